"""The soak's sampler, a process of its own so that the workload's threads cannot delay
its probes: every few seconds, each broker's resident memory and open descriptors (over
its whole process group, from /proc), and the round trip of an ApiVersions request on a
connection kept open: a broker answers it at once, so a slow answer is a broker whose
event loop (or JVM) stalled.

    python -m compat_tests.chaos.soak_sampler HOME OUT BEGAN INTERVAL ID=HOST:PORT ...

HOME is the cluster's directory (``<HOME>/broker-<id>/data`` is in each broker's command
line), OUT the JSON-lines file, BEGAN the ``time.monotonic()`` the histories count from.
One line per broker and sample: ``t``, ``broker``, ``pid`` (the process group; null when
no broker runs), ``rss`` (bytes), ``anon`` (the resident bytes not backed by a file: the
heap, where a leak shows; ``rss`` also counts mapped files and libraries), ``fds``,
``rtt`` (seconds; null without an answer) and ``error``, and ``late``: how late the
sampler itself woke for it (seconds), the machine's share of any delay. Runs until
SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from kafka.protocol.metadata import ApiVersionsRequest

from ..rawkafka import RawConnection

PROBE_TIMEOUT_S = 5.0
PAGE = os.sysconf("SC_PAGE_SIZE")


def process_group(home: Path, broker_id: int) -> int | None:
    """The process group of the broker whose command line names its data directory."""
    marker = f"{home}/broker-{broker_id}/data".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes():
                return os.getpgid(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return None


def group_usage(pgid: int) -> tuple[int, int, int]:
    """Resident bytes, anonymous resident bytes and open descriptors summed over the
    processes of group ``pgid``."""
    rss = anon = fds = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            _, resident, shared, *_ = (int(x) for x in (entry / "statm").read_text().split())
            rss += resident * PAGE
            anon += (resident - shared) * PAGE
            fds += len(os.listdir(entry / "fd"))
        except (OSError, ProcessLookupError, ValueError, IndexError):
            continue
    return rss, anon, fds


class Probe:
    """ApiVersions round trips to one broker on one connection, reopened after a failure."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.connection: RawConnection | None = None

    def round_trip(self) -> tuple[float | None, str | None]:
        try:
            if self.connection is None:
                self.connection = RawConnection(self.bootstrap, PROBE_TIMEOUT_S, "soak-probe")
            began = time.monotonic()
            self.connection.request(ApiVersionsRequest[0](), 0)
            return time.monotonic() - began, None
        except (OSError, ConnectionError, ValueError) as exc:
            if self.connection is not None:
                self.connection.close()
            self.connection = None
            return None, type(exc).__name__


def sample(home: Path, broker_id: int, bootstrap: str, began: float, interval: float,
           out: IO[str], lock: threading.Lock) -> None:
    """Sample one broker every ``interval`` seconds, forever."""
    probe = Probe(bootstrap)
    due = time.monotonic()
    while True:
        # How late this thread woke: the machine's own delay, which every probe's round
        # trip includes too (on a loaded machine the probe, not the broker, is slow).
        late = max(0.0, time.monotonic() - due)
        due = time.monotonic() + interval
        pgid = process_group(home, broker_id)
        rss, anon, fds = group_usage(pgid) if pgid is not None else (0, 0, 0)
        rtt, error = probe.round_trip()
        line: dict[str, Any] = {"t": round(time.monotonic() - began, 3), "broker": broker_id,
                                "pid": pgid, "rss": rss, "anon": anon, "fds": fds, "rtt": rtt,
                                "error": error, "late": round(late, 4)}
        with lock:
            out.write(json.dumps(line) + "\n")
            out.flush()
        time.sleep(max(0.0, due - time.monotonic()))


def main(argv: list[str]) -> None:
    home, path, began, interval = Path(argv[0]), Path(argv[1]), float(argv[2]), float(argv[3])
    brokers = {int(k): v for k, v in (a.split("=", 1) for a in argv[4:])}
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    lock = threading.Lock()
    with path.open("a") as out:
        for broker_id, bootstrap in brokers.items():
            threading.Thread(target=sample, daemon=True,
                             args=(home, broker_id, bootstrap, began, interval, out,
                                   lock)).start()
        while not stopped.wait(1.0):
            pass


if __name__ == "__main__":
    main(sys.argv[1:])
