"""The transaction coordinator's decisions, without I/O (Kafka 3.9's ``TransactionCoordinator``
and the bookkeeping of its ``TransactionStateManager`` and marker channel).

This broker coordinates the transactional ids whose ``__transaction_state`` partition
(`partition_for`) it leads; it loads a partition by replaying it (`begin_loading`,
`finish_loading`) and drops it when it stops leading (`unload`). Requests return a
`Decision`; side effects are values (`txn_effects`): records to append, markers to
write. State changes only when a write is reported done (`write_done`), as Kafka applies
a transition after its log append, with Kafka's one exception: fencing an open
transaction bumps the epoch in memory before the PrepareAbort record is written, so the
fenced producer is refused at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from josefk.cluster.coordinator.records import OFFSETS_TOPIC, partition_for
from josefk.cluster.coordinator.records import partition_for as group_partition_for
from josefk.cluster.coordinator.transaction.effects import (
    Decision,
    InitPidResult,
    MarkerJob,
    MarkerProgress,
    TxnConfig,
    TxnDescription,
    TxnListing,
    TxnWrite,
    WriteKind,
    WriteOutcome,
    append_error_to_coordinator_error,
)
from josefk.cluster.coordinator.transaction.end_rules import judge_end
from josefk.cluster.coordinator.transaction.records import TopicPartition, encode_record
from josefk.cluster.coordinator.transaction.state import (
    EXPIRATION_ALLOWED,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV2,
    IllegalTxnTransition,
    TransactionMetadata,
    TxnError,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
    replay,
)
from josefk.log.clock import now_ms
from josefk.protocol import error_codes as ec

logger = logging.getLogger(__name__)

_S = TxnState
_PREPARED = (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
_END_TXN_KINDS = (WriteKind.END_TXN, WriteKind.FENCE, WriteKind.TIMEOUT_ABORT)
_RETRIABLE_MARKER_ERRORS = frozenset({
    ec.UNKNOWN_TOPIC_OR_PARTITION, ec.NOT_LEADER_OR_FOLLOWER, ec.NOT_ENOUGH_REPLICAS,
    ec.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ec.REQUEST_TIMED_OUT, ec.KAFKA_STORAGE_ERROR})
_FATAL_MARKER_ERRORS = frozenset({
    ec.CORRUPT_MESSAGE, ec.MESSAGE_TOO_LARGE, ec.RECORD_LIST_TOO_LARGE,
    ec.INVALID_REQUIRED_ACKS})


@dataclass(slots=True)
class _Partition:
    """The transactional ids of one led ``__transaction_state`` partition."""

    coordinator_epoch: int
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


class TxnCoordinator:
    """The transaction coordinator of one broker: its loaded partitions and its answers."""

    def __init__(self, config: TxnConfig, next_producer_id: Callable[[], int],
                 clock: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.next_producer_id = next_producer_id
        self.clock = clock
        self.partitions: dict[int, _Partition] = {}
        self.loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self.pending_markers: dict[str, MarkerJob] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    # --- leadership ------------------------------------------------------------------------

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads ``partition`` at ``coordinator_epoch`` (its leader epoch);
        its ids answer COORDINATOR_LOAD_IN_PROGRESS until `finish_loading`."""
        self.unload(partition)
        self.loading[partition] = coordinator_epoch

    def finish_loading(self, partition: int, coordinator_epoch: int,
                       records: Iterable[tuple[bytes | None, bytes | None]]
                       ) -> list[MarkerJob]:
        """Replay the partition's records (key, value) from its log start to its end.
        Returns the markers of the transactions it left half-ended, to write again."""
        if self.loading.get(partition) != coordinator_epoch:
            return []  # unloaded or re-elected meanwhile
        loaded = replay(records)
        del self.loading[partition]
        self.partitions[partition] = _Partition(coordinator_epoch, loaded)
        now = self.clock()
        jobs = []
        for md in loaded.values():
            if md.state in _PREPARED:
                jobs.append(self._marker_job(md, coordinator_epoch, partition,
                                             md.state is _S.PREPARE_COMMIT, now))
        logger.info("loaded %d transactional ids from __transaction_state-%d at epoch %d",
                    len(loaded), partition, coordinator_epoch)
        return jobs

    def unload(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition``: forget its ids and their markers."""
        if coordinator_epoch is None or self.loading.get(partition) == coordinator_epoch:
            self.loading.pop(partition, None)
        self.partitions.pop(partition, None)
        for transactional_id, job in list(self.pending_markers.items()):
            if job.complete.partition == partition:
                del self.pending_markers[transactional_id]

    def _lookup(self, transactional_id: str) -> tuple[int, _Partition | None]:
        p = self.partition_for(transactional_id)
        if p in self.loading:
            return ec.COORDINATOR_LOAD_IN_PROGRESS, None
        entry = self.partitions.get(p)
        if entry is None:
            return ec.NOT_COORDINATOR, None
        return ec.NONE, entry

    def _producers_transaction(self, transactional_id: str, producer_id: int,
                               producer_epoch: int
                               ) -> tuple[int, _Partition | None, TransactionMetadata | None]:
        """The transaction a producer's request names, with its partition; or the error
        Kafka answers (no id, not the coordinator here, another producer, an old epoch)."""
        if not transactional_id:
            return ec.INVALID_REQUEST, None, None
        error, entry = self._lookup(transactional_id)
        if entry is None:
            return error, None, None
        md = entry.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ec.INVALID_PRODUCER_ID_MAPPING, None, None
        if md.producer_epoch != producer_epoch:
            return ec.PRODUCER_FENCED, None, None
        return ec.NONE, entry, md

    def is_current(self, write: TxnWrite) -> bool:
        """Whether ``write`` may still be appended: its partition is led at its epoch."""
        entry = self.partitions.get(write.partition)
        return entry is not None and entry.coordinator_epoch == write.coordinator_epoch

    def _write(self, kind: WriteKind, md: TransactionMetadata, entry: _Partition,
               transit: TxnTransit, *, commit: bool = False,
               is_epoch_fence: bool = False) -> TxnWrite:
        key, value = encode_record(md.record(transit), flexible=self.config.flexible_records)
        return TxnWrite(kind, md.transactional_id, self.partition_for(md.transactional_id),
                        entry.coordinator_epoch, transit, key, value, commit, is_epoch_fence)

    # --- InitProducerId ----------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         producer_id: int = NO_PRODUCER_ID,
                         producer_epoch: int = NO_PRODUCER_EPOCH
                         ) -> Decision[InitPidResult]:
        """InitProducerId with a transactional id (without one, a producer id comes from
        the broker's `ProducerIdManager`, not from here)."""
        def fail(error: int) -> Decision[InitPidResult]:
            return Decision(InitPidResult(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, error))

        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return fail(ec.INVALID_REQUEST)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if not transactional_id:
            return fail(ec.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return fail(ec.INVALID_TRANSACTION_TIMEOUT)
        error, entry = self._lookup(transactional_id)
        if entry is None:
            return fail(error)
        md = entry.txns.get(transactional_id)
        if md is None:
            try:
                new_id = self.next_producer_id()
            except TxnError as e:
                return fail(e.code)
            # Kept even if the write fails, as Kafka does: epoch -1 marks it brand new.
            md = TransactionMetadata(transactional_id, new_id, NO_PRODUCER_EPOCH, timeout_ms,
                                     _S.EMPTY, last_update_timestamp=self.clock())
            entry.txns[transactional_id] = md

        if md.pending:
            return fail(ec.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
                md.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == md.producer_id
                or (expected[0] == md.last_producer_id and is_epoch_exhausted(expected[1]))):
            return fail(ec.PRODUCER_FENCED)
        if md.state in _PREPARED:
            return fail(ec.CONCURRENT_TRANSACTIONS)
        if md.state is _S.ONGOING:
            # Fence the open transaction and abort it; the client gets CONCURRENT_TRANSACTIONS
            # and retries, which bumps the epoch again (or rotates the producer id).
            fence = md.prepare_fence_producer_epoch()
            decision = self._end(transactional_id, fence.producer_id, fence.producer_epoch,
                                 commit=False, from_client=False, kind=WriteKind.FENCE)
            if decision.write is None:
                md.abandon_transition()
                return fail(decision.answer if decision.answer is not None else ec.NONE)
            return Decision(write=decision.write)
        if md.state not in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            raise IllegalTxnTransition(f"{transactional_id} found in {md.state.kafka_name}")
        now = self.clock()
        try:
            if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                transit = md.prepare_producer_id_rotation(self.next_producer_id(), timeout_ms,
                                                          now, expected is not None)
            else:
                transit = md.prepare_increment_producer_epoch(
                    timeout_ms, None if expected is None else expected[1], now)
        except TxnError as e:
            return fail(e.code)
        return Decision(write=self._write(WriteKind.INIT_PRODUCER_ID, md, entry, transit))

    # --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], txn_version: int = 0
                       ) -> Decision[int]:
        """AddPartitionsToTxn (every version's add; the handler checks the topics first,
        see `unknown_partition_errors`). ``txn_version`` 2: a partition leader adds it for
        a Produce v12+ (KIP-890 part 2)."""
        added = frozenset(TopicPartition(*tp) for tp in partitions)
        error, entry, md = self._producers_transaction(transactional_id, producer_id,
                                                       producer_epoch)
        if entry is None or md is None:
            return Decision(error)
        if md.pending or md.state in _PREPARED:
            return Decision(ec.CONCURRENT_TRANSACTIONS)
        if md.state is _S.ONGOING and added <= md.partitions:
            return Decision(ec.NONE)
        if producer_epoch < 0:
            # An id whose first InitProducerId was never written has no epoch: Kafka's
            # prepareTransitionTo throws, which the client sees as UNKNOWN_SERVER_ERROR.
            return Decision(ec.UNKNOWN_SERVER_ERROR)
        transit = md.prepare_add_partitions(added, self.clock(), txn_version)
        return Decision(write=self._write(WriteKind.ADD_PARTITIONS, md, entry, transit))

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    group_id: str) -> Decision[int]:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        tp = TopicPartition(OFFSETS_TOPIC,
                            group_partition_for(group_id, self.config.offsets_num_partitions))
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1, from partition leaders):
        per partition, NONE if it is in the ongoing transaction."""
        tps = [TopicPartition(*tp) for tp in partitions]

        def all_(code: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(tps, code)

        error, entry, md = self._producers_transaction(transactional_id, producer_id,
                                                       producer_epoch)
        if entry is None or md is None:
            return all_(error)
        if md.state in _PREPARED:
            return all_(ec.CONCURRENT_TRANSACTIONS)
        return {tp: ec.NONE if tp in md.partitions else ec.TRANSACTION_ABORTABLE for tp in tps}

    # --- EndTxn -------------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool, txn_version: int = 0) -> Decision[int]:
        """EndTxn; ``txn_version`` 2 (EndTxn v5+) bumps the epoch on every transaction."""
        return self._end(transactional_id, producer_id, producer_epoch, commit=commit,
                         from_client=True, kind=WriteKind.END_TXN, txn_version=txn_version)

    def producer_after_end(self, transactional_id: str) -> tuple[int, int]:
        """The producer id and epoch an EndTxn v5 answers: the bumped epoch, or the next
        producer id at epoch 0 once the last epoch is used up."""
        _, entry = self._lookup(transactional_id)
        md = None if entry is None else entry.txns.get(transactional_id)
        if md is None:
            return NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if md.next_producer_id != NO_PRODUCER_ID:
            return md.next_producer_id, 0
        return md.producer_id, md.producer_epoch

    def _end(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
             commit: bool, from_client: bool, kind: WriteKind,
             txn_version: int = 0) -> Decision[int]:
        if not transactional_id:
            return Decision(ec.INVALID_REQUEST)
        error, entry = self._lookup(transactional_id)
        if entry is None:
            return Decision(error)
        md = entry.txns.get(transactional_id)
        if md is None:
            return Decision(ec.INVALID_PRODUCER_ID_MAPPING)
        verdict = judge_end(md, producer_id, producer_epoch, commit, from_client, txn_version)
        if verdict.target is None:
            assert verdict.error is not None
            return Decision(verdict.error)
        is_fence = md.state is _S.ONGOING and verdict.target is _S.PREPARE_ABORT and \
            md.pending_state is _S.PREPARE_EPOCH_FENCE
        if is_fence:
            md.pending_state = None
            md.producer_epoch = producer_epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
        return self._prepare_end(md, entry, kind, verdict.target,
                                 0 if is_fence else txn_version, is_fence)

    def _prepare_end(self, md: TransactionMetadata, entry: _Partition, kind: WriteKind,
                     target: TxnState, txn_version: int, is_fence: bool) -> Decision[int]:
        next_producer_id = NO_PRODUCER_ID
        if txn_version >= TV2 and md.epoch_exhausted:
            try:
                next_producer_id = self.next_producer_id()
            except TxnError as e:
                return Decision(e.code)
        transit = md.prepare_abort_or_commit(target, self.clock(), txn_version,
                                             next_producer_id)
        return Decision(write=self._write(kind, md, entry, transit,
                                          commit=target is _S.PREPARE_COMMIT,
                                          is_epoch_fence=is_fence))

    # --- after a write ----------------------------------------------------------------------

    def write_done(self, write: TxnWrite, append_error: int) -> WriteOutcome:
        """The append of ``write`` finished with ``append_error`` (0 if it succeeded)."""
        error = append_error_to_coordinator_error(append_error)
        lookup_error, entry = self._lookup(write.transactional_id)
        md = None if entry is None else entry.txns.get(write.transactional_id)
        same_epoch = entry is not None and entry.coordinator_epoch == write.coordinator_epoch
        if write.kind is WriteKind.EXPIRE:
            if md is not None and same_epoch:
                if (error == ec.NONE and md.pending_state is _S.DEAD
                        and md.producer_epoch == write.transit.producer_epoch):
                    assert entry is not None
                    del entry.txns[write.transactional_id]
                else:
                    md.abandon_transition()
            return WriteOutcome(error)
        if error == ec.NONE:
            if entry is None:
                error = lookup_error
            elif md is None or not same_epoch:
                error = ec.NOT_COORDINATOR
            else:
                md.complete_transition(write.transit)
        elif md is not None and same_epoch:
            retry = write.kind is WriteKind.COMPLETE and error == ec.COORDINATOR_NOT_AVAILABLE
            if not retry:
                md.abandon_transition()
            if write.is_epoch_fence:
                md.has_failed_epoch_fence = True
            if retry:
                return WriteOutcome(error, retry=True)
        if write.kind is WriteKind.INIT_PRODUCER_ID:
            if error != ec.NONE:
                return WriteOutcome(error)
            return WriteOutcome(ec.NONE, write.transit.producer_id, write.transit.producer_epoch)
        if write.kind in _END_TXN_KINDS:
            outcome = self._after_prepare(write, error)
            if write.kind is WriteKind.FENCE and outcome.error == ec.NONE:
                return WriteOutcome(ec.CONCURRENT_TRANSACTIONS, markers=outcome.markers)
            return outcome
        return WriteOutcome(error)

    def _after_prepare(self, write: TxnWrite, error: int) -> WriteOutcome:
        """A Prepare* record is written: check nothing moved meanwhile, then send markers."""
        if error != ec.NONE:
            return WriteOutcome(error)
        _, entry = self._lookup(write.transactional_id)
        assert entry is not None  # write_done checked it
        md = entry.txns[write.transactional_id]
        if md.producer_id != write.transit.producer_id:
            return WriteOutcome(ec.INVALID_PRODUCER_ID_MAPPING)
        if md.producer_epoch != write.transit.producer_epoch:
            return WriteOutcome(ec.PRODUCER_FENCED)
        if md.pending:
            return WriteOutcome(ec.CONCURRENT_TRANSACTIONS)
        if md.state is not (_S.PREPARE_COMMIT if write.commit else _S.PREPARE_ABORT):
            return WriteOutcome(ec.INVALID_TXN_STATE)
        job = self._marker_job(md, entry.coordinator_epoch, write.partition, write.commit,
                               self.clock())
        return WriteOutcome(ec.NONE, markers=job)

    def _marker_job(self, md: TransactionMetadata, coordinator_epoch: int, partition: int,
                    commit: bool, now: int) -> MarkerJob:
        transit = md.prepare_complete(now)
        key, value = encode_record(md.record(transit), flexible=self.config.flexible_records)
        complete = TxnWrite(WriteKind.COMPLETE, md.transactional_id, partition,
                            coordinator_epoch, transit, key, value, commit)
        job = MarkerJob(md.transactional_id, coordinator_epoch, md.producer_id,
                        md.producer_epoch, commit, frozenset(md.partitions), complete)
        self.pending_markers[md.transactional_id] = job
        return job

    # --- markers --------------------------------------------------------------------------------

    def markers_written(self, job: MarkerJob, results: Mapping[TopicPartition, int],
                        no_leader: Iterable[TopicPartition] = ()) -> MarkerProgress:
        """WriteTxnMarkers answered ``results`` (partition → error) for some of the job's
        partitions; ``no_leader`` are partitions without a leader (deleted: skipped)."""
        if self.pending_markers.get(job.transactional_id) is not job:
            return MarkerProgress(cancelled=True)
        _, entry = self._lookup(job.transactional_id)
        md = None if entry is None else entry.txns.get(job.transactional_id)
        if entry is None or md is None or entry.coordinator_epoch != job.coordinator_epoch:
            del self.pending_markers[job.transactional_id]
            return MarkerProgress(cancelled=True)
        retry = set()
        for tp, error in results.items():
            if error == ec.NONE or error in (ec.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                                             ec.UNSUPPORTED_VERSION):
                md.remove_partition(TopicPartition(*tp))
            elif error in _RETRIABLE_MARKER_ERRORS:
                retry.add(TopicPartition(*tp))
            elif error in (ec.INVALID_PRODUCER_EPOCH, ec.TRANSACTION_COORDINATOR_FENCED):
                # The producer or coordinator epoch moved on: this transaction is not ours.
                del self.pending_markers[job.transactional_id]
                return MarkerProgress(cancelled=True)
            elif error in _FATAL_MARKER_ERRORS:
                raise IllegalTxnTransition(f"fatal error {error} writing a marker for {tp}")
            else:
                raise IllegalTxnTransition(f"unexpected error {error} writing a marker for {tp}")
        for tp in no_leader:
            md.remove_partition(TopicPartition(*tp))
        if retry:
            return MarkerProgress(retry=frozenset(retry))
        if md.partitions:
            return MarkerProgress()
        del self.pending_markers[job.transactional_id]
        return MarkerProgress(complete=job.complete)

    # --- timers ---------------------------------------------------------------------------------

    def abort_timed_out(self) -> list[TxnWrite]:
        """Transactions open longer than their timeout: fence their producer and abort them
        (``transaction.abort.timed.out.transaction.cleanup.interval.ms``)."""
        now = self.clock()
        writes = []
        for entry in self.partitions.values():
            for md in list(entry.txns.values()):
                if (md.pending or md.state is not _S.ONGOING
                        or md.start_timestamp + md.timeout_ms >= now):
                    continue
                fence = md.prepare_fence_producer_epoch()
                decision = self._end(md.transactional_id, fence.producer_id,
                                     fence.producer_epoch, commit=False, from_client=False,
                                     kind=WriteKind.TIMEOUT_ABORT)
                if decision.write is None:
                    md.abandon_transition()
                else:
                    writes.append(decision.write)
        return writes

    def expire_transactional_ids(self) -> list[TxnWrite]:
        """Tombstones for ids idle longer than ``transactional.id.expiration.ms``
        (``transaction.remove.expired.transaction.cleanup.interval.ms``)."""
        deadline = self.clock() - self.config.id_expiration_ms
        writes = []
        for entry in self.partitions.values():
            for md in entry.txns.values():
                if (not md.pending and md.state in EXPIRATION_ALLOWED
                        and md.last_update_timestamp <= deadline):
                    writes.append(self._write(WriteKind.EXPIRE, md, entry, md.prepare_dead()))
        return writes

    # --- DescribeTransactions / ListTransactions -----------------------------------------------

    def describe(self, transactional_id: str) -> TxnDescription:
        if not transactional_id:
            return TxnDescription(transactional_id, ec.INVALID_REQUEST)
        error, entry = self._lookup(transactional_id)
        if entry is None:
            return TxnDescription(transactional_id, error)
        md = entry.txns.get(transactional_id)
        if md is None or md.state is _S.DEAD:
            return TxnDescription(transactional_id, ec.TRANSACTIONAL_ID_NOT_FOUND)
        return TxnDescription(transactional_id, ec.NONE, md.state.kafka_name, md.producer_id,
                              md.producer_epoch, md.timeout_ms, md.start_timestamp,
                              frozenset(md.partitions))

    def list_transactions(self, producer_ids: Iterable[int] = (), states: Iterable[str] = (),
                          min_duration_ms: int = -1) -> TxnListing:
        if self.loading:
            return TxnListing(ec.COORDINATOR_LOAD_IN_PROGRESS)
        pids, names = set(producer_ids), list(states)
        wanted = {s for s in map(TxnState.from_kafka_name, names) if s is not None}
        unknown = tuple(n for n in names if TxnState.from_kafka_name(n) is None)
        now = self.clock()
        found = []
        for entry in self.partitions.values():
            for md in entry.txns.values():
                if (md.state is _S.DEAD or (pids and md.producer_id not in pids)
                        or (names and md.state not in wanted)
                        or (min_duration_ms >= 0
                            and now - md.start_timestamp <= min_duration_ms)):
                    continue
                found.append((md.transactional_id, md.producer_id, md.state.kafka_name))
        return TxnListing(ec.NONE, unknown, tuple(found))

