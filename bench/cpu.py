"""Broker CPU time from /proc, and CPU seconds per GiB moved.

A broker's CPU time is utime + stime (``/proc/<pid>/stat`` fields 14 and 15,
which cover every thread: the JVM's JIT and GC threads, josefk's worker threads)
of its process and its live descendants. The bench's brokers exec their
runtime (``start-kraft.sh`` and ``start-zk-broker.sh`` exec the JVM), so the pid
is the JVM's or Python's own; :func:`process_name` says which, for the report.
"""

from __future__ import annotations

import contextlib
import os
import time
from types import TracebackType
from typing import Any

from bench.brokers import process_tree

CLK_TCK = os.sysconf("SC_CLK_TCK")
GIB = 1 << 30


def cpu_seconds(pid: int) -> float:
    """user + sys CPU seconds of ``pid`` and its live descendants (all their threads)."""
    total = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # Fields 14 and 15 of proc(5) (utime, stime) are 12 and 13 after the ")".
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def process_name(pid: int) -> str:
    """The executable name of ``pid`` (``/proc/<pid>/comm``), "" when it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class Meter:
    """CPU seconds a process tree uses between ``__enter__`` and ``__exit__``.

    ``seconds`` stays None until a window has closed; a failed window (an
    exception inside it) still records its time, the caller decides what it is worth.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.name = process_name(pid)
        self.seconds: float | None = None
        self.wall: float | None = None
        self._before = self._began = 0.0

    def __enter__(self) -> Meter:
        self._before = cpu_seconds(self.pid)
        self._began = time.monotonic()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.seconds = cpu_seconds(self.pid) - self._before
        self.wall = time.monotonic() - self._began


def per_gib(seconds: float | None, nbytes: int | None) -> float | None:
    """CPU seconds per GiB, None when either is unknown or nothing moved."""
    if seconds is None or not nbytes:
        return None
    return seconds / (nbytes / GIB)


def detail(meter: Meter, nbytes: int, moved: str) -> dict[str, Any]:
    """What a CPU-per-GiB outcome carries besides its value."""
    return {"broker_cpu_s": None if meter.seconds is None else round(meter.seconds, 3),
            "window_s": None if meter.wall is None else round(meter.wall, 3),
            "gib": round(nbytes / GIB, 4), "moved": moved, "process": meter.name}
