"""Replacing segments with cleaned ones so that a crash at any point leaves a readable log.

Kafka's steps, file by file (``<base>.log``, ``.index``, ``.timeindex`` and, when the
segment has aborted transactions, ``.txnindex``):

1. the cleaner writes ``<base>.log.cleaned`` and its indexes, and fsyncs them;
2. each ``.cleaned`` file is renamed ``.swap`` (the ``.log`` first);
3. the replaced segments' files are renamed ``.deleted`` (removed later, once
   readers are done with them);
4. each ``.swap`` file loses its suffix: the cleaned segment is live.

At start-up :func:`recover_swaps` finishes or undoes an interrupted swap as
Kafka's LogLoader does: ``.cleaned`` files are removed, and so is any ``.swap``
file at or above the lowest ``.cleaned`` base offset (step 2 did not finish);
the remaining ``.swap`` segments replace the segment files whose base offsets
fall in their offset range, then lose their suffix.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path

from josefk.log.checkpoint import fsync_dir
from josefk.log.index.time import NO_TIMESTAMP
from josefk.log.index.txn import TXN_INDEX_SUFFIX, AbortedTxn
from josefk.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_name
from josefk.protocol.record_batch import HEADER_SIZE, BatchHeader, parse_header, peek_size

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_FILE = re.compile(r"^(\d{20})(\.[a-z]+)(\.cleaned|\.swap)?$")
_READ_CHUNK = 1 << 20

logger = logging.getLogger(__name__)


def segment_paths(directory: Path, base_offset: int, suffix: str = "") -> list[Path]:
    """The ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` paths of a segment, with
    ``suffix``."""
    stem = segment_name(base_offset)
    return [directory / f"{stem}{ext}{suffix}" for ext in SEGMENT_SUFFIXES]


def rename_suffix(directory: Path, base_offset: int, old: str, new: str) -> None:
    """Rename a segment's files from ``old`` to ``new`` suffix (the ``.log`` first; the
    ``.txnindex`` only exists if the segment has aborted transactions)."""
    for src, dst in zip(segment_paths(directory, base_offset, old),
                        segment_paths(directory, base_offset, new), strict=True):
        if src.name.startswith(segment_name(base_offset) + TXN_INDEX_SUFFIX) \
                and not src.exists():
            continue
        os.replace(src, dst)


def delete_cleaned(directory: Path, base_offset: int) -> None:
    """Remove a cleaned segment not swapped in. Its ``.swap`` files are left alone: once
    they exist the swap is decided, and start-up recovery finishes it."""
    for path in segment_paths(directory, base_offset, CLEANED_SUFFIX):
        path.unlink(missing_ok=True)


class CleanedSegmentWriter:
    """Writes ``<base>.log.cleaned`` and its indexes, indexed as a LogSegment indexes
    its appends (an entry every ``index.interval.bytes``, the time index sealed with
    the largest timestamp), and the ``.txnindex`` entries of the ABORT markers it keeps
    (:mod:`josefk.log.cleaner.txn` decides which)."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int,
                 max_index_size: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path, self.index_path, self.time_index_path, self.txn_index_path = \
            segment_paths(directory, base_offset, CLEANED_SUFFIX)
        self._txn_entries = bytearray()
        self._max_offset_entries = max_index_size // _OFFSET_ENTRY.size
        self._max_time_entries = max_index_size // _TIME_ENTRY.size
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0
        self._offsets = bytearray()
        self._times = bytearray()
        self._last_time = NO_TIMESTAMP
        self._max_ts = (NO_TIMESTAMP, base_offset)
        self._since_entry = 0

    def append(self, batch: bytes | memoryview, header: BatchHeader) -> None:
        view = memoryview(batch)
        position = self.size
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], position + written)
        self.size = position + len(view)
        if header.max_timestamp > self._max_ts[0]:
            self._max_ts = (header.max_timestamp, header.last_offset)
        if self._since_entry > self.index_interval_bytes:
            if len(self._offsets) // _OFFSET_ENTRY.size < self._max_offset_entries:
                self._offsets += _OFFSET_ENTRY.pack(header.last_offset - self.base_offset,
                                                    position)
            self._maybe_time_entry(self._max_time_entries - 1)
            self._since_entry = 0
        self._since_entry += header.size

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        """An aborted transaction whose marker the segment keeps (in marker order)."""
        self._txn_entries += txn.encode()

    def _maybe_time_entry(self, room: int) -> None:
        timestamp, offset = self._max_ts
        if timestamp > self._last_time and len(self._times) // _TIME_ENTRY.size < room:
            self._times += _TIME_ENTRY.pack(timestamp, offset - self.base_offset)
            self._last_time = timestamp

    def finish(self, mtime: float | None) -> None:
        """Seal the time index, write the indexes, fsync everything."""
        self._maybe_time_entry(self._max_time_entries)
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        files = [(self.index_path, self._offsets), (self.time_index_path, self._times)]
        if self._txn_entries:
            files.append((self.txn_index_path, self._txn_entries))
        for path, data in files:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        if mtime is not None:
            os.utime(self.log_path, (mtime, mtime))
        fsync_dir(self.directory)

    def delete(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        delete_cleaned(self.directory, self.base_offset)


def read_batches(fd: int, size: int, position: int = 0
                 ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """The whole batches of a ``.log`` file from ``position`` (read in large chunks)."""
    buf = memoryview(b"")
    start = position
    while position < size:
        rel = position - start
        length = peek_size(buf, rel)
        if length is None or rel + length > len(buf):
            want = max(_READ_CHUNK, length or 0)
            buf = memoryview(os.pread(fd, min(want, size - position), position))
            start, rel = position, 0
            length = peek_size(buf, 0)
            if length is None or length < HEADER_SIZE or length > len(buf):
                return
        yield position, parse_header(buf, rel), buf[rel:rel + length]
        position += length


def _next_offset(path: Path) -> int | None:
    """The offset after the last whole batch of a ``.log`` file, None if it has none."""
    fd = os.open(path, os.O_RDONLY)
    try:
        last = None
        for _, header, _ in read_batches(fd, os.fstat(fd).st_size):
            last = header.next_offset
        return last
    finally:
        os.close(fd)


def recover_swaps(directory: Path, names: list[str] | None = None) -> bool:
    """Finish or undo a swap that a crash interrupted (before the segments load); False
    if there was none. ``names``: the directory's listing, if the caller has it."""
    cleaned: list[tuple[int, Path]] = []
    swaps: list[tuple[int, Path]] = []
    for name in os.listdir(directory) if names is None else names:
        m = _FILE.match(name)
        if m is None or m.group(3) is None:
            continue
        (cleaned if m.group(3) == CLEANED_SUFFIX else swaps).append(
            (int(m.group(1)), directory / name))
    if not cleaned and not swaps:
        return False
    min_cleaned = min((base for base, _ in cleaned), default=None)
    for _, path in cleaned:
        path.unlink()
    if min_cleaned is not None:
        for base, path in swaps:
            if base >= min_cleaned:
                logger.info("removing %s: its swap did not finish", path)
                path.unlink()
        swaps = [(base, path) for base, path in swaps if base < min_cleaned]
    low, high = None, None
    for base, path in swaps:
        if path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            end = _next_offset(path)
            end = base if end is None else end
            low = base if low is None else min(low, base)
            high = end if high is None else max(high, end)
    if low is not None and high is not None:
        for name in os.listdir(directory):
            m = _FILE.match(name)
            if (m and m.group(3) is None and m.group(2) in SEGMENT_SUFFIXES
                    and low <= int(m.group(1)) < high):
                logger.info("deleting %s: a cleaned segment replaces it", name)
                (directory / name).unlink()
    for _, path in swaps:
        logger.info("completing the swap of %s", path)
        os.replace(path, path.with_name(path.name[:-len(SWAP_SUFFIX)]))
    fsync_dir(directory)
    return True
