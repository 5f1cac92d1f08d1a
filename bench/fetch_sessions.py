"""Consumer fetch sessions (KIP-227) on and off, josefk side by side with Apache Kafka 4.x.

    .venv/bin/python -m bench.fetch_sessions            # 1,000 partitions, 1 round
    .venv/bin/python -m bench.fetch_sessions --quick    # smoke test: 200 partitions, short

For each round, each broker (josefk, Kafka) runs twice, fresh each time: sessions *on*
(the default ``max.incremental.fetch.session.cache.slots``, 1000) and *off* (0: every
Fetch names and answers every partition). Each run creates a topic of ``--partitions``
partitions and measures, with the Java consumer (Kafka's ConsumerPerformance, which
opens a session when the broker gives one):

1. *sparse*: a producer writes ``--rate`` 100-byte records a second round-robin over the
   partitions for ``--seconds`` while the consumer reads them; few partitions have
   something new at each fetch, the case sessions are for. Broker CPU over the consumer's
   run, the consumer's fetches (``fetch-total``) and the bytes it sent
   (``outgoing-byte-total``): broker CPU milliseconds per fetch, bytes per request.
2. *drain*: ``--records`` records preloaded over the partitions, read from the start:
   MB/s while fetching (ConsumerPerformance's fetch.MB.sec, the group's join left out)
   and broker CPU seconds per GiB.

Reported per broker: each figure on and off and the ratio on / off; per mode, josefk /
Kafka. Results in results.json and results.md under ``--out``
(bench/results/fetch_sessions, .../quick for ``--quick``); broker output in logs/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
    RUN_CLASS,
    SINGLE_NODE_OVERRIDES,
    BrokerProcess,
    broker_list,
    prepare_run,
)
from bench.cpu import Meter, per_gib

RESULTS = REPO / "bench" / "results" / "fetch_sessions"
SLOTS = "max.incremental.fetch.session.cache.slots"
MODES = {"on": {}, "off": {SLOTS: "0"}}
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
VALUE = b"v" * 100
_METRIC = re.compile(r"^([\w-]+):([\w-]+):\{(.*?)\}\s*:\s*(-?\d+(?:\.\d+)?(?:[Ee][-+]?\d+)?)$")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET_CLIENT})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if topic and len(topic.partitions) == partitions and all(
                p.leader >= 0 for p in topic.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{name} has no leaders after 60 s")


def produce(bootstrap: str, topic: str, partitions: int, count: int, rate: float | None
            ) -> None:
    """``count`` records round-robin over the partitions, at ``rate`` a second (None:
    as fast as it goes)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET_CLIENT})
    began = time.monotonic()
    for i in range(count):
        if rate is not None:
            delay = began + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(60)


def start_consumer(bootstrap: str, topic: str, records: int, group: str, out: Path
                   ) -> subprocess.Popen[str]:
    """ConsumerPerformance over ``records`` records, its output going to ``out``."""
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx512m"}
    with open(out, "w") as f:
        return subprocess.Popen(
            [str(RUN_CLASS), CONSUMER_PERF, "--bootstrap-server", bootstrap, "--topic", topic,
             "--num-records", str(records), "--timeout", "60000", "--print-metrics",
             "--group", group, "--command-property", "client.id=bench"],
            stdout=f, stderr=subprocess.STDOUT, text=True, env=env)


def finish_consumer(proc: subprocess.Popen[str], out: Path) -> dict[str, Any]:
    """The consumer's throughput and client metrics, once it has read its records."""
    if proc.wait(timeout=600) != 0:
        raise RuntimeError(f"ConsumerPerformance exited {proc.returncode}: "
                           f"{out.read_text()[-2000:]}")
    text = out.read_text()
    lines = [ln for ln in text.splitlines() if ln.count(",") >= 9]
    fields = [f.strip() for f in lines[-1].split(",")]  # the summary after the header
    metrics: dict[str, float] = {}
    for line in text.splitlines():
        m = _METRIC.match(line.strip())
        if m and "node-id" not in m.group(3) and "topic" not in m.group(3):
            metrics[f"{m.group(1)}:{m.group(2)}"] = float(m.group(4))
    return {"mb": float(fields[2]), "mb_s": float(fields[3]), "records": int(fields[4]),
            "records_s": float(fields[5]), "fetch_ms": float(fields[7]),
            "fetch_mb_s": float(fields[8]),  # without the group's join: the fetching
            "fetches": metrics.get("consumer-fetch-manager-metrics:fetch-total"),
            "sent_bytes": metrics.get("consumer-metrics:outgoing-byte-total"),
            "requests": metrics.get("consumer-metrics:request-total")}


def wait_stable(bootstrap: str, group: str, timeout: float = 120.0) -> None:
    """Until ``group`` has its members and assignment: the consumer is fetching."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET_CLIENT})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            [described] = admin.describe_consumer_groups([group])[group].result(timeout=5),
            if described.state == ConsumerGroupState.STABLE:
                return
        except Exception:  # not there yet
            pass
        time.sleep(0.2)
    raise RuntimeError(f"consumer group {group} not stable after {timeout:.0f} s")


def measure(args: argparse.Namespace, kind: str, mode: str, root: Path, logs: Path,
            rnd: int) -> dict[str, Any]:
    name = f"{kind}-{mode}-{rnd}"
    broker = BrokerProcess(kind, root / name, log_path=logs / f"{name}.log",
                           overrides=MODES[mode])
    broker.start(timeout=args.start_timeout)
    try:
        result: dict[str, Any] = {}
        sparse_topic, drain_topic = f"sparse-{rnd}", f"drain-{rnd}"
        create_topic(broker.bootstrap, sparse_topic, args.partitions)
        create_topic(broker.bootstrap, drain_topic, args.partitions)
        produce(broker.bootstrap, drain_topic, args.partitions, args.records, None)
        # sparse: the consumer fetches all partitions while few have anything new.
        count = int(args.rate * args.seconds)
        group, out = f"sparse-{name}", logs / f"{name}-sparse.txt"
        consumer = start_consumer(broker.bootstrap, sparse_topic, count, group, out)
        try:
            wait_stable(broker.bootstrap, group)
            with Meter(broker.pid) as meter:
                produce(broker.bootstrap, sparse_topic, args.partitions, count, args.rate)
                sparse = finish_consumer(consumer, out)
        finally:
            consumer.kill()
        fetches = sparse["fetches"] or 0
        result["sparse"] = {
            **sparse, "broker_cpu_s": round(meter.seconds or 0, 3),
            "cpu_ms_per_fetch": round(1000 * (meter.seconds or 0) / fetches, 3)
            if fetches else None,
            "bytes_per_request": round(sparse["sent_bytes"] / sparse["requests"], 1)
            if sparse["requests"] else None}
        # drain: everything from the start, as fast as it goes.
        out = logs / f"{name}-drain.txt"
        with Meter(broker.pid) as meter:
            drain = finish_consumer(start_consumer(broker.bootstrap, drain_topic, args.records,
                                                   f"drain-{name}", out), out)
        result["drain"] = {**drain, "broker_cpu_s": round(meter.seconds or 0, 3),
                           "cpu_s_per_gib": per_gib(meter.seconds, int(drain["mb"] * (1 << 20)))}
        log(f"  {name}: sparse {result['sparse']['cpu_ms_per_fetch']} ms CPU/fetch, "
            f"{result['sparse']['bytes_per_request']} B/request, {fetches:.0f} fetches; "
            f"drain {drain['fetch_mb_s']:.1f} MB/s")
        return result
    finally:
        log(f"  stopping {name}")
        broker.stop()


FIGURES = [("sparse", "cpu_ms_per_fetch", "sparse: broker CPU ms per fetch"),
           ("sparse", "bytes_per_request", "sparse: consumer bytes per request"),
           ("sparse", "broker_cpu_s", "sparse: broker CPU s"),
           ("sparse", "fetches", "sparse: fetches"),
           ("drain", "fetch_mb_s", "drain: MB/s (fetching)"),
           ("drain", "cpu_s_per_gib", "drain: broker CPU s per GiB")]


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for workload, key, label in FIGURES:
        row: dict[str, Any] = {}
        for kind in result["config"]["brokers"]:
            for mode in MODES:
                row[f"{kind} {mode}"] = _median([r[kind][mode].get(workload, {}).get(key)
                                                 for r in result["rounds"]])
            row[f"{kind} on/off"] = _ratio(row[f"{kind} on"], row[f"{kind} off"])
        if {"josefk", "kafka"} <= set(result["config"]["brokers"]):
            for mode in MODES:
                row[f"josefk/kafka {mode}"] = _ratio(row[f"josefk {mode}"], row[f"kafka {mode}"])
        summary[label] = row
    return summary


def markdown(result: dict[str, Any]) -> str:
    summary = result["summary"]
    columns = list(next(iter(summary.values())))
    cfg = result["config"]
    lines = [f"# Fetch sessions: {cfg['partitions']} partitions, on and off", "",
             f"{len(result['rounds'])} round(s), medians. Started {result['started']}. "
             f"sparse: {cfg['rate']} records/s for {cfg['seconds']} s; drain: "
             f"{cfg['records']} records of {len(VALUE)} B. Consumer: Kafka's "
             "ConsumerPerformance (Java). off: `max.incremental.fetch.session.cache.slots=0`.",
             "", "The sparse broker CPU includes the producer's requests (the same on and "
             "off); the consumer fetches again as soon as an answer comes, so the number of "
             "fetches differs: compare per fetch. Bytes per request count all the consumer's "
             "requests (mostly fetches).",
             "", "| figure | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns)]
    for label, row in summary.items():
        lines.append(f"| {label} | " + " | ".join(report.fmt(row[c]) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def write(result: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "results.md"]
    paths[0].write_text(json.dumps(result, indent=2) + "\n")
    paths[1].write_text(markdown(result))
    return paths


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--brokers", default="josefk,kafka")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--rate", type=float, help="sparse records a second")
    parser.add_argument("--seconds", type=float, help="sparse duration")
    parser.add_argument("--records", type=int, help="drain records")
    parser.add_argument("--start-timeout", type=float, default=120.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep-data", action="store_true")
    args = parser.parse_args(argv)
    quick = args.quick
    args.partitions = args.partitions or (200 if quick else 1000)
    args.rate = args.rate or (200.0 if quick else 500.0)
    args.seconds = args.seconds or (5.0 if quick else 20.0)
    args.records = args.records or (20_000 if quick else 500_000)
    args.out = args.out or (RESULTS / "quick" if quick else RESULTS)
    args.broker_list = broker_list(parser, args.brokers)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-fetch-sessions-"))
    logs = args.out / "logs"
    if why := prepare_run(args.broker_list, args.out, logs, root):
        print(f"cannot start Apache Kafka: {why}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {
        "label": "quick" if args.quick else "default", "started": report.now_iso(),
        "machine": report.machine_info(root),
        "config": {"brokers": args.broker_list, "partitions": args.partitions,
                   "rate": args.rate, "seconds": args.seconds, "records": args.records,
                   "overrides_both": SINGLE_NODE_OVERRIDES, "modes": MODES},
        "rounds": []}
    try:
        for rnd in range(1, args.rounds + 1):
            entry: dict[str, Any] = {}
            for kind in args.broker_list:
                entry[kind] = {}
                for mode in MODES:
                    log(f"round {rnd}: {kind}, sessions {mode}")
                    try:
                        entry[kind][mode] = measure(args, kind, mode, root, logs, rnd)
                    except Exception as e:  # one failed run leaves the others to compare
                        log(f"  {kind} sessions {mode} failed: {e!r}"[:2000])
                        entry[kind][mode] = {"error": repr(e)[:2000]}
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
