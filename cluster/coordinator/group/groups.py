"""The groups and committed offsets of the ``__consumer_offsets`` partitions a
coordinator leads, answering the classic group requests without I/O.

:class:`Groups` answers JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
... the way Apache Kafka's classic group coordinator does (``GroupMetadataManager``
and ``OffsetMetadataManager`` of its ``group-coordinator`` module). A request
returns a :class:`~josefk.cluster.coordinator.group.api.Result`: the ``__consumer_offsets``
records to write and the response, or a
:class:`~josefk.cluster.coordinator.group.api.Reply` that completes later (JoinGroup and
SyncGroup park until the rebalance moves on). Each group's state machine is
:class:`~josefk.cluster.coordinator.group.state.Group`; the offset requests are
:class:`~josefk.cluster.coordinator.group.offsets.GroupOffsets`'s.

Durable state changes only through :meth:`Groups.replay`, the same function that
loads a partition at start-up: offsets and tombstones take effect when their
record is replayed, and the leader's assignment when its GroupMetadata record
is (CompletingRebalance → Stable). Membership during a rebalance is transient,
as in Kafka: it lives in memory and its GroupMetadata records, replayed on a
group already past them, change nothing.

Time is an int of milliseconds from ``clock``; deadlines (session, rebalance,
sync and initial-delay timers) are fields of the groups, and
:meth:`Groups.next_deadline` / :meth:`Groups.on_timer` let a caller sleep until
the earliest and fire what is due.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from josefk.cluster.coordinator.group.api import (
    Clock,
    Error,
    GroupConfig,
    GroupDescription,
    JoinRequest,
    JoinResult,
    OffsetAndMetadata,
    Reply,
    Result,
    SyncRequest,
    SyncResult,
)
from josefk.cluster.coordinator.group.consumer.api import ConsumerGroupConfig
from josefk.cluster.coordinator.group.consumer.manager import ConsumerGroups
from josefk.cluster.coordinator.group.consumer.records import ConsumerKey
from josefk.cluster.coordinator.group.joins import Joins
from josefk.cluster.coordinator.group.offsets import GroupOffsets, Offsets
from josefk.cluster.coordinator.group.pending_offsets import PendingTxnOffsets
from josefk.cluster.coordinator.group.rebalance import Rebalance
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from josefk.cluster.coordinator.group.state import Event, Group, GroupState

MAX_MEMBER_ID_BYTES = 32767  # a STRING (int16 length) in the group's records
# --- all groups of a coordinator --------------------------------------------------------------


class Groups(GroupOffsets):
    """The groups and committed offsets of the partitions a coordinator leads."""

    def __init__(self, config: GroupConfig, clock: Clock,
                 consumer: ConsumerGroups | None = None) -> None:
        self.config = config
        self.clock = clock
        self.groups: dict[str, Group] = {}
        # KIP-848 groups; a group id is either a classic or a consumer group.
        self.consumer = consumer or ConsumerGroups(ConsumerGroupConfig(), clock)
        self.offsets: dict[str, Offsets] = {}
        self.pending_txn = PendingTxnOffsets()
        self.rebalance = Rebalance(config, clock)
        self.joins = Joins(config, clock, self.rebalance)

    def get(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def __iter__(self) -> Iterator[Group]:
        return iter(list(self.groups.values()))

    def _create(self, group_id: str) -> Group:
        group = self.groups[group_id] = Group(group_id, self.clock)
        return group

    # --- replay: the only way records change durable state ------------------------------

    def replay(self, record: Record, record_offset: int = -1, producer_id: int = -1) -> None:
        """Apply one ``__consumer_offsets`` record (load, or after writing it), found at
        ``record_offset`` of the log, in a transaction of ``producer_id`` if >= 0."""
        key, value = record
        if isinstance(key, ConsumerKey):
            classic = self.groups.get(key.group)
            if classic is not None and value is not None:
                if not classic.is_in(GroupState.EMPTY, GroupState.DEAD):
                    return  # a live classic group keeps its id
                del self.groups[key.group]  # an empty classic group becomes a consumer group
            self.consumer.replay(key, value)  # type: ignore[arg-type]
        elif isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self._replay_offset(key, value, record_offset, producer_id)
        else:
            assert value is None or isinstance(value, GroupMetadataValue)
            self._replay_group(key.group, value)
            if value is not None and key.group in self.consumer.downgrading:
                # A consumer group just became this classic group: it rebalances
                # (nobody has rejoined yet, so this writes nothing).
                self.consumer.downgrading.discard(key.group)
                self.rebalance.prepare_rebalance(self.groups[key.group])

    def _replay_offset(self, key: OffsetCommitKey, value: OffsetCommitValue | None,
                       record_offset: int, producer_id: int) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            offsets = self.offsets.get(key.group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self.offsets[key.group]
            self.pending_txn.discard(key.group, tp)
            return
        if key.group not in self.groups and key.group not in self.consumer.groups:
            self._create(key.group)  # a "simple" group: committed offsets, no members
        offset = OffsetAndMetadata.from_value(value, record_offset)
        if producer_id >= 0:
            self.pending_txn.add(producer_id, key.group, tp, offset)  # until its marker
        else:
            self.offsets.setdefault(key.group, {})[tp] = offset

    def replay_txn_marker(self, producer_id: int, commit: bool,
                          in_partition: Callable[[str], bool]) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` in the partition whose groups
        ``in_partition`` selects: its pending offsets there are committed or dropped. Of
        a transactional and a regular commit, the later record wins (Kafka's
        ``replayEndTransactionMarker``), as compacting the log would keep it."""
        for group_id, tp, offset in self.pending_txn.complete(producer_id, in_partition):
            if not commit:
                continue
            existing = self.offsets.get(group_id, {}).get(tp)
            if existing is None or offset.record_offset > existing.record_offset:
                if group_id not in self.groups and group_id not in self.consumer.groups:
                    self._create(group_id)
                self.offsets.setdefault(group_id, {})[tp] = offset

    def unload(self, in_partition: Callable[[str], bool]) -> None:
        """Forget the groups ``in_partition`` selects (their partition is no longer led
        here): each goes Dead and its parked JoinGroup and SyncGroup requests are answered
        NOT_COORDINATOR, so that their members look for the new coordinator (Kafka's
        ``onUnloaded``)."""
        for group_id in [g for g in self.groups if in_partition(g)]:
            group = self.groups.pop(group_id)
            group.transition(Event.UNLOAD)
            for member in group.members.values():
                group.complete_join(member, JoinResult(Error.NOT_COORDINATOR, member.member_id))
                group.complete_sync(member, SyncResult(Error.NOT_COORDINATOR))
        for group_id in [g for g in self.offsets if in_partition(g)]:
            del self.offsets[group_id]
        self.pending_txn.drop(in_partition)
        self.consumer.unload(in_partition)

    def _replay_group(self, group_id: str, value: GroupMetadataValue | None) -> None:
        group = self.groups.get(group_id)
        if value is None:
            if group is not None:
                for member in list(group.members.values()):
                    group.remove_member(member.member_id)
                group.transition(Event.DELETE)
                del self.groups[group_id]
            return
        if group is not None:
            if group.is_in(GroupState.COMPLETING_REBALANCE) and \
                    value.generation == group.generation:
                self._store_assignment(group, {m.member_id: m.assignment for m in value.members})
                return
            if group.is_busy() or value.generation < group.generation:
                return  # written by this live group, which is already past it
        self.groups[group_id] = Group.from_value(group_id, value, self.clock)

    def _store_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self.rebalance.propagate_assignment(group, Error.NONE)
        group.transition(Event.ASSIGNMENT_STORED)

    # --- JoinGroup ---------------------------------------------------------------------

    def join(self, req: JoinRequest) -> Result[Reply[JoinResult]]:
        reply: Reply[JoinResult] = Reply()
        group = self.groups.get(req.group_id)
        unknown = req.member_id == ""
        new_group = group is None
        if group is None:
            if not unknown:
                reply.set(JoinResult(Error.UNKNOWN_MEMBER_ID, req.member_id))
                return Result([], reply)
            group = self._create(req.group_id)
        if not self._accept_joining_member(group, req.member_id):
            group.remove_member(req.member_id)
            reply.set(JoinResult(Error.GROUP_MAX_SIZE_REACHED))
            return Result([], reply)
        if unknown:
            result = self.joins.join_new_member(group, req, reply)
        else:
            result = self.joins.join_existing_member(group, req, reply)
        if new_group and not result.records:
            # Kafka writes a new group's (empty) metadata at once; if that fails, the
            # group never was.
            result.records = [(GroupMetadataKey(group.group_id), GroupMetadataValue(
                "", 0, None, None, group.state_timestamp or -1, ()))]
            result.on_failure = lambda error: self._fail_new_group(group, reply, error)
        return result

    def _fail_new_group(self, group: Group, reply: Reply[JoinResult], error: Error
                        ) -> list[Record]:
        reply.set(JoinResult(error))
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        return []

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.join_reply is not None) or \
                group.num_awaiting_join() < max_size
        return member_id in group.members or len(group.members) < max_size

    # --- timers ----------------------------------------------------------------------------

    def next_deadline(self, group_id: str) -> int | None:
        group = self.groups.get(group_id)
        if group is None:
            return self.consumer.next_deadline(group_id)
        return group.next_deadline()

    def on_timer(self, group_id: str) -> list[Record]:
        """Fire the group's due timers once each; returns the records to write."""
        group = self.groups.get(group_id)
        if group is None:
            return list(self.consumer.on_timer(group_id))
        return self.rebalance.on_timer(group)

    # --- SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------------

    def sync(self, req: SyncRequest) -> Result[Reply[SyncResult]]:
        return self.rebalance.sync(self.groups.get(req.group_id), req)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Error:
        return self.rebalance.heartbeat(self.groups.get(group_id), member_id,
                                        group_instance_id, generation_id)

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]
              ) -> Result[list[Error]]:
        """Remove members (member id, group instance id); one error per member."""
        return self.rebalance.leave(self.groups.get(group_id), members)

    # --- DeleteGroups --------------------------------------------------------------------

    def delete_groups(self, group_ids: Iterable[str]) -> Result[dict[str, Error]]:
        """DeleteGroups: tombstones for each empty group's offsets, then for the group."""
        errors: dict[str, Error] = {}
        records: list[Record] = []
        for group_id in group_ids:
            consumer = self.consumer.get(group_id)
            if consumer is not None:
                errors[group_id] = Error.NON_EMPTY_GROUP if consumer.members else Error.NONE
                if not consumer.members:
                    records += [(OffsetCommitKey(group_id, t, p), None)
                                for t, p in self.offset_partitions(group_id)]
                    records += self.consumer.tombstones(group_id)
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                errors[group_id] = Error.GROUP_ID_NOT_FOUND
                continue
            if not group.is_in(GroupState.EMPTY):
                errors[group_id] = Error.NON_EMPTY_GROUP
                continue
            records += self._group_tombstones(group_id)
            errors[group_id] = Error.NONE
        return Result(records, errors)

    def _group_tombstones(self, group_id: str) -> list[Record]:
        # Offsets pending in open transactions are tombstoned too (Kafka's
        # deleteAllOffsets): the transactions' markers then commit nothing of them.
        records: list[Record] = [(OffsetCommitKey(group_id, t, p), None)
                                 for t, p in self.offset_partitions(group_id)]
        records.append((GroupMetadataKey(group_id), None))
        return records

    # --- reads ---------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        return group.describe()

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of the classic groups matching the ListGroups
        filters."""
        return [g[:3] for g in self.list_all(states, types) if g[3] == "classic"]

    def list_all(self, states: Iterable[str] = (), types: Iterable[str] = ()
                 ) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of every group, classic and
        consumer, matching the ListGroups filters."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        listed: list[tuple[str, str, str, str]] = []
        if not wanted_types or "classic" in wanted_types:
            listed += [(g.group_id, g.protocol_type or "", g.state.value, "classic")
                       for g in self.groups.values()
                       if not wanted_states or g.state.value.lower() in wanted_states]
        if not wanted_types or "consumer" in wanted_types:
            listed += [(group_id, "consumer", state, "consumer")
                       for group_id, state in self.consumer.list_groups(wanted_states)]
        return listed
