"""An index file held in memory: the part the offset and time indexes share.

Kafka memory-maps index files and closes their descriptors. Python's mmap keeps a
duplicate descriptor for as long as the map lives (until 3.13's ``trackfd``), which
would cost two descriptors per partition; so an index lives in a buffer instead:

- the active segment's entries in a bytearray, its file preallocated as Kafka's is and
  written with ``pwrite`` on flush, roll and close (after a crash, recovery rebuilds
  the indexes of every segment above the recovery point from the log, as Kafka does);
- a sealed index read into memory on first use; past ``SEALED_CACHE_BYTES`` of them,
  the least recently used are dropped and read again when next needed.

No index holds a file descriptor between calls.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from pathlib import Path

from josefk.log.file_cache import FILES

#: Memory for the entries of sealed indexes read from disk (a module setting for tests).
SEALED_CACHE_BYTES = 64 << 20
_loaded_sealed: OrderedDict[int, IndexFile] = OrderedDict()
_loaded_bytes = 0
# Logs close in parallel at shutdown; the cleaner reads from its own threads.
_sealed_lock = threading.Lock()


class CorruptIndexError(Exception):
    """An index file that fails its sanity check; it is rebuilt from the log."""


class IndexFile(ABC):
    """Fixed-size entries sorted by their key, in memory and in a file.

    The active segment's index file is preallocated to ``max_index_size`` (rounded
    down to whole entries) and trimmed to its entries when the segment rolls or
    closes, as Kafka does; an inactive index is read-only.
    """

    entry: struct.Struct  # set by subclasses

    def __init__(self, path: Path, base_offset: int, max_index_size: int, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.entry.size
        self._writable = writable
        self._buf: bytearray | bytes | None = None
        self._entries: int | None = None
        self._last: tuple[int, int] | None = None
        # Bytes of the buffer from which the file may differ (active index only).
        self._dirty_from = 0
        # A flush from a worker thread against truncation on the event loop.
        self._lock = threading.Lock()
        if writable:
            self._open()

    # --- loading ------------------------------------------------------------------

    def _read_file(self, preallocate: bool) -> bytes:
        flags = os.O_RDWR | os.O_CREAT if preallocate else os.O_RDONLY
        try:
            fd = FILES.open_transient(self.path, flags)
        except FileNotFoundError:
            return b""
        try:
            size = length = os.fstat(fd).st_size
            if preallocate and length:
                # After a crash the active index is still preallocated (10 MiB by
                # default): only its first blocks were written, the rest is a hole.
                # Reading the zeros cost ~20 MiB per partition on every start-up after
                # a crash (six minutes for 10,000 partitions).
                with contextlib.suppress(OSError):
                    length = min(length, os.lseek(fd, 0, os.SEEK_HOLE))
            data = os.pread(fd, length, 0) if length else b""
            if preallocate and size != self.max_entries * self.entry.size:
                os.ftruncate(fd, self.max_entries * self.entry.size)
            return data
        finally:
            os.close(fd)

    def _open(self) -> None:
        self._last = None
        data = self._read_file(preallocate=self._writable)
        entries = len(data) // self.entry.size
        if self._writable:
            entries = min(entries, self.max_entries)
            self._buf = bytearray(data[:entries * self.entry.size])
            self._dirty_from = len(self._buf)
        else:
            self._buf = data[:entries * self.entry.size]
        self._entries = entries

    def _ensure_open(self) -> None:
        if self._entries is None:
            self._open()
        if not self._writable:
            _remember_sealed(self)

    def _unmap(self) -> None:
        """Drop a sealed index's entries from memory; the next lookup reads them again."""
        self._buf = None
        self._entries = None

    @property
    def entries(self) -> int:
        if self._entries is None or not self._writable:
            self._ensure_open()
            assert self._entries is not None
        return self._entries

    def last(self) -> tuple[int, int] | None:
        """The last entry decoded (cached: appends consult it on every batch)."""
        if self._last is None and self.entries:
            self._last = self.entry_at(self.entries - 1)
        return self._last

    @property
    def writable(self) -> bool:
        """True while this is the active segment's preallocated index."""
        return self._writable

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def size_in_bytes(self) -> int:
        return self.entries * self.entry.size

    def entry_at(self, slot: int) -> tuple[int, int]:
        """The entry in ``slot`` as (absolute offset or timestamp, value)."""
        if self._buf is None:
            self._ensure_open()
        assert self._buf is not None
        return self._decode(self.entry.unpack_from(self._buf, slot * self.entry.size))

    def all_entries(self) -> list[tuple[int, int]]:
        return [self.entry_at(i) for i in range(self.entries)]

    def _append_raw(self, *fields: int) -> None:
        if not self._writable:
            raise RuntimeError(f"{self.path} is not the active index")
        assert self._entries is not None and isinstance(self._buf, bytearray)
        if self._entries >= self.max_entries:
            raise RuntimeError(f"{self.path} is full ({self.max_entries} entries)")
        self._buf += self.entry.pack(*fields)
        self._entries += 1
        self._last = self._decode(fields)

    def _truncate_entries(self, entries: int) -> None:
        self._ensure_open()
        assert self._entries is not None and self._buf is not None
        _forget_sealed(self)  # its size changes
        with self._lock:
            self._entries = min(self._entries, entries)
            size = self._entries * self.entry.size
            self._buf = self._buf[:size]
            self._dirty_from = min(self._dirty_from, size)
        self._last = None
        if not self._writable:
            self._write_trimmed()
            _remember_sealed(self)

    def _floor_slot(self, target: int, key_of: int = 0) -> int:
        """The last slot whose key is <= target, or -1 if there is none."""
        lo, hi = 0, self.entries - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.entry_at(mid)[key_of] <= target:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    @abstractmethod
    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        """An entry as stored → (absolute key, value)."""

    # --- writing -----------------------------------------------------------------

    def flush(self, sync: bool = True) -> None:
        """Write the entries the file lacks and fsync it (the active index only)."""
        if not self._writable or self._buf is None:
            return
        with self._lock:
            start = self._dirty_from
            data = bytes(self._buf[start:])
            fd = FILES.open_transient(self.path, os.O_WRONLY)
            try:
                _write_all(fd, data, start)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self._dirty_from = start + len(data)

    def _write_trimmed(self) -> None:
        """Make the file exactly the entries (rolled, closed or truncated while sealed)."""
        with self._lock:
            data = bytes(self._buf or b"")
            fd = FILES.open_transient(self.path, os.O_WRONLY | os.O_CREAT)
            try:
                _write_all(fd, data[self._dirty_from:] if self._writable else data,
                           self._dirty_from if self._writable else 0)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
            self._dirty_from = len(data)

    # --- lifecycle -----------------------------------------------------------

    def trim_and_seal(self) -> None:
        """Trim the file to its entries and make the index read-only (segment rolled)."""
        self.entries  # noqa: B018 - a sealed index not read yet must be before it is trimmed
        self._write_trimmed()
        self._writable = False
        self._buf = bytes(self._buf or b"")
        _remember_sealed(self)

    def make_writable(self) -> None:
        """Preallocate again: the segment became active (truncation made it the last)."""
        if self._writable:
            return
        _forget_sealed(self)
        entries = self._entries
        self._writable = True
        self._open()
        if entries is not None:
            self._truncate_entries(entries)

    def close(self) -> None:
        """Trim to the real entries so the next open knows how many there are."""
        if self._writable and self._entries is not None:
            self._write_trimmed()
            self._writable = False
        _forget_sealed(self)
        self._unmap()

    def drop(self) -> None:
        """Forget the entries without writing them (a crash, in tests)."""
        _forget_sealed(self)
        self._unmap()

    def delete(self) -> None:
        self.drop()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def reset(self) -> None:
        """Drop every entry (before a rebuild): the file is emptied and preallocated again."""
        self.drop()
        fd = FILES.open_transient(self.path, os.O_RDWR | os.O_CREAT)
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        self._open()


def _write_all(fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def _remember_sealed(index: IndexFile) -> None:
    """Mark a sealed index as just used; drop the least recently used past the budget."""
    global _loaded_bytes
    key = id(index)
    with _sealed_lock:
        if key in _loaded_sealed:
            _loaded_sealed.move_to_end(key)
            return
        _loaded_sealed[key] = index
        _loaded_bytes += len(index._buf or b"")
        while _loaded_bytes > SEALED_CACHE_BYTES and len(_loaded_sealed) > 1:
            _, evicted = _loaded_sealed.popitem(last=False)
            _loaded_bytes -= len(evicted._buf or b"")
            evicted._unmap()


def _forget_sealed(index: IndexFile) -> None:
    global _loaded_bytes
    with _sealed_lock:
        if _loaded_sealed.pop(id(index), None) is not None:
            _loaded_bytes -= len(index._buf or b"")
