"""Results of the scale bench (bench/scale.py): results.json, results.md with josefk,
Kafka and ratio columns, one PNG per figure against the partition count (log x), and
biglog.png. ``python -m bench.scale --report results.json`` redraws them."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, NamedTuple

from bench.report import fmt, write_results

KINDS = ("josefk", "kafka")
LABEL = {"josefk": "josefk", "kafka": "Apache Kafka"}
COLOR = {"josefk": "#4c72b0", "kafka": "#dd8452"}


class Figure(NamedTuple):
    step: str
    field: str
    label: str
    unit: str
    higher: bool  # higher is better
    plot: str  # the PNG it is drawn in


PARTITION_FIGURES = [
    Figure("create", "create_s", "create all (until every partition has a leader)", "s",
           False, "create"),
    Figure("metadata", "p50_ms", "full Metadata, median", "ms", False, "metadata"),
    Figure("metadata", "p99_ms", "full Metadata, p99", "ms", False, "metadata"),
    Figure("metadata", "wire_p50_ms", "full Metadata on a bare socket (no client parsing), "
           "median", "ms", False, "metadata"),
    Figure("produce", "first_write_s", "first produce to every partition (one message "
           "each, after the create)", "s", False, "first-write"),
    Figure("produce", "msgs_s", "produce over every partition", "msgs/s", True, "produce"),
    Figure("produce", "mib_s", "produce over every partition", "MiB/s", True, "produce-mib"),
    Figure("fetch", "msgs_s", "fetch every partition from the start", "msgs/s", True, "fetch"),
    Figure("fetch", "mib_s", "fetch every partition from the start", "MiB/s", True,
           "fetch-mib"),
    Figure("load", "rss_mib", "broker VmRSS after the load", "MiB", False, "rss"),
    Figure("load", "hwm_mib", "broker VmHWM (peak) after the load", "MiB", False, "rss"),
    Figure("load", "fds", "broker open descriptors after the load", "fds", False, "fds"),
    Figure("restart_kill", "listen_s", "after SIGKILL: spawn to listening", "s", False,
           "restart-kill"),
    Figure("restart_kill", "ready_s", "after SIGKILL: spawn to an ack on every partition",
           "s", False, "restart-kill"),
    Figure("restart_clean", "stop_s", "clean stop: SIGTERM to exit", "s", False, "stop"),
    Figure("restart_clean", "listen_s", "after a clean stop: spawn to listening", "s", False,
           "restart-clean"),
    Figure("restart_clean", "ready_s",
           "after a clean stop: spawn to an ack on every partition", "s", False,
           "restart-clean"),
    Figure("restart_clean", "rss_mib", "VmRSS after the clean restart's acks", "MiB", False,
           "rss"),
]

BIGLOG_FIGURES = [
    Figure("fill", "mib_s", "fill (librdkafka, acks=1, 1 MiB batches)", "MiB/s", True, ""),
    Figure("load", "segments", "segment files on disk", "", False, ""),
    Figure("load", "log_bytes", "log bytes on disk", "GiB", False, ""),
    Figure("load", "rss_mib", "VmRSS after the fill", "MiB", False, ""),
    Figure("restart_kill", "listen_s", "after SIGKILL: spawn to listening", "s", False,
           "biglog"),
    Figure("restart_kill", "ready_s", "after SIGKILL: spawn to offset 0 fetched", "s",
           False, "biglog"),
    Figure("restart_kill", "rss_mib", "after SIGKILL: VmRSS at that fetch", "MiB", False, ""),
    Figure("restart_kill", "fds", "after SIGKILL: open descriptors", "fds", False, ""),
    Figure("restart_clean", "stop_s", "clean stop: SIGTERM to exit", "s", False, ""),
    Figure("restart_clean", "listen_s", "after a clean stop: spawn to listening", "s", False,
           "biglog"),
    Figure("restart_clean", "ready_s", "after a clean stop: spawn to offset 0 fetched", "s",
           False, "biglog"),
    Figure("restart_clean", "rss_mib", "after a clean stop: VmRSS at that fetch", "MiB",
           False, ""),
    Figure("restart_clean", "fds", "after a clean stop: open descriptors", "fds", False, ""),
]


TITLES = {
    "metadata": "full Metadata latency (list_topics)",
    "produce": "produce throughput over every partition (100 B, acks=1)",
    "produce-mib": "produce throughput over every partition (100 B, acks=1)",
    "fetch": "fetch throughput, every partition from the start",
    "fetch-mib": "fetch throughput, every partition from the start",
    "rss": "broker resident memory (VmRSS; VmHWM is the peak)",
    "restart-kill": "start-up after SIGKILL (from spawn)",
    "restart-clean": "start-up after a clean stop (from spawn)",
    "first-write": "first produce to every partition after the create",
}


def metadata_summary(got: dict[str, Any]) -> dict[str, Any]:
    samples = got["samples_ms"]
    p99 = statistics.quantiles(samples, n=100, method="inclusive")[98] \
        if len(samples) > 1 else samples[0]
    summary = {**got, "p50_ms": statistics.median(samples), "p99_ms": p99,
               "max_ms": max(samples)}
    if got.get("wire_samples_ms"):
        summary["wire_p50_ms"] = statistics.median(got["wire_samples_ms"])
    return summary


STEP_ORDER = ["start", "create", "metadata", "produce", "fetch", "fill", "load",
              "restart_kill", "restart_clean"]


def value(fig: Figure, got: dict[str, Any] | None) -> float | None:
    step = (got or {}).get(fig.step)
    if not isinstance(step, dict) or "error" in step:
        return None
    v = step.get(fig.field)
    if v is not None and fig.unit == "GiB":
        v = v / 2**30
    return v


def failure(fig: Figure, got: dict[str, Any] | None, finished: bool = True) -> str | None:
    """Why there is no value: the step's error, a skip, an earlier step's failure, or a
    run stopped before it reached the step."""
    if got is None:
        return "not run"
    if "skipped" in got:
        return "skipped"
    step = got.get(fig.step)
    if isinstance(step, dict) and "error" in step:
        return "failed"
    if step is None and not finished and fig.step not in got:
        later = STEP_ORDER[STEP_ORDER.index(fig.step) + 1:] if fig.step in STEP_ORDER else []
        if not any(s in got for s in later):
            return "not run"
    return "failed" if any("error" in s for s in got.values() if isinstance(s, dict)) \
        else "–"


def brief(step: str, got: dict[str, Any]) -> str:
    """One progress line for a finished step."""
    if step == "create":
        return f"{got['partitions']:,} partitions with leaders after {got['create_s']:.2f}s"
    if step == "metadata":
        wire = f"; bare socket median {got['wire_p50_ms']:.1f} ms" \
            if "wire_p50_ms" in got else ""
        return (f"median {got['p50_ms']:.1f} ms, p99 {got['p99_ms']:.1f} ms over "
                f"{len(got['samples_ms'])} calls ({got['partitions_seen']:,} partitions)"
                f"{wire}")
    if step in ("produce", "fetch"):
        n = got.get("acked", got.get("messages"))
        first = f"first write everywhere {got['first_write_s']:.2f}s; " if step == "produce" \
            else ""
        return f"{first}{n:,} msgs in {got['seconds']:.2f}s: {got['msgs_s']:,.0f} msgs/s, " \
               f"{got['mib_s']:.2f} MiB/s"
    if step == "fill":
        return f"{got['bytes'] / 2**30:.2f} GiB in {got['seconds']:.1f}s ({got['mib_s']:.0f} MiB/s)"
    if step.startswith("restart"):
        stop = f"stopped in {got['stop_s']:.2f}s; " if "stop_s" in got else ""
        return (f"{stop}listening {fmt(got['listen_s'])}s, ready {fmt(got['ready_s'])}s "
                f"after spawn; RSS {got['rss_mib']:.0f} MiB, {got['fds']} fds")
    if step == "load":
        extra = (f", {got['segments']:,} segments, {got['log_bytes'] / 2**30:.2f} GiB"
                 if "segments" in got else "")
        return f"RSS {got['rss_mib']:.0f} MiB (peak {got['hwm_mib']:.0f}), {got['fds']} fds{extra}"
    if step == "start":
        return f"ready {got['ready_s']:.2f}s after spawn"
    return json.dumps(got)[:200]


def _ratio(j: float | None, k: float | None) -> str:
    return f"{j / k:.2f}" if j is not None and k else "–"


def _cell(v: float | None, why: str | None) -> str:
    return fmt(v) if v is not None else f"*{why}*"


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    fin = bool(result.get("finished"))
    parts = result.get("partitions", {})
    counts = sorted(parts, key=int)
    big = cfg["biglog"]
    acks = cfg.get("acks", 1)
    lines = [f"# Cost at scale: josefk vs Apache Kafka ({result['label']})", ""]
    if cfg.get("brokers", 1) > 1:
        lines += [f"Three brokers of each (Apache Kafka {cfg.get('kafka_version')} in "
                  "ZooKeeper mode), one ZooKeeper; topics with replication factor "
                  f"{cfg['replication_factor']}, so every broker hosts a replica of every "
                  f"partition; produce and restart probes with acks={acks}. Memory is the "
                  "three brokers' sum, descriptors the most one broker holds; a restart "
                  "stops or kills all three at once.", ""]
    lines += [f"Order {' / '.join(cfg['order'])}; both with "
             + ", ".join(f"`{k}={v}`" for k, v in cfg["overrides_both"].items())
             + f". Topics of at most {cfg['topic_max']:,} partitions; {cfg['messages']:,} "
             f"messages of {cfg['message_size']} B (at least one per partition) produced "
             f"round-robin (acks={acks}) and fetched back; {cfg['metadata_calls']} "
             "full-Metadata "
             "calls. `__consumer_offsets` (50 partitions, untimed) is created first on "
             "both, as the consumers would have it created anyway. Ratio = josefk / Kafka "
             "(see each table for which way is better). "
             "One run per figure: read small differences as noise.", ""]
    if counts:
        lines += ["## Partitions", "", "Each cell: josefk / Kafka (ratio); per-figure tables "
                  "below.", "", "| figure | " + " | ".join(f"{int(n):,}" for n in counts)
                  + " |", "|---|" + "---:|" * len(counts)]
        for fig in PARTITION_FIGURES:
            cells = []
            for n in counts:
                j, k = (value(fig, parts[n].get(kind)) for kind in KINDS)
                cells.append(f"{_cell(j, failure(fig, parts[n].get('josefk'), fin))} / "
                             f"{_cell(k, failure(fig, parts[n].get('kafka'), fin))} "
                             f"({_ratio(j, k)})")
            arrow = "↑" if fig.higher else "↓"
            lines.append(f"| {fig.label} ({fig.unit} {arrow}) | " + " | ".join(cells) + " |")
        lines.append("")
        for fig in PARTITION_FIGURES:
            better = "higher" if fig.higher else "lower"
            lines += [f"### {fig.label} ({fig.unit}, {better} is better)", "",
                      "| partitions | josefk | Kafka | ratio |", "|---:|---:|---:|---:|"]
            for n in counts:
                row = parts[n]
                j, k = (value(fig, row.get(kind)) for kind in KINDS)
                lines.append(f"| {int(n):,} | {_cell(j, failure(fig, row.get('josefk'), fin))} | "
                             f"{_cell(k, failure(fig, row.get('kafka'), fin))} | {_ratio(j, k)} |")
            lines.append("")
    if result.get("biglog"):
        bl = result["biglog"]
        lines += ["## Big log", "",
                  f"{big['bytes'] / 2**30:.2f} GiB target in ~{big['segments']:,} segments of "
                  f"{big['segment_bytes'] / 2**20:.0f} MiB over {big['partitions']:,} "
                  f"partitions ({big['value_size'] // 1024} KiB values). SIGKILL right after "
                  "the fill, start; then SIGTERM, start.", "",
                  "| measure | josefk | Kafka | ratio |", "|---|---:|---:|---:|"]
        for fig in BIGLOG_FIGURES:
            j, k = (value(fig, bl.get(kind)) for kind in KINDS)
            unit = f" ({fig.unit})" if fig.unit else ""
            lines.append(f"| {fig.label}{unit} | {_cell(j, failure(fig, bl.get('josefk'), fin))} | "
                         f"{_cell(k, failure(fig, bl.get('kafka'), fin))} | {_ratio(j, k)} |")
        lines.append("")
    lines += failures(result)
    if result.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in result["notes"]] + [""]
    m = result["machine"]
    lines += ["## Machine", "",
              f"- {m.get('cpu')}, {m.get('cores')} cores, {m.get('ram_gib')} GiB RAM; "
              f"{m.get('kernel')}; Python {m.get('python')}; "
              f"{' '.join(m.get('java') or ['java ?'])}",
              f"- Apache Kafka {cfg.get('kafka_version') or m.get('kafka')}; "
              f"confluent-kafka {m.get('confluent_kafka')} "
              f"(librdkafka {m.get('librdkafka')}); josefk {m.get('josefk_commit')}",
              f"- RLIMIT_NOFILE {m.get('nofile_limit')}, vm.max_map_count "
              f"{m.get('vm_max_map_count')}; disk {m.get('disk', {}).get('device')} "
              f"({m.get('disk', {}).get('kind', m.get('disk', {}).get('fstype'))})",
              f"- load average at start {m.get('loadavg_at_start')}, at end "
              f"{m.get('loadavg_at_end')}; started {result.get('started')}, finished "
              f"{result.get('finished')}", ""]
    return "\n".join(lines)


def failures(result: dict[str, Any]) -> list[str]:
    out = []
    for n, row in sorted(result.get("partitions", {}).items(), key=lambda kv: int(kv[0])):
        for kind, got in row.items():
            if "skipped" in got:
                out.append(f"- {kind}, {int(n):,} partitions: skipped ({got['skipped']})")
            for step, s in got.items():
                if isinstance(s, dict) and "error" in s:
                    out.append(f"- {kind}, {int(n):,} partitions, {step}: failed: "
                               f"{s['error'][:400]}")
    for kind, got in result.get("biglog", {}).items():
        for step, s in got.items():
            if isinstance(s, dict) and "error" in s:
                out.append(f"- {kind}, big log, {step}: failed: {s['error'][:400]}")
    return ["## Failures", "", *out, ""] if out else []


# --- plots --------------------------------------------------------------------------------


def plots(result: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    paths = []
    parts = result.get("partitions", {})
    counts = sorted(parts, key=int)
    names = dict.fromkeys(f.plot for f in PARTITION_FIGURES)
    for name in names if counts else []:
        figs = [f for f in PARTITION_FIGURES if f.plot == name]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        drawn = False
        for i, f in enumerate(figs):
            for kind in KINDS:
                xs, ys, failed = [], [], []
                for n in counts:
                    got = parts[n].get(kind)
                    v = value(f, got)
                    if v is not None:
                        xs.append(int(n))
                        ys.append(v)
                    elif got is not None:
                        failed.append(int(n))
                if not xs and not failed:
                    continue
                label = LABEL[kind] + (f": {f.label.rsplit(': ', 1)[-1]}" if len(figs) > 1
                                       else "")
                ax.plot(xs, ys, marker="o", color=COLOR[kind], label=label,
                        linestyle=("-", "--", ":")[i % 3])
                for x in failed if i == 0 else []:
                    why = failure(f, parts[str(x)].get(kind), bool(result.get("finished")))
                    ax.axvline(x, color=COLOR[kind], alpha=0.3, linestyle=":")
                    ax.annotate(f"{kind} {why}", (x, 0.5), xycoords=("data", "axes fraction"),
                                rotation=90, color=COLOR[kind], fontsize=8, ha="right")
                drawn = drawn or bool(xs) or bool(failed)
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xscale("log")
        ax.set_xticks([int(n) for n in counts], [f"{int(n):,}" for n in counts])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ys_all = [line.get_ydata() for line in ax.get_lines()]
        flat = [y for ys in ys_all for y in ys if y and y > 0]
        if flat and max(flat) / min(flat) > 30:
            ax.set_yscale("log")
        ax.set_xlabel("partitions")
        ax.set_ylabel(figs[0].unit)
        acks = result["config"].get("acks", 1)
        ax.set_title(TITLES.get(name, figs[0].label).replace("acks=1", f"acks={acks}"))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    bl = result.get("biglog", {})
    figs = [f for f in BIGLOG_FIGURES if f.plot == "biglog"]
    if any(value(f, bl.get(k)) is not None for f in figs for k in KINDS):
        fig, ax = plt.subplots(figsize=(8, 4.2))
        width = 0.38
        for i, kind in enumerate(KINDS):
            vals = [value(f, bl.get(kind)) or 0 for f in figs]
            xs = [x + (i - 0.5) * width for x in range(len(figs))]
            ax.bar(xs, vals, width, color=COLOR[kind], label=LABEL[kind])
            for x, v in zip(xs, vals, strict=True):
                ax.text(x, v, fmt(v) if v else "failed", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(figs)),
                      [f.label.replace(": ", ":\n") for f in figs], fontsize=7)
        big = result["config"]["biglog"]
        ax.set_title(f"big log start-up (s): {big['bytes'] / 2**30:.1f} GiB, "
                     f"{big['partitions']:,} partitions")
        ax.legend()
        fig.tight_layout()
        path = out / "biglog.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def write(result: dict[str, Any], out: Path, draw: bool = True) -> list[Path]:
    """results.json and results.md, and the plots when ``draw``."""
    return write_results(result, out, markdown, plots if draw else None)
