"""The group coordinator: the groups of the ``__consumer_offsets`` partitions this broker leads.

A group belongs to partition ``abs(hashCode(group id)) % partitions``; its
coordinator is that partition's leader. :class:`GroupCoordinator` serves the group and
offset APIs over :class:`~josefk.cluster.coordinator.group.groups.Groups` (classic
groups, offsets) and its consumer groups, composed of
:class:`~josefk.cluster.coordinator.group.partitions.OffsetsPartitions` (the topic,
loading, writing records then replaying them),
:class:`~josefk.cluster.coordinator.group.timers.GroupTimers` and
:class:`~josefk.cluster.coordinator.group.txn_commits.TxnOffsetCommits`. A request's
records are written, replayed, then answered; JoinGroup and SyncGroup wait on their
Reply until the rebalance moves on; old offsets expire every
``offsets.retention.check.interval.ms``. A JoinGroup, SyncGroup, Heartbeat or LeaveGroup
for a consumer group is its classic members' (KIP-848's online migration).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import trio

from josefk.cluster.background import every
from josefk.cluster.coordinator.group.api import (
    Error,
    FetchedOffset,
    GroupConfig,
    GroupDescription,
    GroupError,
    JoinRequest,
    JoinResult,
    PartitionCommit,
    Reply,
    SyncRequest,
    SyncResult,
)
from josefk.cluster.coordinator.group.consumer import migration
from josefk.cluster.coordinator.group.consumer.api import (
    ConsumerGroupConfig,
    ConsumerGroupDescription,
    HeartbeatRequest,
    HeartbeatResponse,
    Refused,
)
from josefk.cluster.coordinator.group.consumer.assignors import configured
from josefk.cluster.coordinator.group.consumer.manager import ConsumerGroups
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.host import CoordinatorHost
from josefk.cluster.coordinator.group.partitions import OffsetsPartitions
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    Record,
)
from josefk.cluster.coordinator.group.state import GroupState
from josefk.cluster.coordinator.group.timers import GroupTimers
from josefk.cluster.coordinator.group.txn_commits import TxnOffsetCommits
from josefk.log.clock import now_ms

logger = logging.getLogger(__name__)

T = TypeVar("T")


class GroupCoordinator:
    """Serves the group and offset APIs for the groups this broker coordinates."""

    def __init__(self, broker: CoordinatorHost, clock: Callable[[], int] = now_ms) -> None:
        self.broker = broker
        self.clock = clock
        config = broker.config
        self.config = GroupConfig(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            max_size=config.values.get("group.max.size", (1 << 31) - 1),
            offset_metadata_max_bytes=config.values.get("offset.metadata.max.bytes", 4096),
            offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000)
        values = config.values
        consumer = ConsumerGroupConfig(
            session_timeout_ms=values.get("group.consumer.session.timeout.ms", 45000),
            heartbeat_interval_ms=values.get("group.consumer.heartbeat.interval.ms", 5000),
            max_size=values.get("group.consumer.max.size", (1 << 31) - 1),
            assignment_interval_ms=values.get("group.consumer.assignment.interval.ms", 1000),
            assignors=configured(values.get("group.consumer.assignors") or ["uniform", "range"]),
            migration_policy=values.get("group.consumer.migration.policy", "bidirectional"),
            regex_refresh_interval_ms=values.get("group.consumer.regex.refresh.interval.ms",
                                                 600_000),
            classic_max_size=self.config.max_size)
        self.groups = Groups(self.config, clock, ConsumerGroups(consumer, clock, broker.store))
        self.partitions = OffsetsPartitions(
            broker, self.groups, clock,
            lambda group_id, wake: self.timers.touch(group_id, wake=wake))
        self.timers = GroupTimers(self.groups, clock, self.partitions.write_best_effort)
        self.txn = TxnOffsetCommits(self.partitions, self.groups, self.config, clock)
        self._touch = self.timers.touch
        self._write = self.partitions.write
        self._apply = self.partitions.apply
        self._write_best_effort = self.partitions.write_best_effort
        # The partitions' public face, as the broker and its metrics know it.
        self.loaded, self.loading = self.partitions.loaded, self.partitions.loading
        self.load_times_ms = self.partitions.load_times_ms
        self.partition_for = self.partitions.partition_for
        self.ensure_topic = self.partitions.ensure_topic
        self.check = self.partitions.check
        self.coordinator_node = self.partitions.coordinator_node
        self.startup = self.partitions.startup
        self.on_leadership_change = self.partitions.on_leadership_change
        self.load, self.unload = self.partitions.load, self.partitions.unload
        self.txn_commit_offsets = self.txn.commit
        self.oversized_metadata = self.txn.oversized_metadata
        self.complete_txn_offsets = self.txn.complete

    @property
    def num_partitions(self) -> int:
        return self.partitions.num_partitions


    def on_topic_deleted(self, topic: str) -> None:
        """Drop every group's committed offsets of a deleted topic (Kafka's
        onPartitionsDeleted); to be called when a topic is deleted."""
        self._write_best_effort(self.groups.delete_topic_offsets(topic))

    def expire_offsets(self) -> None:
        """Tombstone offsets past retention, and empty groups left without offsets."""
        records = self.groups.expire_offsets()
        if records:
            logger.info("expiring %d offsets and groups", len(records))
        self._write_best_effort(records)

    async def run(self) -> None:
        """Background task: timers and offset expiration, until cancelled."""
        interval_s = self.broker.config.offsets_retention_check_interval_ms / 1000
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.timers.run)
            nursery.start_soon(self.partitions.run_loads)
            nursery.start_soon(every, interval_s, self.expire_offsets, logger, "offset expiration")

    # --- requests -------------------------------------------------------------------------

    def validate_join(self, group_id: str, session_timeout_ms: int) -> Error:
        if not group_id:
            return Error.INVALID_GROUP_ID
        if not (self.config.min_session_timeout_ms <= session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return Error.INVALID_SESSION_TIMEOUT
        return self.check(group_id)

    async def join(self, req: JoinRequest) -> JoinResult:
        error = self.validate_join(req.group_id, req.session_timeout_ms)
        consumer = self.groups.consumer.get(req.group_id)
        if error is Error.NONE and consumer is not None and consumer.members:
            joined = self.groups.consumer.classic.join(consumer, req)
            error = self._apply(joined)
            self._touch(req.group_id)
            return joined.response if error is Error.NONE else JoinResult(error, req.member_id)
        if error is Error.NONE and consumer is not None:
            # An empty consumer group becomes classic (its offsets stay).
            error = self._write(self.groups.consumer.tombstones(req.group_id))
        if error is not Error.NONE:
            return JoinResult(error, req.member_id)
        result = self.groups.join(req)
        self._apply(result)
        self._touch(req.group_id)
        return await _wait(result.response)

    async def sync(self, req: SyncRequest) -> SyncResult:
        error = self.check(req.group_id) if req.group_id else Error.INVALID_GROUP_ID
        if error is not Error.NONE:
            return SyncResult(error)
        consumer = self.groups.consumer.get(req.group_id)
        if consumer is not None:
            synced = self.groups.consumer.classic.sync(consumer, req)
            self._touch(req.group_id)
            return synced
        result = self.groups.sync(req)
        self._apply(result)
        self._touch(req.group_id)
        return await _wait(result.response)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Error:
        error = self.check(group_id) if group_id else Error.INVALID_GROUP_ID
        if error is Error.COORDINATOR_LOAD_IN_PROGRESS:
            return Error.NONE  # Kafka answers blindly while the group loads
        if error is not Error.NONE:
            return error
        consumer = self.groups.consumer.get(group_id)
        if consumer is not None:
            error = self.groups.consumer.classic.heartbeat(consumer, member_id,
                                                           group_instance_id, generation_id)
        else:
            error = self.groups.heartbeat(group_id, member_id, group_instance_id,
                                          generation_id)
        self._touch(group_id)
        return error

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]
              ) -> tuple[Error, list[Error]]:
        """(top-level error, per-member errors) of a LeaveGroup."""
        error = self.check(group_id) if group_id else Error.INVALID_GROUP_ID
        if error is not Error.NONE:
            return error, []
        consumer = self.groups.consumer.get(group_id)
        if consumer is not None:
            left = self.groups.consumer.classic.leave(consumer, members)
            error = self._apply(left)
            self._touch(group_id)
            return error, left.response if error is Error.NONE else []
        try:
            result = self.groups.leave(group_id, members)
        except GroupError as e:
            return e.code, []
        self._apply(result)
        self._touch(group_id)
        return Error.NONE, result.response

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, retention_ms: int,
                       topics: Sequence[tuple[str, Sequence[PartitionCommit]]],
                       api_version: int) -> dict[tuple[str, int], Error]:
        """OffsetCommit: the error of every partition of ``topics``."""
        every = [(t, p.partition) for t, parts in topics for p in parts]
        error = self.check(group_id)
        if error is not Error.NONE:
            return dict.fromkeys(every, error)
        try:
            result = self.groups.commit_offsets(group_id, member_id, group_instance_id,
                                                generation_id, retention_ms, topics, api_version)
        except GroupError as e:
            return dict.fromkeys(every, e.code)
        finally:
            self._touch(group_id)
        error = self._apply(result)
        if error is not Error.NONE:
            return dict.fromkeys(every, error)
        return result.response

    def fetch_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None,
                      require_stable: bool = False
                      ) -> tuple[Error, list[tuple[str, list[FetchedOffset]]]]:
        error = self.check(group_id)
        if error is not Error.NONE:
            return error, []
        fetched = self.groups.fetch_offsets(group_id, topics)
        if require_stable:
            pending = self.groups.pending_txn
            fetched = [(t, [FetchedOffset(o.partition, error=Error.UNSTABLE_OFFSET_COMMIT)
                            if pending.is_pending(group_id, t, o.partition) else o
                            for o in offsets]) for t, offsets in fetched]
        return Error.NONE, fetched

    # --- KIP-848 consumer groups ------------------------------------------------------------

    def consumer_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        """ConsumerGroupHeartbeat: join, heartbeat or leave a consumer group."""
        error = self.check(req.group_id) if req.group_id else Error.NONE
        if error is not Error.NONE:
            return HeartbeatResponse(error)
        classic = self.groups.get(req.group_id)
        records: list[Record] = []
        converted = None
        if classic is not None and not classic.is_in(GroupState.EMPTY, GroupState.DEAD):
            try:
                records = migration.upgrade(classic, req.member_epoch,
                                            self.groups.consumer.config, self.broker.store)
            except Refused as e:
                return HeartbeatResponse(e.code, e.message)
            converted = migration.converted(req.group_id, records)
        elif classic is not None and req.member_epoch == 0:
            records.append((GroupMetadataKey(req.group_id), None))
        result = self.groups.consumer.heartbeat(req, converted)
        result.records = records + list(result.records)
        error = self._apply(result)
        self._touch(req.group_id)
        if error is not Error.NONE:
            return HeartbeatResponse(error)
        return result.response

    def consumer_describe(self, group_id: str
                          ) -> tuple[Error, str | None, ConsumerGroupDescription | None]:
        """ConsumerGroupDescribe of one group: (error, message, description)."""
        error = self.check(group_id) if group_id else Error.INVALID_GROUP_ID
        if error is not Error.NONE:
            return error, None, None
        description = self.groups.consumer.describe(group_id)
        if description is None:
            if self.groups.get(group_id) is not None:
                return Error.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", \
                    None
            return Error.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return Error.NONE, None, description

    def validate_offset_fetch(self, group_id: str, member_id: str | None,
                              member_epoch: int) -> Error:
        """OffsetFetch v9+ from a member of a consumer group: at its current epoch."""
        if self.check(group_id) is not Error.NONE:
            return Error.NONE  # fetch_offsets answers that
        return self.groups.consumer.validate_offset_fetch(group_id, member_id, member_epoch)


    def delete_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
                       ) -> tuple[Error, list[tuple[str, list[tuple[int, Error]]]]]:
        error = self.check(group_id) if group_id else Error.INVALID_GROUP_ID
        if error is not Error.NONE:
            return error, []
        try:
            result = self.groups.delete_offsets(group_id, topics)
        except GroupError as e:
            return e.code, []
        error = self._apply(result)
        if error is not Error.NONE:
            return error, []
        return Error.NONE, result.response

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, Error]:
        results: dict[str, Error] = {}
        by_partition: dict[int, list[str]] = {}
        for group_id in group_ids:
            error = self.check(group_id)
            if error is not Error.NONE:
                results[group_id] = error
            else:
                by_partition.setdefault(self.partition_for(group_id), []).append(group_id)
        for ids in by_partition.values():
            result = self.groups.delete_groups(ids)
            error = self._apply(result)
            for group_id, group_error in result.response.items():
                failed = error is not Error.NONE and group_error is Error.NONE
                results[group_id] = error if failed else group_error
        return results

    def describe(self, group_id: str) -> tuple[Error, GroupDescription | None]:
        error = self.check(group_id)
        if error is not Error.NONE:
            return error, None
        if self.groups.consumer.get(group_id) is not None:
            return Error.GROUP_ID_NOT_FOUND, None  # not a classic group
        return Error.NONE, self.groups.describe(group_id)

    def list_groups(self, states: Iterable[str], types: Iterable[str]
                    ) -> tuple[Error, list[tuple[str, str, str, str]]]:
        for p in self.partitions.led_partitions():
            if p not in self.loaded and p not in self.loading:
                self.load(p)
        if self.loading:
            return Error.COORDINATOR_LOAD_IN_PROGRESS, []
        led = set(self.partitions.led_partitions())
        return Error.NONE, [g for g in self.groups.list_all(states, types)
                            if self.partition_for(g[0]) in led]


async def _wait(reply: Reply[T]) -> T:
    if not reply.done:
        done = trio.Event()
        reply.on_done(lambda _: done.set())
        await done.wait()
    assert reply.value is not None
    return reply.value

