"""The ``__consumer_offsets`` partitions a group coordinator leads: the topic's creation
on first use (compacted, Kafka's settings), which partition a group belongs to and who
coordinates it, loading a partition at start-up or on a new leadership by replaying its
log, unloading it, and writing the records requests produce as v2 batches (acks=all),
each replayed once written.

A partition whose log is small loads at once. A larger one loads in the background, as
Kafka's do: its groups answer COORDINATOR_LOAD_IN_PROGRESS (clients retry) while the
broker serves everything else, the load pausing every few milliseconds.
"""

from __future__ import annotations

import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import trio

from josefk.cluster.background import failures_logged
from josefk.cluster.coordinator.group.api import (
    Error,
    Result,
    append_error_to_response_error,
)
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.host import CoordinatorHost
from josefk.cluster.coordinator.group.load import PartitionLoad
from josefk.cluster.coordinator.group.records import Record, encode_record
from josefk.cluster.coordinator.records import (
    BACKGROUND_LOAD_BYTES,
    OFFSETS_TOPIC,
    RecordFormatError,
    build_batch,
    partition_for,
)
from josefk.cluster.metadata.errors import ClusterError
from josefk.cluster.metadata.store import BrokerInfo
from josefk.cluster.partition import PartitionError
from josefk.log.log import Log
from josefk.protocol.record_batch import HEADER_SIZE, RecordBatchError

logger = logging.getLogger(__name__)

T = TypeVar("T")
RECORD_OVERHEAD = 32  # a record's framing in a batch, generously
# How long a load in the background runs before it lets other tasks run.
LOAD_SLICE_S = 0.02


class OffsetsPartitions:
    """The ``__consumer_offsets`` partitions of one broker and the groups replayed from
    them; ``on_loaded(group id, wake)`` hears of each group a load touched."""

    def __init__(self, broker: CoordinatorHost, groups: Groups, clock: Callable[[], int],
                 on_loaded: Callable[[str, bool], None]) -> None:
        self.broker = broker
        self.groups = groups
        self.clock = clock
        self.on_loaded = on_loaded
        self.loaded: set[int] = set()
        self.loading: set[int] = set()
        # Loads waiting for the loader (`run_loads`), and each loading partition's
        # current load: a load whose token was replaced (unload, reload) stops.
        self._queue: deque[tuple[int, object, bool]] = deque()
        self._tokens: dict[int, object] = {}
        self._queued = trio.Event()
        self._loader_running = False
        # How long each loaded partition took to replay, in ms (the broker's metrics).
        self.load_times_ms: dict[int, float] = {}

    # --- partitions and leadership ----------------------------------------------------

    @property
    def num_partitions(self) -> int:
        topic = self.broker.store.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic else self.broker.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def led_partitions(self) -> list[int]:
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
        for p in self.led_partitions():
            self.load(p)

    def check(self, group_id: str) -> Error:
        """NONE if this broker coordinates the group and its partition is loaded."""
        p = self.partition_for(group_id)
        partition = self.broker.partition(OFFSETS_TOPIC, p)
        if partition is None or not partition.is_leader:
            return Error.NOT_COORDINATOR
        if p not in self.loaded and p not in self.loading:
            self.load(p)  # e.g. the topic was created through CreateTopics
        return Error.COORDINATOR_LOAD_IN_PROGRESS if p in self.loading else Error.NONE

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
        """Startup hook (before the broker serves): replay every ``__consumer_offsets``
        partition this broker leads whose log is small; queue the others."""
        for p in self.led_partitions():
            partition = self.broker.partition(OFFSETS_TOPIC, p)
            if partition is not None and self._is_large(partition.log):
                self._enqueue(p, wake=False)  # `run_loads` starts once the broker serves
            else:
                self.load(p, wake=False)
        if self.loaded:
            logger.info("loaded %d groups from %d %s partitions in %.0f ms",
                        len(self.groups.groups) + len(self.groups.consumer.groups),
                        len(self.loaded), OFFSETS_TOPIC, sum(self.load_times_ms.values()))
        if self.loading:
            logger.info("loading %d %s partitions in the background", len(self.loading),
                        OFFSETS_TOPIC)

    def on_leadership_change(self) -> None:
        """Follow leadership of ``__consumer_offsets``: load the partitions this broker
        now leads, drop the groups of those it no longer leads (Kafka's onElection /
        onResignation); clients of dropped groups get NOT_COORDINATOR and look again."""
        led = set(self.led_partitions())
        for p in sorted((self.loaded | self.loading) - led):
            self.unload(p)
        for p in sorted(led - self.loaded - self.loading):
            self.load(p)

    def unload(self, p: int) -> None:
        """Drop the groups of partition ``p``; their parked JoinGroup and SyncGroup
        requests are answered NOT_COORDINATOR."""
        self.groups.unload(self.in_partition(p))
        self.loaded.discard(p)
        self.loading.discard(p)
        self._tokens.pop(p, None)  # a load under way stops
        self.load_times_ms.pop(p, None)
        logger.info("unloaded %s-%d: this broker no longer leads it", OFFSETS_TOPIC, p)

    def load(self, p: int, *, wake: bool = True) -> None:
        """Replay partition ``p`` from its log start to its end (transactional records
        count once their commit marker is read; aborted or open ones never do), each
        superseded plain offset commit left out (:mod:`.load`): at once if its log is
        small or no loader runs, else queued for `run_loads`."""
        partition = self.broker.partition(OFFSETS_TOPIC, p)
        if partition is None:
            return
        if self._loader_running and self._is_large(partition.log):
            self._enqueue(p, wake)
            self._queued.set()
            return
        started = time.monotonic()
        self._loaded(p, PartitionLoad(partition.log, self.groups, self.in_partition(p),
                                      p).run(), started, wake)

    @staticmethod
    def _is_large(log: Log) -> bool:
        return log.size_in_bytes() >= BACKGROUND_LOAD_BYTES

    def _enqueue(self, p: int, wake: bool) -> None:
        token = object()
        self.loading.add(p)
        self._tokens[p] = token
        self._queue.append((p, token, wake))

    async def run_loads(self) -> None:
        """Background task: the queued loads, one at a time, until cancelled."""
        self._loader_running = True
        try:
            while True:
                while self._queue:
                    p, token, wake = self._queue.popleft()
                    if self._tokens.get(p) is token:
                        with failures_logged(logger, f"loading {OFFSETS_TOPIC}-{p}"):
                            await self._load_in_slices(p, token, wake)
                    if self._tokens.get(p) is token:  # it failed: the next request retries
                        self.unload(p)
                self._queued = trio.Event()
                await self._queued.wait()
        finally:
            self._loader_running = False

    async def _load_in_slices(self, p: int, token: object, wake: bool) -> None:
        partition = self.broker.partition(OFFSETS_TOPIC, p)
        if partition is None:
            self.loading.discard(p)
            self._tokens.pop(p, None)
            return
        started = time.monotonic()
        load = PartitionLoad(partition.log, self.groups, self.in_partition(p), p)
        slice_end = time.monotonic() + LOAD_SLICE_S
        while True:
            for _ in load.steps():
                if time.monotonic() >= slice_end:
                    await trio.sleep(0)
                    if self._tokens.get(p) is not token:
                        return  # unloaded meanwhile: its groups were dropped
                    slice_end = time.monotonic() + LOAD_SLICE_S
            # Nothing awaited since the last step: records appended meanwhile (e.g.
            # transaction markers) were read, or are read now.
            if load.caught_up:
                break
        self.loading.discard(p)
        del self._tokens[p]
        self._loaded(p, load.touched, started, wake)
        logger.info("loaded %s-%d in the background in %.0f ms", OFFSETS_TOPIC, p,
                    self.load_times_ms[p])

    def _loaded(self, p: int, touched: set[str], started: float, wake: bool) -> None:
        self.loaded.add(p)
        self.load_times_ms[p] = (time.monotonic() - started) * 1000
        for group_id in touched:
            self.on_loaded(group_id, wake)

    def in_partition(self, p: int) -> Callable[[str], bool]:
        """Selects the group ids of ``__consumer_offsets`` partition ``p``."""
        count = self.num_partitions
        return lambda group_id: partition_for(group_id, count) == p

    # --- writing -------------------------------------------------------------------------

    def write(self, records: Sequence[Record]) -> Error:
        """Append ``records`` (all of one partition) with acks=all, then replay them."""
        if not records:
            return Error.NONE
        p = self.partition_for(records[0][0].group)
        partition = self.broker.partition(OFFSETS_TOPIC, p)
        if partition is None or not partition.is_leader:
            return Error.NOT_COORDINATOR
        if p in self.loading:
            return Error.COORDINATOR_LOAD_IN_PROGRESS  # e.g. expiry of a half-loaded group
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

    def apply(self, result: Result[T]) -> Error:
        """Write a result's records; run its success or failure follow-up."""
        error = self.write(result.records)
        if error is Error.NONE:
            if result.on_success is not None:
                result.on_success()
        elif result.on_failure is not None:
            self.write_best_effort(result.on_failure(error))
        return error

    def write_best_effort(self, records: Iterable[Record]) -> None:
        by_partition: dict[int, list[Record]] = {}
        for record in records:
            by_partition.setdefault(self.partition_for(record[0].group), []).append(record)
        for part_records in by_partition.values():
            error = self.write(part_records)
            if error is not Error.NONE:
                logger.warning("could not write %d group records: %s", len(part_records),
                               error.name)


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

