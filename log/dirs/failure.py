"""A log directory that fails goes offline (Kafka's ``LogDirFailureChannel``).

Kafka treats an ``IOException`` while writing, flushing, rolling or reading a log as the
failure of its whole directory: the directory goes offline, the broker stops leading and
following every partition in it, and serves its other ``log.dirs`` as before. Here each
:class:`DirGuardedLog` turns an ``OSError`` of its own I/O into the directory's failure
(reported once to the :class:`LogDirFailureChannel`, whose listeners do the rest) and a
:class:`~josefk.log.errors.StorageError` for the request (KAFKA_STORAGE_ERROR).

A :class:`~josefk.log.errors.StorageError` raised below (out of file descriptors) is the
request's alone and takes nothing offline.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from josefk.log.errors import StorageError
from josefk.log.log import Log

logger = logging.getLogger(__name__)

#: Told (once, from whichever thread saw the error) that a directory went offline.
DirListener = Callable[[Path], None]


class LogDirFailureChannel:
    """The offline log directories of one broker; thread-safe (flushes fail on worker
    threads, appends on the event loop)."""

    def __init__(self) -> None:
        self._offline: dict[Path, str] = {}
        self._lock = threading.Lock()
        self._listeners: list[DirListener] = []

    def listen(self, listener: DirListener) -> None:
        self._listeners.append(listener)

    def is_offline(self, log_dir: Path) -> bool:
        return Path(log_dir) in self._offline

    @property
    def offline_dirs(self) -> list[Path]:
        with self._lock:
            return list(self._offline)

    def report(self, log_dir: Path, message: str, error: OSError) -> None:
        """``log_dir`` failed (Kafka's ``maybeAddOfflineLogDir``): logged and announced
        the first time only."""
        log_dir = Path(log_dir)
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline[log_dir] = message
        logger.error("%s: %s; log directory %s goes offline", message, error, log_dir)
        for listener in self._listeners:
            listener(log_dir)


F = TypeVar("F", bound=Callable[..., Any])


def _guarded(what: str) -> Callable[[F], F]:
    def wrap(method: F) -> F:
        @functools.wraps(method)
        def guarded(self: DirGuardedLog, *args: Any, **kwargs: Any) -> Any:
            if self.offline:
                raise StorageError(f"{what} {self.directory.name}: log directory "
                                   f"{self.log_dir} is offline")
            try:
                return method(self, *args, **kwargs)
            except StorageError:
                raise
            except OSError as e:
                message = f"Error while {what} {self.directory.name} in dir {self.log_dir}"
                # A retired log's files go away under a flush still running: no failure.
                if self.failures is not None and not self.retired:
                    self.failures.report(self.log_dir, message, e)
                raise StorageError(f"{message}: {e}") from e
        return guarded  # type: ignore[return-value]
    return wrap


#: Log methods that touch the disk, with what Kafka's messages say they were doing.
GUARDED = {
    "append_as_leader": "appending records to",
    "append_as_follower": "appending records to",
    "append_control_batch": "appending a marker to",
    "roll": "rolling",
    "read": "reading",
    "flush": "flushing",
    "flush_due": "flushing",
    "truncate_to": "truncating",
    "truncate_fully_and_start_at": "truncating",
    "delete_records": "deleting records of",
    "enforce_retention": "deleting segments of",
    "delete_expired_files": "deleting segments of",
    "replace_segments": "swapping cleaned segments into",
    "offset_for_timestamp": "reading",
    "max_timestamp_offset": "reading",
    "collect_aborted_transactions": "reading",
    "aborted_transactions_in": "reading",
}


class DirGuardedLog(Log):
    """A :class:`Log` whose I/O errors take its log directory offline; once offline,
    every guarded method raises :class:`StorageError` at once. Its offsets stay
    readable (what the broker last knew)."""

    failures: LogDirFailureChannel | None = None
    offline = False
    retired = False  # deleted or moved away: its errors are no directory's failure

    @property
    def log_dir(self) -> Path:
        return self.directory.parent


for _name, _what in GUARDED.items():
    setattr(DirGuardedLog, _name, _guarded(_what)(getattr(Log, _name)))


def close_handles(log: Log) -> None:
    """Let go of an offline log's descriptors and index mappings, ignoring the I/O errors
    that took it offline (Kafka's ``closeHandlers``)."""
    for segment in log.segments:
        for close in (segment.release_fd, segment.offset_index.close,
                      segment.time_index.close):
            try:
                close()
            except (OSError, ValueError) as e:
                logger.debug("closing %s: %s", segment.log_path, e)
