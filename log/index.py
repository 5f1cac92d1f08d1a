"""A memory-mapped, preallocated index file: the part the offset and time indexes share."""

from __future__ import annotations

import mmap
import os
import resource
import struct
from abc import ABC, abstractmethod
from collections import OrderedDict
from pathlib import Path

# Python's mmap keeps a duplicate file descriptor per map, so sealed indexes are
# mapped on demand and the least recently used maps are closed past an eighth of
# the process's file descriptor limit.
_open_sealed: OrderedDict[int, MappedIndex] = OrderedDict()


def max_open_sealed_indexes() -> int:
    return max(256, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 8)


class CorruptIndexError(Exception):
    """An index file that fails its sanity check; it is rebuilt from the log."""


class MappedIndex(ABC):
    """Fixed-size entries in a memory-mapped file, sorted by their key.

    The active segment's index is preallocated to ``max_index_size`` (rounded down
    to whole entries) and trimmed to its entries when the segment rolls or closes,
    as Kafka does; an inactive index is mapped read-only on first use.
    """

    entry: struct.Struct  # set by subclasses

    def __init__(self, path: Path, base_offset: int, max_index_size: int, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.entry.size
        self._writable = writable
        self._mmap: mmap.mmap | None = None
        self._entries: int | None = None
        self._last: tuple[int, int] | None = None
        if writable:
            self._open()

    # --- mapping -----------------------------------------------------------

    def _open(self) -> None:
        self._last = None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
            entries = length // self.entry.size
            if self._writable:
                os.ftruncate(fd, self.max_entries * self.entry.size)
                size = self.max_entries * self.entry.size
                access = mmap.ACCESS_WRITE
            else:
                size = entries * self.entry.size
                access = mmap.ACCESS_READ
            self._mmap = mmap.mmap(fd, size, access=access) if size else None
            self._entries = min(entries, self.max_entries) if self._writable else entries
        finally:
            os.close(fd)

    def _ensure_open(self) -> None:
        if self._entries is None:
            self._open()
        if not self._writable:
            _open_sealed[id(self)] = self
            _open_sealed.move_to_end(id(self))
            while len(_open_sealed) > max_open_sealed_indexes():
                _, evicted = _open_sealed.popitem(last=False)
                evicted._unmap()

    def _unmap(self) -> None:
        """Release the map of a sealed index; the next lookup maps it again."""
        self._close_map()
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
        assert self._mmap is not None
        return self._decode(self.entry.unpack_from(self._mmap, slot * self.entry.size))

    def all_entries(self) -> list[tuple[int, int]]:
        return [self.entry_at(i) for i in range(self.entries)]

    def _append_raw(self, *fields: int) -> None:
        if not self._writable:
            raise RuntimeError(f"{self.path} is not the active index")
        if self._entries >= self.max_entries:
            raise RuntimeError(f"{self.path} is full ({self.max_entries} entries)")
        assert self._mmap is not None
        self.entry.pack_into(self._mmap, self._entries * self.entry.size, *fields)
        self._entries += 1
        self._last = self._decode(fields)

    def _truncate_entries(self, entries: int) -> None:
        self._ensure_open()
        assert self._entries is not None
        self._entries = min(self._entries, entries)
        self._last = None
        if not self._writable:
            self._reopen_trimmed()

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

    # --- lifecycle -----------------------------------------------------------

    def flush(self) -> None:
        if self._mmap is not None and self._writable:
            self._mmap.flush()

    def trim_and_seal(self) -> None:
        """Trim the file to its entries and make the index read-only (segment rolled)."""
        self._reopen_trimmed()
        self._writable = False

    def make_writable(self) -> None:
        """Preallocate again: the segment became active (truncation made it the last)."""
        self._close_map()
        self._writable = True
        self._open_with_entries()

    def _open_with_entries(self) -> None:
        entries = self._entries
        self._entries = None
        self._open()
        if entries is not None:
            self._entries = min(entries, self._entries or 0)

    def _reopen_trimmed(self) -> None:
        """Trim the file to its entries; it is mapped again (read-only) on next use."""
        entries = self.entries
        self.flush()
        self._close_map()
        with open(self.path, "r+b") as f:
            f.truncate(entries * self.entry.size)
        self._entries = None
        self._writable = False

    def _close_map(self) -> None:
        _open_sealed.pop(id(self), None)
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def close(self) -> None:
        """Trim to the real entries so the next open knows how many there are."""
        if self._writable and self._entries is not None:
            self._reopen_trimmed()
        self._close_map()
        self._entries = None

    def delete(self) -> None:
        self._close_map()
        self._entries = None
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._close_map()
        self.path.unlink(missing_ok=True)
        self._entries = None
        self._open()
