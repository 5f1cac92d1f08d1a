"""Replication across three brokers: what acks=all promises when brokers crash, pause and return.

- idempotent acks=all producers (kafka-python, confluent-kafka, Kafka's Java producer)
  lose and duplicate nothing they were told was written while the leader is SIGKILLed
  and restarted;
- min.insync.replicas refuses acks=all writes (NOT_ENOUGH_REPLICAS) with too few
  replicas in sync, while acks=1 still works;
- a SIGSTOPped follower leaves the ISR after replica.lag.time.max.ms, and rejoins
  once it runs again and has caught up, while followers of idle partitions stay;
- a stale leader restarted after an unclean election truncates its divergent tail
  and ends with exactly the new leader's log;
- a consumer group resumes from its committed offsets once its coordinator's broker
  is gone (__consumer_offsets has three replicas).

The module's cluster runs with replica.lag.time.max.ms=4000 (a stopped follower
leaves the ISR within seconds) and a 10 s ZooKeeper session, so that the leader's
lag check, not the session expiry, is what drops a paused follower.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource
from kafka.errors import NotEnoughReplicasError
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import OffsetAndMetadata

from ..clients import Got, Rec, confluent_consumer, kafka_python_consume, kafka_python_poll, produce
from ..rawkafka import RawConnection
from .conftest import broker_kinds, cluster_fixture
from .harness import (
    BROKER_IDS,
    KAFKA39_LIBS,
    KAFKA39_RUN_CLASS,
    Cluster,
    ClusterBroker,
    coordinator_of,
    metadata,
    partition_state,
    wait_until,
)
from .test_produce_consume import wait_replicas_identical

SESSION_TIMEOUT_MS = 10_000
REPLICA_LAG_MS = 4_000
CONFIG = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": str(REPLICA_LAG_MS),
}
# A killed broker's leaderships move once its session expires (ticks of 2 s) and the
# controller has reacted; the margin covers a loaded two-CPU machine.
FAILOVER_TIMEOUT = SESSION_TIMEOUT_MS / 1000 + 20
# The leader checks its followers every replica.lag.time.max.ms / 2, then the
# controller writes the new ISR.
ISR_SHRINK_TIMEOUT = REPLICA_LAG_MS / 1000 * 1.5 + 10
IN_SYNC_TIMEOUT = 60.0


cluster = cluster_fixture(
    broker_kinds,
    "Three brokers of the target kind with this module's CONFIG.", CONFIG)


# --- helpers --------------------------------------------------------------------


def others(*ids: int) -> list[int]:
    """The broker ids not given, in order."""
    return [b for b in BROKER_IDS if b not in ids]


def wait_isr(cluster: Cluster, topic: str, expected: list[int], timeout: float) -> dict:
    """The state znode once its ISR is exactly ``expected``."""
    return wait_until(
        lambda: (s := partition_state(cluster.zk, topic, 0)) and sorted(s["isr"]) == sorted(
            expected) and s,
        timeout, f"ISR of {topic}-0 to be {sorted(expected)}",
    )


def high_watermark(cluster: Cluster, topic: str, partition: int = 0) -> int | None:
    """The high watermark as the partition's current leader answers it (None: no leader)."""
    leader = partition_state(cluster.zk, topic, partition)["leader"]
    broker = cluster.brokers.get(leader)
    if broker is None or not broker.running or broker.paused:
        return None
    with RawConnection(broker.bootstrap, timeout=5.0) as conn:
        got = conn.fetch(topic, partition, 0, max_bytes=1)
    return got.high_watermark if got.error_code == 0 else None


def read_all(cluster: Cluster, topic: str, partition: int = 0) -> list[Got]:
    """Every record of the partition, from offset 0 to its leader's high watermark."""
    leader = cluster.leader_of(topic, partition)
    # The leader's own answer: Fetch v11+ may read a follower's log (and its high watermark).
    with RawConnection(leader.bootstrap, timeout=10.0) as conn:
        got = conn.fetch(topic, partition, 0, max_bytes=1)
    assert got.error_code == 0 and got.log_start_offset == 0, (leader, got)
    end = got.high_watermark
    records = kafka_python_consume(cluster.bootstrap, topic, end, partition=partition)[:end]
    assert [r.offset for r in records] == list(range(end)), (
        f"{topic}-{partition}: read offsets {[r.offset for r in records][:5]}... "
        f"({len(records)} records), expected 0..{end - 1}"
    )
    return records


def recs(tag: str, count: int) -> list[Rec]:
    return [Rec(None, f"{tag}-{i:04d}".encode()) for i in range(count)]


def produce_to(broker: ClusterBroker, topic: str, values: list[bytes], acks: int) -> int:
    """Produce one (non-idempotent) batch to partition 0 on exactly ``broker``; its base
    offset. A client would also route through other brokers of its Metadata, and a
    SIGSTOPped one among them holds its requests until they time out."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None, acks=acks, timeout_ms=15_000,
        topic_data=[data(name=topic, partition_data=[
            data.PartitionProduceData(index=0, records=bytes(builder.build()))])],
    )
    with RawConnection(broker.bootstrap, timeout=20.0) as conn:
        response = conn.request(request, conn.pick_version(ProduceRequest, 3, 9))
    [[answer]] = [t.partition_responses for t in response.responses]
    assert answer.error_code == 0, answer
    return answer.base_offset


def batch_producer_ids(cluster: Cluster, topic: str) -> set[int]:
    """The producer ids of every batch of ``topic``-0, read from its leader."""
    leader = cluster.leader_of(topic, 0)
    with RawConnection(leader.bootstrap, timeout=10.0) as conn:
        return {b.producer_id for b in conn.all_batches(topic, 0)}


# --- producers streaming in the background ---------------------------------------


class Stream(threading.Thread, ABC):
    """Produces "<name>-<index>" values to partition 0 of ``topic``, paced, until stopped.

    ``acked`` holds the indexes the client reported written (in report order);
    ``failed`` the ones it reported failed; ``sent`` how many it was given.
    """

    RATE = 100  # records per second
    LIMIT = 50_000

    def __init__(self, name: str, bootstrap: str, topic: str) -> None:
        super().__init__(name=f"stream-{name}", daemon=True)
        self.label = name
        self.bootstrap = bootstrap
        self.topic = topic
        self.acked: list[int] = []
        self.failed: dict[int, str] = {}
        self.sent = 0
        self.error: BaseException | None = None
        self.stopping = threading.Event()
        self.finished = threading.Event()

    def value(self, i: int) -> bytes:
        return f"{self.label}-{i:06d}".encode()

    def index(self, value: bytes) -> int:
        prefix = f"{self.label}-".encode()
        assert value.startswith(prefix), f"{value!r} is not a value of {self.label}"
        return int(value[len(prefix):])

    def run(self) -> None:
        try:
            self.open()
            try:
                interval = 1.0 / self.RATE
                while not self.stopping.is_set() and self.sent < self.LIMIT:
                    self.send(self.sent)
                    self.sent += 1
                    time.sleep(interval)
            finally:
                self.finish()
        except BaseException as exc:  # reported by stop()
            self.error = exc
        finally:
            self.finished.set()

    def stop(self, timeout: float = 150.0) -> None:
        """Stop sending and wait until every sent record is acked or failed (closed)."""
        self.stopping.set()
        self.join(timeout)

    def check_finished(self) -> None:
        """The producer closed without raising."""
        assert not self.is_alive(), f"{self.label}: the producer did not finish"
        if self.error is not None:
            raise AssertionError(f"{self.label}: the producer raised {self.error!r}") from (
                self.error)

    def progress(self) -> int:
        return len(self.acked)

    @abstractmethod
    def open(self) -> None:
        """Create the producer."""

    @abstractmethod
    def send(self, i: int) -> None:
        """Send value ``i``; its callbacks fill ``acked`` / ``failed``."""

    @abstractmethod
    def finish(self) -> None:
        """Flush and close: every sent value acked or failed."""

    def check_log(self, log: list[Got]) -> None:
        """Every acked value once, in send order; nothing twice; nothing never sent."""
        positions = [self.index(g.value or b"") for g in log]
        duplicates = sorted(p for p, n in Counter(positions).items() if n > 1)
        assert not duplicates, f"{self.label}: values written twice: {duplicates[:20]}"
        assert all(0 <= p < self.sent for p in positions), f"{self.label}: unknown values"
        out_of_order = [(a, b) for a, b in zip(positions, positions[1:], strict=False)
                        if b < a]
        assert not out_of_order, f"{self.label}: out of send order: {out_of_order[:10]}"
        missing = sorted(set(self.acked) - set(positions))
        assert not missing, (
            f"{self.label}: {len(missing)} acknowledged values missing, first {missing[:20]}"
        )


class KafkaPythonStream(Stream):
    """kafka-python with its defaults (idempotent, retries) and acks=all."""

    def open(self) -> None:
        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", linger_ms=5,
            client_id=f"replication-{self.label}",
        )

    def send(self, i: int) -> None:
        future = self.producer.send(self.topic, value=self.value(i), partition=0)
        future.add_callback(lambda _md, i=i: self.acked.append(i))
        future.add_errback(lambda exc, i=i: self.failed.__setitem__(i, repr(exc)))

    def finish(self) -> None:
        try:
            self.producer.flush(timeout=120)
        finally:
            self.producer.close(timeout=10)


class ConfluentStream(Stream):
    """confluent-kafka (librdkafka) with enable.idempotence=true and acks=all."""

    def open(self) -> None:
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120_000,
            "client.id": f"replication-{self.label}",
        })

    def send(self, i: int) -> None:
        def delivered(err: confluent_kafka.KafkaError | None, _msg: Any, i: int = i) -> None:
            if err is None:
                self.acked.append(i)
            else:
                self.failed[i] = str(err)

        self.producer.produce(self.topic, value=self.value(i), partition=0,
                              on_delivery=delivered)
        self.producer.poll(0)

    def finish(self) -> None:
        remaining = self.producer.flush(120)
        assert remaining == 0, f"{remaining} records neither delivered nor failed"


class JavaStream(Stream):
    """Kafka 3.9's console producer (kafka.tools.ConsoleProducer), idempotent, acks=all.

    It reads one value a line from stdin and logs each failed send at ERROR without
    saying which: ``acked`` is then unknown, every sent value counts as acked
    unless some failed (``failures``).
    """

    def __init__(self, name: str, bootstrap: str, topic: str, log_dir: Path,
                 progress: Callable[[], int | None]) -> None:
        super().__init__(name, bootstrap, topic)
        self.log_dir = log_dir
        self._progress = progress
        self.failures = 0
        self.status: int | None = None

    def open(self) -> None:
        env = dict(os.environ)
        env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256m")
        env.setdefault("KAFKA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        self.stdout = open(self.log_dir / f"{self.label}.out", "wb")  # noqa: SIM115
        self.stderr_path = self.log_dir / f"{self.label}.err"
        self.stderr = open(self.stderr_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(KAFKA39_RUN_CLASS), "kafka.tools.ConsoleProducer",
             "--bootstrap-server", self.bootstrap, "--topic", self.topic,
             "--request-required-acks", "-1", "--timeout", "5",
             # The tool's own retries=3 and 1.5 s request timeout give way to the
             # producer's defaults (retry until delivery.timeout.ms, 2 minutes).
             "--message-send-max-retries", "2147483647", "--request-timeout-ms", "30000",
             "--producer-property", "enable.idempotence=true",
             "--producer-property", f"client.id=replication-{self.label}",
             # Every record to partition 0 (the topic has one partition).
             ],
            stdin=subprocess.PIPE, stdout=self.stdout, stderr=self.stderr, env=env,
        )

    def send(self, i: int) -> None:
        assert self.proc.stdin is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the console producer exited ({self.proc.returncode}): "
                                 f"{self.stderr_path.read_text(errors='replace')[-3000:]}")
        self.proc.stdin.write(self.value(i) + b"\n")
        self.proc.stdin.flush()

    def finish(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
            self.status = self.proc.wait(timeout=140)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise
        finally:
            self.stdout.close()
            self.stderr.close()
        err = self.stderr_path.read_text(errors="replace")
        self.failures = err.count("Error when sending message")
        assert self.status == 0, f"console producer exited {self.status}:\n{err[-5000:]}"

    def progress(self) -> int:
        return self._progress() or 0

    def check_log(self, log: list[Got]) -> None:
        # Which sends failed is unknown: all count as acked, less at most the failures.
        self.acked = list(range(self.sent))
        if self.failures == 0:
            super().check_log(log)
            return
        positions = [self.index(g.value or b"") for g in log]
        assert len(set(positions)) == len(positions), f"{self.label}: values written twice"
        assert positions == sorted(positions), f"{self.label}: out of send order"
        assert len(positions) >= self.sent - self.failures, (
            f"{self.label}: {self.sent - len(positions)} values missing, "
            f"{self.failures} sends failed"
        )


def wait_progress(streams: list[Stream], more: int, timeout: float, what: str) -> None:
    """Until each stream has ``more`` acks (or high watermark) beyond what it has now."""
    start = {s.label: s.progress() for s in streams}

    def advanced() -> bool:
        for s in streams:
            if s.finished.is_set():  # not an AssertionError: wait_until would retry
                raise RuntimeError(f"{s.label} stopped: {s.error!r}")
        return all(s.progress() >= start[s.label] + more for s in streams)

    wait_until(advanced, timeout, f"{what} ({start} -> +{more} each)")


# --- 1. idempotent acks=all producers through a leader crash ------------------------


def test_idempotent_acks_all_producers_survive_leader_sigkill(
    cluster: Cluster, topic: str, tmp_path: Path
) -> None:
    controller = cluster.controller_id()
    victim_id = others(controller)[0]
    rest = others(victim_id)
    kinds = ["kafka-python", "confluent"]
    # Kafka 3.9's console producer too, when its jars and java are there.
    java = any(KAFKA39_LIBS.glob("*.jar")) and (
        shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME")))
    if java:
        kinds.append("java")
    topics = {k: f"{topic}-{k}" for k in kinds}
    for name in topics.values():
        cluster.create_topic(name, configs={"min.insync.replicas": "2"},
                             assignments={0: [victim_id, *rest]})
        assert cluster.leader_of(name, 0).broker_id == victim_id

    streams: list[Stream] = [
        KafkaPythonStream("kafka-python", cluster.bootstrap, topics["kafka-python"]),
        ConfluentStream("confluent", cluster.bootstrap, topics["confluent"]),
    ]
    if java:
        streams.append(JavaStream(
            "java", cluster.bootstrap, topics["java"], tmp_path,
            lambda: high_watermark(cluster, topics["java"]),
        ))
    for s in streams:
        s.start()
    try:
        wait_progress(streams, 100, 90, "every producer under way")
        sent_before_kill = {s.label: s.sent for s in streams}
        killed = time.monotonic()
        cluster[victim_id].kill()
        for name in topics.values():
            wait_until(lambda name=name: partition_state(cluster.zk, name, 0)["leader"] in rest,
                       FAILOVER_TIMEOUT, f"a new leader of {name}-0")
        print(f"leaders moved {time.monotonic() - killed:.1f}s after SIGKILL")
        wait_progress(streams, 100, 90, "acks=all writes on the new leader")

        cluster[victim_id].start_after_crash()
        for name in topics.values():
            cluster.wait_in_sync(name, 1, timeout=IN_SYNC_TIMEOUT)
        sent_at_rejoin = {s.label: s.sent for s in streams}
        wait_progress(streams, 100, 60, "acks=all writes with the old leader back in sync")
    finally:
        for s in streams:
            s.stopping.set()
        for s in streams:
            s.stop()

    for s in streams:
        s.check_finished()
    for s in streams:
        log = read_all(cluster, s.topic)
        s.check_log(log)
        positions = [s.index(g.value or b"") for g in log]
        assert min(positions) < sent_before_kill[s.label] <= max(positions), s.label
        assert max(positions) >= sent_at_rejoin[s.label], s.label
        # Idempotent: every batch carries a producer id.
        ids = batch_producer_ids(cluster, s.topic)
        assert ids and min(ids) >= 0, (s.label, ids)
        print(f"{s.label}: sent {s.sent}, acked {len(s.acked)}, failed "
              f"{len(s.failed) or getattr(s, 'failures', 0)}, in the log {len(log)}")


# --- 2. min.insync.replicas ---------------------------------------------------------


def test_not_enough_replicas_with_two_of_three_down(cluster: Cluster, topic: str) -> None:
    leader_id = cluster.controller_id()
    followers = others(leader_id)
    cluster.create_topic(topic, configs={"min.insync.replicas": "2"},
                         assignments={0: [leader_id, *followers]})
    leader = cluster[leader_id]
    before = recs("in-sync", 10)
    assert produce(cluster.bootstrap, topic, before) == list(range(10))

    for f in followers:
        cluster[f].kill()
    wait_isr(cluster, topic, [leader_id], ISR_SHRINK_TIMEOUT + FAILOVER_TIMEOUT)
    wait_until(lambda: metadata(leader.bootstrap, [topic]).topics[topic].partitions[0].isr
               == (leader_id,), 15, "the leader's Metadata to show ISR [leader]")

    producer = KafkaProducer(
        bootstrap_servers=leader.bootstrap, acks="all", retries=0, enable_idempotence=False,
        request_timeout_ms=15_000, max_block_ms=15_000, client_id="replication-min-isr",
    )
    try:
        future = producer.send(topic, value=b"refused", partition=0)
        with pytest.raises(NotEnoughReplicasError) as refused:
            future.get(timeout=30)
    finally:
        producer.close(timeout=5)
    assert refused.value.errno == 19

    # acks=1 needs only the leader. (Kafka 3.9 keeps the high watermark where it is
    # while the ISR is smaller than min.insync.replicas: the record becomes
    # readable once the followers are back.)
    assert produce(leader.bootstrap, topic, [Rec(None, b"acks=1")], acks=1) == [10]
    with RawConnection(leader.bootstrap, timeout=10.0) as conn:
        hw = conn.fetch(topic, 0, 0, max_bytes=1).high_watermark
    print(f"high watermark with ISR [leader] after the acks=1 write: {hw}")

    for f in followers:
        cluster[f].start_after_crash()
    cluster.wait_in_sync(topic, 1, timeout=IN_SYNC_TIMEOUT)
    assert produce(cluster.bootstrap, topic, [Rec(None, b"after")]) == [11]
    wait_replicas_identical(cluster, topic, 1)
    log = read_all(cluster, topic)
    # The refused record was not appended.
    assert [g.value for g in log] == [r.value for r in before] + [b"acks=1", b"after"]


# --- 3. a paused follower leaves and rejoins the ISR ---------------------------------


def test_paused_follower_leaves_isr_and_rejoins(cluster: Cluster, topic: str) -> None:
    controller = cluster.controller_id()
    leader_id, paused_id = others(controller)
    cluster.create_topic(topic, configs={"min.insync.replicas": "2"},
                         assignments={0: [leader_id, paused_id, controller]})
    stream = KafkaPythonStream("paused-follower", cluster.bootstrap, topic)
    stream.start()
    try:
        wait_progress([stream], 50, 60, "the producer under way")
        paused = cluster[paused_id]
        paused.pause()
        paused_at = time.monotonic()
        state = wait_isr(cluster, topic, [leader_id, controller], ISR_SHRINK_TIMEOUT)
        took = time.monotonic() - paused_at
        # The leader dropped it for lagging: its ZooKeeper session is still alive.
        assert cluster.zk.exists(f"/brokers/ids/{paused_id}"), (
            f"broker {paused_id} left the ISR only with its session ({took:.1f}s)"
        )
        assert state["leader"] == leader_id
        assert took >= REPLICA_LAG_MS / 1000 - 1.0, f"ISR shrank after {took:.1f}s"
        print(f"paused follower left the ISR {took:.1f}s after SIGSTOP")
        cluster.agreed_view(
            [topic],
            lambda v: sorted(v.topics[topic].partitions[0].isr) == sorted([leader_id, controller]),
            what="Metadata to show the shrunk ISR",
        )
        # acks=all goes on with two replicas in sync (min.insync.replicas=2).
        wait_progress([stream], 100, 30, "acks=all writes without the paused follower")
        assert not stream.failed, list(stream.failed.items())[:5]

        paused.resume()
        resumed_at = time.monotonic()
        wait_isr(cluster, topic, BROKER_IDS, IN_SYNC_TIMEOUT)
        print(f"it rejoined {time.monotonic() - resumed_at:.1f}s after SIGCONT")
        cluster.wait_in_sync(topic, 1, timeout=IN_SYNC_TIMEOUT)
        wait_progress([stream], 100, 30, "acks=all writes with three replicas in sync")
    finally:
        stream.stop()
    stream.check_finished()
    assert not stream.failed, list(stream.failed.items())[:5]
    assert sorted(stream.acked) == list(range(stream.sent))
    log = read_all(cluster, topic)
    stream.check_log(log)
    assert len(log) == stream.sent
    wait_replicas_identical(cluster, topic, 1)


def test_idle_partitions_keep_their_followers_in_sync(cluster: Cluster, topic: str) -> None:
    """Followers that have everything stay in the ISR of partitions no one writes to,
    for many times replica.lag.time.max.ms, and acks=all goes on everywhere."""
    partitions = 24
    cluster.create_topic(topic, partitions=partitions, replication_factor=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                         "acks": "all", "linger.ms": 5})
    failed: list[Any] = []

    def produce_everywhere(tag: str) -> None:
        for p in range(partitions):
            producer.produce(topic, f"{tag}-{p}".encode(), partition=p,
                             on_delivery=lambda err, _msg: err and failed.append(err))
        assert producer.flush(60) == 0
        assert not failed, failed[:5]

    produce_everywhere("before")
    time.sleep(3 * REPLICA_LAG_MS / 1000)
    shrunk = {p: state["isr"] for p in range(partitions)
              if sorted((state := partition_state(cluster.zk, topic, p))["isr"])
              != sorted(BROKER_IDS)}
    assert not shrunk, f"ISRs shrank while idle: {shrunk}"
    produce_everywhere("after")
    assert [high_watermark(cluster, topic, p) for p in range(partitions)] == [2] * partitions


# --- 4. a stale leader truncates its divergent tail ----------------------------------


def test_restarted_stale_leader_truncates_divergent_tail(cluster: Cluster, topic: str) -> None:
    old_id = cluster.controller_id()
    a_id, b_id = others(old_id)
    cluster.create_topic(
        topic, configs={"min.insync.replicas": "1", "unclean.leader.election.enable": "false"},
        assignments={0: [old_id, a_id, b_id]},
    )
    old, a, b = cluster[old_id], cluster[a_id], cluster[b_id]
    w = recs("w", 20)
    assert produce(cluster.bootstrap, topic, w) == list(range(20))
    wait_replicas_identical(cluster, topic, 1)

    # ISR {old, a, b} -> {old, b} -> {old}: the old leader alone in sync.
    a.kill()
    wait_until(lambda: not cluster.zk.exists(f"/brokers/ids/{a_id}"), FAILOVER_TIMEOUT,
               f"broker {a_id}'s session to expire")
    wait_isr(cluster, topic, [old_id, b_id], ISR_SHRINK_TIMEOUT)
    # b stays paused for less than its session timeout: only the lag check drops it.
    b.pause()
    wait_isr(cluster, topic, [old_id], ISR_SHRINK_TIMEOUT)
    # Records only the old leader gets.
    x = recs("x", 15)
    assert produce_to(old, topic, [r.value or b"" for r in x], acks=1) == 20
    old.kill()
    b.resume()
    a.start_after_crash()

    # Neither survivor was in the ISR: with unclean election disabled, no leader.
    wait_until(lambda: cluster.zk.exists("/controller")
               and cluster.controller_id() in (a_id, b_id), FAILOVER_TIMEOUT + 10,
               "a or b to become controller")
    cluster.agreed_view(
        [topic], lambda v: {a_id, b_id} <= set(v.brokers)
        and v.topics[topic].partitions[0].leader == -1,
        timeout=30, what="the survivors' Metadata to show no leader",
    )
    time.sleep(2)
    state = partition_state(cluster.zk, topic, 0)
    assert state["leader"] not in (a_id, b_id) and state["isr"] == [old_id], state

    with cluster.admin() as admin:
        result = admin.alter_configs([ConfigResource(
            "TOPIC", topic, configs={"unclean.leader.election.enable": "true"})])
    assert result == {"topic": {topic: "OK"}}, result
    state = wait_until(
        lambda: (s := partition_state(cluster.zk, topic, 0))["leader"] in (a_id, b_id) and s,
        30, "an unclean leader among the survivors",
    )
    wait_isr(cluster, topic, [a_id, b_id], IN_SYNC_TIMEOUT)
    y = recs("y", 12)
    assert produce(cluster.bootstrap, topic, y) == list(range(20, 32))

    # The old leader comes back: it must drop x and copy y.
    old.start_after_crash()
    cluster.wait_in_sync(topic, 1, timeout=IN_SYNC_TIMEOUT)
    wait_replicas_identical(cluster, topic, 1)
    expected = [r.value for r in w + y]
    assert [g.value for g in read_all(cluster, topic)] == expected

    # Read the old leader's own log: make it leader again (it is the preferred replica).
    with cluster.admin() as admin:
        response = admin.elect_leaders(0, {topic: [0]}, timeout_ms=30_000)
    assert response.error_code == 0, response
    cluster.agreed_view([topic], lambda v: v.leaders(topic)[0] == old_id,
                        what="the old leader to lead again")
    assert cluster.leader_of(topic, 0) is old
    assert [g.value for g in read_all(cluster, topic)] == expected


# --- 5. a consumer group outlives its coordinator -------------------------------------


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_group_resumes_from_committed_offsets_after_coordinator_sigkill(
    cluster: Cluster, topic: str
) -> None:
    partitions, per_partition = 3, 40
    cluster.create_topic(topic, partitions=partitions, replication_factor=3)
    for p in range(partitions):
        assert produce(cluster.bootstrap, topic, recs(f"p{p}", per_partition),
                       partition=p) == list(range(per_partition))
    group = f"replication-group-{uuid.uuid4().hex[:8]}"
    committed = {p: 10 + 7 * p for p in range(partitions)}

    consumer = KafkaConsumer(
        topic, bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest", request_timeout_ms=30_000,
        client_id="replication-group-1",
    )
    try:
        got = kafka_python_poll(consumer, partitions * per_partition, timeout=60)
        assert len(got) == partitions * per_partition
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                         for p, o in committed.items()})
        assert {p: consumer.committed(TopicPartition(topic, p)) for p in committed} == committed
    finally:
        consumer.close()

    coordinator = wait_until(lambda: coordinator_of(cluster, group), 30,
                             f"the coordinator of {group}")
    # Kafka's partitionFor: Utils.abs(groupId.hashCode) % 50 (Utils.abs(MIN_VALUE) = 0).
    h = java_string_hash(group)
    offsets_partition = (0 if h == -(1 << 31) else abs(h)) % 50
    internal = cluster.agreed_view(["__consumer_offsets"]).topics["__consumer_offsets"]
    part = internal.partitions[offsets_partition]
    assert part.leader == coordinator, (offsets_partition, part, coordinator)
    assert sorted(part.replicas) == list(BROKER_IDS) and sorted(part.isr) == list(BROKER_IDS)

    cluster[coordinator].kill()
    new = wait_until(lambda: (c := coordinator_of(cluster, group)) != coordinator and c,
                     FAILOVER_TIMEOUT, "another coordinator")
    assert new in others(coordinator)
    assert partition_state(cluster.zk, "__consumer_offsets", offsets_partition)["leader"] == new

    # A new member of the group (confluent-kafka) resumes where the group committed.
    expected = sum(per_partition - o for o in committed.values())
    resumed = confluent_consumer(cluster.bootstrap, **{"group.id": group,
                                                       "client.id": "replication-group-2"})
    got2: list[tuple[int, int, bytes]] = []
    errors: list[str] = []
    try:
        resumed.subscribe([topic])
        deadline = time.monotonic() + 90
        while len(got2) < expected and time.monotonic() < deadline:
            msg = resumed.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.append(str(msg.error()))
                continue
            got2.append((msg.partition(), msg.offset(), msg.value()))
        # Nothing more comes (no record after the end, none twice).
        settle = time.monotonic() + 2
        while time.monotonic() < settle:
            msg = resumed.poll(0.2)
            if msg is not None and msg.error() is None:
                got2.append((msg.partition(), msg.offset(), msg.value()))
        check = resumed.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)], timeout=15)
    finally:
        resumed.close()
    assert {c.partition: c.offset for c in check} == committed
    for p in range(partitions):
        mine = [(o, v) for q, o, v in got2 if q == p]
        assert mine == [(o, f"p{p}-{o:04d}".encode()) for o in range(committed[p], per_partition)
                        ], (p, mine[:5], errors[:5])
    assert len(got2) == expected


def test_delete_records_reaches_the_followers(cluster: Cluster, topic: str) -> None:
    """A follower takes the leader's log start offset from every fetch answer, so records
    deleted with DeleteRecords stay deleted when a follower becomes the leader."""
    leader_id, *followers = BROKER_IDS
    cluster.create_topic(topic, assignments={0: [leader_id, *followers]})
    assert produce_to(cluster[leader_id], topic, [b"v%d" % i for i in range(10)], -1) == 0
    tp = TopicPartition(topic, 0)
    with cluster.admin() as admin:
        result = admin.delete_records({tp: 4}, timeout_ms=15_000)
    assert result[tp]["error_code"] == 0 and result[tp]["low_watermark"] == 4, result
    # acks=all: both followers fetch these, in answers that carry the new log start.
    assert produce_to(cluster[leader_id], topic, [b"after"], -1) == 10
    cluster[leader_id].kill()
    wait_until(lambda: partition_state(cluster.zk, topic, 0)["leader"] in followers,
               FAILOVER_TIMEOUT, f"a new leader of {topic}-0")
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        assert consumer.beginning_offsets([tp], timeout_ms=15_000) == {tp: 4}
    finally:
        consumer.close()
    cluster[leader_id].start_after_crash()


def test_high_watermark_holds_while_the_isr_is_below_min_insync(cluster: Cluster,
                                                                 topic: str) -> None:
    """Kafka's leader does not advance the high watermark while its ISR is smaller than
    ``min.insync.replicas`` (Partition.maybeIncrementLeaderHW, KIP-966): records written
    with acks=1 meanwhile are invisible until enough replicas have them."""
    leader_id = cluster.controller_id()  # pausing the followers leaves the controller up
    followers = others(leader_id)
    cluster.create_topic(topic, configs={"min.insync.replicas": "2"},
                         assignments={0: [leader_id, *followers]})
    assert produce_to(cluster[leader_id], topic, [b"in sync"], -1) == 0
    for follower in followers:
        cluster[follower].pause()
    try:
        wait_isr(cluster, topic, [leader_id], ISR_SHRINK_TIMEOUT)
        wait_until(lambda: high_watermark(cluster, topic) == 1, 10, "the leader's HW")
        assert produce_to(cluster[leader_id], topic, [b"alone"], 1) == 1
        time.sleep(1.0)
        assert high_watermark(cluster, topic) == 1, "HW moved with one replica in sync"
    finally:
        for follower in followers:
            cluster[follower].resume()
    wait_isr(cluster, topic, BROKER_IDS, IN_SYNC_TIMEOUT)
    wait_until(lambda: high_watermark(cluster, topic) == 2, 30, "the HW once back in sync")
    assert [r.value for r in read_all(cluster, topic)] == [b"in sync", b"alone"]
