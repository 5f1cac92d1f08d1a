"""Clock jumps: each broker runs under libfaketime (Debian's ``libfaketime``) reading its
offset from a file of its own, so the nemesis can step one broker's wall clock forward
or back while it runs, and step it back to the true time when it heals.

Only the wall clock (CLOCK_REALTIME) moves, as when NTP or an operator steps a clock:
FAKETIME_DONT_FAKE_MONOTONIC leaves CLOCK_MONOTONIC alone, as such a step does (the
timeouts of Kafka and josefk run on it). The offset file is read again at most once a second
(FAKETIME_CACHE_DURATION).

libfaketime 0.9.10 (Debian 12) mishandles two waits on the monotonic clock when it is
not faked. ``pthread_cond_timedwait`` on a CLOCK_MONOTONIC condition variable (every
timed wait of a JVM: ``Thread.sleep``, ``parkNanos``, ``Object.wait``; Python's GIL)
subtracts the *faked* monotonic time from the caller's real deadline and, with its
"forced monotonic fix" (on by default for glibc >= 2.30), adds the result to the real
time: a deadline decades in the past, so each wait returns at once and every sleeping
thread spins (fixed upstream in 2025, after 0.9.12). FAKETIME_FORCE_MONOTONIC_FIX=0
makes it hand the deadline on unchanged, which is right when that clock is real.
``clock_nanosleep`` on an absolute monotonic deadline fails with EINVAL
(wolfcw/libfaketime#426), which breaks Python's ``time.sleep`` (see
``faketime_site/sitecustomize.py``, which a josefk broker imports to sleep otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SITE = Path(__file__).resolve().parent / "faketime_site"
FAULTS = frozenset({"clock-jump"})


def available() -> str | None:
    """None when brokers can run under libfaketime here; otherwise why not."""
    if not LIBFAKETIME.exists():
        return f"no {LIBFAKETIME} (Debian package libfaketime)"
    return None


def offset_file(home: Path, broker_id: int) -> Path:
    """Where broker ``broker_id`` of the cluster in ``home`` reads its clock offset."""
    return home / f"broker-{broker_id}.faketime"


def wrap(home: Path, broker_id: int, command: list[str]) -> list[str]:
    """``command`` run under libfaketime with a true clock until :func:`jump`."""
    path = offset_file(home, broker_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("+0\n")
    python_path = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH")) if p)
    return ["env", f"LD_PRELOAD={LIBFAKETIME}", f"FAKETIME_TIMESTAMP_FILE={path}",
            "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_FORCE_MONOTONIC_FIX=0",
            "FAKETIME_CACHE_DURATION=1", f"PYTHONPATH={python_path}", *command]


def jump(home: Path, broker_id: int, seconds: int) -> None:
    """Set broker ``broker_id``'s wall clock ``seconds`` away from the true time (0: true)."""
    path = offset_file(home, broker_id)
    if not path.exists():
        raise ValueError(f"broker {broker_id} does not run under libfaketime ({path})")
    staged = path.with_suffix(".next")
    staged.write_text(f"{seconds:+d}\n")
    staged.replace(path)  # libfaketime never reads half a file
