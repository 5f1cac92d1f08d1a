"""The compaction bench's results (`bench.compaction`): medians per measure, ratio
josefk / Kafka, as results.json, results.md and results.png."""

from __future__ import annotations

import contextlib
import json
import statistics
from pathlib import Path
from typing import Any

from bench import report

MIB = 1 << 20
OFFSETS_TOPIC = "__consumer_offsets"

MEASURES = [
    # key, path in a round's result, label, unit, higher is better
    ("clean_mb_s", ("cleaning", "mb_s"), "cleaning throughput (broker's own line)", "MB/s",
     True),
    ("clean_wall_mb_s", ("cleaning", "wall_mb_s"),
     "cleaning, alter to settled size (incl. back-off)", "MB/s", True),
    ("uncompacted_s", ("startup", "uncompacted", "offsets_s"),
     "spawn to offsets fetched, 1M commits uncompacted", "s", False),
    ("compacted_s", ("startup", "compacted", "offsets_s"),
     "spawn to offsets fetched, after compaction", "s", False),
    ("uncompacted_port_s", ("startup", "uncompacted", "port_s"),
     "spawn to port open (uncompacted restart)", "s", False),
    ("compacted_port_s", ("startup", "compacted", "port_s"),
     "spawn to port open (compacted restart)", "s", False),
    ("load_uncompacted_ms", ("startup", "uncompacted", "load_ms"),
     "the broker's own coordinator load line, uncompacted", "ms", False),
    ("load_compacted_ms", ("startup", "compacted", "load_ms"),
     "the broker's own coordinator load line, after compaction", "ms", False),
    ("history_cost_s", ("startup", "history_cost_s"),
     "uncompacted minus compacted spawn-to-offsets", "s", False),
    ("commit_rate", ("startup", "commit_rate"), "offset commits written", "commits/s", True),
]


def _dig(d: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def aggregate(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for rnd in result["rounds"]:
        for got in rnd.values():
            s = got.get("startup", {})
            if s.get("commits") and s.get("commit_s"):
                s["commit_rate"] = round(s["commits"] / s["commit_s"])
            un, co = _dig(s, ("uncompacted", "offsets_s")), _dig(s, ("compacted", "offsets_s"))
            if un is not None and co is not None:
                s["history_cost_s"] = round(un - co, 3)
    for key, path, *_ in MEASURES:
        row: dict[str, Any] = {}
        for kind in result["config"]["order"]:
            values = [v for rnd in result["rounds"]
                      if (v := _dig(rnd.get(kind, {}), path)) is not None]
            row[kind] = {"median": statistics.median(values) if values else None,
                         "values": values}
        j, k = row.get("josefk", {}).get("median"), row.get("kafka", {}).get("median")
        row["ratio"] = round(j / k, 3) if j and k else None
        out[key] = row
    return out


def markdown(result: dict[str, Any]) -> str:
    agg = result["summary"] = aggregate(result)
    cfg = result["config"]
    lines = [f"# Log compaction: josefk vs Apache Kafka ({result['label']})", "",
             f"{len(result['rounds'])} round(s), order {' / '.join(cfg['order'])}; "
             f"{cfg['clean_mib']} MiB cleaned ({cfg['keys']:,} keys); "
             f"{cfg['commits']:,} offset commits. Medians; ratio = josefk / Kafka.", "",
             "| measure | josefk | Kafka | ratio | per round (josefk; Kafka) |",
             "|---|---:|---:|---:|---|"]
    for key, _path, label, unit, higher in MEASURES:
        row = agg[key]
        j, k = row.get("josefk", {}), row.get("kafka", {})
        better = "higher" if higher else "lower"
        lines.append(
            f"| {label} ({unit}, {better} is better) | {report.fmt(j.get('median'))} | "
            f"{report.fmt(k.get('median'))} | {row['ratio'] if row['ratio'] else '-'} | "
            f"{', '.join(map(report.fmt, j.get('values', [])))}; "
            f"{', '.join(map(report.fmt, k.get('values', [])))} |")
    lines += ["", "Reading: a restart's spawn-to-offsets time is mostly process start for Kafka "
              "(the JVM; it varies by seconds with the machine's load), so the cost of the "
              "history is best read from each broker's own load line: Kafka's `Finished "
              "loading of metadata from __consumer_offsets-N ... in X ms`, josefk's "
              "`loaded __consumer_offsets-N in the background in X ms` (as Kafka, josefk "
              "loads a partition over 1 MiB after its port opens and answers "
              "COORDINATOR_LOAD_IN_PROGRESS meanwhile; smaller ones before, in its `loaded "
              "N groups from M __consumer_offsets partitions in X ms` line; it reads each "
              "record's key and value bytes only and decodes the last offset commit of "
              "each key). "
              "Kafka 4.3 writes larger offset-commit values than josefk (its partition is "
              "bigger for the same commits).", "", "## Details", ""]
    for i, rnd in enumerate(result["rounds"], 1):
        for kind, got in rnd.items():
            c, s = got.get("cleaning", {}), got.get("startup", {})
            if "error" in c:
                lines.append(f"- round {i} {kind} cleaning **failed**: {c['error'][:300]}")
            else:
                lines.append(
                    f"- round {i} {kind} cleaning: {c.get('records', 0):,} records, "
                    f"{(c.get('size_before') or 0) / MIB:.1f} -> "
                    f"{(c.get('size_after') or 0) / MIB:.1f} MiB; passes "
                    + "; ".join(f"{p['mib']:.1f} MB in {p['seconds']:.2f} s "
                                f"({p['rate']:.1f} MB/s)" for p in c.get("passes", [])))
            if "error" in s:
                lines.append(f"- round {i} {kind} start-up **failed**: {s['error'][:300]}")
            elif s:
                un, co = s.get("uncompacted", {}), s.get("compacted", {})
                lines.append(
                    f"- round {i} {kind} start-up: {s.get('commits', 0):,} commits in "
                    f"{s.get('commit_s')} s; {OFFSETS_TOPIC}-{s.get('offsets_partition')} "
                    f"{(s.get('size_uncompacted') or 0) / MIB:.1f} MiB -> "
                    f"{(s.get('size_compacted') or 0) / MIB:.2f} MiB (settled "
                    f"{s.get('compaction_settled_s')} s after start); offsets fetched "
                    f"{un.get('offsets_s')} s / {co.get('offsets_s')} s after spawn "
                    f"(port {un.get('port_s')} / {co.get('port_s')} s"
                    + f"; its own load line {un.get('load_ms')} / {co.get('load_ms')} ms)")
    if result.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in result["notes"]]
    m = result["machine"]
    lines += ["", "## Machine", "",
              f"- {m.get('cpu')}, {m.get('cores')} cores, {m.get('ram_gib')} GiB RAM; "
              f"{m.get('kernel')}; Python {m.get('python')}; {m.get('java')}",
              f"- Apache Kafka {m.get('kafka')}; confluent-kafka {m.get('confluent_kafka')} "
              f"(librdkafka {m.get('librdkafka')}); josefk {m.get('josefk_commit')} "
              f"(imported from {m.get('josefk_from')})",
              f"- load average at start {m.get('loadavg_at_start')}, at end "
              f"{m.get('loadavg_at_end')}; started {result.get('started')}, finished "
              f"{result.get('finished')}", ""]
    return "\n".join(lines)


def chart(result: dict[str, Any], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    agg = result["summary"]
    kinds = result["config"]["order"]
    colors = {"josefk": "#4c72b0", "kafka": "#dd8452"}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.38
    for i, kind in enumerate(kinds):
        v = agg["clean_mb_s"][kind]["median"] or 0
        ax1.bar(i, v, color=colors.get(kind), label=kind)
        ax1.text(i, v, f"{v:.1f}", ha="center", va="bottom")
    ax1.set_xticks(range(len(kinds)), kinds)
    ax1.set_title("cleaning throughput (MB/s of log, broker's line)")
    for i, kind in enumerate(kinds):
        vals = [agg[k][kind]["median"] or 0 for k in ("uncompacted_s", "compacted_s")]
        xs = [x + (i - 0.5) * width for x in range(2)]
        ax2.bar(xs, vals, width, color=colors.get(kind), label=kind)
        for x, v in zip(xs, vals, strict=True):
            ax2.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(range(2), [f"{result['config']['commits']:,} commits\nuncompacted",
                              "after compaction"])
    ax2.set_title("restart: spawn to offsets fetched (s)")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write(result: dict[str, Any], out: Path) -> list[Path]:
    md = markdown(result)
    paths = [out / "results.json", out / "results.md"]
    paths[0].write_text(json.dumps(result, indent=1, default=str) + "\n")
    paths[1].write_text(md)
    with contextlib.suppress(Exception):
        if (png := chart(result, out / "results.png")) is not None:
            paths.append(png)
    return paths
