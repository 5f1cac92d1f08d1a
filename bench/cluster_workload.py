"""The replicated produce workload of bench/cluster.py, against one started cluster.

One topic of 6 partitions, replication factor 3, ``min.insync.replicas=2``
(created with CreateTopics, then awaited until every partition has a leader and
all three replicas in its ISR). One librdkafka producer process
(``python -m bench.clients produce``: confluent-kafka, ``acks=all``,
``enable.idempotence=true``, ``linger.ms=5``, no compression, no key,
``sticky.partitioning.linger.ms=0`` so each record goes to a random partition and
the six partitions, thus the three leaders, get even shares)
sends ``count`` records of 1 KiB as fast as the client accepts them, then
flushes; it is bounded by ``seconds``.

The producer connects and learns the topic first, then waits on a barrier; the
brokers' CPU times are read just before the barrier is released and again as
soon as the producer reports (after its flush), so the CPU figure is the
produce phase's: every broker's user + sys time from /proc/<pid>/stat (the JVM
or the Python process with all their threads). Throughput is the producer's
own: acknowledged bytes over the time from its first send to the end of its flush.

Afterwards, a cheap check: the high watermarks of the six partitions (asked of
their leaders) add up to exactly the records acknowledged; and how many of the
18 replicas are in the ISR at the end (informative).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import workloads
from bench.brokers import QUIET_CLIENT, REPO
from bench.cluster_brokers import BROKER_IDS, Cluster
from bench.cpu import CLK_TCK, cpu_seconds, machine_ticks
from bench.workloads import client_command

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# sticky.partitioning.linger.ms=0: each keyless record goes to a random partition, so the
# six partitions (and the three leaders) fill evenly; librdkafka's default (stick to one
# partition for 2 x linger.ms) can leave a partition empty in a short run.
PRODUCER_CONFIG = {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                   "compression.type": "none", "sticky.partitioning.linger.ms": 0}


@dataclass(frozen=True)
class Plan:
    """What one round produces."""

    total_bytes: int = 1024 * MIB
    record_size: int = KIB
    partitions: int = 6
    replication_factor: int = 3
    min_insync_replicas: int = 2
    seconds: float = 300.0             # the producer stops sending after this
    warmup_bytes: int = 64 * MIB       # produced first, untimed (JIT, page cache, connections)
    topic_timeout: float = 60.0        # CreateTopics until all leaders and full ISRs

    @property
    def records(self) -> int:
        return self.total_bytes // self.record_size

    @property
    def warmup_records(self) -> int:
        return self.warmup_bytes // self.record_size


class WorkloadError(RuntimeError):
    """The round could not be measured (topic not ready, producer failed or overran)."""


def create_topic(cluster: Cluster, topic: str, plan: Plan) -> dict[str, Any]:
    """Create the topic; wait until every broker shows each partition led and fully in
    sync. Returns {"leaders": {partition: broker}, "seconds": ...}."""
    from confluent_kafka.admin import AdminClient, NewTopic

    began = time.monotonic()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET_CLIENT})
    new = NewTopic(topic, plan.partitions, plan.replication_factor,
                   config={"min.insync.replicas": str(plan.min_insync_replicas)})
    future = admin.create_topics([new], operation_timeout=plan.topic_timeout,
                                 request_timeout=plan.topic_timeout)[topic]
    try:
        future.result(timeout=plan.topic_timeout)
    except Exception as exc:
        raise WorkloadError(f"CreateTopics {topic}: {exc}") from exc
    deadline = began + plan.topic_timeout
    last = "no answer"
    pending = set(BROKER_IDS)
    leaders: dict[int, int] = {}
    while pending:
        for broker_id in sorted(pending):
            one = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap,
                               **QUIET_CLIENT})
            try:
                meta = one.list_topics(topic, timeout=2).topics.get(topic)
            except Exception as exc:
                last = f"broker {broker_id}: {exc}"
                continue
            if meta is None or meta.error is not None:
                last = f"broker {broker_id}: {meta.error if meta else 'no topic'}"
                continue
            parts = meta.partitions
            if len(parts) == plan.partitions and all(
                    p.leader in BROKER_IDS and len(p.isrs) == plan.replication_factor
                    for p in parts.values()):
                pending.discard(broker_id)
                leaders = {p.id: p.leader for p in parts.values()}
            else:
                last = f"broker {broker_id}: " + ", ".join(
                    f"p{p.id} leader {p.leader} isr {sorted(p.isrs)}" for p in parts.values())
        if pending and time.monotonic() > deadline:
            raise WorkloadError(f"{topic} not led and fully in sync on brokers "
                                f"{sorted(pending)} after {plan.topic_timeout:.0f}s; last: {last}")
        if pending:
            time.sleep(0.2)
    return {"leaders": dict(sorted(leaders.items())),
            "seconds": round(time.monotonic() - began, 2)}


class _Lines:
    """The stdout lines of a process, read by a thread, with timeouts."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        stream = proc.stdout

        def pump() -> None:
            for line in stream:
                self.queue.put(line.rstrip("\n"))
            self.queue.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def next(self, timeout: float, want: str) -> str | None:
        """The next line starting with ``want``; None at end of output or after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                line = self.queue.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            if line.startswith(want):
                return line


def _kill(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def warm_up(cluster: Cluster, topic: str, plan: Plan) -> dict[str, Any]:
    """The untimed warm-up: ``plan.warmup_bytes`` into the same topic, same settings, by a
    producer process of its own (bounded by 60 s of sending)."""
    args = {"bootstrap": cluster.bootstrap, "topic": topic, "count": plan.warmup_records,
            "size": plan.record_size, "seconds": 60.0, "config": PRODUCER_CONFIG}
    try:
        got = workloads.run_client("produce", args, timeout=150)
    except workloads.WorkloadError as exc:
        raise WorkloadError(f"warm-up: {exc}") from exc
    if got["records"] == 0:
        raise WorkloadError(f"warm-up: no record acknowledged; errors: {got['errors']}")
    return got


def produce(cluster: Cluster, topic: str, plan: Plan, stderr_path: Path,
            during: Any = None, zookeeper_pid: int | None = None) -> dict[str, Any]:
    """The timed produce phase. ``during``: a context manager entered around it (a profiler).

    Returns the producer's figures plus the brokers' (and ZooKeeper's, for
    information) CPU seconds over the phase.
    """
    args = {"bootstrap": cluster.bootstrap, "topic": topic, "count": plan.records,
            "size": plan.record_size, "seconds": plan.seconds, "config": PRODUCER_CONFIG,
            "barrier": True}
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen(client_command("produce", args), cwd=REPO, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True)
    lines = _Lines(proc)
    try:
        if lines.next(60, "ready") is None:
            raise WorkloadError(f"producer not ready in 60s: {_tail(stderr_path)}")
        with during if during is not None else contextlib.nullcontext():
            zk_before = cpu_seconds(zookeeper_pid) if zookeeper_pid else 0.0
            client_before = cpu_seconds(proc.pid)
            machine_before = machine_ticks()
            cpu_before = cluster.cpu()
            wall_before = time.monotonic()
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            # The client sends for up to plan.seconds, then flushes for up to 30 s more.
            line = lines.next(plan.seconds + 60, "{")
            cpu_after = cluster.cpu()
            wall = time.monotonic() - wall_before
            zk_after = cpu_seconds(zookeeper_pid) if zookeeper_pid else 0.0
            machine_after = machine_ticks()
            client_after = cpu_seconds(proc.pid)
        if line is None:
            raise WorkloadError(f"producer gave no result within {plan.seconds + 60:.0f}s "
                                f"(status {proc.poll()}): {_tail(stderr_path)}")
        result = json.loads(line)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            _kill(proc)
    dead = cluster.dead()
    if dead:
        raise WorkloadError(f"{cluster.kind} brokers {dead} died during the produce phase")
    cpu = {i: round(cpu_after[i] - cpu_before[i], 2) for i in cpu_before if i in cpu_after}
    result["broker_cpu_s"] = cpu
    result["cpu_window_s"] = round(wall, 3)
    if zookeeper_pid:
        result["zookeeper_cpu_s"] = round(zk_after - zk_before, 2)
    result["producer_cpu_s"] = round(client_after - client_before, 2)
    busy, steal = (machine_after[0] - machine_before[0], machine_after[1] - machine_before[1])
    result["machine_cores_busy"] = round(busy / CLK_TCK / wall, 2)
    result["machine_cores_stolen"] = round(steal / CLK_TCK / wall, 2)
    return result


def replica_bytes(cluster: Cluster, topic: str, partitions: int) -> dict[int, dict[int, int]]:
    """Partition -> {broker: bytes of its replica's .log segment files}, read from the data
    dirs (``<log.dirs>/<topic>-<partition>/*.log``, the same layout on both sides)."""
    out: dict[int, dict[int, int]] = {}
    for p in range(partitions):
        out[p] = {}
        for broker_id, broker in cluster.brokers.items():
            folder = broker.data_dir / f"{topic}-{p}"
            total = 0
            with contextlib.suppress(OSError):
                for seg in folder.glob("*.log"):
                    with contextlib.suppress(OSError):
                        total += seg.stat().st_size
            out[p][broker_id] = total
    return out


def check(cluster: Cluster, topic: str, plan: Plan, expected: int, sent: int,
          replica_timeout: float = 30.0) -> dict[str, Any]:
    """High watermarks summed against the acknowledged records; replicas of equal size on
    disk (waiting up to ``replica_timeout`` for followers to catch up); the ISR at the end."""
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bench-unused",
                            "enable.auto.commit": False, **QUIET_CLIENT})
    try:
        marks = {}
        for p in range(plan.partitions):
            marks[p] = consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=15)[1]
        meta = consumer.list_topics(topic, timeout=15).topics[topic]
        isr = sum(len(p.isrs) for p in meta.partitions.values())
    finally:
        consumer.close()
    total = sum(marks.values())
    deadline = time.monotonic() + replica_timeout
    while True:
        sizes = replica_bytes(cluster, topic, plan.partitions)
        same = sum(1 for s in sizes.values() if len(set(s.values())) == 1)
        if same == plan.partitions or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return {"end_offsets": marks, "end_offsets_sum": total, "expected": expected, "sent": sent,
            "hw_ok": total == expected, "replicas_identical": f"{same}/{plan.partitions}",
            "replica_bytes": sizes, "ok": total == expected and same == plan.partitions,
            "isr_at_end": f"{isr}/{plan.partitions * plan.replication_factor}"}


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        return path.read_text(errors="replace").strip()[-chars:]
    except OSError:
        return ""
