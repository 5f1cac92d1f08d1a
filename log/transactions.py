"""The transactional side of a partition log (mixed into :class:`josefk.log.log.Log`).

End-transaction markers appended as leader, the producer-state and aborted-
transaction-index updates every append (leader, follower) and every replay
(recovery) makes for them, and the offsets read_committed consumers live by:
the first unstable offset and the last stable offset (Kafka's UnifiedLog).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from josefk.log.clock import now_ms
from josefk.log.index.txn import AbortedTxn
from josefk.log.producer_state import CompletedTxn, OnCompleted, ProducerStateManager
from josefk.log.segment import Data, LogSegment
from josefk.protocol.end_txn_marker import EndTxnMarker, decode_marker, encode_marker_batch
from josefk.protocol.record_batch import (
    BatchHeader,
    CorruptRecordError,
    parse_header,
    set_log_append_time,
)

if TYPE_CHECKING:
    from josefk.log.config import LogConfig
    from josefk.log.log import AppendInfo, FetchSlice

logger = logging.getLogger(__name__)


class LogTransactions:
    """Markers, the LSO and the ``.txnindex`` files of a Log."""

    config: LogConfig
    segments: list[LogSegment]
    _base_offsets: list[int]
    producer_state: ProducerStateManager
    log_start_offset: int
    log_end_offset: int
    _high_watermark: int

    if TYPE_CHECKING:
        def _segment_index_for(self, offset: int) -> int: ...

        def _append(self, buf: Data, batches: list[tuple[int, BatchHeader]], now: int,
                    append_time: int) -> AppendInfo: ...

        def _next_base_offset(self, segment: LogSegment) -> int | None: ...

    # --- markers -------------------------------------------------------------------------

    def append_control_batch(self, producer_id: int, producer_epoch: int,
                             coordinator_epoch: int, commit: bool, leader_epoch: int,
                             now: int | None = None) -> AppendInfo:
        """Append a COMMIT or ABORT marker for ``producer_id`` as leader (WriteTxnMarkers).

        Raises InvalidProducerEpochError (47) for an older producer epoch and
        TransactionCoordinatorFencedError (52) for an older coordinator epoch than the
        producer's last marker; nothing is written then.
        """
        now = now_ms() if now is None else now
        self.producer_state.validate_marker(producer_id, producer_epoch, coordinator_epoch)
        buf = encode_marker_batch(producer_id, producer_epoch, coordinator_epoch, commit, now,
                                  base_offset=self.log_end_offset, leader_epoch=leader_epoch)
        append_time = -1
        if self.config.log_append_time:
            append_time = now
            set_log_append_time(buf, 0, len(buf), now)
        return self._append(buf, [(0, parse_header(buf))], now, append_time)

    def _markers(self, buf: Data, batches: list[tuple[int, BatchHeader]]
                 ) -> dict[int, EndTxnMarker | None]:
        """The markers of the control batches among ``batches`` (by base offset)."""
        found: dict[int, EndTxnMarker | None] = {}
        for pos, header in batches:
            if header.is_control:
                assert not isinstance(buf, list)  # clients' batches are never control ones
                found[header.base_offset] = _decode(memoryview(buf)[pos:pos + header.size],
                                                    header)
        return found

    def _read_marker(self, segment: LogSegment, position: int, header: BatchHeader
                     ) -> EndTxnMarker | None:
        return _decode(segment.pread(position, header.size), header)

    # --- the aborted-transaction index ---------------------------------------------------

    def _index_aborted(self, txn: CompletedTxn, last_stable_offset: int) -> None:
        """An ABORT marker was appended: the segment holding it records the transaction."""
        if txn.aborted:
            segment = self.segments[self._segment_index_for(txn.last_offset)]
            segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset,
                                                txn.last_offset, last_stable_offset))

    def _index_aborted_from(self, offset: int | None) -> OnCompleted | None:
        """The index writer of a replay: only segments being rebuilt (from ``offset``)."""
        if offset is None:
            return None

        def index(txn: CompletedTxn, last_stable_offset: int) -> None:
            if txn.last_offset >= offset:
                self._index_aborted(txn, last_stable_offset)

        for segment in self.segments:
            if segment.base_offset >= offset:
                segment.txn_index.reset()
        return index

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping
        [start_offset, upper_bound_offset) (Kafka's collectAbortedTransactions): from the
        segment holding ``start_offset`` on, until an entry's LSO reaches the bound."""
        found: list[tuple[int, int]] = []
        for segment in self.segments[max(0, self._segment_index_for(start_offset)):]:
            txns, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
            found += [(t.producer_id, t.first_offset) for t in txns]
            if complete:
                break
        return found

    def aborted_transactions_in(self, piece: FetchSlice, fetch_offset: int, max_offset: int
                                ) -> list[tuple[int, int]]:
        """The aborted transactions a read_committed fetch of ``piece`` must report: those
        overlapping [fetch_offset, the end of the slice's segment or ``max_offset``)."""
        if piece.segment is None or piece.length == 0:
            return []
        next_base = self._next_base_offset(piece.segment)
        upper = min(max_offset, self.log_end_offset if next_base is None else next_base)
        return self.collect_aborted_transactions(fetch_offset, upper)

    # --- the last stable offset ------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is undecided or whose marker is
        not yet below the high watermark; None when there is none."""
        first = self.producer_state.first_unstable_offset
        return None if first is None else max(first, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read below: the first unstable offset, or the
        high watermark if that is lower or there is no open transaction."""
        first = self.first_unstable_offset
        return first if first is not None and first < self._high_watermark \
            else self._high_watermark

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int | None = None
                                ) -> bool:
        return self.producer_state.has_ongoing_transaction(producer_id, producer_epoch)


def _decode(batch: bytes | memoryview, header: BatchHeader) -> EndTxnMarker | None:
    try:
        return decode_marker(batch, header)
    except CorruptRecordError as e:
        logger.warning("ignoring unreadable control batch at offset %d: %s",
                       header.base_offset, e)
        return None
