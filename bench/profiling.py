"""Profiling josefk under load: py-spy attached to the running broker, or cProfile.

py-spy (``pip install py-spy``) samples the broker from outside (ptrace /
process_vm_readv: needs root, CAP_SYS_PTRACE or a permissive
``kernel.yama.ptrace_scope``) at 200 Hz into collapsed stacks aggregated by
function (``py-spy record --pid P --function --format raw --nonblocking --gil``).
``--nonblocking`` reads the broker's memory without stopping it, so sampling
costs the broker almost nothing; a few samples per hundred come out unreadable
(py-spy's "Errors"), which is fine for a profile.

``--gil`` records only the thread holding the GIL: the broker's Python work. A
system call releases the GIL, so the kernel's time (socket and page-cache copies,
epoll) is not in the profile; the CPU tables give it as sys time. Without
``--gil``, py-spy in this VM counted a thread blocked in ``epoll_wait`` or in a
socket write as busy: a third of the samples of a Java-producer run fell there
while the process's CPU time was three quarters user time.

From the stacks this module draws a flame graph SVG and lists where the samples
fall: by function (self and inclusive) and by package. Time inside C code that
keeps the GIL (CRC, struct packing, copies) counts in the Python function that
called it.

When py-spy cannot attach, the bench restarts josefk under cProfile instead
(``python -c "import cProfile ..."``), whose stats file is written when the
broker stops cleanly; the summary then lists cProfile's top functions.
"""

from __future__ import annotations

import html
import io
import pstats
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ProfilerError(RuntimeError):
    """A profiler could not be started or attached."""


def py_spy_binary() -> str | None:
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


class PySpy:
    """``py-spy record --pid`` running while a workload runs; stop() writes the file."""

    def __init__(self, pid: int, raw_path: Path, rate: int = 200) -> None:
        binary = py_spy_binary()
        if binary is None:
            raise ProfilerError("py-spy not installed (.venv/bin/pip install py-spy)")
        self.raw_path = raw_path
        self.rate = rate
        self.log_path = raw_path.with_suffix(".py-spy.log")
        raw_path.unlink(missing_ok=True)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [binary, "record", "--pid", str(pid), "--function", "--format", "raw",
             "--nonblocking", "--gil",
             "--rate", str(rate), "--output", str(raw_path)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while "Sampling process" not in self.log_path.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ProfilerError(f"py-spy could not attach to pid {pid}: "
                                    f"{self.log_path.read_text().strip()[:600]}")
            time.sleep(0.05)

    def errors(self) -> tuple[int, int] | None:
        """(samples, errors) from py-spy's last line, once it has stopped."""
        match = re.search(r"Samples: (\d+) Errors: (\d+)", self.log_path.read_text())
        return (int(match.group(1)), int(match.group(2))) if match else None

    def stop(self) -> Path:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if not self.raw_path.exists():
            raise ProfilerError(f"py-spy wrote no profile: {self.log_path.read_text()[-600:]}")
        return self.raw_path


# --- collapsed stacks -----------------------------------------------------------------------

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def read_folded(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def frame_file(frame: str) -> str:
    match = _FRAME.match(frame)
    return match.group("file") if match else ""


def package_of(frame: str) -> str:
    """A coarse owner of a frame: josefk.<area>, trio, kafka-python, stdlib, ..."""
    path = frame_file(frame).replace("\\", "/")
    repo_areas = ("protocol", "server", "log", "cluster")
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        if part == "josefk" and i + 1 < len(parts):
            return f"josefk.{parts[i + 1]}"
        if part in repo_areas and i + 1 < len(parts) and parts[i + 1].endswith(".py") \
                and "site-packages" not in parts:
            return f"josefk.{part}"
        if part == "site-packages" and i + 1 < len(parts):
            name = parts[i + 1]
            return {"kafka": "kafka-python"}.get(name, name.removesuffix(".py"))
    if not parts:
        return "?"
    head = parts[0]
    if head in repo_areas and len(parts) > 1:
        return f"josefk.{head}"
    if head == "kafka":
        return "kafka-python"
    if head in ("trio", "outcome", "sniffio", "crc32c", "lz4", "zstandard", "snappy"):
        return head
    if head.endswith(".py") or head in ("asyncio", "concurrent", "json", "logging",
                                        "selectors", "threading", "importlib", "collections",
                                        "encodings", "email", "socket"):
        return "stdlib"
    return head


@dataclass
class Summary:
    samples: int
    self_top: list[tuple[str, int]] = field(default_factory=list)
    inclusive_top: list[tuple[str, int]] = field(default_factory=list)
    packages: list[tuple[str, int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        def pct(rows: list[tuple[str, int]]) -> list[dict[str, Any]]:
            return [{"name": n, "samples": c, "percent": round(100 * c / self.samples, 1)}
                    for n, c in rows]

        return {"samples": self.samples, "self": pct(self.self_top),
                "inclusive": pct(self.inclusive_top), "packages": pct(self.packages)}


_BORING_INCLUSIVE = ("<module>", "run (trio/_core/_run.py", "unrolled_run", "main (",
                     "serve (josefk/server/cli.py", "_run (", "wrapper (", "run_sync_soon",
                     "_bootstrap", "_bootstrap_inner", "worker_thread_fn", "run (threading.py")


def summarize(stacks: list[tuple[list[str], int]], top: int = 12) -> Summary:
    total = sum(c for _, c in stacks)
    selfc: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    pkgs: Counter[str] = Counter()
    for frames, count in stacks:
        if not frames:
            continue
        selfc[frames[-1]] += count
        pkgs[package_of(frames[-1])] += count
        for frame in set(frames):
            incl[frame] += count
    interesting = [(f, c) for f, c in incl.most_common()
                   if not any(b in f for b in _BORING_INCLUSIVE) and c < total]
    return Summary(total, selfc.most_common(top), interesting[:top], pkgs.most_common(top))


def summarize_cprofile(stats_path: Path, top: int = 15) -> dict[str, Any]:
    stream = io.StringIO()
    stats = pstats.Stats(str(stats_path), stream=stream)
    rows = []
    total = stats.total_tt  # type: ignore[attr-defined]
    for (filename, line, func), (_, ncalls, tottime, cumtime, _) in sorted(
            stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]:  # type: ignore[attr-defined]
        rows.append({"name": f"{func} ({_short(filename)}:{line})", "calls": ncalls,
                     "tottime_s": round(tottime, 3), "cumtime_s": round(cumtime, 3),
                     "percent": round(100 * tottime / total, 1) if total else None})
    return {"total_s": round(total, 3), "self": rows}


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# --- flame graph ------------------------------------------------------------------------------


def flamegraph_svg(stacks: list[tuple[list[str], int]], title: str, width: int = 1200) -> str:
    """A static flame graph (root at the bottom), hover titles give the sample counts."""
    root: dict[str, Any] = {"n": 0, "c": {}}
    depth = 0
    for frames, count in stacks:
        node = root
        node["n"] += count
        for frame in frames:
            node = node["c"].setdefault(frame, {"n": 0, "c": {}})
            node["n"] += count
        depth = max(depth, len(frames))
    total = root["n"] or 1
    row, pad, top = 16, 10, 40
    height = top + (depth + 1) * row + pad
    scale = (width - 2 * pad) / total
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="#fdfdf6"/>',
           f'<text x="{pad}" y="20" font-size="14">{html.escape(title)}</text>',
           f'<text x="{pad}" y="34" fill="#666">{total} samples; width = share of GIL-holding '
           'samples; hover a frame for its count</text>']

    def draw(name: str, node: dict[str, Any], x: float, level: int) -> None:
        w = node["n"] * scale
        if w < 0.3:
            return
        y = height - pad - (level + 1) * row
        hue = zlib.crc32(name.split(" (")[0].encode()) % 60
        label = f"{name} ({node['n']} samples, {100 * node['n'] / total:.1f}%)"
        out.append(f'<g><title>{html.escape(label)}</title><rect x="{x:.1f}" y="{y}" '
                   f'width="{max(w - 0.5, 0.3):.1f}" height="{row - 1}" '
                   f'fill="hsl({hue}, 85%, {60 + hue % 15}%)"/>')
        chars = int(w / 6.6)
        if chars >= 3:
            text = name if len(name) <= chars else name[: chars - 2] + ".."
            out.append(f'<text x="{x + 2:.1f}" y="{y + 11}">{html.escape(text)}</text>')
        out.append("</g>")
        cx = x
        for child_name, child in sorted(node["c"].items()):
            draw(child_name, child, cx, level + 1)
            cx += child["n"] * scale

    draw("all", root, pad, 0)
    out.append("</svg>")
    return "\n".join(out)
