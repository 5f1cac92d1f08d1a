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

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence

from josefk.cluster.coordinator.group.api import (
    Clock,
    Error,
    GroupConfig,
    GroupDescription,
    GroupError,
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
from josefk.cluster.coordinator.group.offsets import GroupOffsets, Offsets
from josefk.cluster.coordinator.group.pending_offsets import PendingTxnOffsets
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from josefk.cluster.coordinator.group.state import Event, Group, GroupState, Member

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
        self._propagate_assignment(group, Error.NONE)
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
            result = self._join_new_member(group, req, reply)
        else:
            result = self._join_existing_member(group, req, reply)
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

    def _join_new_member(self, group: Group, req: JoinRequest, reply: Reply[JoinResult]
                         ) -> Result[Reply[JoinResult]]:
        if group.is_in(GroupState.DEAD):
            reply.set(JoinResult(Error.COORDINATOR_NOT_AVAILABLE))
            return Result([], reply)
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            reply.set(JoinResult(Error.INCONSISTENT_GROUP_PROTOCOL))
            return Result([], reply)
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if len(new_id.encode()) > MAX_MEMBER_ID_BYTES:
            # A client id near 32 KiB: the member id could not be written to
            # __consumer_offsets or answered before JoinGroup v6. Kafka answers this.
            reply.set(JoinResult(Error.UNKNOWN_SERVER_ERROR))
            return Result([], reply)
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                return self._update_static_member(group, req, existing, new_id, reply)
            return Result(self._add_member_and_rebalance(group, req, new_id, reply), reply)
        if req.api_version >= 4:
            # KIP-394: the member learns its id first and joins again with it.
            group.pending_members[new_id] = self.clock() + req.session_timeout_ms
            reply.set(JoinResult(Error.MEMBER_ID_REQUIRED, new_id))
            return Result([], reply)
        return Result(self._add_member_and_rebalance(group, req, new_id, reply), reply)

    def _join_existing_member(self, group: Group, req: JoinRequest, reply: Reply[JoinResult]
                              ) -> Result[Reply[JoinResult]]:
        mid = req.member_id
        if group.is_in(GroupState.DEAD):
            reply.set(JoinResult(Error.COORDINATOR_NOT_AVAILABLE, mid))
            return Result([], reply)
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            reply.set(JoinResult(Error.INCONSISTENT_GROUP_PROTOCOL, mid))
            return Result([], reply)
        if mid in group.pending_members:
            return Result(self._add_member_and_rebalance(group, req, mid, reply), reply)
        try:
            member = group.validate_member(mid, req.group_instance_id)
        except GroupError as e:
            reply.set(JoinResult(e.code, mid))
            return Result([], reply)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return Result(self._update_member_and_rebalance(group, member, req, reply), reply)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.protocols == req.protocols:
                # It missed the JoinGroup response: the same answer again.
                reply.set(group.join_result(member))
                return Result([], reply)
            return Result(self._update_member_and_rebalance(group, member, req, reply), reply)
        if group.is_in(GroupState.STABLE):
            if group.is_leader(mid) or member.protocols != req.protocols:
                # The leader rejoins to rebalance (e.g. new partitions); others on change.
                return Result(self._update_member_and_rebalance(group, member, req, reply),
                              reply)
            reply.set(group.join_result(member, with_members=False))
            return Result([], reply)
        reply.set(JoinResult(Error.UNKNOWN_MEMBER_ID, mid))
        return Result([], reply)

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str,
                                  reply: Reply[JoinResult]) -> list[Record]:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        req.protocols, is_new=True)
        if group.is_in(GroupState.PREPARING_REBALANCE) and \
                group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add_member(member, reply)
        # A parked JoinGroup cannot heartbeat: new members get a join timeout instead.
        group.reschedule_heartbeat(member, self.config.new_member_join_timeout_ms)
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest,
                                     reply: Reply[JoinResult]) -> list[Record]:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, reply)
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(self, group: Group, req: JoinRequest, old_id: str, new_id: str,
                              reply: Reply[JoinResult]) -> Result[Reply[JoinResult]]:
        """KIP-345: a static member back with a new member id takes its old place."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        old_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        group.reschedule_heartbeat(member)
        old_settings = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, reply)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name != group.select_protocol():
                return Result(self._maybe_prepare_rebalance_or_complete_join(group), reply)
            # Same protocol: no rebalance, the new id is written and the member rejoins
            # the current generation.
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            records: list[Record] = [(GroupMetadataKey(group.group_id),
                                      group.metadata_value(assignment))]

            def success() -> None:
                if req.api_version >= 9:
                    leader = group.is_leader(new_id)
                    result = group.join_result(member, skip_assignment=leader)
                else:
                    result = group.join_result(member, leader=old_leader, with_members=False)
                group.complete_join(member, result)

            def failure(error: Error) -> list[Record]:
                group.update_member(member, *old_settings, None)
                restored = group.replace_static_member(instance_id, new_id, old_id)
                group.reschedule_heartbeat(restored)
                reply.set(JoinResult(error, "", group.generation, group.protocol_type,
                                     group.protocol_name, old_leader or ""))
                return []

            return Result(records, reply, success, failure)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may already hold the old id: rebalance so the new one gets assigned.
            return Result(self._prepare_rebalance(group), reply)
        return Result(self._maybe_complete_join_phase(group), reply)

    # --- the rebalance --------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group) -> list[Record]:
        if group.can_rebalance():
            return self._prepare_rebalance(group)
        return self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: Group) -> list[Record]:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, Error.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        group.sync_deadline = None
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            # A new group: give more members time to join (group.initial.rebalance.delay.ms).
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline = self.clock() + delay
            group.initial_join = (delay, remaining)
        group.transition(Event.REBALANCE)
        return [] if initial else self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: Group) -> list[Record]:
        if group.has_all_members_joined():
            return self._complete_join(group)
        group.join_deadline = self.clock() + group.rebalance_timeout_ms()
        group.initial_join = None
        return []

    def _maybe_complete_join_phase(self, group: Group) -> list[Record]:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return []
        if group.previous_state is GroupState.EMPTY:
            return []  # the initial rebalance ends only when its delay runs out
        if not group.has_all_members_joined():
            return []
        return self._complete_join(group)

    def _complete_join(self, group: Group) -> list[Record]:
        group.join_deadline = None
        group.initial_join = None
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                group.remove_member(member.member_id)
        if group.is_in(GroupState.DEAD):
            return []
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            group.join_deadline = self.clock() + group.rebalance_timeout_ms()
            return []
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            return [(GroupMetadataKey(group.group_id), group.metadata_value({}))]
        for member in group.members.values():
            group.complete_join(member, group.join_result(member))
            group.reschedule_heartbeat(member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline = self.clock() + group.rebalance_timeout_ms()
        group.sync_generation = group.generation
        return []

    def _reset_and_propagate_assignment_error(self, group: Group, error: Error) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: Error) -> None:
        ok = error is Error.NONE
        for member in group.members.values():
            result = SyncResult(error, group.protocol_type if ok else None,
                                group.protocol_name if ok else None, member.assignment)
            if group.complete_sync(member, result):
                group.reschedule_heartbeat(member)

    def _remove_member_and_update(self, group: Group, member: Member) -> list[Record]:
        group.complete_join(member, JoinResult(Error.UNKNOWN_MEMBER_ID))
        group.remove_member(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self._maybe_prepare_rebalance_or_complete_join(group)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            return self._complete_join(group)
        return []

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
        now = self.clock()
        records: list[Record] = []
        if group.join_deadline is not None and group.join_deadline <= now:
            records += self._join_timer(group)
        if group.sync_deadline is not None and group.sync_deadline <= now:
            group.sync_deadline = None
            records += self._expire_pending_sync(group, group.sync_generation)
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now and member_id in group.pending_members:
                group.remove_member(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                    records += self._complete_join(group)
        for member in list(group.members.values()):
            deadline = member.heartbeat_deadline
            if deadline is None or deadline > now or member.member_id not in group.members:
                continue
            member.heartbeat_deadline = None
            if not member.has_satisfied_heartbeat:
                records += self._remove_member_and_update(group, member)
        return records

    def _join_timer(self, group: Group) -> list[Record]:
        if group.initial_join is None:
            return self._complete_join(group)
        delay, remaining = group.initial_join
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.join_deadline = self.clock() + new_delay
            group.initial_join = (new_delay, max(remaining - delay, 0))
            return []
        return self._complete_join(group)

    def _expire_pending_sync(self, group: Group, generation: int) -> list[Record]:
        if generation != group.generation or not group.pending_sync:
            return []
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return []
        for member_id in list(group.pending_sync):
            group.remove_member(member_id)
        return self._prepare_rebalance(group)

    # --- SyncGroup ------------------------------------------------------------------------

    def sync(self, req: SyncRequest) -> Result[Reply[SyncResult]]:
        reply: Reply[SyncResult] = Reply()
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(GroupState.EMPTY):
            reply.set(SyncResult(Error.UNKNOWN_MEMBER_ID))
            return Result([], reply)
        error = self._validate_sync(group, req)
        if error is not Error.NONE:
            reply.set(SyncResult(error))
            return Result([], reply)
        member = group.members[req.member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            reply.set(SyncResult(Error.REBALANCE_IN_PROGRESS))
            return Result([], reply)
        if group.is_in(GroupState.STABLE):
            group.pending_sync.discard(member.member_id)
            reply.set(SyncResult(Error.NONE, group.protocol_type, group.protocol_name,
                                 member.assignment))
            return Result([], reply)
        # CompletingRebalance: park until the leader's assignment is written.
        if member.sync_reply is not None:
            member.sync_reply.set(SyncResult(Error.REBALANCE_IN_PROGRESS))
        member.sync_reply = reply
        group.pending_sync.discard(member.member_id)
        if group.pending_sync == set():
            group.sync_deadline = None
        if not group.is_leader(member.member_id):
            return Result([], reply)
        assignment = {m: b"" for m in group.members}
        for member_id, data in req.assignments:
            if member_id in assignment:
                assignment[member_id] = data
        generation = req.generation_id
        records: list[Record] = [(GroupMetadataKey(group.group_id),
                                  group.metadata_value(assignment))]

        def failure(error: Error) -> list[Record]:
            if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
                self._reset_and_propagate_assignment_error(group, error)
                return self._maybe_prepare_rebalance_or_complete_join(group)
            return []

        return Result(records, reply, on_failure=failure)

    @staticmethod
    def _validate_sync(group: Group, req: SyncRequest) -> Error:
        if group.is_in(GroupState.DEAD):
            return Error.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(req.member_id, req.group_instance_id)
        except GroupError as e:
            return e.code
        if req.generation_id != group.generation:
            return Error.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or \
                _inconsistent(req.protocol_name, group.protocol_name):
            return Error.INCONSISTENT_GROUP_PROTOCOL
        return Error.NONE

    # --- Heartbeat, LeaveGroup -----------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Error:
        group = self.groups.get(group_id)
        if group is None:
            return Error.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return Error.COORDINATOR_NOT_AVAILABLE
        try:
            member = group.validate_member(member_id, group_instance_id)
        except GroupError as e:
            return e.code
        if generation_id != group.generation:
            return Error.ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return Error.UNKNOWN_MEMBER_ID
        group.reschedule_heartbeat(member)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return Error.REBALANCE_IN_PROGRESS
        return Error.NONE

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]
              ) -> Result[list[Error]]:
        """Remove members (member id, group instance id); one error per member."""
        group = self.groups.get(group_id)
        if group is None:
            return Result([], [Error.UNKNOWN_MEMBER_ID] * len(members))
        if group.is_in(GroupState.DEAD):
            raise GroupError(Error.COORDINATOR_NOT_AVAILABLE)
        errors: list[Error] = []
        for member_id, instance_id in members:
            if member_id == "":
                # Administrative removal of a static member by its instance id.
                static_id = group.static_members.get(instance_id) if instance_id else None
                if static_id is None:
                    errors.append(Error.UNKNOWN_MEMBER_ID)
                    continue
                self._remove_leaving_member(group, static_id)
            elif member_id in group.pending_members:
                group.remove_member(member_id)
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except GroupError as e:
                    errors.append(e.code)
                    continue
                self._remove_leaving_member(group, member_id)
            errors.append(Error.NONE)
        records: list[Record] = []
        if Error.NONE in errors:
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                records = self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                records = self._maybe_complete_join_phase(group)
        return Result(records, errors)

    @staticmethod
    def _remove_leaving_member(group: Group, member_id: str) -> None:
        member = group.members[member_id]
        group.complete_join(member, JoinResult(Error.UNKNOWN_MEMBER_ID))
        group.remove_member(member_id)

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


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
