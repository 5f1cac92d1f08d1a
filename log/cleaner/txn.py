"""Transactions as the cleaner sees them (Kafka's ``CleanedTransactionMetadata``).

A pass walks the log in offset order with the aborted transactions of its range
(from the ``.txnindex`` files, sorted by first offset). A transactional data batch
is *aborted* when its producer has an aborted transaction that started at or
before it and whose ABORT marker has not been read yet; other transactional
batches belong to a committed transaction. From that:

- the offset map skips aborted batches (and control batches), so aborted data
  never shadows a committed value of its key;
- aborted batches are discarded when rewriting;
- a COMMIT or ABORT marker may go once its transaction has no batch left in the
  log (none was read during the pass), and only after its delete horizon: the
  first pass that finds it so stamps the horizon (now + ``delete.retention.ms``),
  as for tombstones (KIP-534), and a later pass past it drops it;
- the cleaned segment's ``.txnindex`` keeps an aborted transaction only while its
  marker does and some of its batches were read in the pass (the pass removing
  its data); once the data is gone, the entry goes, then the marker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from josefk.log.index.txn import AbortedTxn
from josefk.protocol.end_txn_marker import decode_marker
from josefk.protocol.record_batch import BatchHeader, CorruptRecordError


@dataclass(slots=True)
class _OngoingAbort:
    txn: AbortedTxn
    batch_read: bool = False


@dataclass(frozen=True, slots=True)
class LastRecord:
    """What a live producer's last entry in the log is (Kafka's ``LastRecord``): the last
    offset of its last data batch (-1 if it has none, e.g. a marker bumped its epoch)
    and its epoch."""

    last_data_offset: int
    epoch: int


def is_last_of_producer(header: BatchHeader, producers: dict[int, LastRecord]) -> bool:
    """Whether the batch holds what producer state needs of a live producer: its last
    data batch (last sequence) or, without one, its marker at its current epoch."""
    if not header.has_producer_id:
        return False
    last = producers.get(header.producer_id)
    if last is None:
        return False
    if last.last_data_offset >= 0:
        return header.last_offset == last.last_data_offset
    return header.is_control and header.producer_epoch == last.epoch


class CleanedTransactions:
    """The transaction state of one pass, fed every batch in offset order."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending = sorted(set(aborted), key=lambda t: (t.first_offset, t.last_offset))
        self._next = 0
        self._aborting: dict[int, _OngoingAbort] = {}
        self._committing: set[int] = set()
        #: Entries of the ABORT markers kept so far, for the cleaned ``.txnindex``.
        self.kept_index: list[AbortedTxn] = []

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._aborting.setdefault(txn.producer_id, _OngoingAbort(txn))
            self._next += 1

    def on_data_batch(self, header: BatchHeader) -> bool:
        """A data batch was read; True if it belongs to an aborted transaction."""
        self._start_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborting.get(header.producer_id)
        if ongoing is not None:
            ongoing.batch_read = True
            return True
        self._committing.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, batch: bytes | memoryview) -> bool:
        """A control batch was read; True if its transaction has no batch left (the marker
        may go once past its delete horizon)."""
        self._start_up_to(header.last_offset)
        if header.record_count == 0:
            return True  # a marker an earlier pass emptied
        try:
            marker = decode_marker(batch, header)
        except CorruptRecordError:
            return False
        if marker is None:
            return False  # not COMMIT/ABORT: kept
        pid = header.producer_id
        if marker.commit:
            if pid in self._committing:
                self._committing.discard(pid)
                return False
            return True
        ongoing = self._aborting.pop(pid, None)
        if ongoing is not None and ongoing.batch_read:
            self.kept_index.append(ongoing.txn)
            return False
        return True
