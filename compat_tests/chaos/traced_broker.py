"""A josefk broker under tracemalloc, to find what its heap grows with over a soak.

    python -m compat_tests.chaos.traced_broker EVERY_S DIR serve --override ...

runs the broker as ``python -m josefk.server`` does and writes a tracemalloc snapshot to
``DIR/<pid>-<n>.snap`` every EVERY_S seconds. The cluster harness starts its josefk
brokers this way when ``JOSEFK_TRACEMALLOC_EVERY_S`` is set (``DIR`` is ``heap/`` beside
each broker's data), e.g. ``JOSEFK_TRACEMALLOC_EVERY_S=60 make soak DURATION=1800``.

    python -m compat_tests.chaos.traced_broker --census EVERY_S DIR serve --override ...

runs it with a census of its objects by type instead (``census.py``; no tracemalloc, so at
full speed), as the harness does when ``JOSEFK_CENSUS_EVERY_S`` is set.

    python -m compat_tests.chaos.traced_broker --compare DIR [SKIP]

prints, for each process, what grew between its snapshot number SKIP (default 5: past
the warm-up) and its last one, by allocation site and by traceback.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

from .census import record_every

FRAMES = 12
TOP = 15


def _dump_every(every: float, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for n in range(1_000_000):
        time.sleep(every)
        path = directory / f"{os.getpid()}-{n:04d}.snap"
        tracemalloc.take_snapshot().dump(f"{path}.tmp")
        os.replace(f"{path}.tmp", path)


def serve(every: float, directory: Path, argv: list[str], census: bool = False) -> None:
    """Run the broker with ``argv`` (``serve ...``), snapshots (or, with ``census``,
    censuses) every ``every`` seconds."""
    if not census:
        tracemalloc.start(FRAMES)
    threading.Thread(target=record_every if census else _dump_every, args=(every, directory),
                     daemon=True, name="heap-watch").start()
    sys.argv = ["josefk.server", *argv]
    runpy.run_module("josefk.server", run_name="__main__", alter_sys=True)


def snapshots(directory: Path) -> dict[str, list[Path]]:
    """Each process's snapshot files, oldest first."""
    by_pid: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(directory.glob("*.snap")):
        by_pid[path.name.split("-")[0]].append(path)
    return dict(by_pid)


def compare(directory: Path, skip: int = 5, top: int = TOP) -> str:
    """What grew in each process between its snapshot ``skip`` and its last."""
    lines = []
    for pid, paths in snapshots(directory).items():
        if len(paths) < 2:
            continue
        first = tracemalloc.Snapshot.load(str(_first(paths, skip)))
        last = tracemalloc.Snapshot.load(str(paths[-1]))
        stats = last.compare_to(first, "lineno")
        total = sum(s.size_diff for s in stats)
        lines.append(f"process {pid}: {total / 1e6:+.2f} MB traced between "
                     f"{_first(paths, skip).name} and {paths[-1].name}")
        lines += [f"  {s.size_diff / 1e3:+10.1f} kB {s.count_diff:+8d}  {s.traceback[0]}"
                  for s in stats[:top]]
        for s in last.compare_to(first, "traceback")[:3]:
            lines.append(f"  {s.size_diff / 1e3:+10.1f} kB {s.count_diff:+8d} from:")
            lines += [f"      {line}" for line in s.traceback.format()[-2 * FRAMES:]]
    return "\n".join(lines)


def _first(paths: list[Path], skip: int) -> Path:
    return paths[min(skip, len(paths) - 2)]


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--compare":
        print(compare(Path(argv[1]), int(argv[2]) if len(argv) > 2 else 5))
        return
    census = bool(argv) and argv[0] == "--census"
    argv = argv[1:] if census else argv
    serve(float(argv[0]), Path(argv[1]), argv[2:], census)


if __name__ == "__main__":
    main(sys.argv[1:])
