"""The segment files the broker holds open: a bounded cache of descriptors.

Kafka keeps one descriptor per segment for the log's lifetime, so the number of
partitions it can host is capped by the open-file limit. Here every ``.log``
file is opened on demand and the least recently used are closed once more than
``capacity`` are open, so the partition count is bounded by memory and disk.

A caller pins a file for as long as it uses the descriptor (a read, a write, an
fsync in a worker thread, a sendfile to a socket); pinned files are never closed
under it, so a descriptor number is never reused while someone still holds it.
When the process runs out of descriptors anyway, every unpinned file is closed
and the open retried once; if that fails too, :class:`StorageError` tells the
request that needed the file (Kafka's KAFKA_STORAGE_ERROR) and nothing else.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from josefk.log.errors import StorageError

logger = logging.getLogger(__name__)

_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def default_capacity() -> int:
    """A quarter of the soft open-file limit: the rest is for connections and the others."""
    return max(32, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 4)


class CachedFile:
    """One file that may or may not be open right now; ``pins`` users hold its descriptor."""

    __slots__ = ("path", "fd", "pins", "closing")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1
        self.pins = 0
        self.closing = False  # close once the last pin is released


class FileCache:
    """Open descriptors of :class:`CachedFile` s, least recently used closed first."""

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = capacity
        self._default: int | None = None  # default_capacity(), read once (a system call)
        self._open: OrderedDict[int, CachedFile] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        if self._capacity is not None:
            return self._capacity
        if self._default is None:
            self._default = default_capacity()
        return self._default

    def limit_changed(self) -> None:
        """The open-file limit was changed: derive the default capacity from it again."""
        self._default = None

    @capacity.setter
    def capacity(self, value: int | None) -> None:
        self._capacity = value

    def __len__(self) -> int:
        return len(self._open)

    def acquire(self, file: CachedFile, create: bool = False) -> int:
        """The file's descriptor, pinned until :meth:`release` (opened if need be)."""
        with self._lock:
            if file.fd < 0:
                file.fd = self._open_evicting(file.path, create)
                file.closing = False
                self._open[id(file)] = file
                file.pins += 1
                self._evict_over_capacity()
            else:
                self._open.move_to_end(id(file))
                file.pins += 1
            return file.fd

    def release(self, file: CachedFile) -> None:
        with self._lock:
            file.pins -= 1
            if file.pins == 0 and file.closing:
                self._close(file)

    def close(self, file: CachedFile) -> None:
        """The file is done with (segment closed or deleted): close it, or once unpinned."""
        with self._lock:
            if file.fd < 0:
                return
            if file.pins:
                file.closing = True
            else:
                self._close(file)

    def close_unused(self) -> int:
        """Close every file no one is using right now; returns how many."""
        with self._lock:
            return self._evict(len(self._open))

    def open_transient(self, path: Path, flags: int, mode: int = 0o644) -> int:
        """A descriptor the caller closes itself soon (index and snapshot files), freeing
        cached ones if the process is out of descriptors."""
        with self._lock:
            return self._open_with_retry(lambda: os.open(path, flags, mode), path)

    # --- inside the lock ----------------------------------------------------------------

    def _open_evicting(self, path: Path, create: bool) -> int:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        return self._open_with_retry(lambda: os.open(path, flags, 0o644), path)

    def _open_with_retry(self, opener: Callable[[], int], path: Path) -> int:
        try:
            return opener()
        except OSError as e:
            if e.errno not in _OUT_OF_DESCRIPTORS:
                raise
        closed = self._evict(len(self._open))
        try:
            return opener()
        except OSError as e:
            if e.errno not in _OUT_OF_DESCRIPTORS:
                raise
            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            logger.error("out of file descriptors opening %s: %d segment files open (all in "
                         "use), %d closed to make room, open-file limit %d; the request fails "
                         "with KAFKA_STORAGE_ERROR", path, len(self._open), closed, limit)
            raise StorageError(f"out of file descriptors opening {path}") from e

    def _evict_over_capacity(self) -> None:
        excess = len(self._open) - self.capacity
        if excess > 0:
            self._evict(excess)

    def _evict(self, count: int) -> int:
        """Close up to ``count`` unpinned files, least recently used first."""
        victims = []
        for file in self._open.values():
            if len(victims) >= count:
                break
            if file.pins == 0:
                victims.append(file)
        for file in victims:
            self._close(file)
        return len(victims)

    def _close(self, file: CachedFile) -> None:
        self._open.pop(id(file), None)
        fd, file.fd, file.closing = file.fd, -1, False
        os.close(fd)


#: The broker's one cache: descriptors are a per-process resource.
FILES = FileCache()
