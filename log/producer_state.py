"""Producer state: per producer id, its epoch, last batches' sequence numbers and open
transaction.

This is what makes an idempotent producer's retries safe (seed 003): a batch
whose sequence range matches one of the producer's last five batches is a
duplicate and is acknowledged with its original offset; a gap in sequences is
OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.

Transactions (Kafka's ProducerStateManager): a producer's first transactional batch
opens its transaction (its first offset is *ongoing*); a COMMIT or ABORT marker
closes it, unless the marker's coordinator epoch is older than the last one seen
(TRANSACTION_COORDINATOR_FENCED). A closed transaction stays *unreplicated* until
the high watermark passes its marker: the first unstable offset, the smallest first
offset of both, bounds what read_committed consumers see (the LSO).

Updates are staged, validated, and committed only after the append succeeded
(Kafka's ProducerAppendInfo), so a failed append leaves no state behind. The
state is snapshotted in Kafka's ``<offset>.snapshot`` format at segment roll and
clean shutdown, and rebuilt on recovery by replaying batches after the newest
readable snapshot. A copy is also kept in memory every few thousand offsets
(*checkpoints*): a follower truncating its tail after a leader change replays from
the newest one below its cut instead of from the segment's start (Kafka does the same
replay from the newest file, in the JVM; replaying 25,000 batches in Python held the
event loop for half a second per partition).
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from josefk.log.checkpoint import write_atomic
from josefk.protocol.end_txn_marker import EndTxnMarker
from josefk.protocol.record_batch import NO_SEQUENCE, BatchHeader, RecordBatchError

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
INT32_MAX = (1 << 31) - 1
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = 6  # the CRC covers everything after version and crc
# Offsets between two in-memory checkpoints, at least (more with many producers, so
# copying them costs a fraction of a microsecond per offset); two are kept.
CHECKPOINT_INTERVAL = 2000
CHECKPOINT_OFFSETS_PER_PRODUCER = 16
CHECKPOINTS_KEPT = 2

logger = logging.getLogger(__name__)


class OutOfOrderSequenceError(RecordBatchError):
    """A sequence gap for a known producer (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    error_code = 45


class InvalidProducerEpochError(RecordBatchError):
    """A batch from an older producer epoch (INVALID_PRODUCER_EPOCH)."""

    error_code = 47


class InvalidTxnStateError(RecordBatchError):
    """A non-transactional batch while the producer's transaction is open (INVALID_TXN_STATE)."""

    error_code = 48


class TransactionCoordinatorFencedError(RecordBatchError):
    """A marker from an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED)."""

    error_code = 52


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerEntry:
    """What we remember of one producer on one partition."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1  # of its last data batch or marker

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch,
                             deque(self.batches, maxlen=BATCHES_TO_RETAIN),
                             self.coordinator_epoch, self.current_txn_first_offset,
                             self.last_timestamp)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed: from its first offset to the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    """The state as it was with every batch below ``offset`` applied."""

    offset: int
    producers: dict[int, ProducerEntry]
    ongoing: dict[int, int]
    unreplicated: dict[int, tuple[int, int]]


@dataclass(slots=True)
class ProducerUpdate:
    """What one append does to producer state, staged until the append succeeded (Kafka's
    ProducerAppendInfo, for every producer of the append)."""

    entries: dict[int, ProducerEntry] = field(default_factory=dict)
    started: list[tuple[int, int]] = field(default_factory=list)  # (first offset, producer)
    completed: list[CompletedTxn] = field(default_factory=list)


#: Called with each completed transaction and the LSO once it completes (the txn index).
OnCompleted = Callable[[CompletedTxn, int], None]


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """``next_seq`` directly follows ``last_seq``; sequences wrap at Int32.MAX_VALUE."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """The producer entries of one partition log, and its snapshot files."""

    def __init__(self, directory: Path, expiration_ms: int = 86_400_000) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0  # the state reflects every batch below this offset
        # The offset of the newest snapshot file known to hold this state's batches.
        self.last_snapshot_offset: int | None = None
        self.ongoing: dict[int, int] = {}  # first offset -> producer id, undecided
        # first offset -> (producer id, marker offset): decided, marker above the HW
        self.unreplicated: dict[int, tuple[int, int]] = {}
        self._checkpoints: list[_Checkpoint] = []  # oldest first

    # --- the produce path ---------------------------------------------------------

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate(header) if entry is not None else None

    def validate(self, header: BatchHeader) -> None:
        """Raise if a client's batch breaks the producer's epoch or sequence (Kafka's
        checkProducerEpoch and checkSequence)."""
        entry = self.producers.get(header.producer_id)
        current_epoch = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
        if header.producer_epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"epoch {header.producer_epoch} of producer {header.producer_id} is older "
                f"than {current_epoch}")
        if header.base_sequence == NO_SEQUENCE:
            return
        if header.producer_epoch != current_epoch:
            # A new epoch must start at sequence 0, unless we knew nothing of the producer
            # (its state expired or was removed with the log: KIP-360, Kafka 2.5+).
            if header.base_sequence != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"new epoch {header.producer_epoch} of producer {header.producer_id} "
                    f"starts at sequence {header.base_sequence}, not 0")
            return
        if current_epoch == NO_PRODUCER_EPOCH:
            return  # no epoch known (Kafka: currentEntry.producerEpoch == NO_PRODUCER_EPOCH)
        assert entry is not None
        # The same epoch continues the last batch's sequence. An entry of this epoch
        # without batches (a marker bumped the epoch, or a snapshot held no batch of
        # it) has last sequence NO_SEQUENCE, so only 0 follows: Kafka's checkSequence,
        # inSequence(currentEntry.lastSeq(), firstSeq).
        if not in_sequence(entry.last_seq, header.base_sequence):
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} sent sequence {header.base_sequence} after "
                f"{entry.last_seq}")

    def validate_txn_state(self, header: BatchHeader) -> None:
        """A producer with an open transaction may only send transactional batches."""
        entry = self.producers.get(header.producer_id)
        if entry is not None and entry.current_txn_first_offset >= 0 \
                and not header.is_transactional:
            raise InvalidTxnStateError(
                f"non-transactional batch from producer {header.producer_id} while its "
                f"transaction from offset {entry.current_txn_first_offset} is open")

    def validate_marker(self, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int) -> None:
        """A coordinator's marker (Kafka's appendEndTxnMarker checks): not from an older
        producer epoch, nor from an older coordinator epoch."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker epoch {producer_epoch} of producer {producer_id} is older than "
                f"{entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of coordinator epoch {coordinator_epoch} for producer {producer_id} "
                f"is older than {entry.coordinator_epoch}")

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int | None = None
                                ) -> bool:
        """Whether the producer has a transaction open here (of ``producer_epoch`` if given:
        Kafka 4's check, as transactions v2 bump the epoch on every transaction)."""
        entry = self.producers.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset >= 0
                and (producer_epoch is None or entry.epoch == producer_epoch))

    def stage(self, update: ProducerUpdate, header: BatchHeader,
              marker: EndTxnMarker | None = None) -> None:
        """Record ``header`` (offsets assigned; ``marker`` decoded if it is a control batch)
        in ``update``, copying entries on first touch."""
        if header.is_control and marker is None:
            return  # an emptied or unknown control batch: nothing to end
        pid = header.producer_id
        entry = update.entries.get(pid)
        if entry is None:
            current = self.producers.get(pid)
            entry = current.copy() if current is not None else ProducerEntry(pid)
            update.entries[pid] = entry
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = header.max_timestamp
        if marker is not None:
            if entry.current_txn_first_offset >= 0:
                update.completed.append(CompletedTxn(pid, entry.current_txn_first_offset,
                                                     header.base_offset, not marker.commit))
            entry.current_txn_first_offset = -1
            entry.coordinator_epoch = marker.coordinator_epoch
            return
        if header.base_sequence != NO_SEQUENCE:
            entry.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                               header.last_offset, header.last_offset_delta,
                                               header.max_timestamp))
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
            update.started.append((header.base_offset, pid))

    def commit(self, update: ProducerUpdate, end_offset: int,
               on_completed: OnCompleted | None = None) -> None:
        """Apply a staged update; each completed transaction is reported with the LSO it
        leaves (the next other producer's open transaction, or past its marker)."""
        self.producers.update(update.entries)
        for first_offset, pid in update.started:
            self.ongoing[first_offset] = pid
        for txn in update.completed:
            if on_completed is not None:
                on_completed(txn, self._stable_offset_after(txn))
            self.ongoing.pop(txn.first_offset, None)
            self.unreplicated[txn.first_offset] = (txn.producer_id, txn.last_offset)
        self.map_end_offset = max(self.map_end_offset, end_offset)
        self._maybe_checkpoint()

    def _maybe_checkpoint(self) -> None:
        last = self._checkpoints[-1].offset if self._checkpoints else 0
        if self.map_end_offset - last < max(CHECKPOINT_INTERVAL,
                                            CHECKPOINT_OFFSETS_PER_PRODUCER * len(self.producers)):
            return
        self._checkpoints = [*self._checkpoints[1 - CHECKPOINTS_KEPT:], _Checkpoint(
            self.map_end_offset, {pid: e.copy() for pid, e in self.producers.items()},
            dict(self.ongoing), dict(self.unreplicated))]

    def _stable_offset_after(self, txn: CompletedTxn) -> int:
        others = [first for first, pid in self.ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def replay(self, header: BatchHeader, marker: EndTxnMarker | None = None,
               on_completed: OnCompleted | None = None) -> None:
        """Apply a batch read back from the log (recovery, replication): no validation."""
        if header.has_producer_id:
            update = ProducerUpdate()
            self.stage(update, header, marker)
            self.commit(update, header.next_offset, on_completed)
        self.map_end_offset = max(self.map_end_offset, header.next_offset)

    # --- the last stable offset ---------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction undecided or decided above the HW."""
        if not self.ongoing and not self.unreplicated:  # the common case, on every fetch
            return None
        return min((*self.ongoing, *self.unreplicated), default=None)

    @property
    def first_undecided_offset(self) -> int | None:
        return min(self.ongoing) if self.ongoing else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is replicated stop holding the LSO back."""
        self._drop_unreplicated_below(high_watermark)

    def _drop_unreplicated_below(self, offset: int) -> None:
        if not self.unreplicated:
            return
        for first, (_, last) in list(self.unreplicated.items()):
            if last < offset:
                del self.unreplicated[first]

    # --- expiry and truncation --------------------------------------------------------

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` (and not in a transaction)."""
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp
                   >= self.expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start offset moved (retention, DeleteRecords): drop older snapshots.

        Producers stay, as in Kafka since 2.8: a retry of a batch that was deleted is
        still recognised; only producer.id.expiration.ms forgets a producer.
        """
        self._drop_unreplicated_below(log_start_offset)
        for offset, path in self.snapshots():
            if offset < log_start_offset:
                path.unlink(missing_ok=True)
                if offset == self.last_snapshot_offset:
                    self.last_snapshot_offset = None

    def reset(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        self.map_end_offset = 0
        self.last_snapshot_offset = None
        self._checkpoints = []

    # --- snapshots -------------------------------------------------------------------

    def snapshots(self) -> list[tuple[int, Path]]:
        found = []
        for name in os.listdir(self.directory):
            m = _SNAPSHOT_FILE.match(name)
            if m:
                found.append((int(m.group(1)), self.directory / name))
        return sorted(found)

    def take_snapshot(self, sync: bool = True) -> Path:
        """Write ``<map end offset>.snapshot`` with each producer's last batch, unless
        the newest snapshot is already at that offset (as Kafka: no new batch, no new
        snapshot; a broker closing thousands of idle logs writes nothing for them)."""
        path = self.directory / f"{self.map_end_offset:020d}{SNAPSHOT_SUFFIX}"
        if self.map_end_offset != self.last_snapshot_offset:
            write_atomic(path, encode_snapshot(self.producers.values()), sync)
            self.last_snapshot_offset = self.map_end_offset
        return path

    def load(self, log_start_offset: int, log_end_offset: int) -> int:
        """Load the newest readable snapshot, or in-memory checkpoint, at or below
        ``log_end_offset``; returns the offset replay must start from. Corrupt and stray
        snapshots are deleted."""
        checkpoints = [c for c in self._checkpoints
                       if log_start_offset <= c.offset <= log_end_offset]
        self.reset()
        self._checkpoints = checkpoints
        replay_from = self._load_snapshot(log_start_offset, log_end_offset)
        if checkpoints and checkpoints[-1].offset > replay_from:
            newest = checkpoints[-1]
            self.producers = {pid: e.copy() for pid, e in newest.producers.items()}
            self.ongoing, self.unreplicated = dict(newest.ongoing), dict(newest.unreplicated)
            self.map_end_offset = replay_from = newest.offset
        return replay_from

    def _load_snapshot(self, log_start_offset: int, log_end_offset: int) -> int:
        for offset, path in reversed(self.snapshots()):
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                entries = decode_snapshot(path.read_bytes())
            except ValueError as e:
                logger.warning("deleting corrupt producer snapshot %s: %s", path, e)
                path.unlink(missing_ok=True)
                continue
            self.producers = {e.producer_id: e for e in entries}
            self.ongoing = {e.current_txn_first_offset: e.producer_id for e in entries
                            if e.current_txn_first_offset >= 0}
            self.map_end_offset = self.last_snapshot_offset = offset
            return offset
        self.map_end_offset = log_start_offset
        return log_start_offset

    def delete_snapshots_above(self, offset: int) -> None:
        for snapshot_offset, path in self.snapshots():
            if snapshot_offset > offset:
                path.unlink(missing_ok=True)
        if self.last_snapshot_offset is not None and self.last_snapshot_offset > offset:
            self.last_snapshot_offset = None


def encode_snapshot(entries: object) -> bytes:
    """Kafka's producer snapshot (version 1): version, CRC-32C, then one entry per
    producer with its last batch, coordinator epoch and open transaction's first offset."""
    body = bytearray(_HEADER.pack(SNAPSHOT_VERSION, 0, 0))
    count = 0
    for entry in entries:  # type: ignore[attr-defined]
        last = entry.batches[-1] if entry.batches else None
        body += _ENTRY.pack(
            entry.producer_id, entry.epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            entry.last_timestamp,
            entry.coordinator_epoch, entry.current_txn_first_offset)
        count += 1
    struct.pack_into(">i", body, _CRC_FROM, count)
    struct.pack_into(">I", body, 2, crc32c.crc32c(memoryview(body)[_CRC_FROM:]))
    return bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    """Parse a snapshot; ValueError if it is truncated, of another version or corrupt."""
    if len(data) < _HEADER.size:
        raise ValueError("snapshot shorter than its header")
    version, crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"unknown snapshot version {version}")
    if crc32c.crc32c(memoryview(data)[_CRC_FROM:]) != crc:
        raise ValueError("snapshot CRC-32C mismatch")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise ValueError(f"snapshot size does not fit {count} entries")
    entries = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first) = _ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)
        entry = ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch,
                              current_txn_first_offset=txn_first if txn_first >= 0 else -1,
                              last_timestamp=timestamp)
        if last_offset >= 0:
            first_seq = last_seq - offset_delta if last_seq >= 0 else NO_SEQUENCE
            if first_seq < 0 and last_seq >= 0:
                first_seq += INT32_MAX + 1  # the batch wrapped around
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, offset_delta,
                                               timestamp))
        entries.append(entry)
    return entries
