"""The transaction coordinator's I/O: the pure `TxnCoordinator` wired to the log,
to leadership of ``__transaction_state`` and to the markers (Kafka 3.9's
``TransactionStateManager`` appends and loads, ``TransactionMarkerChannelManager``).

- ``__transaction_state`` is created on first use (compacted, uncompressed,
  ``transaction.state.log.*`` settings, replication capped to the live brokers);
- a partition this broker comes to lead is loaded by replaying it, and the markers of
  the transactions it left half-ended are sent again; one it stops leading is unloaded;
- each `TxnWrite` is appended with acks=all while its coordinator epoch is current,
  then handed back to the coordinator (`TxnCoordinator.write_done`);
- marker jobs run as tasks: write to every partition, retry what failed retriably,
  then append the Complete* record;
- timers abort transactions past their timeout and expire idle transactional ids.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable

import trio

from josefk.cluster.background import every, failures_logged
from josefk.cluster.coordinator.records import (
    BACKGROUND_LOAD_BYTES,
    build_batch,
    keys_and_values,
    log_batches,
)
from josefk.cluster.coordinator.transaction.coordinator import TxnCoordinator
from josefk.cluster.coordinator.transaction.effects import (
    Decision,
    InitPidResult,
    MarkerJob,
    TxnConfig,
    TxnWrite,
    WriteOutcome,
)
from josefk.cluster.coordinator.transaction.host import TxnHost
from josefk.cluster.coordinator.transaction.records import TRANSACTION_STATE_TOPIC, TopicPartition
from josefk.cluster.coordinator.transaction.state import TV2, IllegalTxnTransition, TxnError
from josefk.cluster.metadata.errors import ClusterError
from josefk.cluster.metadata.store import BrokerInfo
from josefk.cluster.partition import PartitionError
from josefk.log.clock import now_ms
from josefk.log.log import Log, OffsetOutOfRangeError
from josefk.protocol import error_codes as ec
from josefk.protocol.record_batch import RecordBatchError

logger = logging.getLogger(__name__)

MARKER_RETRY_S = 0.1  # Kafka's marker channel retries each send-thread wakeup (~100 ms)
COMPLETE_RETRY_S = 0.5


class TxnService:
    """The transaction coordinator of one broker, with its log, markers and timers."""

    def __init__(self, host: TxnHost, clock: Callable[[], int] = now_ms) -> None:
        self.host = host
        values = host.config.values
        self.config = TxnConfig(
            num_partitions=values["transaction.state.log.num.partitions"],
            max_timeout_ms=values["transaction.max.timeout.ms"],
            id_expiration_ms=values["transactional.id.expiration.ms"],
            offsets_num_partitions=values["offsets.topic.num.partitions"],
            # transaction.version 2 is finalized on a single broker, none in a ZooKeeper
            # cluster: Kafka writes TransactionLogValue v1 from version 1 on.
            flexible_records=not values.get("zookeeper.connect"))
        self._spare_ids: list[int] = []
        self.coordinator = TxnCoordinator(self.config, self._take_id, clock)
        self.clock = clock
        self.loaded: dict[int, int] = {}  # partition -> leader epoch it was loaded at
        # How long each loaded partition took to replay, in ms (the broker's metrics).
        self.load_times_ms: dict[int, float] = {}
        self._nursery: trio.Nursery | None = None
        self._queued: list[Callable[[], Awaitable[None]]] = []

    # --- the topic ---------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        topic = self.host.store.get(TRANSACTION_STATE_TOPIC)
        return len(topic.partitions) if topic else self.config.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return self.coordinator.partition_for(transactional_id)

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` as Kafka does on the first FindCoordinator."""
        if self.host.store.get(TRANSACTION_STATE_TOPIC) is not None:
            return
        values = self.host.config.values
        wanted = values["transaction.state.log.replication.factor"]
        live = len(self.host.live_brokers()) or 1
        replication = min(wanted, live)
        if replication < wanted:
            logger.warning("creating %s with replication factor %d: only %d broker(s) are "
                           "live (transaction.state.log.replication.factor=%d)",
                           TRANSACTION_STATE_TOPIC, replication, live, wanted)
        await self.host.create_topic(
            TRANSACTION_STATE_TOPIC, self.config.num_partitions, replication,
            configs={"cleanup.policy": "compact", "compression.type": "uncompressed",
                     "unclean.leader.election.enable": "false",
                     "min.insync.replicas": str(min(values["transaction.state.log.min.isr"],
                                                    replication)),
                     "segment.bytes": str(values["transaction.state.log.segment.bytes"])})
        logger.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC,
                    self.config.num_partitions)
        self.on_leadership_change()

    async def coordinator_node(self, transactional_id: str) -> tuple[int, BrokerInfo | None]:
        """FindCoordinator key type 1: the leader of the id's partition."""
        try:
            await self.ensure_topic()
        except ClusterError as e:
            logger.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, e)
            return ec.COORDINATOR_NOT_AVAILABLE, None
        view = self.host.partition_view(TRANSACTION_STATE_TOPIC,
                                        self.partition_for(transactional_id))
        if view is None or view.leader < 0:
            return ec.COORDINATOR_NOT_AVAILABLE, None
        if view.leader == self.host.node_id:
            host, port = self.host.advertised_endpoint()
            return ec.NONE, BrokerInfo(self.host.node_id, host, port)
        for info in self.host.live_brokers():
            if info.node_id == view.leader:
                return ec.NONE, info
        return ec.COORDINATOR_NOT_AVAILABLE, None

    # --- leadership and loading ------------------------------------------------------------

    def _led(self) -> dict[int, int]:
        led = {}
        for p in range(self.num_partitions):
            part = self.host.partition(TRANSACTION_STATE_TOPIC, p)
            if part is not None and part.is_leader:
                led[p] = part.leader_epoch
        return led

    def startup(self) -> None:
        self.on_leadership_change()

    def on_leadership_change(self) -> None:
        """Load the partitions this broker now leads (or leads at a new epoch), unload
        those it no longer leads (Kafka's onElection / onResignation)."""
        led = self._led()
        for p, epoch in list(self.loaded.items()):
            if led.get(p) != epoch:
                self.coordinator.unload(p, epoch)
                del self.loaded[p]
                self.load_times_ms.pop(p, None)
                logger.info("unloaded %s-%d", TRANSACTION_STATE_TOPIC, p)
        for p, epoch in sorted(led.items()):
            if self.loaded.get(p) != epoch and self.coordinator.loading.get(p) != epoch:
                self._load(p, epoch)

    def _load(self, p: int, epoch: int) -> None:
        """Replay partition ``p``: at once if its log is small, else its log is read in a
        worker thread while its ids answer COORDINATOR_LOAD_IN_PROGRESS (Kafka loads in
        the background too)."""
        partition = self.host.partition(TRANSACTION_STATE_TOPIC, p)
        if partition is None:
            return
        started = time.monotonic()
        self.coordinator.begin_loading(p, epoch)
        buffer = self.host.config.values["transaction.state.log.load.buffer.size"]
        if partition.log.size_in_bytes() < BACKGROUND_LOAD_BYTES:
            self._loaded(p, epoch, _read_records(partition.log, p, buffer), started)
            return

        async def in_background() -> None:
            # Only this coordinator appends to the partition, and not while it loads.
            records = await trio.to_thread.run_sync(_read_records, partition.log, p, buffer)
            self._loaded(p, epoch, records, started)
        self._spawn(in_background)

    def _loaded(self, p: int, epoch: int, records: list[tuple[bytes | None, bytes | None]],
                started: float) -> None:
        if self.coordinator.loading.get(p) != epoch:
            return  # unloaded or re-elected meanwhile
        jobs = self.coordinator.finish_loading(p, epoch, records)
        self.loaded[p] = epoch
        self.load_times_ms[p] = (time.monotonic() - started) * 1000
        for job in jobs:
            self._spawn(lambda job=job: self._send_markers(job))

    # --- writing ---------------------------------------------------------------------------

    async def _append(self, write: TxnWrite) -> int:
        """Append one record with acks=all: the append's error code."""
        if not self.coordinator.is_current(write):
            return ec.NOT_COORDINATOR
        partition = self.host.partition(TRANSACTION_STATE_TOPIC, write.partition)
        if partition is None or not partition.is_leader:
            return ec.NOT_LEADER_OR_FOLLOWER
        batch = build_batch([(write.key, write.value)], self.clock())
        try:
            info = partition.append_records(batch, required_acks=-1)
        except (RecordBatchError, PartitionError) as e:
            logger.warning("appending to %s-%d failed: %s", TRANSACTION_STATE_TOPIC,
                           write.partition, e)
            return e.error_code
        except OSError as e:
            logger.error("appending to %s-%d failed: %s", TRANSACTION_STATE_TOPIC,
                         write.partition, e)
            return ec.KAFKA_STORAGE_ERROR
        timeout_s = self.host.config.values["request.timeout.ms"] / 1000
        return await self.host.wait_replicated(partition, info.last_offset + 1, timeout_s)

    async def _execute(self, write: TxnWrite) -> WriteOutcome:
        outcome = self.coordinator.write_done(write, await self._append(write))
        if outcome.markers is not None:
            job = outcome.markers
            self._spawn(lambda: self._send_markers(job))
        return outcome

    async def _decide(self, decision: Decision[int]) -> int:
        if decision.write is None:
            assert decision.answer is not None
            return decision.answer
        return (await self._execute(decision.write)).error

    # --- requests --------------------------------------------------------------------------

    def _take_id(self) -> int:
        if not self._spare_ids:
            raise TxnError(ec.COORDINATOR_LOAD_IN_PROGRESS)
        return self._spare_ids.pop()

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               producer_id: int, producer_epoch: int) -> InitPidResult:
        if not self._spare_ids:
            # The pure coordinator takes ids synchronously; a cluster's come from the
            # controller, so one is fetched ahead.
            try:
                self._spare_ids.append(await self.host.next_producer_id())
            except TxnError as e:
                return InitPidResult(-1, -1, e.code)
        decision = self.coordinator.init_producer_id(transactional_id, timeout_ms,
                                                     producer_id, producer_epoch)
        if decision.write is None:
            assert decision.answer is not None
            return decision.answer
        outcome = await self._execute(decision.write)
        return InitPidResult(outcome.producer_id, outcome.producer_epoch, outcome.error)

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: Iterable[TopicPartition],
                             txn_version: int = 0) -> int:
        return await self._decide(self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, txn_version))

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> int:
        return await self._decide(self.coordinator.add_offsets(
            transactional_id, producer_id, producer_epoch, group_id))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, txn_version: int = 0) -> tuple[int, int, int]:
        """(error, producer id, producer epoch): with transactions v2 the producer's next
        id and epoch, else -1s."""
        error = await self._decide(self.coordinator.end_txn(
            transactional_id, producer_id, producer_epoch, commit, txn_version))
        if error != ec.NONE or txn_version < TV2:
            return error, -1, -1
        return error, *self.coordinator.producer_after_end(transactional_id)

    # --- markers ---------------------------------------------------------------------------

    def _spawn(self, task: Callable[[], Awaitable[None]]) -> None:
        if self._nursery is None:
            self._queued.append(task)
        else:
            self._nursery.start_soon(_guarded, task)

    async def _send_markers(self, job: MarkerJob) -> None:
        todo = job.partitions
        while True:
            results: dict[TopicPartition, int] = {}
            gone: set[TopicPartition] = set()
            if todo:
                try:
                    results, gone = await self.host.write_txn_markers(
                        job.producer_id, job.producer_epoch, job.coordinator_epoch,
                        job.commit, todo)
                except Exception:
                    # Kafka's marker channel keeps retrying; so does this job.
                    logger.exception("writing markers of %s failed", job.transactional_id)
                    await trio.sleep(COMPLETE_RETRY_S)
                    continue
            try:
                progress = self.coordinator.markers_written(job, results, gone)
            except IllegalTxnTransition as e:
                logger.error("markers of %s: %s", job.transactional_id, e)
                return
            if progress.cancelled:
                return
            if progress.complete is not None:
                await self._complete(progress.complete)
                return
            if not progress.retry:
                logger.error("markers of %s: partitions left unsent", job.transactional_id)
                return
            todo = progress.retry
            await trio.sleep(MARKER_RETRY_S)

    async def _complete(self, write: TxnWrite) -> None:
        """Append the Complete* record, again while it fails retriably."""
        while (await self._execute(write)).retry:
            await trio.sleep(COMPLETE_RETRY_S)

    # --- timers ----------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        for write in self.coordinator.abort_timed_out():
            logger.info("aborting the transaction of %s: past its timeout",
                        write.transactional_id)
            self._spawn(lambda write=write: self._run_write(write))

    def expire_transactional_ids(self) -> None:
        for write in self.coordinator.expire_transactional_ids():
            self._spawn(lambda write=write: self._run_write(write))

    async def _run_write(self, write: TxnWrite) -> None:
        await self._execute(write)

    async def _every(self, interval_ms: int, job: Callable[[], None]) -> None:
        await every(interval_ms / 1000, job, logger, f"transaction coordinator job {job.__name__}")

    async def run(self) -> None:
        """Background task: marker jobs and timers, until cancelled."""
        values = self.host.config.values
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for task in self._queued:
                nursery.start_soon(_guarded, task)
            self._queued.clear()
            nursery.start_soon(
                self._every, values["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                self.abort_timed_out)
            nursery.start_soon(
                self._every, values["transaction.remove.expired.transaction.cleanup.interval.ms"],
                self.expire_transactional_ids)


async def _guarded(task: Callable[[], Awaitable[None]]) -> None:
    """A background job's failure is logged; it never takes the broker down."""
    with failures_logged(logger, "transaction coordinator task"):
        await task()


def _read_records(log: Log, p: int, buffer: int) -> list[tuple[bytes | None, bytes | None]]:
    """The last (key, value) of each key of a partition's data batches, from its log start
    to its end: what replaying every record leaves (the last record per id wins), without
    decoding the superseded ones."""
    last: dict[bytes, bytes | None] = {}
    offset = log.log_start_offset
    try:
        for header, batch in log_batches(log, buffer):
            if not header.is_control:
                _, keys, values = keys_and_values(batch, header)
                last.update(zip(keys, values, strict=True))
            offset = header.next_offset
    except (RecordBatchError, OffsetOutOfRangeError, OSError, ValueError, IndexError) as e:
        logger.error("loading %s-%d stopped at offset %d: %s", TRANSACTION_STATE_TOPIC, p,
                     offset, e)
    return list(last.items())
