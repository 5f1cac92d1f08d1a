"""The workloads of the josefk / Apache Kafka comparison, and their sizes.

Each ``w*`` function runs one workload against one started broker and returns
``{measure key: Outcome}``; a workload that fails returns failed outcomes (with
the reason) instead of raising, so one broken feature does not end the run.
Every client runs in its own process, bounded by a record count and by time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import cpu
from bench.brokers import QUIET_CLIENT, REPO, RUN_CLASS, BrokerProcess, port_open

KIB = 1024
MIB = 1024 * 1024
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"


@dataclass(frozen=True)
class Measure:
    workload: str
    title: str
    client: str
    unit: str
    better: str                        # "higher", "lower", or "info" (neither)
    short: str                         # chart label


_W1 = "produce 1 KiB, acks=1, linger 5 ms"
_W2 = "produce 1 KiB, acks=all, idempotent"
_W3 = "produce 100 B, linger 0, several producers"
_W4 = "consume the big topic from offset 0"
_W5 = "end-to-end latency at 20 MB/s"

# Stable keys: the JSON, the table and the chart all use them.
MEASURES: dict[str, Measure] = {
    "w1.librdkafka": Measure("1", _W1, "librdkafka", "MiB/s", "higher",
                             "W1 acks=1 · librdkafka"),
    "w1.java": Measure("1", _W1, "ProducerPerformance", "MiB/s", "higher",
                       "W1 acks=1 · ProducerPerf"),
    "w2.librdkafka": Measure("2", _W2, "librdkafka", "MiB/s", "higher",
                             "W2 acks=all idem · librdkafka"),
    "w2.java": Measure("2", _W2, "ProducerPerformance", "MiB/s", "higher",
                       "W2 acks=all idem · ProducerPerf"),
    "w3.records": Measure("3", _W3, "librdkafka", "records/s", "higher",
                          "W3 small records · records/s"),
    "w3.requests": Measure("3", _W3, "librdkafka: Produce requests", "requests/s", "info",
                           "W3 small records · requests/s"),
    "w4.librdkafka": Measure("4", _W4, "librdkafka (assign)", "MiB/s", "higher",
                             "W4 consume · librdkafka"),
    "w4.java": Measure("4", _W4, "ConsumerPerformance (group)", "MiB/s", "higher",
                       "W4 consume · ConsumerPerf"),
    "w5.p50": Measure("5", _W5, "librdkafka", "ms p50", "lower", "W5 latency p50"),
    "w5.p99": Measure("5", _W5, "librdkafka", "ms p99", "lower", "W5 latency p99"),
    "w5.p999": Measure("5", _W5, "librdkafka", "ms p99.9", "lower", "W5 latency p99.9"),
    "w6.cold_start": Measure("6", "cold start: process start to first acked produce",
                             "librdkafka", "s", "lower", "W6 cold start"),
    "w7.rss_idle": Measure("7", "broker RSS, idle after start", "-", "MiB", "lower",
                           "W7 RSS idle"),
    "w7.rss_after_w1": Measure("7", "broker RSS at the end of workload 1", "-", "MiB", "lower",
                               "W7 RSS after W1"),
}
CPU_UNIT = "CPU s/GiB"
# Broker CPU seconds per GiB moved over each data workload's client run (bench/cpu.py).
for _cpu_key, _base, _short in (
        ("w1.librdkafka.cpu", "w1.librdkafka", "W1 acks=1 · librdkafka"),
        ("w1.java.cpu", "w1.java", "W1 acks=1 · ProducerPerf"),
        ("w2.librdkafka.cpu", "w2.librdkafka", "W2 acks=all idem · librdkafka"),
        ("w2.java.cpu", "w2.java", "W2 acks=all idem · ProducerPerf"),
        ("w3.cpu", "w3.records", "W3 small records"),
        ("w4.librdkafka.cpu", "w4.librdkafka", "W4 consume · librdkafka"),
        ("w4.java.cpu", "w4.java", "W4 consume · ConsumerPerf"),
        ("w5.cpu", "w5.p50", "W5 20 MB/s produce + consume")):
    _m = MEASURES[_base]
    MEASURES[_cpu_key] = Measure(_m.workload, _m.title, _m.client, CPU_UNIT, "lower",
                                 _short + " · CPU/GiB")


@dataclass
class Sizes:
    """How much each workload does; ``scale`` multiplies counts, bytes and durations."""

    scale: float = 1.0
    w1_records: int = 750_000          # 1 KiB each: 732 MiB per client per round
    w1_seconds: float = 60.0           # librdkafka stops producing after this
    w3_producers: int = 4
    w3_records: int = 250_000          # per producer, 100 B each
    w3_seconds: float = 30.0
    w4_bytes: int = 2 << 30            # the topic consumed from the start
    w4_seconds: float = 120.0
    w5_rate: float = 20e6              # bytes/s (20 MB/s of 1 KiB records)
    w5_seconds: float = 20.0
    w5_warmup: float = 2.0             # first seconds of sends not counted
    idle_seconds: float = 5.0          # idle before the idle RSS is read
    java_slack: float = 60.0           # a Java tool is killed after its budget plus this
    warmup_records: int = 200_000      # 1 KiB each, per round before the workloads (warmup.py)
    start_timeout: float = 120.0

    @classmethod
    def for_scale(cls, scale: float, quick: bool = False) -> Sizes:
        base = cls()
        sizes = cls(
            scale=scale,
            w1_records=max(2_000, int(base.w1_records * scale)),
            warmup_records=max(50_000, int(base.warmup_records * scale)),
            w3_records=max(1_000, int(base.w3_records * scale)),
            w4_bytes=max(8 * MIB, int(base.w4_bytes * scale)),
            w5_seconds=max(5.0, base.w5_seconds * scale),
            w5_warmup=1.0 if quick else base.w5_warmup,
            idle_seconds=2.0 if quick else base.idle_seconds,
            w1_seconds=max(20.0, base.w1_seconds * scale),
            w3_seconds=max(10.0, base.w3_seconds * scale),
            w4_seconds=max(30.0, base.w4_seconds * scale),
        )
        return sizes

    @property
    def w4_records(self) -> int:
        return self.w4_bytes // KIB


@dataclass
class Outcome:
    status: str                        # "ok" or "failed"
    value: float | None = None
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, {})}


def ok(value: float, **detail: Any) -> Outcome:
    return Outcome("ok", value=value, detail=detail)


def failed(error: str, **detail: Any) -> Outcome:
    return Outcome("failed", error=error.strip()[-1500:], detail=detail)


class WorkloadError(RuntimeError):
    """A workload's client failed; the run records it and goes on."""


@dataclass
class Context:
    sizes: Sizes
    log: Callable[[str], None]
    results_dir: Path
    extra: dict[str, Any] = field(default_factory=dict)


# --- running clients ------------------------------------------------------------------------


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def client_command(role: str, args: dict[str, Any]) -> list[str]:
    return [sys.executable, "-m", "bench.clients", role, json.dumps(args)]


def run_client(role: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run one librdkafka client process; its JSON result, or WorkloadError."""
    proc = subprocess.Popen(client_command(role, args), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise WorkloadError(f"{role} client killed after {timeout:.0f}s") from None
    return _client_result(role, proc.returncode, out, err)


def _client_result(role: str, code: int, out: str, err: str) -> dict[str, Any]:
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if code != 0 or not lines:
        raise WorkloadError(f"{role} client exited {code}: {err.strip()[-1500:]}")
    return json.loads(lines[-1])


def run_java(cls: str, args: list[str], timeout: float) -> tuple[str, str]:
    """Run one of Kafka's Java tools (default JIT and GC, -Xmx512m); (stdout, stderr)."""
    proc = subprocess.Popen([str(RUN_CLASS), cls, *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise WorkloadError(f"{cls.rsplit('.', 1)[-1]} killed after {timeout:.0f}s; "
                            f"last output: {_tail(out)}") from None
    if proc.returncode != 0:
        raise WorkloadError(f"{cls.rsplit('.', 1)[-1]} exited {proc.returncode}: "
                            f"{_tail(err) or _tail(out)}")
    return out, err


def _tail(text: str | None, lines: int = 6) -> str:
    if not text:
        return ""
    kept = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(kept[-lines:])[-1500:]


# --- topics ---------------------------------------------------------------------------------


def admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, **QUIET_CLIENT})


def create_topic(bootstrap: str, name: str, partitions: int = 1, timeout: float = 30) -> None:
    """Create ``name`` (replication factor 1) and wait until its partitions have leaders."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    admin = admin_client(bootstrap)
    future = admin.create_topics([NewTopic(name, partitions, 1)],
                                 operation_timeout=timeout, request_timeout=timeout)[name]
    try:
        future.result(timeout=timeout)
    except Exception as exc:
        err = exc.args[0] if exc.args else None
        if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise WorkloadError(f"CreateTopics {name}: {exc}") from exc
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=5).topics.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)
    raise WorkloadError(f"topic {name} has no leader after {timeout:.0f}s")


def delete_topic(bootstrap: str, name: str) -> None:
    """Best effort: keeps the data dirs from growing over the rounds."""
    with contextlib.suppress(Exception):
        admin_client(bootstrap).delete_topics([name], operation_timeout=30)[name].result(30)


def end_offset(bootstrap: str, topic: str) -> int:
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                            **QUIET_CLIENT})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return -1
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- producer configs -------------------------------------------------------------------------

ACKS1 = {"acks": 1, "linger.ms": 5, "compression.type": "none"}
IDEMPOTENT = {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
              "compression.type": "none"}
SMALL = {"acks": 1, "linger.ms": 0, "compression.type": "none"}
JAVA_ACKS1 = ["acks=1", "linger.ms=5", "compression.type=none", "enable.idempotence=false"]
JAVA_IDEMPOTENT = ["acks=all", "linger.ms=5", "compression.type=none",
                   "enable.idempotence=true"]

_PP_FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def _librdkafka_produce(broker: BrokerProcess, topic: str, count: int, size: int,
                        seconds: float, config: dict[str, Any]) -> Outcome:
    res = run_client("produce", {"bootstrap": broker.bootstrap, "topic": topic, "count": count,
                                 "size": size, "seconds": seconds, "config": config},
                     timeout=seconds + 90)
    if res["records"] == 0:
        return failed(f"no record acknowledged; errors: {res['errors']}")
    detail = {"records": res["records"], "seconds": round(res["seconds"], 3),
              "records_per_s": round(res["records"] / res["seconds"])}
    if res["records"] < count:
        detail["capped"] = f"{res['records']} of {count} records acknowledged in the time bound"
    if res["errors"]:
        detail["errors"] = res["errors"]
    return ok(res["bytes"] / MIB / res["seconds"], **detail)


def _java_produce(ctx: Context, broker: BrokerProcess, topic: str, count: int,
                  props: list[str]) -> Outcome:
    out, _ = run_java(PRODUCER_PERFORMANCE,
                      ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                       "--num-records", str(count), "--record-size", "1024",
                       "--throughput", "-1", "--command-property", *props],
                      timeout=ctx.sizes.w1_seconds + ctx.sizes.java_slack)
    matches = list(_PP_FINAL.finditer(out))
    if not matches:
        raise WorkloadError(f"no summary line from ProducerPerformance: {_tail(out)}")
    match = matches[-1]
    sent = int(match.group(1))
    return ok(float(match.group(3)), records=sent, records_per_s=float(match.group(2)),
              producer_latency_ms={"avg": float(match.group(4)), "p50": int(match.group(6)),
                                   "p99": int(match.group(8)), "p999": int(match.group(9))})


def _guard(fn: Callable[[], Outcome]) -> Outcome:
    try:
        return fn()
    except WorkloadError as exc:
        return failed(str(exc))
    except Exception as exc:  # a bench bug or a client library error: record, go on
        return failed(f"{type(exc).__name__}: {exc}")


def _produce_workload(ctx: Context, broker: BrokerProcess, key: str, config: dict[str, Any],
                      java_props: list[str], clients: tuple[str, ...]) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    sizes = ctx.sizes
    for client in clients:
        topic = unique(f"bench-{key}-{client}")
        meter = cpu.Meter(broker.pid)

        def one(client: str = client, topic: str = topic, meter: cpu.Meter = meter) -> Outcome:
            create_topic(broker.bootstrap, topic)
            with meter:
                if client == "librdkafka":
                    return _librdkafka_produce(broker, topic, sizes.w1_records, KIB,
                                               sizes.w1_seconds, config)
                return _java_produce(ctx, broker, topic, sizes.w1_records, java_props)

        ctx.log(f"{key} {client}: {sizes.w1_records} x 1 KiB ...")
        got = out[f"{key}.{client}"] = _guard(one)
        _report(ctx, f"{key}.{client}", got)
        out[f"{key}.{client}.cpu"] = cpu_outcome(
            meter, got, got.detail.get("records", 0) * KIB, "produced")
        _report(ctx, f"{key}.{client}.cpu", out[f"{key}.{client}.cpu"])
        delete_topic(broker.bootstrap, topic)
    return out


def cpu_outcome(meter: cpu.Meter, measured: Outcome, nbytes: int, moved: str) -> Outcome:
    """The broker's CPU seconds per GiB over ``meter``'s window, if the measure it
    belongs to (``measured``) succeeded."""
    if measured.status != "ok":
        return failed(f"no throughput figure: {(measured.error or '')[:200]}")
    value = cpu.per_gib(meter.seconds, nbytes)
    if value is None:
        return failed("no CPU window or nothing moved")
    return ok(value, **cpu.detail(meter, nbytes, moved))


def _report(ctx: Context, key: str, outcome: Outcome) -> None:
    if outcome.status == "ok":
        unit = MEASURES[key].unit
        ctx.log(f"  {key}: {outcome.value:,.1f} {unit}")
    else:
        ctx.log(f"  {key}: FAILED: {(outcome.error or '')[:300]}")


# --- the workloads ----------------------------------------------------------------------------


def w1(ctx: Context, broker: BrokerProcess,
       clients: tuple[str, ...] = ("librdkafka", "java")) -> dict[str, Outcome]:
    """1 KiB records, acks=1, linger 5 ms, no compression, as fast as the client goes."""
    return _produce_workload(ctx, broker, "w1", ACKS1, JAVA_ACKS1, clients)


def w2(ctx: Context, broker: BrokerProcess,
       clients: tuple[str, ...] = ("librdkafka", "java")) -> dict[str, Outcome]:
    """The same with acks=all and the idempotent producer (the Java client's default)."""
    return _produce_workload(ctx, broker, "w2", IDEMPOTENT, JAVA_IDEMPOTENT, clients)


def w3(ctx: Context, broker: BrokerProcess) -> dict[str, Outcome]:
    """Several librdkafka producers (one process each), 100 B records, linger 0, acks=1,
    started together; throughput over the union of their windows, and Produce
    requests/s from librdkafka's statistics."""
    sizes = ctx.sizes
    topic = unique("bench-w3")
    ctx.log(f"w3: {sizes.w3_producers} producers x {sizes.w3_records} x 100 B, linger 0 ...")
    meter = cpu.Meter(broker.pid)

    def run() -> dict[str, Outcome]:
        create_topic(broker.bootstrap, topic)
        args = {"bootstrap": broker.bootstrap, "topic": topic, "count": sizes.w3_records,
                "size": 100, "seconds": sizes.w3_seconds, "config": SMALL, "stats": True,
                "barrier": True}
        procs = [subprocess.Popen(client_command("produce", args), cwd=REPO,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
                 for _ in range(sizes.w3_producers)]
        try:
            for proc in procs:
                assert proc.stdout is not None
                line = proc.stdout.readline()
                if line.strip() != "ready":
                    raise WorkloadError(f"producer did not start: {line!r} "
                                        f"{proc.stderr.read()[-1000:] if proc.stderr else ''}")
            results = []
            with meter:
                for proc in procs:
                    assert proc.stdin is not None
                    proc.stdin.write("go\n")
                    proc.stdin.flush()
                for proc in procs:
                    try:
                        out, err = proc.communicate(timeout=sizes.w3_seconds + 90)
                    except subprocess.TimeoutExpired:
                        raise WorkloadError("a w3 producer did not finish in time") from None
                    results.append(_client_result("produce", proc.returncode, out, err))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    _kill_group(proc)
        window = (max(r["end_ns"] for r in results) - min(r["start_ns"] for r in results)) / 1e9
        records = sum(r["records"] for r in results)
        requests = sum(r["produce_requests"] for r in results)
        if records == 0:
            errors = [e for r in results for e in r["errors"]]
            raise WorkloadError(f"no record acknowledged; errors: {errors[:3]}")
        detail = {"records": records, "seconds": round(window, 3),
                  "producers": sizes.w3_producers,
                  "records_per_request": round(records / requests, 1) if requests else None}
        if records < sizes.w3_records * sizes.w3_producers:
            detail["capped"] = (f"{records} of {sizes.w3_records * sizes.w3_producers} "
                                "acknowledged in the time bound")
        return {"w3.records": ok(records / window, **detail),
                "w3.requests": ok(requests / window, requests=requests, seconds=round(window, 3))
                if requests else failed("librdkafka statistics reported no Produce requests")}

    try:
        out = run()
    except Exception as exc:
        msg = str(exc) if isinstance(exc, WorkloadError) else f"{type(exc).__name__}: {exc}"
        out = {"w3.records": failed(msg), "w3.requests": failed(msg)}
    out["w3.cpu"] = cpu_outcome(meter, out["w3.records"],
                                out["w3.records"].detail.get("records", 0) * 100, "produced")
    for key, outcome in out.items():
        _report(ctx, key, outcome)
    delete_topic(broker.bootstrap, topic)
    return out


W4_TOPIC = "bench-w4-source"


def w4_prepare(ctx: Context, broker: BrokerProcess) -> dict[str, Any]:
    """Fill the topic workload 4 reads (once per broker; kept over the rounds), with the
    producer settings of workload 1, so both brokers store the same batches."""
    sizes = ctx.sizes
    have = end_offset(broker.bootstrap, W4_TOPIC)
    if have >= sizes.w4_records:
        return {"prepared": False, "records": have}
    if have > 0:
        delete_topic(broker.bootstrap, W4_TOPIC)
        time.sleep(1)
    ctx.log(f"w4: filling {W4_TOPIC} with {sizes.w4_bytes / MIB:,.0f} MiB "
            "(once per broker, not timed) ...")
    create_topic(broker.bootstrap, W4_TOPIC)
    began = time.monotonic()
    res = run_client("produce", {"bootstrap": broker.bootstrap, "topic": W4_TOPIC,
                                 "count": sizes.w4_records, "size": KIB, "seconds": 900,
                                 "config": ACKS1}, timeout=1000)
    if res["records"] < sizes.w4_records:
        raise WorkloadError(f"filling {W4_TOPIC}: only {res['records']} records acknowledged "
                            f"({res['errors']})")
    return {"prepared": True, "records": res["records"],
            "seconds": round(time.monotonic() - began, 1)}


# When its local queue is full (the Python loop drains it slower than a broker on
# loopback fills it), librdkafka waits fetch.queue.backoff.ms (1 s by default) before
# fetching again: with either broker, whole seconds of a 2-4 s run went to that wait.
W4_LIBRDKAFKA = {"fetch.queue.backoff.ms": 10}


def w4(ctx: Context, broker: BrokerProcess,
       clients: tuple[str, ...] = ("librdkafka", "java")) -> dict[str, Outcome]:
    """Read the whole big topic from offset 0: librdkafka by assignment (no group),
    ConsumerPerformance through a consumer group (subscribe), default fetch sizes
    (librdkafka's queue backoff shortened: W4_LIBRDKAFKA)."""
    sizes = ctx.sizes
    out: dict[str, Outcome] = {}
    try:
        prep = w4_prepare(ctx, broker)
    except Exception as exc:
        msg = f"preparing the topic failed: {exc}"
        out = {f"w4.{c}": failed(msg) for c in clients}
        for key, outcome in out.items():
            _report(ctx, key, outcome)
        return out
    count = sizes.w4_records
    for client in clients:
        ctx.log(f"w4 {client}: {count} records ({count * KIB / MIB:,.0f} MiB) from offset 0 ...")
        meter = cpu.Meter(broker.pid)

        def one(client: str = client, meter: cpu.Meter = meter) -> Outcome:
            with meter:
                return consume(client)

        def consume(client: str) -> Outcome:
            if client == "librdkafka":
                res = run_client("consume", {"bootstrap": broker.bootstrap, "topic": W4_TOPIC,
                                             "count": count, "seconds": sizes.w4_seconds,
                                             "config": W4_LIBRDKAFKA},
                                 timeout=sizes.w4_seconds + 60)
                if res["records"] < count:
                    return failed(f"read {res['records']} of {count} records in "
                                  f"{sizes.w4_seconds:.0f}s; errors: {res['errors']}")
                return ok(res["bytes"] / MIB / res["seconds"], records=res["records"],
                          seconds=round(res["seconds"], 3),
                          first_to_last_seconds=res["first_to_last_seconds"],
                          fetch_requests=res["fetch_requests"],
                          kib_per_fetch_response=res["kib_per_fetch"])
            out_text, _ = run_java(CONSUMER_PERFORMANCE,
                                   ["--bootstrap-server", broker.bootstrap, "--topic", W4_TOPIC,
                                    "--num-records", str(count), "--timeout", "30000",
                                    "--group", unique("bench-w4")],
                                   timeout=sizes.w4_seconds + sizes.java_slack)
            stats = _consumer_performance_stats(out_text)
            got = int(stats["data.consumed.in.nMsg"])
            if got < count:
                return failed(f"ConsumerPerformance read {got} of {count} records "
                              f"(rebalance {stats.get('rebalance.time.ms')} ms)", **stats)
            return ok(float(stats["fetch.MB.sec"]), records=got,
                      total_mib_per_s=float(stats["MB.sec"]),
                      rebalance_ms=float(stats["rebalance.time.ms"]),
                      fetch_ms=float(stats["fetch.time.ms"]))

        out[f"w4.{client}"] = _guard(one)
        if prep.get("prepared"):
            out[f"w4.{client}"].detail["topic_prepared_in_s"] = prep.get("seconds")
        _report(ctx, f"w4.{client}", out[f"w4.{client}"])
        out[f"w4.{client}.cpu"] = cpu_outcome(
            meter, out[f"w4.{client}"], out[f"w4.{client}"].detail.get("records", 0) * KIB,
            "consumed")
        _report(ctx, f"w4.{client}.cpu", out[f"w4.{client}.cpu"])
    return out


def _consumer_performance_stats(out: str) -> dict[str, str]:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        if line.startswith("start.time") and i + 1 < len(lines):
            names = [n.strip() for n in line.split(",")]
            values = [v.strip() for v in lines[i + 1].split(",")]
            if len(values) == len(names):
                return dict(zip(names, values, strict=True))
    raise WorkloadError(f"no statistics from ConsumerPerformance: {_tail(out)}")


def w5(ctx: Context, broker: BrokerProcess) -> dict[str, Outcome]:
    """One producer paced at 20 MB/s (1 KiB records, acks=1, linger 5 ms) and one
    consumer (assigned, default fetch settings) in separate processes; latency is
    the consumer's receive time minus the send time carried in each value, after a
    warm-up."""
    sizes = ctx.sizes
    topic = unique("bench-w5")
    count = int(sizes.w5_rate / KIB * sizes.w5_seconds)
    keys = ("w5.p50", "w5.p99", "w5.p999")
    ctx.log(f"w5: {sizes.w5_rate / 1e6:.0f} MB/s for {sizes.w5_seconds:.0f}s ...")
    meter = cpu.Meter(broker.pid)

    def run() -> dict[str, Outcome]:
        create_topic(broker.bootstrap, topic)
        consumer = subprocess.Popen(
            client_command("latency-consume", {
                "bootstrap": broker.bootstrap, "topic": topic, "count": count,
                "seconds": sizes.w5_seconds + 30, "warmup": sizes.w5_warmup}),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        try:
            assert consumer.stdout is not None
            if consumer.stdout.readline().strip() != "ready":
                raise WorkloadError("latency consumer did not start")
            with meter:
                produced = run_client("latency-produce", {
                    "bootstrap": broker.bootstrap, "topic": topic, "count": count, "size": KIB,
                    "rate": sizes.w5_rate, "config": ACKS1}, timeout=sizes.w5_seconds + 90)
                try:
                    out, err = consumer.communicate(timeout=sizes.w5_seconds + 60)
                except subprocess.TimeoutExpired:
                    raise WorkloadError("latency consumer did not finish") from None
            got = _client_result("latency-consume", consumer.returncode, out, err)
        finally:
            if consumer.poll() is None:
                _kill_group(consumer)
        if not got.get("measured"):
            raise WorkloadError(f"no latency measured (consumer got {got.get('records')} "
                                f"records of {count})")
        detail = {"received": got["records"], "sent": produced["records"],
                  "measured": got["measured"], "max_ms": round(got["max_ms"], 3),
                  "achieved_mb_s": round(produced["rate_bytes"] / 1e6, 2)}
        if got["records"] < count:
            detail["incomplete"] = f"received {got['records']} of {count}"
        return {k: ok(got[k.split(".")[1] + "_ms"], **detail) for k in keys}

    try:
        out = run()
    except Exception as exc:
        msg = str(exc) if isinstance(exc, WorkloadError) else f"{type(exc).__name__}: {exc}"
        out = {k: failed(msg) for k in keys}
    moved = out["w5.p50"].detail
    out["w5.cpu"] = cpu_outcome(meter, out["w5.p50"],
                                (moved.get("sent", 0) + moved.get("received", 0)) * KIB,
                                "produced + consumed")
    for key, outcome in out.items():
        _report(ctx, key, outcome)
    delete_topic(broker.bootstrap, topic)
    return out


def w6_cold_start(ctx: Context, broker: BrokerProcess) -> dict[str, Outcome]:
    """Spawn the broker on an empty data dir (Kafka's formatted beforehand, untimed) and
    time until one record to a topic created right after the port opens is
    acknowledged (acks=all); then leave it idle and read its RSS (workload 7)."""
    import confluent_kafka as ck

    sizes = ctx.sizes
    timeout = sizes.start_timeout
    keys = ("w6.cold_start", "w7.rss_idle")
    try:
        if broker.kind == "kafka":
            broker.format_kafka()
        spawned = broker.spawn()
        deadline = spawned + timeout
        while not port_open(broker.port, timeout=0.05):
            broker._check_alive()
            if time.monotonic() > deadline:
                raise WorkloadError(f"port not open after {timeout:.0f}s")
            time.sleep(0.01)
        port_s = time.monotonic() - spawned
        topic = "bench-cold-start"
        admin = admin_client(broker.bootstrap)
        from confluent_kafka.admin import NewTopic

        while True:
            broker._check_alive()
            try:
                admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10,
                                    request_timeout=10)[topic].result(timeout=15)
                break
            except Exception as exc:
                err = exc.args[0] if exc.args else None
                if isinstance(err, ck.KafkaError) and err.code() == \
                        ck.KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if time.monotonic() > deadline:
                    raise WorkloadError(f"CreateTopics kept failing: {exc}") from exc
                time.sleep(0.02)
        created_s = time.monotonic() - spawned
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, **QUIET_CLIENT,
                                "topic.metadata.refresh.fast.interval.ms": 10,
                                "retry.backoff.ms": 10, "linger.ms": 0})
        acked_at: list[float] = []
        while not acked_at:
            errors: list[str] = []

            def on_delivery(err: Any, _msg: Any, errors: list[str] = errors) -> None:
                if err is None:
                    acked_at.append(time.monotonic())
                else:
                    errors.append(str(err))

            producer.produce(topic, b"x" * 100, on_delivery=on_delivery)
            while not acked_at and not errors and time.monotonic() < deadline:
                producer.poll(0.005)
            if time.monotonic() > deadline:
                raise WorkloadError(f"no acknowledged produce after {timeout:.0f}s: {errors}")
        cold = acked_at[0] - spawned
        producer.flush(5)
        del producer, admin
        time.sleep(sizes.idle_seconds)
        rss = broker.rss_mib()
        return {"w6.cold_start": ok(cold, port_open_s=round(port_s, 3),
                                    topic_created_s=round(created_s, 3)),
                "w7.rss_idle": ok(rss, idle_seconds=sizes.idle_seconds)}
    except Exception as exc:
        msg = str(exc) if isinstance(exc, WorkloadError) else f"{type(exc).__name__}: {exc}"
        return {k: failed(msg) for k in keys}
    finally:
        broker.stop()
