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


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, sys) CPU seconds of ``pid`` and its live descendants (all their threads)."""
    user = system = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # Fields 14 and 15 of proc(5) (utime, stime) are 12 and 13 after the ")".
            user += int(fields[11])
            system += int(fields[12])
    return user / CLK_TCK, system / CLK_TCK


def machine_ticks() -> tuple[int, int]:
    """(busy, steal) clock ticks of all CPUs so far, from /proc/stat: busy is everything but
    idle, iowait and steal (guest time is already inside user)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal


def cpu_seconds(pid: int) -> float:
    """user + sys CPU seconds of ``pid`` and its live descendants (all their threads)."""
    return sum(cpu_times(pid))


def process_name(pid: int) -> str:
    """The executable name of ``pid`` (``/proc/<pid>/comm``), "" when it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class Meter:
    """CPU seconds a process tree uses between ``__enter__`` and ``__exit__``.

    ``seconds`` (user + sys) stays None until a window has closed; a failed window (an
    exception inside it) still records its time, the caller decides what it is worth.
    ``sys_seconds`` is the kernel's part: system calls (socket and file copies) and page
    faults. ``machine_seconds`` is every CPU's busy time over the window (brokers, clients,
    kernel threads): on loopback the kernel charges one side's TCP work to whichever
    process wakes it, which moves CPU between broker and client but not off the machine.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.name = process_name(pid)
        self.seconds: float | None = None
        self.sys_seconds: float | None = None
        self.wall: float | None = None
        self.machine_seconds: float | None = None
        self._before = (0.0, 0.0)
        self._machine_before = 0
        self._began = 0.0

    def __enter__(self) -> Meter:
        self._before = cpu_times(self.pid)
        self._machine_before = machine_ticks()[0]
        self._began = time.monotonic()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        user, system = cpu_times(self.pid)
        self.sys_seconds = system - self._before[1]
        self.seconds = user - self._before[0] + self.sys_seconds
        self.wall = time.monotonic() - self._began
        self.machine_seconds = (machine_ticks()[0] - self._machine_before) / CLK_TCK


def per_gib(seconds: float | None, nbytes: int | None) -> float | None:
    """CPU seconds per GiB, None when either is unknown or nothing moved."""
    if seconds is None or not nbytes:
        return None
    return seconds / (nbytes / GIB)


def detail(meter: Meter, nbytes: int, moved: str) -> dict[str, Any]:
    """What a CPU-per-GiB outcome carries besides its value."""
    return {"broker_cpu_s": None if meter.seconds is None else round(meter.seconds, 3),
            "broker_sys_s": None if meter.sys_seconds is None else round(meter.sys_seconds, 3),
            "machine_cpu_s": None if meter.machine_seconds is None
            else round(meter.machine_seconds, 3),
            "window_s": None if meter.wall is None else round(meter.wall, 3),
            "gib": round(nbytes / GIB, 4), "moved": moved, "process": meter.name}
