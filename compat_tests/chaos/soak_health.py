"""What the soak's samples (``soak_sampler.py``) say about each broker: the slope of its
resident memory and open descriptors once warmed up, and its worst stall; and the PNG.

A broker killed by the nemesis comes back as a new process, so slopes are fitted per
process (the longest-lived one after its first ``warmup`` seconds). A stall is the
slowest ApiVersions answer, or a probe that timed out, outside the faults aimed at that
broker (a paused or cut-off broker does not answer, by design) and ``GRACE_S`` after them.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checker import FaultWindow, fault_windows
from .soak_sampler import PROBE_TIMEOUT_S

GRACE_S = 10.0
# Fewer samples than this after the warm-up: no slope.
MIN_SAMPLES = 10
MB = 1024 * 1024


def load_samples(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open() as lines:
        return [json.loads(line) for line in lines if line.strip()]


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """The least-squares slope of ``(t, y)`` points, in y per hour."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (y - mean_y) for t, y in points) / var * 3600


@dataclass
class BrokerHealth:
    """One broker over the soak."""

    broker: int
    processes: int = 0
    rss_mb: tuple[float, float] = (0.0, 0.0)  # first and last after the warm-up
    rss_slope: float | None = None  # MB per hour
    anon_slope: float | None = None  # MB per hour of the anonymous (heap) part, if sampled
    fds: tuple[int, int] = (0, 0)
    fds_slope: float | None = None  # descriptors per hour
    fitted_s: float = 0.0  # how long the fitted process ran after its warm-up
    worst_stall: float = 0.0  # seconds
    worst_stall_at: float = 0.0
    worst_late: float = 0.0  # how late the sampler itself woke, at worst (the machine)
    unanswered: int = 0  # refused or reset probes outside its faults

    def line(self) -> str:
        if self.rss_slope is None or self.fds_slope is None:
            growth = "too short after the warm-up for a slope"
        else:
            growth = (f"RSS {self.rss_mb[0]:.0f} -> {self.rss_mb[1]:.0f} MB "
                      f"({self.rss_slope:+.1f} MB/h{self._anon()}), fds {self.fds[0]} -> "
                      f"{self.fds[1]} "
                      f"({self.fds_slope:+.1f}/h) over {self.fitted_s:.0f} s")
        return (f"broker {self.broker}: {self.processes} process(es); {growth}; worst stall "
                f"{self.worst_stall * 1000:.0f} ms at {self.worst_stall_at:.0f} s (the sampler "
                f"itself woke up to {self.worst_late * 1000:.0f} ms late); "
                f"{self.unanswered} unanswered probes")


    def _anon(self) -> str:
        return "" if self.anon_slope is None else f", anonymous {self.anon_slope:+.1f} MB/h"


def _own_faults(windows: list[FaultWindow], broker: int) -> list[tuple[float, float]]:
    return [(w.start, w.stop + GRACE_S) for w in windows if broker in w.targets]


def assess(samples: list[dict[str, Any]], events: list[dict[str, Any]],
           warmup: float) -> list[BrokerHealth]:
    """Each broker's health from the samples and the nemesis events of a history."""
    windows = fault_windows(events)
    by_broker: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in samples:
        by_broker[int(s["broker"])].append(s)
    return [_assess_one(b, sorted(rows, key=lambda s: s["t"]), _own_faults(windows, b), warmup)
            for b, rows in sorted(by_broker.items())]


def _assess_one(broker: int, rows: list[dict[str, Any]], faults: list[tuple[float, float]],
                warmup: float) -> BrokerHealth:
    health = BrokerHealth(broker)
    runs = [run for _, run in _runs(rows)]
    health.processes = len(runs)
    warmed = [[s for s in run if s["t"] >= run[0]["t"] + warmup] for run in runs]
    longest = max(warmed, key=lambda run: run[-1]["t"] - run[0]["t"] if run else -1.0,
                  default=[])
    if len(longest) >= MIN_SAMPLES:
        health.rss_mb = (longest[0]["rss"] / MB, longest[-1]["rss"] / MB)
        health.rss_slope = slope_per_hour([(s["t"], s["rss"] / MB) for s in longest])
        if all("anon" in s for s in longest):
            health.anon_slope = slope_per_hour([(s["t"], s["anon"] / MB) for s in longest])
        health.fds = (longest[0]["fds"], longest[-1]["fds"])
        health.fds_slope = slope_per_hour([(s["t"], float(s["fds"])) for s in longest])
        health.fitted_s = longest[-1]["t"] - longest[0]["t"]
    for s in rows:
        health.worst_late = max(health.worst_late, s.get("late") or 0.0)
        if any(start <= s["t"] <= stop for start, stop in faults):
            continue
        stall = s["rtt"] if s["rtt"] is not None else (
            PROBE_TIMEOUT_S if s["error"] in ("TimeoutError", "timeout") else None)
        if stall is None:
            health.unanswered += 1
        elif stall > health.worst_stall:
            health.worst_stall, health.worst_stall_at = stall, s["t"]
    return health


def plot(samples: list[dict[str, Any]], events: list[dict[str, Any]], title: str,
         path: Path) -> None:
    """RSS, descriptors and ApiVersions round trips of every broker, faults shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .timeline import shade_faults

    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(12, 8), dpi=100)
    by_broker: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in samples:
        by_broker[int(s["broker"])].append(s)
    palette = plt.get_cmap("tab10")
    for i, (broker, rows) in enumerate(sorted(by_broker.items())):
        rows.sort(key=lambda s: s["t"])
        color, label = palette(i % 10), f"broker {broker}"
        for j, (_, run) in enumerate(_runs(rows)):  # a line per process: restarts break it
            axes[0].plot([s["t"] for s in run], [s["rss"] / MB for s in run], lw=1,
                         color=color, label=None if j else label)
            axes[1].plot([s["t"] for s in run], [s["fds"] for s in run], lw=1, color=color,
                         label=None if j else label)
        answered = [s for s in rows if s["rtt"] is not None]
        axes[2].scatter([s["t"] for s in answered], [s["rtt"] * 1000 for s in answered], s=3,
                        color=color, label=label)
    axes[0].set_ylabel("RSS (MB)")
    axes[1].set_ylabel("open descriptors")
    axes[2].set_ylabel("ApiVersions round trip (ms)")
    if any(s["rtt"] for s in samples):
        axes[2].set_yscale("log")
    axes[2].set_xlabel("seconds since start")
    handles = shade_faults(events, axes)
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    if handles:
        fig.legend(handles=handles, loc="center right", fontsize=8, title="faults")
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 0.85 if handles else 1, 1))
    fig.savefig(path)
    plt.close(fig)


def _runs(rows: list[dict[str, Any]]) -> list[tuple[int, list[dict[str, Any]]]]:
    """Consecutive samples of one live process each, in time order."""
    runs: list[tuple[int, list[dict[str, Any]]]] = []
    for s in rows:
        if s["pid"] is None or s["rss"] <= 0:
            continue
        if not runs or runs[-1][0] != s["pid"]:
            runs.append((s["pid"], []))
        runs[-1][1].append(s)
    return runs


def worst(healths: list[BrokerHealth]) -> tuple[float, float, float]:
    """The steepest RSS slope (MB/h), steepest descriptor slope (per h), longest stall (s)."""
    rss = max((h.rss_slope for h in healths if h.rss_slope is not None), default=math.nan)
    fds = max((h.fds_slope for h in healths if h.fds_slope is not None), default=math.nan)
    return rss, fds, max((h.worst_stall for h in healths), default=0.0)
