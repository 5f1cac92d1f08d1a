"""The group coordinator: the groups of the ``__consumer_offsets`` partitions this broker leads.

A group belongs to partition ``abs(hashCode(group id)) % partitions``; its
coordinator is that partition's leader. This module is the I/O around the state
machines of :mod:`josefk.cluster.coordinator.group.state`, answered through
:class:`josefk.cluster.coordinator.group.groups.Groups`:

- it creates ``__consumer_offsets`` on first use (compacted, Kafka's settings),
- loads every partition it leads at start-up by replaying its log,
- writes the records requests produce as one v2 batch (acks=all), replays them,
  then answers; JoinGroup and SyncGroup wait on their Reply until the
  rebalance moves on,
- runs the timers (session, rebalance, sync, initial delay): one task sleeps
  until the earliest deadline and is woken when an earlier one appears,
- and expires old offsets every ``offsets.retention.check.interval.ms``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import trio
from kafka.errors import KafkaError

from josefk.cluster.background import every, failures_logged
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
    Result,
    SyncRequest,
    SyncResult,
    append_error_to_response_error,
)
from josefk.cluster.coordinator.group.consumer.api import (
    ConsumerGroupConfig,
    ConsumerGroupDescription,
    HeartbeatRequest,
    HeartbeatResponse,
)
from josefk.cluster.coordinator.group.consumer.assignors import configured
from josefk.cluster.coordinator.group.consumer.manager import ConsumerGroups
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.host import CoordinatorHost
from josefk.cluster.coordinator.group.offsets import metadata_too_large
from josefk.cluster.coordinator.group.pending_offsets import (
    build_txn_batch,
    offset_records,
    validate_txn_commit,
)
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    Record,
    decode_key,
    decode_value,
    encode_record,
)
from josefk.cluster.coordinator.group.state import GroupState
from josefk.cluster.coordinator.records import (
    OFFSETS_TOPIC,
    RecordFormatError,
    build_batch,
    control_is_commit,
    partition_for,
    read_batches,
)
from josefk.cluster.metadata.errors import ClusterError
from josefk.cluster.metadata.store import BrokerInfo
from josefk.cluster.partition import PartitionError
from josefk.log.clock import now_ms
from josefk.log.log import OffsetOutOfRangeError
from josefk.protocol.record_batch import HEADER_SIZE, RecordBatchError

logger = logging.getLogger(__name__)

T = TypeVar("T")
RECORD_OVERHEAD = 32  # a record's framing in a batch, generously
LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # offsets.load.buffer.size's default


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
            assignors=configured(values.get("group.consumer.assignors") or ["uniform", "range"]))
        self.groups = Groups(self.config, clock, ConsumerGroups(consumer, clock, broker.store))
        self.loaded: set[int] = set()
        self.loading: set[int] = set()
        # How long each loaded partition took to replay, in ms (the broker's metrics).
        self.load_times_ms: dict[int, float] = {}
        # Timers: (deadline, seq, group id) and the deadline last pushed per group.
        self._heap: list[tuple[int, int, str]] = []
        self._scheduled: dict[str, int] = {}
        self._seq = itertools.count()
        self._wakeup: trio.Event | None = None

    # --- partitions ---------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        topic = self.broker.store.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic else self.broker.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def _led_partitions(self) -> list[int]:
        return [p for p in range(self.num_partitions)
                if (part := self.broker.partition(OFFSETS_TOPIC, p)) is not None
                and part.is_leader]

    async def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` as Kafka does on the first FindCoordinator."""
        if self.broker.store.get(OFFSETS_TOPIC) is not None:
            return
        config = self.broker.config
        live = len(self.broker.live_brokers()) or 1
        replication = min(config.offsets_topic_replication_factor, live)
        if replication < config.offsets_topic_replication_factor:
            logger.warning("creating %s with replication factor %d: only %d broker(s) are "
                           "live (offsets.topic.replication.factor=%d)", OFFSETS_TOPIC,
                           replication, live, config.offsets_topic_replication_factor)
        await self.broker.create_topic(
            OFFSETS_TOPIC, config.offsets_topic_num_partitions, replication,
            configs={"cleanup.policy": "compact", "compression.type": "producer",
                     "segment.bytes": str(config.offsets_topic_segment_bytes)})
        logger.info("created %s with %d partitions", OFFSETS_TOPIC,
                    config.offsets_topic_num_partitions)
        for p in self._led_partitions():
            self.load(p)

    def check(self, group_id: str) -> Error:
        """NONE if this broker coordinates the group and its partition is loaded."""
        p = self.partition_for(group_id)
        partition = self.broker.partition(OFFSETS_TOPIC, p)
        if partition is None or not partition.is_leader:
            return Error.NOT_COORDINATOR
        if p in self.loading:
            return Error.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.loaded:
            self.load(p)  # e.g. the topic was created through CreateTopics
        return Error.NONE

    async def coordinator_node(self, key: str) -> tuple[Error, BrokerInfo | None]:
        """FindCoordinator for a group: the leader of its partition."""
        try:
            await self.ensure_topic()
        except ClusterError as e:
            logger.warning("cannot create %s: %s", OFFSETS_TOPIC, e)
            return Error.COORDINATOR_NOT_AVAILABLE, None
        view = self.broker.partition_view(OFFSETS_TOPIC, self.partition_for(key))
        if view is None or view.leader < 0:
            return Error.COORDINATOR_NOT_AVAILABLE, None
        if view.leader == self.broker.node_id:
            host, port = self.broker.advertised_endpoint()
            return Error.NONE, BrokerInfo(self.broker.node_id, host, port)
        for info in self.broker.live_brokers():
            if info.node_id == view.leader:
                return Error.NONE, info
        return Error.COORDINATOR_NOT_AVAILABLE, None

    # --- loading ------------------------------------------------------------------------

    def startup(self) -> None:
        """Startup hook: replay every ``__consumer_offsets`` partition this broker leads."""
        for p in self._led_partitions():
            self.load(p, wake=False)
        if self.loaded:
            logger.info("loaded %d groups from %d %s partitions",
                        len(self.groups.groups) + len(self.groups.consumer.groups),
                        len(self.loaded), OFFSETS_TOPIC)

    def on_leadership_change(self) -> None:
        """Follow leadership of ``__consumer_offsets``: load the partitions this broker
        now leads, drop the groups of those it no longer leads (Kafka's onElection /
        onResignation); clients of dropped groups get NOT_COORDINATOR and look again."""
        led = set(self._led_partitions())
        for p in sorted(self.loaded - led):
            self.unload(p)
        for p in sorted(led - self.loaded):
            self.load(p)

    def unload(self, p: int) -> None:
        """Drop the groups of partition ``p``; their parked JoinGroup and SyncGroup
        requests are answered NOT_COORDINATOR."""
        self.groups.unload(self._in_partition(p))
        self.loaded.discard(p)
        self.load_times_ms.pop(p, None)
        logger.info("unloaded %s-%d: this broker no longer leads it", OFFSETS_TOPIC, p)

    def load(self, p: int, *, wake: bool = True) -> None:
        """Replay partition ``p`` from its log start to its end (transactional records
        count once their commit marker is read; aborted or open ones never do)."""
        partition = self.broker.partition(OFFSETS_TOPIC, p)
        if partition is None:
            return
        log = partition.log
        self.loading.add(p)
        started = time.monotonic()
        touched: set[str] = set()
        in_partition = self._in_partition(p)
        try:
            offset, end = log.log_start_offset, log.log_end_offset
            while offset < end:
                data = log.read(offset, LOAD_BUFFER_BYTES, max_offset=end).read_bytes()
                before = offset
                for header, records in read_batches(data):
                    offset = header.next_offset
                    if header.is_control:
                        for rec in records:
                            commit = control_is_commit(rec.key)
                            if commit is not None:
                                self.groups.replay_txn_marker(header.producer_id, commit,
                                                              in_partition)
                        continue
                    # A transaction's offsets stay pending until its marker is read (or
                    # after the log end, while it is still open).
                    producer_id = header.producer_id if header.is_transactional else -1
                    for rec in records:
                        record = _decode(rec.key, rec.value, p, rec.offset)
                        if record is not None:
                            self.groups.replay(record, rec.offset, producer_id)
                            touched.add(record[0].group)
                if offset == before:
                    break  # nothing whole could be read
        except (RecordBatchError, OffsetOutOfRangeError, KafkaError, OSError, ValueError) as e:
            logger.error("loading %s-%d stopped at offset %d: %s", OFFSETS_TOPIC, p, offset, e)
        finally:
            self.loading.discard(p)
        self.loaded.add(p)
        self.load_times_ms[p] = (time.monotonic() - started) * 1000
        for group_id in touched:
            self._touch(group_id, wake=wake)

    def _in_partition(self, p: int) -> Callable[[str], bool]:
        """Selects the group ids of ``__consumer_offsets`` partition ``p``."""
        count = self.num_partitions
        return lambda group_id: partition_for(group_id, count) == p

    # --- writing -------------------------------------------------------------------------

    def _write(self, records: Sequence[Record]) -> Error:
        """Append ``records`` (all of one partition) with acks=all, then replay them."""
        if not records:
            return Error.NONE
        partition = self.broker.partition(OFFSETS_TOPIC, self.partition_for(records[0][0].group))
        if partition is None or not partition.is_leader:
            return Error.NOT_COORDINATOR
        limit = min(partition.log.config.max_message_bytes, partition.log.config.segment_bytes)
        try:
            chunks = list(_chunks(records, limit - HEADER_SIZE))
        except (RecordFormatError, struct.error) as e:
            # E.g. a member id past a string's 32767 bytes: Kafka's serializer throws
            # and the write fails with UNKNOWN_SERVER_ERROR; nothing is appended.
            logger.error("cannot write group records to %s-%d: %s", OFFSETS_TOPIC,
                         partition.index, e)
            return Error.UNKNOWN_SERVER_ERROR
        try:
            for chunk in chunks:
                batch = build_batch((encoded for _, encoded in chunk), self.clock())
                info = partition.append_records(batch, required_acks=-1)
                for i, (record, _) in enumerate(chunk):
                    self.groups.replay(record, info.first_offset + i)
        except (RecordBatchError, PartitionError) as e:
            logger.warning("writing to %s-%d failed: %s", OFFSETS_TOPIC, partition.index, e)
            return append_error_to_response_error(e.error_code)
        except OSError as e:
            logger.error("writing to %s-%d failed: %s", OFFSETS_TOPIC, partition.index, e)
            return Error.NOT_COORDINATOR
        return Error.NONE

    def _apply(self, result: Result[T]) -> Error:
        """Write a result's records; run its success or failure follow-up."""
        error = self._write(result.records)
        if error is Error.NONE:
            if result.on_success is not None:
                result.on_success()
        elif result.on_failure is not None:
            self._write_best_effort(result.on_failure(error))
        return error

    def _write_best_effort(self, records: Iterable[Record]) -> None:
        by_partition: dict[int, list[Record]] = {}
        for record in records:
            by_partition.setdefault(self.partition_for(record[0].group), []).append(record)
        for part_records in by_partition.values():
            error = self._write(part_records)
            if error is not Error.NONE:
                logger.warning("could not write %d group records: %s", len(part_records),
                               error.name)

    # --- timers ------------------------------------------------------------------------------

    def _touch(self, group_id: str, *, wake: bool = True) -> None:
        """Schedule the group's earliest deadline if it is earlier than the one pending."""
        deadline = self.groups.next_deadline(group_id)
        if deadline is None:
            return
        scheduled = self._scheduled.get(group_id)
        if scheduled is not None and scheduled <= deadline:
            return
        self._scheduled[group_id] = deadline
        heapq.heappush(self._heap, (deadline, next(self._seq), group_id))
        if wake and self._heap[0][0] == deadline and self._wakeup is not None:
            self._wakeup.set()

    async def _run_timers(self) -> None:
        while True:
            while self._heap and self._heap[0][0] <= self.clock():
                deadline, _, group_id = heapq.heappop(self._heap)
                if self._scheduled.get(group_id) != deadline:
                    continue  # superseded by an earlier deadline
                del self._scheduled[group_id]
                # A timer that fails leaves its group unscheduled until its next request,
                # so that it cannot fire again at once, forever.
                with failures_logged(logger, f"the timer of group {group_id}"):
                    self._write_best_effort(self.groups.on_timer(group_id))
                    self._touch(group_id, wake=False)
                await trio.lowlevel.checkpoint()
            self._wakeup = trio.Event()
            if self._heap:
                with trio.move_on_after(max(0, self._heap[0][0] - self.clock()) / 1000):
                    await self._wakeup.wait()
            else:
                await self._wakeup.wait()

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
            nursery.start_soon(self._run_timers)
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
        if error is Error.NONE:
            error = self._maybe_leave_consumer_protocol(req.group_id)
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
        error = self.groups.heartbeat(group_id, member_id, group_instance_id, generation_id)
        self._touch(group_id)
        return error

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]
              ) -> tuple[Error, list[Error]]:
        """(top-level error, per-member errors) of a LeaveGroup."""
        error = self.check(group_id) if group_id else Error.INVALID_GROUP_ID
        if error is not Error.NONE:
            return error, []
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

    def _maybe_leave_consumer_protocol(self, group_id: str) -> Error:
        """A classic JoinGroup for a consumer group: an empty one becomes classic (its
        offsets stay); a group with members is refused, as Kafka refuses it without an
        online downgrade."""
        consumer = self.groups.consumer.get(group_id)
        if consumer is None:
            return Error.NONE
        if consumer.members:
            return Error.INCONSISTENT_GROUP_PROTOCOL
        return self._write(self.groups.consumer.tombstones(group_id))

    def consumer_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        """ConsumerGroupHeartbeat: join, heartbeat or leave a consumer group."""
        error = self.check(req.group_id) if req.group_id else Error.NONE
        if error is not Error.NONE:
            return HeartbeatResponse(error)
        classic = self.groups.get(req.group_id)
        records: list[Record] = []
        if classic is not None:
            if not classic.is_in(GroupState.EMPTY, GroupState.DEAD):
                return HeartbeatResponse(
                    Error.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {req.group_id} "
                    "to consumer group because the online upgrade is not supported.")
            if req.member_epoch == 0:
                records.append((GroupMetadataKey(req.group_id), None))
        result = self.groups.consumer.heartbeat(req)
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

    # --- transactional offsets ---------------------------------------------------------------

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           member_id: str, group_instance_id: str | None, generation_id: int,
                           topics: Sequence[tuple[str, Sequence[tuple[int, int, int,
                                                                      str | None]]]]) -> int:
        """TxnOffsetCommit: append the offsets in the producer's transaction; they are
        the group's once its COMMIT marker arrives (`complete_txn_offsets`). Partitions
        whose metadata is too large are left out (see `oversized_metadata`)."""
        error = self.check(group_id) if group_id else Error.INVALID_GROUP_ID
        if error is Error.NONE and self.groups.consumer.get(group_id) is not None:
            # A member of a consumer group commits at its member epoch.
            error = self.groups.consumer.validate_offset_commit(group_id, member_id,
                                                                generation_id, api_version=9)
            if error is Error.STALE_MEMBER_EPOCH:
                error = Error.ILLEGAL_GENERATION
        elif error is Error.NONE:
            error = validate_txn_commit(self.groups.get(group_id), member_id,
                                        group_instance_id, generation_id)
        if error is not Error.NONE:
            return error
        oversized = self.oversized_metadata(topics)
        records = offset_records(group_id, [
            (name, [p for p in parts if (name, p[0]) not in oversized])
            for name, parts in topics], self.clock())
        partition = self.broker.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        if partition is None or not partition.is_leader:
            return Error.NOT_COORDINATOR
        if not records:
            return Error.NONE  # every partition's metadata was too large
        try:
            batch = build_txn_batch([encode_record(r) for r in records], producer_id,
                                    producer_epoch, self.clock())
        except (RecordFormatError, struct.error) as e:
            logger.error("cannot write the TxnOffsetCommit of %s: %s", group_id, e)
            return Error.UNKNOWN_SERVER_ERROR
        try:
            info = partition.append_records(batch, required_acks=-1)
        except (RecordBatchError, PartitionError) as e:
            logger.info("TxnOffsetCommit of %s refused: %s", group_id, e)
            return append_error_to_response_error(e.error_code)
        except OSError as e:
            logger.error("writing to %s-%d failed: %s", OFFSETS_TOPIC, partition.index, e)
            return Error.NOT_COORDINATOR
        for i, record in enumerate(records):
            self.groups.replay(record, info.first_offset + i, producer_id)
        return Error.NONE

    def oversized_metadata(self, topics: Sequence[tuple[str, Sequence[tuple[int, int, int,
                                                                          str | None]]]]
                           ) -> set[tuple[str, int]]:
        """The partitions whose metadata is over ``offset.metadata.max.bytes``: Kafka
        answers each OFFSET_METADATA_TOO_LARGE and commits the others."""
        limit = self.config.offset_metadata_max_bytes
        return {(name, p) for name, parts in topics for p, _, _, m in parts
                if metadata_too_large(m, limit)}

    def complete_txn_offsets(self, producer_id: int, partition: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` was written to ``partition``: its
        pending offsets there become the groups' (commit) or are dropped (abort)."""
        self.groups.replay_txn_marker(producer_id, commit, self._in_partition(partition))

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
        if self.loading:
            return Error.COORDINATOR_LOAD_IN_PROGRESS, []
        for p in self._led_partitions():
            if p not in self.loaded:
                self.load(p)
        led = set(self._led_partitions())
        return Error.NONE, [g for g in self.groups.list_all(states, types)
                            if self.partition_for(g[0]) in led]


async def _wait(reply: Reply[T]) -> T:
    if not reply.done:
        done = trio.Event()
        reply.on_done(lambda _: done.set())
        await done.wait()
    assert reply.value is not None
    return reply.value


def _decode(key: bytes | None, value: bytes | None, p: int, offset: int) -> Record | None:
    if key is None:
        return None
    try:
        decoded = decode_key(key)
        if decoded is None:
            return None
        return decoded, decode_value(decoded, value)
    except (RecordFormatError, UnicodeDecodeError) as e:
        logger.warning("skipping undecodable record at %s-%d offset %d: %s", OFFSETS_TOPIC, p,
                       offset, e)
        return None


def _chunks(records: Sequence[Record], limit: int
            ) -> Iterable[list[tuple[Record, tuple[bytes, bytes | None]]]]:
    """Records with their encoding, in runs that fit a batch of ``limit`` bytes."""
    chunk: list[tuple[Record, tuple[bytes, bytes | None]]] = []
    size = 0
    for record in records:
        encoded = encode_record(record)
        n = len(encoded[0]) + len(encoded[1] or b"") + RECORD_OVERHEAD
        if chunk and size + n > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append((record, encoded))
        size += n
    if chunk:
        yield chunk

