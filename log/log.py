"""A partition's log: its segments, offsets, appends, reads, truncation and flushing
(deletion in :mod:`josefk.log.deletion`, transactions in :mod:`josefk.log.transactions`)."""

from __future__ import annotations

import logging
import os
import re
import threading
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from josefk.log.cleaner.swap import recover_swaps
from josefk.log.clock import now_ms
from josefk.log.config import LogConfig
from josefk.log.deletion import LogDeletion
from josefk.log.errors import (
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    RecordValidationError,
)
from josefk.log.leader_epoch import LeaderEpochCache
from josefk.log.producer_state import BatchMetadata, ProducerStateManager, ProducerUpdate
from josefk.log.records import keyless_record_indexes
from josefk.log.segment import DELETED_SUFFIX, Data, LogSegment, TimestampOffset, data_size
from josefk.log.transactions import LogTransactions
from josefk.protocol.end_txn_marker import EndTxnMarker
from josefk.protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    InvalidRecordError,
    RecordBatchError,
    assign_offset,
    parse_header,
    rewritten_header,
    set_leader_epoch,
    set_log_append_time,
    validate_batches,
)

logger = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
# Every segment has both; a missing one is rebuilt from the log.
_INDEX_KINDS = ("index", "timeindex")


@dataclass(slots=True)
class AppendInfo:
    """What an append did: offsets assigned and the batches as written."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    batches: list[BatchHeader] = field(default_factory=list)
    duplicate: bool = False  # an idempotent retry: nothing was written


@dataclass(frozen=True, slots=True)
class FetchSlice:
    """Bytes of one segment file to send as a partition's records (zero-copy)."""

    segment: LogSegment | None
    position: int
    length: int

    def pin(self) -> int:
        """The segment file's descriptor, kept open until :meth:`unpin` (for sendfile)."""
        assert self.segment is not None
        return self.segment.acquire_fd()

    def unpin(self) -> None:
        assert self.segment is not None
        self.segment.release_fd_pin()

    def read_bytes(self) -> bytes:
        """The slice's bytes; for tests and replication, not the fetch path."""
        if self.segment is None or self.length == 0:
            return b""
        return self.segment.pread(self.position, self.length)


EMPTY_SLICE = FetchSlice(None, 0, 0)




class Log(LogTransactions, LogDeletion):
    """One partition replica's log in ``<log.dir>/<topic>-<partition>``.

    Offsets: the log start offset (lowest readable), the high watermark (what
    consumers may see), the last stable offset (what read_committed consumers may
    see), the log end offset (next to assign), and the recovery point (everything
    below it is fsynced).
    """

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment],
                 log_start_offset: int, recovery_point: int) -> None:
        self.directory = directory
        self.config = config
        self.segments = segments
        self._base_offsets = [s.base_offset for s in segments]
        self.leader_epochs = LeaderEpochCache(directory)
        self.producer_state = ProducerStateManager(directory)
        self.log_end_offset = segments[-1].read_next_offset()
        self.log_start_offset = max(log_start_offset, segments[0].base_offset)
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self._high_watermark = min(self.log_start_offset, self.log_end_offset)
        # What lies above the recovery point counts as unflushed (Kafka: logEndOffset -
        # recoveryPoint), so flush.messages and flush.ms also cover what recovery kept.
        self.unflushed_messages = self.log_end_offset - self.recovery_point
        self.last_flush_ms = now_ms()
        self.pending_deletes: list[tuple[int, LogSegment]] = []
        # Bumped by every truncation: a cleaning pass planned before one must not swap,
        # and a flush that overlapped one must not move the recovery point.
        self.truncations = 0
        # Held by a truncation (event loop) throughout, and by a flush (worker thread)
        # only to read where it flushes to and to move the recovery point, never across
        # an fsync: a truncation waits for a few attribute reads, not for a disk.
        self._flush_lock = threading.Lock()
        # The base offset of the newest segment rolled: flushed up to it soon after.
        self.rolled_to = 0
        # The owner's set of logs that may need a flush (LogManager's): a log joins it
        # when it rolls or, under a flush policy, appends, so the periodic check visits
        # those rather than every log (50,000 partitions cost 8% of a CPU otherwise).
        self.flush_watch: set[Log] | None = None
        # The owner's set of logs with ``.deleted`` files waiting for file.delete.delay.ms.
        self.delete_watch: set[Log] | None = None

    # --- opening -----------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, config: LogConfig | None = None, *,
             log_start_offset: int = 0, recovery_point: int = 0,
             clean_shutdown: bool = False) -> Log:
        """Load (or create) the log; after an unclean stop, recover from the recovery point."""
        config = config or LogConfig()
        directory.mkdir(parents=True, exist_ok=True)
        # The directory is listed once (a broker may load tens of thousands of logs).
        names = _remove_leftovers(directory, os.listdir(directory))
        if recover_swaps(directory, names):
            names = os.listdir(directory)
        segment_files = [(int(m.group(1)), m.group(2)) for name in names
                         if (m := _SEGMENT_FILE.match(name))]
        base_offsets = sorted({base for base, kind in segment_files if kind == "log"})
        _remove_orphan_indexes(directory, segment_files, set(base_offsets))
        if not base_offsets:
            base_offsets = [log_start_offset]
        # Checked before the segments are built: the active one creates its files.
        indexed = Counter(base for base, kind in segment_files if kind in _INDEX_KINDS)
        missing = {base for base in base_offsets if indexed[base] < len(_INDEX_KINDS)}
        segments = [
            LogSegment(directory, base, config.index_interval_bytes, config.segment_index_bytes,
                       active=(i == len(base_offsets) - 1))
            for i, base in enumerate(base_offsets)
        ]
        for segment in segments:
            if segment.base_offset in missing and segment.size:
                logger.warning("rebuilding the missing indexes of %s", segment.log_path)
                segment.recover()
        txn_index_from = None
        if not clean_shutdown:
            segments = _recover_segments(segments, recovery_point)
            # The recovered segments' aborted-transaction indexes are rebuilt by replay.
            txn_index_from = next((s.base_offset for s in reversed(segments)
                                   if s.base_offset <= recovery_point), segments[0].base_offset)
        segments[-1].make_active()
        # The recovery point stays where it was (only lowered to the log end offset), as
        # Kafka's LogLoader keeps min(recoveryPoint, logEndOffset): what recovery found
        # valid may be in the page cache only, and a crash of the OS must recover it again.
        # Only a flush moves the recovery point past it.
        log = cls(directory, config, segments, log_start_offset, recovery_point)
        log.leader_epochs.truncate_from_end(log.log_end_offset)
        log._load_producer_state(epochs_from=recovery_point, txn_index_from=txn_index_from)
        return log

    def _load_producer_state(self, epochs_from: int | None = None,
                             txn_index_from: int | None = None) -> None:
        """Load the newest producer snapshot, then replay the batches after it; the same
        pass re-assigns leader epochs from ``epochs_from`` on and rebuilds the aborted-
        transaction indexes of the segments from ``txn_index_from`` on (recovery: the
        snapshot must then be at or below it, as Kafka rebuilds from a segment's base)."""
        snapshot_limit = self.log_end_offset if txn_index_from is None else txn_index_from
        replay_from = self.producer_state.load(self.log_start_offset, snapshot_limit)
        on_completed = self._index_aborted_from(txn_index_from)
        start = replay_from if epochs_from is None else min(replay_from, epochs_from)
        if start >= self.log_end_offset:
            return
        for segment in self.segments[max(0, self._segment_index_for(start)):]:
            for position, header in segment.batches_from(0):
                if header.last_offset < start:
                    continue
                if epochs_from is not None and header.last_offset >= epochs_from:
                    self.leader_epochs.assign(header.partition_leader_epoch, header.base_offset)
                if header.last_offset >= replay_from:
                    marker = (self._read_marker(segment, position, header)
                              if header.is_control else None)
                    self.producer_state.replay(header, marker, on_completed)
        self.producer_state.map_end_offset = self.log_end_offset

    # --- offsets -------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # --- appending -------------------------------------------------------------------

    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         now: int | None = None, one_batch: bool = False) -> AppendInfo:
        """Validate a producer's batches, assign offsets and append them.

        Only baseOffset, partitionLeaderEpoch and, for LogAppendTime, maxTimestamp are
        rewritten, never the records: in place in a bytearray; for read-only bytes in a
        copy of the batch header, the body written from ``records`` itself. With
        ``one_batch`` (Produce v3+) anything but exactly one batch is INVALID_RECORD.
        A bad batch raises a RecordBatchError and nothing is written.
        """
        now = now_ms() if now is None else now
        batches = validate_batches(records)
        if one_batch and len(batches) != 1:
            raise InvalidRecordError("a produce request must hold exactly one record batch "
                                     "per partition")
        self._check_sizes(records, batches)
        if self.config.compact:
            self._check_keys(records, batches)
        if not self.config.log_append_time:
            self._check_timestamps(batches, now)
        for _, header in batches:
            if header.is_control:
                raise InvalidRecordError("Clients are not allowed to write control records in "
                                         f"topic partition {self.directory.name}")
            if header.has_producer_id:
                duplicate = self.producer_state.find_duplicate(header)
                if duplicate is not None:
                    return self._duplicate(duplicate)
                self.producer_state.validate(header)
                self.producer_state.validate_txn_state(header)
        offset = self.log_end_offset
        append_time = now if self.config.log_append_time else -1
        if len(batches) == 1 and not isinstance(records, bytearray):
            # The produce path: one batch in a read-only request buffer. Only its header
            # is copied and rewritten; the records go from the request buffer to the file.
            size = batches[0][1].size
            head = rewritten_header(records, 0, size, offset, leader_epoch, append_time)
            parts = [head, memoryview(records)[HEADER_SIZE:size]]
            return self._append(parts, [(0, parse_header(head))], now, append_time)
        buf = records if isinstance(records, bytearray) else bytearray(records)
        for pos, header in batches:
            assign_offset(buf, pos, offset)
            set_leader_epoch(buf, pos, leader_epoch)
            if append_time >= 0:
                set_log_append_time(buf, pos, header.size, append_time)
            offset += header.record_count
        return self._append(buf, _rebased(batches, buf), now, append_time)

    def _check_keys(self, records: bytes | bytearray | memoryview,
                    batches: list[tuple[int, BatchHeader]]) -> None:
        """A compacted topic refuses records without a key (Kafka's LogValidator)."""
        errors: list[tuple[int, str]] = []
        view = memoryview(records)
        for pos, header in batches:
            if header.is_control:
                continue
            errors += [(i, "Compacted topic cannot accept message without key in topic "
                           f"partition {self.directory.name}")
                       for i in keyless_record_indexes(view[pos:pos + header.size], header)]
        if errors:
            raise RecordValidationError(errors)

    def _check_timestamps(self, batches: list[tuple[int, BatchHeader]], now: int) -> None:
        """message.timestamp.before/after.max.ms against the batches' first and max
        timestamps (Kafka checks every record; a batch's bounds are what we read)."""
        for _, header in batches:
            if header.max_timestamp - now > self.config.message_timestamp_after_max_ms:
                raise InvalidTimestampError(
                    f"timestamp {header.max_timestamp} is more than "
                    f"message.timestamp.after.max.ms ahead of the broker's clock {now}")
            if now - header.base_timestamp > self.config.message_timestamp_before_max_ms:
                raise InvalidTimestampError(
                    f"timestamp {header.base_timestamp} is more than "
                    f"message.timestamp.before.max.ms behind the broker's clock {now}")

    def _duplicate(self, batch: BatchMetadata) -> AppendInfo:
        """A retry of a batch already written: acknowledge its original offsets (and,
        as Kafka does, its max timestamp as the append time)."""
        return AppendInfo(batch.first_offset, batch.last_offset, batch.timestamp,
                          batch.last_offset, batch.timestamp, self.log_start_offset, [],
                          duplicate=True)

    def append_as_follower(self, records: bytes | bytearray) -> AppendInfo:
        """Append batches that already carry their offsets (replication); a compacted
        leader's batches may hold fewer records than their offset range."""
        batches = validate_batches(records, from_client=False)
        expected = self.log_end_offset
        for _, header in batches:
            if header.base_offset < expected:
                raise RecordBatchError(
                    f"follower batch at offset {header.base_offset} is below {expected}: "
                    f"offsets out of order")
            expected = header.next_offset
        return self._append(records, batches, now_ms(), -1)

    def _check_sizes(self, buf: bytes | bytearray | memoryview,
                     batches: list[tuple[int, BatchHeader]]) -> None:
        for _, header in batches:
            if header.size > self.config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {header.size} bytes exceeds max.message.bytes "
                    f"{self.config.max_message_bytes}")
        if len(buf) > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(buf)} bytes exceed segment.bytes {self.config.segment_bytes}")

    def _append(self, buf: Data, batches: list[tuple[int, BatchHeader]], now: int,
                append_time: int) -> AppendInfo:
        headers = [h for _, h in batches]
        first, last = headers[0].base_offset, headers[-1].last_offset
        if len(headers) == 1:  # a producer's append: one batch, always fits one segment
            max_ts = headers[0]
            self._maybe_roll(data_size(buf), 1, max_ts.max_timestamp, first, last, now)
            self.active_segment.append(buf, batches)
        else:
            max_ts = max(headers, key=_by_max_timestamp)
            for chunk_buf, chunk in self._chunks_fitting_indexes(buf, batches):
                chunk_max = max(h.max_timestamp for _, h in chunk)
                self._maybe_roll(data_size(chunk_buf), len(chunk), chunk_max,
                                 chunk[0][1].base_offset, chunk[-1][1].last_offset, now)
                self.active_segment.append(chunk_buf, chunk)
        latest_epoch = self.leader_epochs.latest_epoch
        update = _NO_PRODUCERS
        markers: dict[int, EndTxnMarker | None] = {}
        for header in headers:
            if header.partition_leader_epoch > latest_epoch:
                self.leader_epochs.assign(header.partition_leader_epoch, header.base_offset)
                latest_epoch = header.partition_leader_epoch
            if header.has_producer_id:
                if update is _NO_PRODUCERS:
                    update = ProducerUpdate()
                    markers = self._markers(buf, batches)
                self.producer_state.stage(update, header, markers.get(header.base_offset))
        self.log_end_offset = last + 1
        self.producer_state.commit(update, self.log_end_offset, self._index_aborted)
        self.unflushed_messages += last + 1 - first
        if self.flush_watch is not None and self.config.flushes_by_policy:
            self.flush_watch.add(self)
        return AppendInfo(first, last, max_ts.max_timestamp, max_ts.last_offset, append_time,
                          self.log_start_offset, headers)

    def _chunks_fitting_indexes(self, buf: Data, batches: list[tuple[int, BatchHeader]]
                                ) -> list[tuple[Data, list[tuple[int, BatchHeader]]]]:
        """Split an append whose batches could not all be indexed by one fresh segment
        (only follower appends carry many batches; they come as one buffer)."""
        segment = self.active_segment
        room = min(segment.offset_index.max_entries, segment.time_index.max_entries - 1)
        if len(batches) <= room:
            return [(buf, batches)]
        assert not isinstance(buf, list)
        view = memoryview(buf)
        chunks = []
        for i in range(0, len(batches), room):
            group = batches[i:i + room]
            start = group[0][0]
            end = group[-1][0] + group[-1][1].size
            chunks.append((view[start:end], [(pos - start, h) for pos, h in group]))
        return chunks

    def _maybe_roll(self, size: int, batch_count: int, max_timestamp: int, first_offset: int,
                    last_offset: int, now: int) -> None:
        segment = self.active_segment
        if segment.should_roll(size, batch_count, max_timestamp, last_offset,
                               self.config.segment_bytes, self.config.segment_ms, now):
            self.roll(first_offset)

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Seal the active segment and start a new one at ``base_offset`` (the LEO)."""
        base = self.log_end_offset if base_offset is None else base_offset
        current = self.active_segment
        if current.size == 0 and current.base_offset == base:
            return current
        self.producer_state.map_end_offset = base
        self.producer_state.take_snapshot()
        # The new segment's files first: if they cannot be created, nothing has changed.
        segment = LogSegment(self.directory, base, self.config.index_interval_bytes,
                             self.config.segment_index_bytes, active=True)
        if current.size == 0:
            # An empty active segment is replaced rather than left behind.
            self._delete_now(current)
            with self._flush_lock:
                self.segments.pop()
                self._base_offsets.pop()
            if not self.segments:
                # Nothing below ``base`` exists any more, as a reopen would also find.
                self.log_start_offset = max(self.log_start_offset, base)
        else:
            current.on_become_inactive()
            self.rolled_to = base
            if self.flush_watch is not None:
                self.flush_watch.add(self)
        with self._flush_lock:
            self.segments.append(segment)
            self._base_offsets.append(base)
        return segment

    # --- reading -------------------------------------------------------------------------

    def _segment_index_for(self, offset: int) -> int:
        return bisect_right(self._base_offsets, offset) - 1

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchSlice:
        """Bytes from the batch holding ``offset`` on, up to ``max_bytes``.

        Batches at or above ``max_offset`` (the high watermark or the last stable
        offset) are not returned. With ``min_one_message`` the first batch is
        returned whole even if it is larger than ``max_bytes``, as Kafka does.
        """
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}] "
                f"of {self.directory.name}")
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        index = max(0, self._segment_index_for(offset))
        while offset < limit and index < len(self.segments):
            segment = self.segments[index]
            found = segment.translate_offset(offset)
            if found is not None:
                return self._slice(segment, found, limit, max_bytes, min_one_message)
            index += 1  # offset falls after this segment's last batch
        return EMPTY_SLICE

    def _slice(self, segment: LogSegment, found: tuple[int, BatchHeader], limit: int,
               max_bytes: int, min_one_message: bool) -> FetchSlice:
        position, header = found
        if header.last_offset >= limit:
            return EMPTY_SLICE
        end = segment.size
        if limit < self.log_end_offset:  # else the segment's own end bounds the slice
            next_base = self._next_base_offset(segment)
            if next_base is None or limit < next_base:
                bound = segment.translate_offset(limit, position)
                if bound is not None:
                    end = bound[0]
        size = max(max_bytes, header.size) if min_one_message else max_bytes
        length = min(end - position, size)
        return FetchSlice(segment, position, length) if length > 0 else EMPTY_SLICE

    def _next_base_offset(self, segment: LogSegment) -> int | None:
        i = self._segment_index_for(segment.base_offset)
        return self._base_offsets[i + 1] if i + 1 < len(self._base_offsets) else None

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record with a timestamp >= ``timestamp``, or None if there is none."""
        for segment in self.segments:
            if segment.size and segment.max_timestamp_so_far().timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> TimestampOffset | None:
        """The record with the largest timestamp (ListOffsets -3), or None if empty."""
        best: TimestampOffset | None = None
        for segment in self.segments:
            if segment.size:
                candidate = segment.max_timestamp_so_far()
                if best is None or candidate.timestamp > best.timestamp:
                    best = candidate
        if best is None or best.timestamp < 0:
            return best
        # The index holds the batch's last offset; Kafka answers with the record's own.
        segment = self.segments[self._segment_index_for(best.offset)]
        found = segment.find_offset_by_timestamp(best.timestamp, self.log_start_offset)
        return found or best

    # --- truncation ---------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove everything from the batch holding ``offset`` on (a follower's truncation)."""
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch this replica started as leader without writing
            # anything in it must go, or it would diverge from the new leader forever
            # (as Kafka's UnifiedLog.truncateTo).
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            return
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        with self._flush_lock:
            self.truncations += 1
            while len(self.segments) > 1 and self.active_segment.base_offset >= offset:
                self._delete_now(self.segments.pop())
                self._base_offsets.pop()
            segment = self.active_segment
            if not segment.offset_index.writable:
                segment.make_active()
            segment.truncate_to(offset)
            self.log_end_offset = segment.read_next_offset()
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            self._high_watermark = min(self._high_watermark, self.log_end_offset)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self.rolled_to = min(self.rolled_to, self.log_end_offset)
            self.producer_state.delete_snapshots_above(self.log_end_offset)
            self._load_producer_state()
            self.producer_state.on_high_watermark_updated(self._high_watermark)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment; the log restarts empty at ``offset``."""
        with self._flush_lock:
            self.truncations += 1
            for segment in self.segments:
                self._delete_now(segment)
            self.segments = [LogSegment(self.directory, offset,
                                        self.config.index_interval_bytes,
                                        self.config.segment_index_bytes, active=True)]
            self._base_offsets = [offset]
            self.leader_epochs.clear()
            self.log_end_offset = self.log_start_offset = self.recovery_point = offset
            self.rolled_to = min(self.rolled_to, offset)
            self._high_watermark = offset
            self.producer_state.delete_snapshots_above(-1)
            self.producer_state.reset()
            self.producer_state.map_end_offset = offset

    # --- flushing and closing -------------------------------------------------------

    def reconfigure(self, config: LogConfig) -> None:
        """New topic configs; a flush policy set now may make what is unflushed due."""
        self.config = config
        if self.flush_watch is not None and self.may_need_flush():
            self.flush_watch.add(self)

    def may_need_flush(self) -> bool:
        """Whether the log belongs in the flush watch (false: only a roll or, under a
        flush policy, an append can make a flush due)."""
        return self.rolled_to > self.recovery_point or (
            self.unflushed_messages > 0 and self.config.flushes_by_policy)

    def needs_flush(self, now: int | None = None) -> bool:
        """True when ``flush.messages`` or ``flush.ms`` asks for an fsync, or a segment
        rolled since the last flush."""
        if self.rolled_to > self.recovery_point:
            return True
        if self.unflushed_messages == 0:
            return False
        now = now_ms() if now is None else now
        return (self.unflushed_messages >= self.config.flush_messages
                or now - self.last_flush_ms >= self.config.flush_ms)

    def flush_due(self, now: int | None = None) -> None:
        """The flush :meth:`needs_flush` asked for: the whole log if the flush policy
        says so, else only the segments that rolled (as Kafka flushes on roll, so that
        a crash recovers no more than the active segments)."""
        now = now_ms() if now is None else now
        policy = self.unflushed_messages > 0 and (
            self.unflushed_messages >= self.config.flush_messages
            or now - self.last_flush_ms >= self.config.flush_ms)
        self.flush(None if policy else self.rolled_to)

    def flush(self, up_to: int | None = None, sync: bool = True) -> None:
        """fsync every segment holding data above the recovery point (below ``up_to``,
        the base offset of a segment, if given) and move the recovery point there.
        Without ``sync`` the caller makes the writes durable (shutdown: one syncfs).

        Blocking: the server calls it from a worker thread, never the event loop, which
        may append, roll and truncate meanwhile. Appends land above the target, which is
        read with the segments to fsync; a truncation during the fsyncs may cut below it
        and new appends fill in, unsynced, so the recovery point then stays where the
        truncation left it and the next flush moves it (Kafka's markFlushed also runs
        under the log lock after the fsyncs, but does not check for a truncation).
        """
        with self._flush_lock:
            target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
            truncations = self.truncations
            unflushed = self.unflushed_messages
            # Every change of the segment list (roll, truncation, retention, the cleaner's
            # swap) holds this lock, so the list and its base offsets agree here.
            first = max(0, self._segment_index_for(self.recovery_point))
            segments = self.segments[first:]
        for segment in segments:
            if segment.base_offset >= target and up_to is not None:
                break
            try:
                segment.flush(sync)
            except FileNotFoundError:
                with self._flush_lock:
                    if self.truncations == truncations and segment in self.segments:
                        raise
                # It left the log meanwhile (a truncation deleted it): nothing to keep.
        if sync:
            self.leader_epochs.sync()
        with self._flush_lock:
            if self.truncations != truncations:
                return
            self.recovery_point = max(self.recovery_point, target)
            if up_to is None:
                # Appends made during the fsyncs stay counted: they are above the target.
                self.unflushed_messages = max(0, self.unflushed_messages - unflushed)
                self.last_flush_ms = now_ms()

    def close(self, sync: bool = True) -> None:
        """Close every segment; a snapshot of producer state spares the next start a replay."""
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot(sync)
        for segment in self.segments:
            segment.close()
        self.delete_expired_files(now=1 << 62)

    def delete(self) -> None:
        """Remove the whole partition directory (the topic was deleted)."""
        for segment in self.segments:
            segment.delete_files()
        self.delete_expired_files(now=1 << 62)
        for path in self.directory.iterdir():
            path.unlink()
        self.directory.rmdir()


# The producer-state update of an append without producer ids (never staged into).
_NO_PRODUCERS = ProducerUpdate()


def _by_max_timestamp(header: BatchHeader) -> int:
    return header.max_timestamp


def _rebased(batches: list[tuple[int, BatchHeader]], buf: bytearray
             ) -> list[tuple[int, BatchHeader]]:
    """Headers after offset assignment, without validating the whole buffer again."""
    return [(pos, parse_header(buf, pos)) for pos, _ in batches]


def _recover_segments(segments: list[LogSegment], recovery_point: int) -> list[LogSegment]:
    """Recover every segment that may hold data above the recovery point.

    A segment with a bad batch is cut there, and every later segment is deleted:
    what follows a torn write was never acknowledged by a complete log.
    """
    bases = [s.base_offset for s in segments]
    start = max(0, bisect_right(bases, recovery_point) - 1)
    for i in range(start, len(segments)):
        segment = segments[i]
        truncated = segment.recover()
        if truncated:
            logger.warning("recovered %s: truncated %d invalid bytes", segment.log_path,
                           truncated)
            for later in segments[i + 1:]:
                logger.warning("deleting %s after a truncated segment", later.log_path)
                later.delete_files()
            del segments[i + 1:]
            break
    return segments


def _remove_leftovers(directory: Path, names: list[str]) -> list[str]:
    """Files of an interrupted delete or atomic write are not part of the log: removed;
    returns the other names."""
    kept = []
    for name in names:
        if name.endswith((DELETED_SUFFIX, ".tmp")):
            (directory / name).unlink()
        else:
            kept.append(name)
    return kept


def _remove_orphan_indexes(directory: Path, files: list[tuple[int, str]], bases: set[int]
                           ) -> None:
    for base, kind in files:
        if kind != "log" and base not in bases:
            (directory / f"{base:020d}.{kind}").unlink()
