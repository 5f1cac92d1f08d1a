"""Results of ``python -m bench.security``: medians, ratios, the TLS cost, results.md.

``python -m bench.security --report bench/results/security/results.json`` rewrites the
markdown from a saved JSON file.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench.report import fmt
from bench.security import LISTENERS, WORKLOADS, key

BROKERS = ("josefk", "kafka")
LABEL = {"josefk": "josefk", "kafka": "Apache Kafka"}
TARGET = 1.0  # josefk's MiB/s over Kafka's, over SASL_SSL (issue 27)


def _outcome(entry: dict[str, Any], name: str) -> dict[str, Any] | None:
    return (entry.get("outcomes") or {}).get(name)


def _value(entry: dict[str, Any], name: str) -> float | None:
    got = _outcome(entry, name)
    return got["value"] if got and got.get("status") == "ok" else None


def _stats(values: list[float], runs: int, errors: list[str]) -> dict[str, Any]:
    return {"values": values, "median": statistics.median(values) if values else None,
            "runs": runs, "failed": runs - len(values), "errors": sorted(set(errors))}


def aggregate(result: dict[str, Any]) -> dict[str, Any]:
    """Per measure and broker: the rounds' values, median, failures; josefk / Kafka. Per
    workload and broker: the TLS cost, SASL_SSL over PLAINTEXT paired within each round
    (throughput and CPU per GiB), and its median."""
    rounds = result["rounds"]
    measures: dict[str, Any] = {}
    names = [key(lst, w) + suffix for suffix in ("", ".cpu") for w in WORKLOADS
             for lst in LISTENERS]
    for name in names:
        entry: dict[str, Any] = {}
        for kind in BROKERS:
            outcomes = [_outcome(r[kind], name) for r in rounds if kind in r]
            outcomes = [o for o in outcomes if o is not None]
            if not outcomes:
                continue
            values = [o["value"] for o in outcomes if o["status"] == "ok"]
            entry[kind] = _stats(values, len(outcomes),
                                 [o.get("error", "") for o in outcomes if o["status"] != "ok"])
            sys_per_gib = [o["detail"]["broker_sys_s"] / o["detail"]["gib"] for o in outcomes
                           if o["status"] == "ok" and o.get("detail", {}).get("gib")
                           and o["detail"].get("broker_sys_s") is not None]
            if sys_per_gib:
                entry[kind]["sys_median"] = statistics.median(sys_per_gib)
        if entry:
            j, k = (entry.get(b, {}).get("median") for b in BROKERS)
            entry["ratio"] = j / k if j is not None and k else None
            measures[name] = entry
    tls: dict[str, Any] = {}
    for w in WORKLOADS:
        for suffix in ("", ".cpu"):
            row: dict[str, Any] = {}
            for kind in BROKERS:
                pairs = []
                for r in rounds:
                    if kind not in r:
                        continue
                    plain = _value(r[kind], key("PLAINTEXT", w) + suffix)
                    secure = _value(r[kind], key("SASL_SSL", w) + suffix)
                    if plain and secure is not None:
                        pairs.append(secure / plain)
                if pairs:
                    row[kind] = {"values": pairs, "median": statistics.median(pairs)}
            if row:
                tls[w + suffix] = row
    return {"measures": measures, "tls_cost": tls}


def _cell(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "not run"
    if entry.get("median") is None:
        return f"**failed** ({entry['failed']}/{entry['runs']})"
    text = f"**{fmt(entry['median'])}**"
    if len(entry["values"]) > 1:
        text += f" ({fmt(min(entry['values']))}–{fmt(max(entry['values']))})"
    if entry.get("failed"):
        text += f", failed {entry['failed']}/{entry['runs']}"
    return text


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _tls_cell(row: dict[str, Any], kind: str) -> str:
    got = row.get(kind)
    if not got:
        return "–"
    text = f"**{got['median']:.2f}**"
    if len(got["values"]) > 1:
        text += f" ({min(got['values']):.2f}–{max(got['values']):.2f})"
    return text


def _negotiated(result: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for kind in BROKERS:
        seen = sorted({f"{t['protocol']} {t['cipher']}" if "protocol" in t
                       else t.get("error", "?")
                       for r in result["rounds"] if (t := r.get(kind, {}).get("tls"))})
        if seen:
            out[kind] = ", ".join(seen)
    return out


def _load(result: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind in BROKERS:
        loads = [o["detail"]["loadavg_1min_before"] for r in result["rounds"]
                 for o in (r.get(kind, {}).get("outcomes") or {}).values()
                 if "loadavg_1min_before" in o.get("detail", {})]
        if loads:
            out[kind] = statistics.median(loads)
    return out


def markdown(result: dict[str, Any]) -> str:
    summary = result["summary"]
    measures, tls = summary["measures"], summary["tls_cost"]
    cfg, m = result["config"], result["machine"]
    sizes = cfg["sizes"]
    rounds = cfg["rounds"]
    lines = [
        f"# josefk vs Apache Kafka {m['kafka']} over SASL_SSL — {result['label']} run",
        "",
        f"{result['started']} to {result['finished']}; {rounds} round"
        f"{'' if rounds == 1 else 's'} alternating {' / '.join(cfg['order'])}; "
        f"{sizes['records']:,} records of 1 KiB per run ({sizes['records'] * 1024 / 2**20:,.0f}"
        " MiB of values), librdkafka (confluent-kafka) clients, SASL/PLAIN on SASL_SSL. "
        "Figures are medians over the rounds (min–max in brackets); the ratio is josefk's "
        "median over Kafka's, measured in the same run.",
        "",
        "## Throughput, MiB/s of record values",
        "",
        f"Target (issue 27): josefk ≥ {TARGET:.1f}× Kafka over SASL_SSL.",
        "",
        "| workload | listener | josefk | Apache Kafka | josefk / Kafka | target |",
        "|---|---|---|---|---|---|",
    ]
    for w, title in WORKLOADS.items():
        for lst in LISTENERS:
            entry = measures.get(key(lst, w), {})
            ratio = entry.get("ratio")
            target = "–"
            if lst == "SASL_SSL":
                target = "–" if ratio is None else ("met" if ratio >= TARGET else "**not met**")
            lines.append(f"| {title} | {lst} | {_cell(entry.get('josefk'))} | "
                         f"{_cell(entry.get('kafka'))} | {_ratio(ratio)} | {target} |")
    lines += [
        "", "## The cost of TLS on each broker", "",
        "SASL_SSL over PLAINTEXT on the same broker, paired within each round (the same "
        "broker process, one listener after the other), median over the rounds (min–max). "
        "Throughput: below 1 is the share TLS keeps; CPU per GiB: above 1 is what it adds.",
        "",
        "| workload | josefk MiB/s | Kafka MiB/s | josefk CPU/GiB | Kafka CPU/GiB |",
        "|---|---|---|---|---|",
    ]
    for w, title in WORKLOADS.items():
        speed, cpu_row = tls.get(w, {}), tls.get(w + ".cpu", {})
        lines.append(f"| {title} | {_tls_cell(speed, 'josefk')} | {_tls_cell(speed, 'kafka')} | "
                     f"{_tls_cell(cpu_row, 'josefk')} | {_tls_cell(cpu_row, 'kafka')} |")
    lines += [
        "", "## Broker CPU per GiB", "",
        "The broker process's user + sys CPU seconds (/proc/<pid>/stat, every thread: the "
        "JVM's JIT and GC threads for Kafka) over each client run, per GiB of record values "
        "produced or consumed (bench/cpu.py); the window includes the client process's "
        "start-up (broker idle). The sys part (kernel: system calls, socket and page-cache "
        "copies) is in the last two columns.",
        "",
        "| workload | listener | josefk | Apache Kafka | josefk / Kafka | josefk sys | "
        "Kafka sys |",
        "|---|---|---|---|---|---|---|",
    ]
    for w, title in WORKLOADS.items():
        for lst in LISTENERS:
            entry = measures.get(key(lst, w) + ".cpu", {})
            lines.append(
                f"| {title} | {lst} | {_cell(entry.get('josefk'))} | "
                f"{_cell(entry.get('kafka'))} | {_ratio(entry.get('ratio'))} | "
                f"{fmt(entry.get('josefk', {}).get('sys_median'))} | "
                f"{fmt(entry.get('kafka', {}).get('sys_median'))} |")
    negotiated = _negotiated(result)
    ktls = ("available" if cfg.get("ktls_available")
            else f"not available (`tcp_available_ulp`: `{cfg.get('tcp_available_ulp') or '-'}`"
                 ", no `tls`)")
    lines += [
        "", "## TLS in each broker", "",
        f"- Kernel TLS (kTLS) on this machine: {ktls}. Neither broker uses it here.",
        "- josefk: TLS in user space, the standard library's `ssl` engine (OpenSSL) over "
        "memory buffers on the connection's non-blocking socket "
        "(server/network/transport.py). On PLAINTEXT a fetch's record bytes go from the "
        "segment file to the socket with `sendfile`; on SASL_SSL they are read from the file "
        "in 256 KiB pieces and encrypted, so the consume rows compare zero copy against "
        "read + encrypt + write.",
        "- Apache Kafka: the JVM's `SSLEngine`. On PLAINTEXT `FileRecords` go out with "
        "`transferTo` (`sendfile`); on SASL_SSL they are read into a buffer and wrapped, the "
        "same trade as josefk's.",
        "- Negotiated (a TLS handshake from Python's `ssl`, OpenSSL's defaults as "
        "librdkafka's): " + ("; ".join(f"{LABEL[k]}: {v}" for k, v in negotiated.items())
                             or "not recorded") + ".",
        "- The clients encrypt and decrypt too, on the same 2-core machine: the TLS cost "
        "above is the whole pipeline's, not only the broker's (the CPU per GiB is the "
        "broker's alone).",
    ]
    disk = m["disk"]
    lines += [
        "", "## Machine", "",
        f"- CPU: {m['cpu']}, {m['cores']} cores; RAM {m['ram_gib']} GiB",
        f"- disk (both log dirs): {disk.get('device')} {disk.get('fstype')} {disk.get('size')}",
        f"- kernel {m['kernel']}; Python {m['python']}; Java: {m['java'][0]}",
        f"- Apache Kafka {m['kafka']} (KRaft, one node, JVM defaults, -Xmx1g); "
        f"confluent-kafka {m['confluent_kafka']} / librdkafka {m['librdkafka']}; "
        f"josefk {m['josefk_commit']}",
        f"- load average at start {m['loadavg_at_start']}, at end "
        f"{m.get('loadavg_at_end', '?')}; 1-minute load average before each measured run, "
        "median: " + (", ".join(f"{LABEL[k]} {v:.2f}" for k, v in _load(result).items())
                       or "not recorded")
        + " (other work on the machine makes single runs noisy)",
        "", "## Settings", "",
        "Both brokers (Kafka also gets `CONTROLLER://127.0.0.1:<port>` in `listeners` and "
        "`CONTROLLER:PLAINTEXT` in the map); the key store and CA are made by `trustme` at "
        "run time in the data dir and removed with it:",
        "", "```",
        *(f"{k}={v}" for k, v in cfg["overrides_both"].items()),
        "```", "",
        f"Sizes: `{json.dumps(sizes)}`. Each round warms each broker up first (untimed, on "
        "both listeners: acks=1 and idempotent produce, then consume); the listener order "
        "alternates between rounds.",
    ]
    warnings = result.get("log_warnings") or {}
    if warnings:
        lines += ["", "## Warnings in the broker logs", ""]
        for name, got in warnings.items():
            lines.append(f"- `logs/{name}.log`: {got['count']} WARN/ERROR line"
                         f"{'' if got['count'] == 1 else 's'}")
            lines += [f"  - `{ln[:300]}`" for ln in got["distinct"][:6]]
    failures = [(name, kind, err) for name, entry in measures.items() for kind in BROKERS
                for err in entry.get(kind, {}).get("errors", []) if err]
    if failures:
        lines += ["", "## Failures", ""]
        lines += [f"- `{name}` on {LABEL[kind]}: {err[:600]}" for name, kind, err in failures]
    if result.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in result["notes"]]
    lines.append("")
    return "\n".join(lines)


def write(result: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    result["summary"] = aggregate(result)
    paths = [out / "results.json", out / "results.md"]
    paths[0].write_text(json.dumps(result, indent=1, default=str) + "\n")
    paths[1].write_text(markdown(result))
    return paths
