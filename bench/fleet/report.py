"""Results of the fleet bench: results.json, results.md (josefk, Kafka, ratio per broker
count and partition count) and one PNG per group of figures against the partition count.
``python -m bench.fleet --report results.json`` redraws them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from bench.report import disk_text, fmt, write_results

KINDS = ("josefk", "kafka")
LABEL = {"josefk": "josefk", "kafka": "Apache Kafka 3.9.1"}
COLOR = {"josefk": "#4c72b0", "kafka": "#dd8452"}
STYLE = ("-", "--", ":", "-.")
MARKER = ("o", "s", "^", "D")


class Figure(NamedTuple):
    step: str
    field: str
    label: str
    plot: str  # the PNG it is drawn in
    short: str  # its name in the PNG's legend


# All times in seconds, lower is better.
FIGURES = [
    Figure("create", "visible_s", "topic creation: the CreateTopics answer to every broker "
           "listing every partition with a leader", "create", "answer to visible"),
    Figure("create", "total_s", "topic creation: the CreateTopics request to every broker "
           "listing every partition with a leader", "create", "request to visible"),
    Figure("create_one", "visible_s", "one more topic on the loaded cluster: its CreateTopics "
           "answer to every broker listing it with leaders", "create",
           "one more topic, answer to visible"),
    Figure("shutdown", "exit_s", "controlled shutdown of one broker: SIGTERM to exit",
           "shutdown", "SIGTERM to exit"),
    Figure("shutdown", "moved_s", "controlled shutdown: SIGTERM to it leading nothing",
           "shutdown", "SIGTERM to leaderships moved"),
    Figure("failover", "controller_s", "controller SIGKILLed: to another controller named",
           "failover", "new controller"),
    Figure("failover", "leaders_s", "controller SIGKILLed: to every partition led by a live "
           "broker", "failover", "every partition led"),
    Figure("restart_clean", "isr_s", "restart after the controlled shutdown: spawn to back "
           "in every ISR", "restart", "after SIGTERM"),
    Figure("restart_kill", "isr_s", "restart of the SIGKILLed controller: spawn to back in "
           "every ISR", "restart", "after SIGKILL"),
    Figure("start", "s", "cluster start: spawn to every broker listing all brokers and a "
           "controller", "start", "start"),
]
TITLES = {"create": "topic creation visible on every broker (s)",
          "shutdown": "controlled shutdown of one broker (s)",
          "failover": "controller failover after SIGKILL (s)",
          "restart": "broker restart to back in every ISR (s)",
          "start": "cluster start (s)"}


def value(fig: Figure, got: dict[str, Any] | None) -> float | None:
    """The figure, or None when its step timed out, failed or did not run."""
    step = (got or {}).get(fig.step)
    if not isinstance(step, dict) or "timeout" in step or "error" in step:
        return None
    v = step.get(fig.field)
    return float(v) if isinstance(v, int | float) else None


def why_not(fig: Figure, got: dict[str, Any] | None) -> str:
    """What stands in a cell without a figure."""
    step = (got or {}).get(fig.step)
    if isinstance(step, dict) and "timeout" in step:
        return "timeout"
    if isinstance(step, dict) and "error" in step:
        return "failed"
    if got and "refused" in got:
        return "refused"
    return "skipped" if got and "skipped" in got else "not run"


def ratio(j: float | None, k: float | None) -> str:
    """josefk / Kafka, or a dash when either is missing."""
    return f"{j / k:.2f}" if j is not None and k else "–"


def _cell(fig: Figure, got: dict[str, Any] | None) -> str:
    v = value(fig, got)
    return fmt(v) if v is not None else f"*{why_not(fig, got)}*"


def ordered(runs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return sorted(runs.items(), key=lambda kv: (kv[1]["brokers"], kv[1]["partitions"]))


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    runs = ordered(result.get("runs", {}))
    title = "The cluster at scale: josefk vs Apache Kafka 3.9.1 (ZooKeeper mode)"
    lines = [f"# {title}" + (" — SMOKE RUN, not figures" if cfg.get("smoke") else ""), "",
             f"One ZooKeeper; N brokers of each kind on this machine; topics of at most "
             f"{cfg['topic_max']:,} partitions, replication factor {cfg['replication']}, no "
             f"data. Kafka brokers with `KAFKA_HEAP_OPTS={cfg['kafka_heap']}`. Both with the "
             "cluster tests' keys and " + ", ".join(f"`{k}={v}`" for k, v in
                                                     cfg["overrides"].items())
             + ". Each time runs from what the bench did (a signal, a spawn, a CreateTopics "
             "answer) to the first full Metadata (v8, bare socket) showing the goal; the "
             "resolution column of results.json is the gap to the answer before it. "
             "Ratio = josefk / Kafka, lower is better for every figure. One run per cell.", "",
             "| figure (s) | " + " | ".join(f"{r['brokers']} × {r['partitions']:,}"
                                             for _, r in runs) + " |",
             "|---|" + "---:|" * len(runs)]
    for fig in FIGURES:
        cells = [f"{_cell(fig, r.get('josefk'))} / {_cell(fig, r.get('kafka'))} "
                 f"({ratio(value(fig, r.get('josefk')), value(fig, r.get('kafka')))})"
                 for _, r in runs]
        lines.append(f"| {fig.label} | " + " | ".join(cells) + " |")
    lines += ["", "Each cell: josefk / Kafka (ratio); columns are brokers × partitions.", ""]
    lines += _memory(runs) + _problems(runs)
    if result.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in result["notes"]] + [""]
    m = result.get("machine", {})
    lines += ["## Machine", "",
              f"- {m.get('cpu')}, {m.get('cores')} cores, {m.get('ram_gib')} GiB RAM; "
              f"{m.get('kernel')}; Python {m.get('python')}; "
              f"{' '.join(m.get('java') or ['java ?'])}; josefk {m.get('josefk_commit')}",
              f"- data dirs (ZooKeeper's and every broker's, "
              f"{disk_text(m.get('disk') or {})}",
              f"- load average at start {m.get('loadavg_at_start')}, at end "
              f"{m.get('loadavg_at_end')}; started {result.get('started')}, finished "
              f"{result.get('finished')}", ""]
    return "\n".join(lines)


def _memory(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    rows = []
    for _, r in runs:
        for kind in KINDS:
            rss = (r.get(kind) or {}).get("rss_mib")
            if rss:
                rows.append(f"| {r['brokers']} × {r['partitions']:,} | {LABEL[kind]} | "
                            f"{fmt(sum(rss.values()) / len(rss))} | {fmt(max(rss.values()))} |")
    if not rows:
        return []
    return ["## Memory after the load (VmRSS per broker, MiB)", "",
            "| size | broker | mean | max |", "|---|---|---:|---:|", *rows, ""]


def _problems(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    out = []
    for _, r in runs:
        for kind in KINDS:
            got = r.get(kind) or {}
            where = f"{kind}, {r['brokers']} × {r['partitions']:,}"
            if "skipped" in got:
                out.append(f"- {where}: skipped {got['skipped']}")
            if "refused" in got:
                out.append(f"- {where}: refused before it started: {got['refused']}")
            for step, s in got.items():
                if isinstance(s, dict) and ("timeout" in s or "error" in s):
                    label = "timeout" if "timeout" in s else "failed"
                    out.append(f"- {where}, {step}: {label}: "
                               f"{str(s.get('timeout') or s.get('error'))[:400]}")
    return ["## Timeouts and failures", "", *out, ""] if out else []


def plots(result: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    runs = ordered(result.get("runs", {}))
    paths = []
    for name, title in TITLES.items():
        figs = [f for f in FIGURES if f.plot == name]
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        drawn = False
        for kind in KINDS:
            for n_brokers in sorted({r["brokers"] for _, r in runs}):
                for i, f in enumerate(figs):
                    pts = [(r["partitions"], value(f, r.get(kind))) for _, r in runs
                           if r["brokers"] == n_brokers]
                    pts = [(x, y) for x, y in pts if y is not None]
                    if not pts:
                        continue
                    xs, ys = zip(*pts, strict=True)
                    ax.plot(xs, ys, marker=MARKER[i % 4], color=COLOR[kind],
                            linestyle=STYLE[i % 4],
                            label=f"{LABEL[kind]}, {n_brokers} brokers: {f.short}")
                    drawn = True
        if not drawn:
            plt.close(fig)
            continue
        counts = sorted({r["partitions"] for _, r in runs})
        ax.set_xscale("log")
        ax.set_xticks(counts, [f"{n:,}" for n in counts])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_ylim(bottom=0)
        ax.set_xlabel("partitions across the cluster (replication factor 3); missing points "
                      "timed out or failed (results.md)")
        ax.set_ylabel("seconds")
        ax.set_title(title + (" — smoke" if result["config"].get("smoke") else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def write(result: dict[str, Any], out: Path, draw: bool = True) -> list[Path]:
    """results.json and results.md, and the plots when ``draw``."""
    return write_results(result, out, markdown, plots if draw else None)
