"""Results of a comparison run: medians, ratios, machine description, and the
JSON / markdown / PNG files under bench/results/.

``python -m bench.report bench/results/results.json`` redraws the table and the
chart from a saved JSON file.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.brokers import REPO, TOOLS
from bench.workloads import CPU_UNIT, MEASURES

BROKERS = ("josefk", "kafka")
LABEL = {"josefk": "josefk", "kafka": "Apache Kafka"}


# --- the machine ------------------------------------------------------------------------------


def _run(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (done.stdout + done.stderr).strip()


def _cpuinfo() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _meminfo_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def disk_text(disk: dict[str, Any]) -> str:
    """Where the log dirs were, for a report's machine lines (from :func:`machine_info`)."""
    return (f"`{disk.get('path')}`): {disk.get('device')} {disk.get('fstype')} "
            f"{disk.get('size')}" + (f", {disk['kind']}" if disk.get("kind") else "")
            + (f", reports rotational={disk['rotational']}" if "rotational" in disk else ""))


def _disk(path: Path) -> dict[str, Any]:
    out = _run(["df", "--output=source,fstype,size,avail", "-h", str(path)]).splitlines()
    info: dict[str, Any] = {"path": str(path)}
    if len(out) >= 2:
        source, fstype, size, avail = out[-1].split()[:4]
        info.update(device=source, fstype=fstype, size=size, available=size and avail)
        name = Path(source).name
        block = Path("/sys/block") / re.sub(r"p?\d+$", "", name)
        if not block.exists():
            block = Path("/sys/block") / name
        rot = block / "queue" / "rotational"
        if rot.exists():
            info["rotational"] = rot.read_text().strip() == "1"
        for leaf in ("device/model", "device/vendor"):
            f = block / leaf
            if f.exists():
                info[leaf.split("/")[1]] = f.read_text().strip()
        if name.startswith("vd"):
            info["kind"] = "virtio block device (virtual disk)"
    return info


def _version_string(version: Any) -> str:
    """confluent_kafka.version() is a string in some releases, (string, int) in others."""
    return version if isinstance(version, str) else str(version[0])


def machine_info(data_root: Path) -> dict[str, Any]:
    import confluent_kafka

    pom = (TOOLS / "pom.xml").read_text()
    kafka_version = re.search(r"<kafka.version>(.*?)</kafka.version>", pom)
    commit = _run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return {
        "cpu": _cpuinfo(),
        "cores": os.cpu_count(),
        "ram_gib": _meminfo_gib(),
        "disk": _disk(data_root),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0] + f" ({platform.python_implementation()})",
        "java": _run(["java", "-version"]).splitlines()[0:1] or ["?"],
        "kafka": kafka_version.group(1) if kafka_version else "?",
        "confluent_kafka": _version_string(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
        "josefk_commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


# --- aggregation ------------------------------------------------------------------------------


def aggregate(rounds: list[dict[str, dict[str, dict[str, Any]]]]) -> dict[str, Any]:
    """Per measure and broker: values of the rounds, their median, failures; the ratio."""
    summary: dict[str, Any] = {}
    for key in MEASURES:
        entry: dict[str, Any] = {}
        for kind in BROKERS:
            outcomes = [r[kind][key] for r in rounds if key in r.get(kind, {})]
            if not outcomes:
                continue
            values = [o["value"] for o in outcomes if o["status"] == "ok"]
            errors = sorted({o.get("error", "") for o in outcomes if o["status"] != "ok"})
            entry[kind] = {"values": values, "median": statistics.median(values) if values
                           else None, "runs": len(outcomes),
                           "failed": len(outcomes) - len(values), "errors": errors}
            kernel = [o["detail"]["broker_sys_s"] / o["detail"]["gib"] for o in outcomes
                      if o["status"] == "ok" and o.get("detail", {}).get("broker_sys_s")
                      is not None and o["detail"].get("gib")]
            if kernel:
                entry[kind]["kernel_median"] = statistics.median(kernel)
            machine = [o["detail"]["machine_cpu_s"] / o["detail"]["gib"] for o in outcomes
                       if o["status"] == "ok" and o.get("detail", {}).get("machine_cpu_s")
                       is not None and o["detail"].get("gib")]
            if machine:
                entry[kind]["machine_median"] = statistics.median(machine)
        if not entry:
            continue
        j, k = entry.get("josefk", {}).get("median"), entry.get("kafka", {}).get("median")
        entry["ratio"] = j / k if j is not None and k else None
        summary[key] = entry
    return summary


# --- markdown ---------------------------------------------------------------------------------


def _rounds(n: int) -> str:
    return f"{n} round" + ("" if n == 1 else "s")


def fmt(value: float | None) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "not run"
    if entry["median"] is None:
        return f"**failed** ({entry['failed']}/{entry['runs']})"
    text = f"**{fmt(entry['median'])}**"
    if len(entry["values"]) > 1:
        text += f" ({fmt(min(entry['values']))}–{fmt(max(entry['values']))})"
    if entry["failed"]:
        text += f", failed {entry['failed']}/{entry['runs']}"
    return text


def markdown(result: dict[str, Any]) -> str:
    summary = result["summary"]
    cfg = result["config"]
    m = result["machine"]
    lines = [
        f"# josefk vs Apache Kafka {m['kafka']} — {result['label']} run",
        "",
        f"{result['started']} to {result['finished']}; {_rounds(cfg['rounds'])} alternating "
        f"{' / '.join(cfg['order'])}; scale {cfg['scale']}. "
        "Figures are medians over the rounds (min–max in brackets); the ratio is "
        "josefk's median over Kafka's, measured in the same run.",
        "",
        "| # | workload | client | unit | josefk | Apache Kafka | josefk / Kafka | better |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += _measure_rows(summary, cpu=False)
    cpu_rows = _measure_rows(summary, cpu=True)
    if cpu_rows:
        warm = ("after an untimed warm-up pass on each broker in every round (bench/warmup.py)"
                if cfg.get("warmup") else "without a warm-up pass (--no-warmup)")
        lines += [
            "", "## Broker CPU per GiB", "",
            "The broker process's user + sys CPU seconds (/proc/<pid>/stat, all threads: the "
            "JVM's JIT and GC threads for Kafka) over each client run, per GiB of record "
            "values produced and/or consumed (the JSON's `moved`); workload 5 counts both "
            f"directions. Measured {warm}.", "",
            "| # | workload | client | unit | josefk | Apache Kafka | josefk / Kafka | better |",
            "|---|---|---|---|---|---|---|---|",
        ] + cpu_rows
        kernel_rows = _kernel_rows(summary)
        if kernel_rows:
            lines += [
                "", "The same split into the kernel's part (sys time: system calls, socket and "
                "page-cache copies, median) and the broker's own code (user: the median total "
                "less the median sys), CPU s/GiB:", "",
                "| # | client | josefk sys | Kafka sys | josefk user | Kafka user |",
                "|---|---|---|---|---|---|",
            ] + kernel_rows
        machine_rows = _machine_rows(summary)
        if machine_rows:
            lines += [
                "", "The whole machine's CPU over the same windows (every CPU's busy time from "
                "/proc/stat: broker, clients and kernel threads), per GiB. On loopback the "
                "kernel charges one side's TCP work to whichever process wakes the other, so "
                "this is the figure such shifts do not move:", "",
                "| # | client | josefk | Apache Kafka | josefk / Kafka |",
                "|---|---|---|---|---|",
            ] + machine_rows
    lines += ["", "## Machine", ""]
    disk = m["disk"]
    lines += [
        f"- CPU: {m['cpu']}, {m['cores']} cores; RAM {m['ram_gib']} GiB",
        f"- disk (both log dirs, {disk_text(disk)}",
        f"- kernel {m['kernel']}; Python {m['python']}; Java: {m['java'][0]}",
        f"- Apache Kafka {m['kafka']} (KRaft, one node, JVM defaults, -Xmx1g); "
        f"confluent-kafka {m['confluent_kafka']} / librdkafka {m['librdkafka']}; "
        f"josefk {m['josefk_commit']}",
        f"- load average at start {m['loadavg_at_start']}, at end "
        f"{m.get('loadavg_at_end', '?')} (other work on the machine makes figures noisy)",
        "",
        "## Sizes",
        "",
        "```",
        json.dumps(cfg["sizes"], indent=1),
        "```",
    ]
    failures = [(key, kind, err) for key, entry in summary.items() for kind in BROKERS
                for err in entry.get(kind, {}).get("errors", []) if err]
    if failures:
        lines += ["", "## Failures", ""]
        for key, kind, err in failures:
            lines.append(f"- `{key}` on {LABEL[kind]}: {err[:600]}")
    notes = result.get("notes") or []
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    profiles = result.get("profiles") or {}
    if profiles:
        lines += ["", "## Where josefk spends its time", ""]
        for name, prof in profiles.items():
            lines += _profile_markdown(name, prof)
    lines.append("")
    return "\n".join(lines)


def _measure_rows(summary: dict[str, Any], cpu: bool) -> list[str]:
    """Table rows of the measures in ``summary``: the CPU ones, or all the others."""
    rows = []
    for key, meas in MEASURES.items():
        if key not in summary or (meas.unit == CPU_UNIT) != cpu:
            continue
        entry = summary[key]
        ratio = entry.get("ratio")
        rows.append(
            f"| {meas.workload} | {meas.title} | {meas.client} | {meas.unit} | "
            f"{cell(entry.get('josefk'))} | {cell(entry.get('kafka'))} | "
            f"{'–' if ratio is None else f'{ratio:.2f}'} | "
            f"{meas.better} |")
    return rows


def _kernel_rows(summary: dict[str, Any]) -> list[str]:
    """Per CPU measure: each broker's sys and user CPU s/GiB (medians)."""
    rows = []
    for key, meas in MEASURES.items():
        entry = summary.get(key, {})
        if meas.unit != CPU_UNIT or not any("kernel_median" in entry.get(k, {})
                                            for k in BROKERS):
            continue
        cells = []
        for kind in BROKERS:
            side = entry.get(kind, {})
            kernel, total = side.get("kernel_median"), side.get("median")
            cells.append((fmt(kernel), fmt(None if kernel is None or total is None
                                           else total - kernel)))
        (js, ju), (ks, ku) = cells
        rows.append(f"| {meas.workload} | {meas.client} | {js} | {ks} | {ju} | {ku} |")
    return rows


def _machine_rows(summary: dict[str, Any]) -> list[str]:
    """Per CPU measure: the whole machine's CPU s/GiB under each broker (medians)."""
    rows = []
    for key, meas in MEASURES.items():
        entry = summary.get(key, {})
        j = entry.get("josefk", {}).get("machine_median")
        k = entry.get("kafka", {}).get("machine_median")
        if meas.unit != CPU_UNIT or (j is None and k is None):
            continue
        ratio = fmt(j / k) if j is not None and k else "–"
        rows.append(f"| {meas.workload} | {meas.client} | {fmt(j)} | {fmt(k)} | {ratio} |")
    return rows


def _profile_markdown(name: str, prof: dict[str, Any]) -> list[str]:
    lines = [f"### {name}: {prof.get('workload', '')}", ""]
    if prof.get("error"):
        return lines + [f"Profiling failed: {prof['error']}", ""]
    summ = prof.get("summary", {})
    if prof.get("profiler") == "cprofile":
        lines.append(f"cProfile (main thread, wall clock, so waiting in epoll and the "
                     f"broker's start-up are included): {summ.get('total_s')} s; "
                     f"stats in `{prof.get('stats')}`.")
        lines += ["", "| self % | self s | cum s | calls | function |", "|---|---|---|---|---|"]
        for row in summ.get("self", [])[:12]:
            lines.append(f"| {row['percent']} | {row['tottime_s']} | {row['cumtime_s']} | "
                         f"{row['calls']} | `{row['name']}` |")
        return lines + [""]
    errors = prof.get("py_spy_samples_errors")
    lines.append(f"py-spy, {summ.get('samples')} samples of the thread holding the GIL at "
                 f"{prof.get('rate_hz')} Hz"
                 + (f" (py-spy also reported {errors[1]} read errors)" if errors else "")
                 + f"; flame graph `{prof.get('svg')}`, collapsed stacks `{prof.get('raw')}`. "
                 "The broker's Python work only: system calls release the GIL, so the "
                 "kernel's share (the sys column above) is not here.")
    lines += ["", "By package (self time): " + ", ".join(
        f"{p['name']} {p['percent']}%" for p in summ.get("packages", [])[:8]), ""]
    lines += ["| self % | function (self) | | incl. % | function (inclusive) |",
              "|---|---|---|---|---|"]
    selfs, incls = summ.get("self", []), summ.get("inclusive", [])
    for i in range(max(len(selfs), len(incls))):
        s = selfs[i] if i < len(selfs) else None
        c = incls[i] if i < len(incls) else None
        lines.append(f"| {s['percent'] if s else ''} | {('`' + s['name'] + '`') if s else ''} "
                     f"| | {c['percent'] if c else ''} | "
                     f"{('`' + c['name'] + '`') if c else ''} |")
    return lines + [""]


# --- chart ------------------------------------------------------------------------------------


def chart(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    summary = result["summary"]
    keys = [k for k in MEASURES if summary.get(k, {}).get("ratio") is not None]
    fig, axes = plt.subplots(1, 3, figsize=(18, 7.5),
                             gridspec_kw={"width_ratios": [1.6, 1.2, 0.9]})
    ax = axes[0]
    labels, ratios, colors = [], [], []
    for key in keys:
        meas = MEASURES[key]
        ratio = summary[key]["ratio"]
        labels.append(f"{meas.short}\n[{meas.unit}]")
        ratios.append(ratio)
        if meas.better == "info":
            colors.append("#999999")
        else:
            better = ratio >= 1 if meas.better == "higher" else ratio <= 1
            colors.append("#3a9a5b" if better else "#c8553d")
    y = range(len(keys))
    ax.barh(list(y), ratios, color=colors)
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1)
    for i, r in enumerate(ratios):
        ax.text(r, i, f" {r:.2f}", va="center", fontsize=8)
    ax.set_xlabel("josefk / Kafka, medians (green: josefk better, red: worse, grey: neither)")
    ax.set_title("Ratio josefk / Apache Kafka")

    ax = axes[1]
    tput = [k for k in MEASURES if MEASURES[k].unit == "MiB/s" and k in summary]
    _grouped(ax, summary, tput, [MEASURES[k].short for k in tput])
    ax.set_ylabel("MiB/s (median)")
    ax.set_title("Throughput, 1 KiB records")

    ax = axes[2]
    lat = [k for k in ("w5.p50", "w5.p99", "w5.p999") if k in summary]
    _grouped(ax, summary, lat, [MEASURES[k].unit.split()[1] for k in lat])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylabel("ms (median of rounds)")
    ax.set_title("End-to-end latency at 20 MB/s")

    m = result["machine"]
    fig.suptitle(f"josefk vs Apache Kafka {m['kafka']} — {result['label']} run, "
                 f"{_rounds(result['config']['rounds'])} — {m['cpu']}, {m['cores']} cores, "
                 f"{m['ram_gib']} GiB, {m['kernel']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _grouped(ax: Any, summary: dict[str, Any], keys: list[str], labels: list[str]) -> None:
    width = 0.38
    for offset, kind, color in ((-width / 2, "josefk", "#4c72b0"),
                                (width / 2, "kafka", "#dd8452")):
        vals = [summary[k].get(kind, {}).get("median") or 0 for k in keys]
        bars = ax.bar([i + offset for i in range(len(keys))], vals, width, label=LABEL[kind],
                      color=color)
        for bar, v in zip(bars, vals, strict=True):
            ax.text(bar.get_x() + bar.get_width() / 2, v, fmt(v) if v else "failed",
                    ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(keys)), labels, rotation=30, ha="right", fontsize=8)
    ax.legend(fontsize=8)


# --- files ------------------------------------------------------------------------------------


def write_all(result: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    result["summary"] = aggregate(result["rounds"])
    paths = [out_dir / "results.json", out_dir / "results.md", out_dir / "results.png"]
    paths[0].write_text(json.dumps(result, indent=1, default=str) + "\n")
    paths[1].write_text(markdown(result))
    try:
        chart(result, paths[2])
    except Exception as exc:  # no matplotlib: JSON and markdown still stand
        print(f"chart not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)
        paths.pop()
    return paths


def write_results(result: dict[str, Any], out: Path, markdown: Callable[[dict[str, Any]], str],
                  plots: Callable[[dict[str, Any], Path], list[Path]] | None = None
                  ) -> list[Path]:
    """results.json and results.md in ``out``, and the PNGs of ``plots`` when given."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "results.md"]
    paths[0].write_text(json.dumps(result, indent=1, default=str) + "\n")
    paths[1].write_text(markdown(result))
    if plots is not None:
        try:
            paths += plots(result, out)
        except Exception as exc:  # no matplotlib: JSON and markdown still stand
            print(f"plots not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)
    return paths


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "bench" / "results" / "results.json")
    result = json.loads(path.read_text())
    for p in write_all(result, path.parent):
        print(p)


if __name__ == "__main__":
    main()
