"""A PNG timeline of a chaos run: throughput, latency and errors, with the faults shaded."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

from .checker import check, end_time, fault_windows

_FINAL_READ_COLOR = "0.6"


def _per_second(
    times: list[float], seconds: int, weights: list[float] | None = None
) -> list[float]:
    counts = [0.0] * seconds
    for i, t in enumerate(times):
        b = min(max(int(t), 0), seconds - 1)
        counts[b] += 1.0 if weights is None else weights[i]
    return counts


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class Checked(Protocol):
    """What a title needs of any workload's check."""

    @property
    def ok(self) -> bool: ...

    def summary_line(self, seed: Any) -> str: ...


def _title(events: list[dict[str, Any]], result: Checked | None) -> str:
    meta = next((e for e in events if e.get("type") == "meta"), {})
    seed = meta.get("seed", "?")
    head = f"{meta.get('target', '?')}  seed {seed}"
    if result is None:
        try:
            result = check(events)
        except ValueError as exc:
            return f"{head}\n{exc}"
    verdict = "OK" if result.ok else "FAILED"
    return f"{head}  {verdict}\n{result.summary_line(seed)}"


def shade_faults(events: list[dict[str, Any]], axes: Any) -> list[Any]:
    """Shade each fault of the history on every one of ``axes``, one colour per kind;
    returns the legend's handles."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colors: dict[str, Any] = {}
    palette = plt.get_cmap("tab10")
    for w in fault_windows(events):
        color = colors.setdefault(w.fault, palette(len(colors) % 10))
        for ax in axes:
            ax.axvspan(w.start, w.stop, color=color, alpha=0.18, lw=0)
    return [Patch(color=c, alpha=0.35, label=k) for k, c in colors.items()]


def plot(events: list[dict[str, Any]], path: str | Path, result: Checked | None = None) -> None:
    """Write the timeline PNG of a history to ``path`` (``result``: its check, if at hand)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogFormatter

    end = max(end_time(events), 1.0)
    seconds = int(math.ceil(end)) + 1
    xs = [s + 0.5 for s in range(seconds)]
    ok_t: list[float] = []
    latency: list[float] = []
    fail_t: list[float] = []
    error_t: list[float] = []
    poll_t: list[float] = []
    poll_n: list[float] = []
    phases: dict[str, float] = {}
    for e in events:
        kind, t = e.get("type"), e.get("t")
        if not isinstance(t, int | float):
            continue
        if kind == "ok":
            ok_t.append(t)
            latency.append(float(e.get("latency") or 0.0))
        elif kind == "fail":
            fail_t.append(t)
        elif kind == "client-error":
            error_t.append(t)
        elif kind == "poll":
            poll_t.append(t)
            poll_n.append(float(len(e.get("records") or [])))
        elif kind == "phase":
            phases.setdefault(str(e.get("name")), float(t))

    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(12, 8), dpi=100)
    ax_rate, ax_lat, ax_err = axes
    ax_rate.plot(xs, _per_second(ok_t, seconds), label="acknowledged sends/s", lw=1.2)
    ax_rate.plot(xs, _per_second(poll_t, seconds, poll_n), label="polled records/s", lw=1.2)
    ax_rate.set_ylabel("per second")
    ax_rate.legend(loc="upper left", fontsize=8)

    positive = [(t, v) for t, v in zip(ok_t, latency, strict=True) if v > 0]
    if positive:
        ax_lat.scatter(
            [t for t, _ in positive],
            [v * 1000 for _, v in positive],
            s=2,
            alpha=0.3,
            color="tab:blue",
            rasterized=True,
            label="acknowledged send",
        )
        by_second: dict[int, list[float]] = {}
        for t, v in positive:
            by_second.setdefault(int(t), []).append(v * 1000)
        secs = sorted(by_second)
        for q, color in ((50, "tab:green"), (99, "tab:red")):
            ax_lat.plot(
                [s + 0.5 for s in secs],
                [_percentile(by_second[s], q) for s in secs],
                color=color,
                lw=1.2,
                label=f"p{q} per second",
            )
        ax_lat.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax_lat.yaxis.set_major_formatter(plain)
        ax_lat.yaxis.set_minor_formatter(LogFormatter())  # labels minors on narrow ranges only
        ax_lat.legend(loc="upper left", fontsize=8)
    ax_lat.set_ylabel("latency (ms)")

    ax_err.plot(xs, _per_second(fail_t, seconds), label="failed sends/s", color="tab:red", lw=1.2)
    ax_err.plot(
        xs, _per_second(error_t, seconds), label="client errors/s", color="tab:orange", lw=1.2
    )
    ax_err.set_ylabel("per second")
    ax_err.set_xlabel("seconds since start")
    ax_err.legend(loc="upper left", fontsize=8)

    handles = shade_faults(events, axes)
    if "final-read" in phases:
        start = phases["final-read"]
        stop = phases.get("done", end)
        for ax in axes:
            ax.axvline(start, color="black", ls="--", lw=1)
            ax.axvspan(start, max(stop, start), color=_FINAL_READ_COLOR, alpha=0.15, lw=0)
        handles.append(Line2D([], [], color="black", ls="--", label="final read"))
    if "healed" in phases:
        for ax in axes:
            ax.axvline(phases["healed"], color="tab:green", ls=":", lw=1)
        handles.append(Line2D([], [], color="tab:green", ls=":", label="healed"))
    if handles:
        fig.legend(handles=handles, loc="upper right", fontsize=8, title="faults, phases", ncol=2)

    ax_err.set_xlim(0, end)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.suptitle(_title(events, result), fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 0.85 if handles else 1, 1))
    fig.savefig(path)
    plt.close(fig)
