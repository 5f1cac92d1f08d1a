"""The cost of many idle connections, josefk side by side with Apache Kafka 4.x.

    .venv/bin/python -m bench.connections            # 10,000 idle + 100 producers, 2 rounds
    .venv/bin/python -m bench.connections --quick    # smoke test: 500 idle, 10 producers

For each broker of each round (josefk, Kafka, josefk, Kafka, ...) on 127.0.0.1, a fresh
broker of bench/brokers.py with ``connections.max.idle.ms`` one hour (no idle connection
is closed during the run) and ``socket.listen.backlog.size`` 1024, and a 4-partition
topic:

1. *without* (a): ``--producers`` confluent-kafka producers (acks=1, ``--size``-byte
   messages, ``--rate`` per second each, staggered) in ``--processes`` client
   processes; after a warm-up, librdkafka's produce-to-ack latency of every message
   for ``--seconds``.
2. Broker RSS (``VmRSS`` of /proc/<pid>/status), then one client process (its
   RLIMIT_NOFILE raised) opens ``--connections`` connections, each with one ApiVersions
   round trip, 256 at a time: the accept rate is connections / seconds to open them
   all. After a 3 s settle, the RSS again.
3. *with*: the producers again, the idle connections still open.
4. *without* (b): the idle connections closed, after 3 s the producers once more. The
   baseline is the latencies of (a) and (b) pooled, so drift (warm-up, other load on
   the machine) does not pass for the idle connections' cost.

Reported per broker: RSS before, after and the difference (MiB; per idle connection in
KiB), accept rate, the producers' p50/p99 without and with the idle connections and
their ratios (with / without). Results in results.json and results.md under ``--out``
(bench/results/connections, or .../quick for ``--quick``); broker output in logs/.
Acceptance targets for josefk: the idle connections cost < 200 MiB RSS and move the
producers' p99 by < 20 %.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import report
from bench.brokers import (
    QUIET_CLIENT,
    REPO,
    SINGLE_NODE_OVERRIDES,
    BrokerProcess,
    broker_list,
    prepare_run,
)

RESULTS = REPO / "bench" / "results" / "connections"
OVERRIDES = {"connections.max.idle.ms": "3600000", "socket.listen.backlog.size": "1024"}
TOPIC = "conn-bench"
PARTITIONS = 4
SETTLE_S = 3.0
RSS_TARGET_MIB = 200
P99_TARGET = 1.2


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def client_command(*args: object) -> list[str]:
    return [sys.executable, "-m", "bench.connection_clients", *map(str, args)]


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET_CLIENT})
    futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], operation_timeout=30)
    futures[TOPIC].result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topic = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
        if topic and topic.error is None and all(p.leader >= 0
                                                 for p in topic.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {TOPIC} has no leaders after 30 s")


def run_producers(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    """The producers in ``--processes`` processes; their latencies merged."""
    load = os.getloadavg()[0]
    shares = [args.producers // args.processes + (i < args.producers % args.processes)
              for i in range(args.processes)]
    procs = [subprocess.Popen(client_command("produce", bootstrap, TOPIC, n, args.rate,
                                             args.size, args.warmup, args.seconds),
                              stdout=subprocess.PIPE, cwd=REPO)
             for n in shares if n]
    latencies: list[float] = []
    errors = 0
    limit = args.warmup + args.seconds + 60
    for proc in procs:
        out, _ = proc.communicate(timeout=limit)
        if proc.returncode != 0:
            raise RuntimeError(f"producer process failed with status {proc.returncode}")
        result = json.loads(out.decode().strip().splitlines()[-1])
        latencies += result["latencies_ms"]
        errors += result["errors"]
    return {"latencies_ms": latencies, "errors": errors, "loadavg": load}


def stats(*runs: dict[str, Any]) -> dict[str, Any]:
    """Percentiles of the runs' latencies pooled."""
    latencies = [x for run in runs for x in run["latencies_ms"]]
    return {"messages": len(latencies), "errors": sum(run["errors"] for run in runs),
            "p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies, default=None),
            "loadavg": [round(run["loadavg"], 2) for run in runs]}


def measure(args: argparse.Namespace, kind: str, root: Path, logs: Path, rnd: int
            ) -> dict[str, Any]:
    broker = BrokerProcess(kind, root / f"{kind}-{rnd}", log_path=logs / f"{kind}-{rnd}.log",
                           overrides=OVERRIDES)
    broker.start(timeout=args.start_timeout)
    holder: subprocess.Popen[bytes] | None = None
    try:
        create_topic(broker.bootstrap)
        before = run_producers(args, broker.bootstrap)
        log(f"{kind}: without idle connections {summary_line(stats(before))}")
        time.sleep(SETTLE_S)
        rss_before = broker.rss_mib()
        holder = subprocess.Popen(client_command("idle", broker.bootstrap, args.connections),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO)
        assert holder.stdout is not None
        line = holder.stdout.readline()
        if not line:
            raise RuntimeError(f"the idle client exited ({holder.wait(10)}) before reporting")
        opened = json.loads(line)
        rate = opened["opened"] / opened["seconds"] if opened["seconds"] else None
        time.sleep(SETTLE_S)
        rss_after = broker.rss_mib()
        log(f"{kind}: {opened['opened']} idle connections ({opened['failed']} failed) in "
            f"{opened['seconds']:.1f} s ({rate or 0:.0f}/s); RSS {rss_before:.0f} -> "
            f"{rss_after:.0f} MiB")
        with_idle = stats(run_producers(args, broker.bootstrap))
        log(f"{kind}: with idle connections {summary_line(with_idle)}")
        close_holder(holder)
        holder = None
        time.sleep(SETTLE_S)
        after = run_producers(args, broker.bootstrap)
        log(f"{kind}: without again {summary_line(stats(after))}")
        without = stats(before, after)
        alive_after = broker.alive()
    finally:
        if holder is not None:
            close_holder(holder)
        broker.stop()
        if not args.keep_data:
            shutil.rmtree(broker.data_dir, ignore_errors=True)
    delta = rss_after - rss_before
    return {
        "rss_before_mib": rss_before, "rss_after_mib": rss_after, "rss_delta_mib": delta,
        "rss_per_connection_kib": delta * 1024 / opened["opened"] if opened["opened"] else None,
        "opened": opened["opened"], "failed": opened["failed"],
        "open_seconds": opened["seconds"], "accept_per_s": rate,
        "without": without, "with": with_idle, "broker_alive": alive_after,
        "p50_ratio": ratio(with_idle["p50_ms"], without["p50_ms"]),
        "p99_ratio": ratio(with_idle["p99_ms"], without["p99_ms"]),
    }


def close_holder(holder: subprocess.Popen[bytes]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    try:
        holder.wait(timeout=60)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait(timeout=10)


def summary_line(s: dict[str, Any]) -> str:
    return (f"p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms ({s['messages']} messages, "
            f"load {s['loadavg']})")


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


SUMMARY_KEYS = ["rss_before_mib", "rss_after_mib", "rss_delta_mib", "rss_per_connection_kib",
                "accept_per_s", "p50_without", "p50_with", "p50_ratio", "p99_without",
                "p99_with", "p99_ratio"]
LABELS = {"rss_before_mib": "RSS before (MiB)", "rss_after_mib": "RSS with idle (MiB)",
          "rss_delta_mib": "RSS cost of the idle connections (MiB)",
          "rss_per_connection_kib": "per idle connection (KiB)",
          "accept_per_s": "accept rate (connections/s)",
          "p50_without": "producers' p50 without (ms)", "p50_with": "p50 with (ms)",
          "p50_ratio": "p50 with / without", "p99_without": "producers' p99 without (ms)",
          "p99_with": "p99 with (ms)", "p99_ratio": "p99 with / without"}


def flat(entry: dict[str, Any]) -> dict[str, Any]:
    out = {k: entry.get(k) for k in SUMMARY_KEYS}
    for p in ("p50", "p99"):
        out[f"{p}_without"] = entry["without"][f"{p}_ms"]
        out[f"{p}_with"] = entry["with"][f"{p}_ms"]
    return out


def summarize(result: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Medians over the rounds, per broker."""
    summary: dict[str, dict[str, float | None]] = {}
    for kind in result["config"]["brokers"]:
        entries = [flat(r[kind]) for r in result["rounds"] if kind in r]
        summary[kind] = {k: statistics.median(v) if (v := [e[k] for e in entries
                                                          if e[k] is not None]) else None
                         for k in SUMMARY_KEYS}
    return summary


def markdown(result: dict[str, Any]) -> str:
    config, summary = result["config"], result["summary"]
    brokers = config["brokers"]
    lines = [f"# Idle connections: josefk vs Apache Kafka ({result['label']})", "",
             f"{config['connections']:,} idle connections (one ApiVersions each), "
             f"{config['producers']} producers (acks=1, {config['size']} B, "
             f"{config['rate']:g}/s each, {config['processes']} processes, "
             f"{config['seconds']:g} s measured after {config['warmup']:g} s); "
             f"{len(result['rounds'])} round(s), medians. Started {result['started']}; "
             f"josefk {result['machine'].get('josefk_commit', '?')}, Kafka "
             f"{result['machine'].get('kafka', '?')}, {result['machine'].get('cores')} cores.",
             "", "| | " + " | ".join(brokers) + " |", "|---|" + "---:|" * len(brokers)]
    for key in SUMMARY_KEYS:
        lines.append(f"| {LABELS[key]} | "
                     + " | ".join(report.fmt(summary[b][key]) for b in brokers) + " |")
    if "josefk" in summary:
        j = summary["josefk"]
        rss_ok = j["rss_delta_mib"] is not None and j["rss_delta_mib"] < RSS_TARGET_MIB
        p99_ok = j["p99_ratio"] is not None and j["p99_ratio"] < P99_TARGET
        lines += ["", f"Targets for josefk: idle connections < {RSS_TARGET_MIB} MiB: "
                  f"{'met' if rss_ok else 'MISSED'}; producers' p99 moved < "
                  f"{(P99_TARGET - 1) * 100:.0f} %: {'met' if p99_ok else 'MISSED'}."]
    lines += ["", "## Rounds", "", "| round | broker | opened (failed) | open s | "
              "RSS before → after MiB | p50 ms without → with | p99 ms without → with | "
              "messages without / with | load (1 min) a, with, b |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for i, rnd in enumerate(result["rounds"], 1):
        for kind in brokers:
            if kind not in rnd:
                continue
            e = rnd[kind]
            lines.append(
                f"| {i} | {kind} | {e['opened']} ({e['failed']}) | {e['open_seconds']:.1f} | "
                f"{e['rss_before_mib']:.0f} → {e['rss_after_mib']:.0f} | "
                f"{report.fmt(e['without']['p50_ms'])} → {report.fmt(e['with']['p50_ms'])} | "
                f"{report.fmt(e['without']['p99_ms'])} → {report.fmt(e['with']['p99_ms'])} | "
                f"{e['without']['messages']} / {e['with']['messages']} | "
                f"{e['without']['loadavg'][0]}, {e['with']['loadavg'][0]}, "
                f"{e['without']['loadavg'][-1]} |")
    if result.get("notes"):
        lines += ["", "## Notes", "", *[f"- {n}" for n in result["notes"]]]
    return "\n".join(lines) + "\n"


def write(result: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "results.md"]
    paths[0].write_text(json.dumps(result, indent=1) + "\n")
    paths[1].write_text(markdown(result))
    return paths


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.connections", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 500 idle connections, 10 producers, 1 round")
    parser.add_argument("--rounds", type=int, default=None, help="default 2 (1 with --quick)")
    parser.add_argument("--brokers", default="josefk,kafka", help="order within a round")
    parser.add_argument("--connections", type=int, default=None, help="idle (10,000)")
    parser.add_argument("--producers", type=int, default=None, help="active producers (100)")
    parser.add_argument("--processes", type=int, default=4, help="producer processes")
    parser.add_argument("--rate", type=float, default=10.0, help="messages/s per producer")
    parser.add_argument("--size", type=int, default=100, help="message bytes")
    parser.add_argument("--warmup", type=float, default=None, help="seconds (5)")
    parser.add_argument("--seconds", type=float, default=None, help="measured seconds (20)")
    parser.add_argument("--start-timeout", type=float, default=120.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--report", type=Path, default=None,
                        help="only rewrite results.md from this results.json")
    args = parser.parse_args(argv)
    quick = args.quick
    args.rounds = args.rounds or (1 if quick else 2)
    args.connections = args.connections or (500 if quick else 10_000)
    args.producers = args.producers or (10 if quick else 100)
    args.processes = min(args.processes, args.producers) if not quick else 2
    args.warmup = args.warmup if args.warmup is not None else (2.0 if quick else 5.0)
    args.seconds = args.seconds or (5.0 if quick else 20.0)
    args.out = args.out or (RESULTS / "quick" if quick else RESULTS)
    args.broker_list = broker_list(parser, args.brokers)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        result = json.loads(args.report.read_text())
        result["summary"] = summarize(result)
        for path in write(result, args.report.parent):
            print(f"wrote {path}")
        return 0
    root = Path(tempfile.mkdtemp(prefix="bench-connections-"))
    logs = args.out / "logs"
    if why := prepare_run(args.broker_list, args.out, logs, root):
        print(f"cannot start Apache Kafka: {why}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {
        "label": "quick" if args.quick else "default", "started": report.now_iso(),
        "machine": report.machine_info(root),
        "config": {"brokers": args.broker_list, "connections": args.connections,
                   "producers": args.producers, "processes": args.processes,
                   "rate": args.rate, "size": args.size, "warmup": args.warmup,
                   "seconds": args.seconds, "overrides_both": {**SINGLE_NODE_OVERRIDES,
                                                               **OVERRIDES}},
        "rounds": [], "notes": []}
    log(f"connections bench: {args.rounds} round(s) of {' / '.join(args.broker_list)}; "
        f"{args.connections:,} idle connections, {args.producers} producers")
    try:
        for rnd in range(1, args.rounds + 1):
            entry: dict[str, Any] = {}
            for kind in args.broker_list:
                log(f"round {rnd}: {kind}")
                entry[kind] = measure(args, kind, root, logs, rnd)
            result["rounds"].append(entry)
    finally:
        if not args.keep_data:
            shutil.rmtree(root, ignore_errors=True)
        if result["rounds"]:
            result["summary"] = summarize(result)
            for path in write(result, args.out):
                log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
