"""A log segment: one ``.log`` file of record batches plus its offset, time and
aborted-transaction indexes."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from kafka.record.default_records import DefaultRecordBatch

from josefk.log.clock import now_ms
from josefk.log.file_cache import FILES, CachedFile
from josefk.log.index.base import CorruptIndexError
from josefk.log.index.offset import OffsetIndex
from josefk.log.index.time import NO_TIMESTAMP, TimeIndex
from josefk.log.index.txn import TXN_INDEX_SUFFIX, TransactionIndex
from josefk.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    RecordBatchError,
    check_batch,
    parse_header,
    peek_size,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
INT32_MAX = (1 << 31) - 1
_READ_CHUNK = 1 << 20
_HEADER_READAHEAD = 8192  # bytes read at once to walk batch headers while batches are small

logger = logging.getLogger(__name__)


Buffer = bytes | bytearray | memoryview
#: Bytes to append: one buffer, or buffers written in order with one pwritev.
Data = Buffer | list[Buffer]


def data_size(data: Data) -> int:
    return sum(map(len, data)) if isinstance(data, list) else len(data)


def segment_name(base_offset: int) -> str:
    """Kafka's file name stem: the base offset zero-padded to 20 digits."""
    return f"{base_offset:020d}"


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class LogSegment:
    """Record batches from ``base_offset`` on, appended in order, with sparse indexes."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        max_index_size: int,
        active: bool,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        stem = directory / segment_name(base_offset)
        # Opened on demand through the broker's bounded cache of descriptors.
        self._file = CachedFile(stem.with_suffix(LOG_SUFFIX))
        try:
            self.size = os.stat(self.log_path).st_size
        except FileNotFoundError:
            if not active:
                raise
            FILES.acquire(self._file, create=True)  # a new segment: create its file
            FILES.release(self._file)
            self.size = 0
        self.offset_index = OffsetIndex(stem.with_suffix(INDEX_SUFFIX), base_offset,
                                        max_index_size, writable=active)
        self.time_index = TimeIndex(stem.with_suffix(TIME_INDEX_SUFFIX), base_offset,
                                    max_index_size, writable=active)
        self.txn_index = TransactionIndex(stem.with_suffix(TXN_INDEX_SUFFIX), base_offset)
        self.created_ms = now_ms()
        self.bytes_since_last_index_entry = 0
        # Loaded lazily from the time index for a segment that already has data.
        self._max_timestamp: TimestampOffset | None = (
            TimestampOffset(NO_TIMESTAMP, base_offset) if self.size == 0 else None)
        self._rolling_timestamp: int | None = None
        self._checked_indexes = False

    # --- files ---------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self._file.path

    @log_path.setter
    def log_path(self, path: Path) -> None:
        self._file.path = path

    def acquire_fd(self) -> int:
        """The ``.log`` file's descriptor, held open until :meth:`release_fd_pin`
        (readers ``os.sendfile`` straight from it)."""
        return FILES.acquire(self._file)

    def release_fd_pin(self) -> None:
        FILES.release(self._file)

    def pread(self, position: int, length: int) -> bytes:
        fd = FILES.acquire(self._file)
        try:
            chunk = os.pread(fd, length, position)
            if len(chunk) == length:
                return chunk  # the common case: one read
            chunks = []
            while chunk:
                chunks.append(chunk)
                position += len(chunk)
                length -= len(chunk)
                if length <= 0:
                    break
                chunk = os.pread(fd, length, position)
            return b"".join(chunks)
        finally:
            FILES.release(self._file)

    @staticmethod
    def _write_at(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written

    # --- appending -----------------------------------------------------------

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def append(self, data: Data, batches: list[tuple[int, BatchHeader]]) -> None:
        """Append whole batches (``batches`` are positions within ``data`` and headers)."""
        if not batches:
            return
        if not self.can_convert_to_relative_offset(batches[-1][1].last_offset):
            raise ValueError(f"offset {batches[-1][1].last_offset} does not fit segment "
                             f"{self.base_offset}")
        start = self.size
        if start == 0:
            self._rolling_timestamp = batches[0][1].max_timestamp
        elif self._max_timestamp is None:
            # Learn the tail's max timestamp before the new batches are in the file: a scan
            # after the write would see them all at once and index too few timestamps.
            self.max_timestamp_so_far()
        size = data_size(data)
        fd = FILES.acquire(self._file)
        try:
            if isinstance(data, list):
                written = os.pwritev(fd, data, start)
                if written < size:
                    self._write_at(fd, memoryview(b"".join(data))[written:], start + written)
            else:
                written = os.pwrite(fd, data, start)
                if written < size:
                    self._write_at(fd, memoryview(data)[written:], start + written)
        finally:
            FILES.release(self._file)
        self.size += size
        for pos, header in batches:
            self._index_batch(start + pos, header)

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        """Advance the max timestamp and add index entries: the same on append and rebuild."""
        max_ts = self._max_timestamp or self.max_timestamp_so_far()
        if header.max_timestamp > max_ts.timestamp:
            max_ts = self._max_timestamp = TimestampOffset(header.max_timestamp,
                                                           header.last_offset)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.base_offset + header.last_offset_delta, position)
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.batch_length + LOG_OVERHEAD

    # --- rolling -------------------------------------------------------------

    def should_roll(self, batch_bytes: int, batch_count: int, max_timestamp: int,
                    max_offset: int, segment_bytes: int, segment_ms: int, now_ms: int) -> bool:
        """Kafka's four roll conditions, checked before appending ``batch_count`` batches
        of ``batch_bytes`` in all (an index must have room for each batch's entry)."""
        return (
            self.size > segment_bytes - batch_bytes
            or (self.size > 0 and self._time_waited_for_roll(now_ms, max_timestamp) > segment_ms)
            or self.offset_index.entries + batch_count > self.offset_index.max_entries
            or self.time_index.entries + batch_count > self.time_index.max_entries - 1
            or not self.can_convert_to_relative_offset(max_offset)
        )

    def _time_waited_for_roll(self, now_ms: int, batch_timestamp: int) -> int:
        first = self.rolling_timestamp()
        if first is not None and first >= 0:
            return batch_timestamp - first
        return now_ms - self.created_ms

    def rolling_timestamp(self) -> int | None:
        """The first batch's max timestamp: ``segment.ms`` is measured from it."""
        if self._rolling_timestamp is None and self.size >= HEADER_SIZE:
            self._rolling_timestamp = parse_header(self.pread(0, HEADER_SIZE)).max_timestamp
        return self._rolling_timestamp

    def on_become_inactive(self) -> None:
        """The segment rolled: close the time index with the max timestamp, trim indexes."""
        self._seal_indexes()
        self.offset_index.trim_and_seal()
        self.time_index.trim_and_seal()
        self.release_fd()

    def release_fd(self) -> None:
        """Close the ``.log`` file (once no one uses it) until the next read reopens it."""
        FILES.close(self._file)

    def _truncate_file(self, size: int) -> None:
        fd = FILES.acquire(self._file)
        try:
            os.ftruncate(fd, size)
        finally:
            FILES.release(self._file)

    def _seal_indexes(self) -> None:
        max_ts = self.max_timestamp_so_far()
        if max_ts.timestamp != NO_TIMESTAMP and self.time_index.writable:
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)

    def make_active(self) -> None:
        """Truncation made this the last segment again: preallocate its indexes."""
        self.offset_index.make_writable()
        self.time_index.make_writable()
        self._load_tail_state()

    # --- reading -------------------------------------------------------------

    def batches_from(self, position: int = 0, end: int | None = None
                     ) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the batches from ``position`` (a batch boundary) to ``end``."""
        end = self.size if end is None else min(end, self.size)
        buffer, start, small = b"", position, True  # ``buffer`` holds the file from ``start``
        while position + HEADER_SIZE <= end:
            at = position - start
            if at + HEADER_SIZE > len(buffer):
                # Small batches: one read brings many headers. Large ones: the header only.
                want = _HEADER_READAHEAD if small else HEADER_SIZE
                buffer, start, at = self.pread(position, min(end - position, want)), position, 0
            header = parse_header(buffer, at)
            if header.size < HEADER_SIZE or position + header.size > end:
                return
            yield position, header
            position += header.size
            small = header.size < _HEADER_READAHEAD

    def translate_offset(self, offset: int, start_position: int = 0
                         ) -> tuple[int, BatchHeader] | None:
        """The position and header of the first batch whose last offset >= ``offset``."""
        self.ensure_valid_indexes()
        _, position = self.offset_index.lookup(offset)
        position = max(position, start_position)
        for pos, header in self.batches_from(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (scanning from the last index entry)."""
        self.ensure_valid_indexes()
        return self._scan_next_offset()

    def _scan_next_offset(self) -> int:
        entries = self.offset_index.entries
        _, position = self.offset_index.entry_at(entries - 1) if entries else (0, 0)
        next_offset = self.base_offset
        for _, header in self.batches_from(position):
            next_offset = header.next_offset
        return next_offset

    def max_timestamp_so_far(self) -> TimestampOffset:
        if self._max_timestamp is None:
            self._max_timestamp = self._read_largest_timestamp()
        return self._max_timestamp

    def _read_largest_timestamp(self) -> TimestampOffset:
        self.ensure_valid_indexes()
        timestamp, offset = self.time_index.last_entry()
        best = TimestampOffset(timestamp, offset)
        _, position = self.offset_index.lookup(offset)
        for _, header in self.batches_from(position):
            if header.max_timestamp > best.timestamp:
                best = TimestampOffset(header.max_timestamp, header.last_offset)
        return best

    def largest_timestamp(self) -> int:
        """The max record timestamp, or the file's mtime if the segment has none."""
        timestamp = self.max_timestamp_so_far().timestamp
        if timestamp >= 0:
            return timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int
                                 ) -> TimestampOffset | None:
        """The first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``."""
        self.ensure_valid_indexes()
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, starting_offset))
        for pos, header in self.batches_from(position):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            for record in self.records_of(pos, header):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return TimestampOffset(record.timestamp, record.offset)
        return None

    def records_of(self, position: int, header: BatchHeader) -> DefaultRecordBatch:
        """The decoded records of one batch (decompressed by kafka-python)."""
        return DefaultRecordBatch(self.pread(position, header.size))

    # --- truncation and recovery ----------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop batches at or after the one holding ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        self.txn_index.truncate_to(offset)
        if found is None:
            return 0
        position = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.size - position
        self._truncate_file(position)
        self.size = position
        if position == 0:
            self._rolling_timestamp = None
        self._max_timestamp = None
        self._load_tail_state()
        return removed

    def _load_tail_state(self) -> None:
        entries = self.offset_index.entries
        last_position = self.offset_index.entry_at(entries - 1)[1] if entries else 0
        self.bytes_since_last_index_entry = self.size - last_position
        self._max_timestamp = (TimestampOffset(NO_TIMESTAMP, self.base_offset)
                               if self.size == 0 else None)

    def recover(self) -> int:
        """Re-validate every batch, rebuild both indexes, cut the file at the first bad
        batch. Returns the number of bytes truncated."""
        active = self.offset_index.writable
        for index in (self.offset_index, self.time_index):
            if not active:
                index.make_writable()
            index.reset()
        self.bytes_since_last_index_entry = 0
        self._max_timestamp = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        self._rolling_timestamp = None
        valid = 0
        for position, header, error in self._scan_valid_batches():
            if header is None or error is not None:
                logger.warning("%s: invalid batch at position %d (%s); truncating",
                               self.log_path, position, error)
                break
            if self._rolling_timestamp is None:
                self._rolling_timestamp = header.max_timestamp
            self._index_batch(position, header)
            valid = position + header.size
        truncated = self.size - valid
        if truncated:
            self._truncate_file(valid)
            self.size = valid
        self._checked_indexes = True
        if not active:
            self._seal_indexes()
            self.offset_index.trim_and_seal()
            self.time_index.trim_and_seal()
        return truncated

    def _scan_valid_batches(self) -> Iterator[tuple[int, BatchHeader | None, str | None]]:
        """Walk the file in large reads, yielding each batch with its validation error."""
        position = 0
        previous_next = self.base_offset
        buf = b""
        buf_start = 0
        while position < self.size:
            rel = position - buf_start
            size = peek_size(buf, rel)
            if size is None or (size >= HEADER_SIZE and rel + size > len(buf)):
                want = max(_READ_CHUNK, size or 0)
                buf = self.pread(position, min(want, self.size - position))
                buf_start, rel = position, 0
                size = peek_size(buf, 0)
            if size is None or size < HEADER_SIZE or size > len(buf):
                yield position, None, "truncated batch"
                return
            try:
                header = check_batch(buf, rel, from_client=False)
            except RecordBatchError as e:
                yield position, None, str(e)
                return
            if header.base_offset < previous_next or not self.can_convert_to_relative_offset(
                header.last_offset
            ):
                yield position, header, f"offset {header.base_offset} out of order"
                return
            previous_next = header.next_offset
            yield position, header, None
            position += header.size

    def ensure_valid_indexes(self) -> None:
        """Check the indexes on first use; a corrupt one is rebuilt, never trusted."""
        if self._checked_indexes:
            return
        self._checked_indexes = True
        try:
            self.offset_index.sanity_check(self.size)
            self.time_index.sanity_check(self._scan_next_offset())
        except CorruptIndexError as e:
            logger.warning("rebuilding indexes of %s: %s", self.log_path, e)
            self.recover()

    # --- lifecycle -------------------------------------------------------------

    def flush(self, sync: bool = True) -> None:
        """Write the indexes out and, with ``sync``, fsync the segment's files."""
        if sync:
            fd = FILES.acquire(self._file)
            try:
                os.fsync(fd)
            finally:
                FILES.release(self._file)
        self.offset_index.flush(sync)
        self.time_index.flush(sync)
        self.txn_index.flush(sync)

    def close(self) -> None:
        if self.offset_index.writable:
            self._seal_indexes()
        self.offset_index.close()
        self.time_index.close()
        self.release_fd()

    def rename_for_deletion(self) -> None:
        """Kafka's async delete: rename to ``.deleted`` now, remove the files later. The
        ``.log`` descriptor is closed now (a late reader reopens it under the new name):
        a compacted topic renames segments faster than the delay deletes them."""
        self.release_fd()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            if path.exists():
                os.replace(path, path.with_name(path.name + DELETED_SUFFIX))
        self.log_path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        self.offset_index.path = self.offset_index.path.with_name(
            self.offset_index.path.name + DELETED_SUFFIX)
        self.time_index.path = self.time_index.path.with_name(
            self.time_index.path.name + DELETED_SUFFIX)
        self.txn_index.rename(self.txn_index.path.with_name(
            self.txn_index.path.name + DELETED_SUFFIX))

    def delete_files(self) -> None:
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.release_fd()
        self.log_path.unlink(missing_ok=True)
