"""The idempotent producer: duplicates, sequence gaps, fencing, and retries through cuts.

- Raw protocol (InitProducerId, Produce with hand-built batches): a resent batch is
  acknowledged with its first offset and written once, also after a SIGKILL; a
  sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45); an older epoch is
  INVALID_PRODUCER_EPOCH (47).
- Stock producers (kafka-python, confluent-kafka, Java) send numbered records
  through ``ChaosProxy``, which cuts their connections at random points; every
  number must land exactly once, in order per partition. That needs a broker of
  its own that advertises the proxy's port.
- kafka-python's and the Java producer's defaults (idempotence, acks=all) work.
- A producer outlives DeleteRecords of all its batches, as in Kafka 2.8+.
- A duplicate's acknowledgement carries the original batch's timestamp, as Kafka's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from .clients import confluent_consumer, now_ms
from .conftest import RUN_CLASS, START_KRAFT, Broker, free_port, unique_topic_name
from .proxy import DOWN, UP, ChaosProxy
from .rawkafka import RawConnection

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
# Answers a produce may get while a (re)started broker settles its leaders.
RETRIABLE = {3, 5, 6, 7, 13, 19}  # unknown topic, no leader, not leader, timeout, ...
SETTLE_TIMEOUT = 60.0

CHAOS_RECORDS = 50_000
CHAOS_PARTITIONS = 3
CHAOS_SEED = 20240917
CHAOS_CUTS = 6
CHAOS_MIN_CUTS = 3  # fewer and the run did not test retries
CHAOS_PRODUCE_TIMEOUT = 90.0
JAVA_TIMEOUT = 120.0

TopicData = ProduceRequest.TopicProduceData
PartitionData = TopicData.PartitionProduceData


# --- raw protocol -----------------------------------------------------------------


def init_producer_id(conn: RawConnection) -> tuple[int, int]:
    """InitProducerId without a transactional id: a fresh (producer id, epoch).

    Retried while a starting Kafka answers COORDINATOR_LOAD_IN_PROGRESS (14) or
    COORDINATOR_NOT_AVAILABLE (15).
    """
    version = conn.pick_version(InitProducerIdRequest, 0, 4)
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                        producer_id=-1, producer_epoch=-1)
        response = conn.request(request, version)
        if response.error_code not in (14, 15) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert response.error_code == 0, response
    return response.producer_id, response.producer_epoch


def idempotent_batch(pid: int, epoch: int, seq: int, values: list[bytes], ts: int) -> bytes:
    """A v2 batch of ``values`` from producer ``pid``/``epoch`` starting at sequence ``seq``."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20,
    )
    for delta, value in enumerate(values):
        builder.append(delta, timestamp=ts + delta, key=None, value=value, headers=[])
    return bytes(builder.build())


@dataclass(frozen=True)
class Ack:
    """One partition's answer to a Produce."""

    error_code: int
    base_offset: int
    log_append_time: int


def produce_raw(conn: RawConnection, topic: str, batch: bytes) -> Ack:
    """Produce one batch to partition 0 with acks=all (Produce v3..v12: by topic name)."""
    version = conn.pick_version(ProduceRequest, 3, 12)
    request = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=15_000,
        topic_data=[TopicData(name=topic, partition_data=[PartitionData(index=0, records=batch)])],
    )
    [topic_response] = conn.request(request, version).responses
    [p] = topic_response.partition_responses
    return Ack(p.error_code, p.base_offset, p.log_append_time_ms)


def produce_settled(bootstrap: str, topic: str, batch: bytes) -> Ack:
    """Produce on a fresh connection, retrying while the broker is still starting."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        error: object
        try:
            with RawConnection(bootstrap) as conn:
                ack = produce_raw(conn, topic, batch)
        except (OSError, ConnectionError) as exc:
            error = exc
        else:
            if ack.error_code not in RETRIABLE:
                return ack
            error = ack
        if time.monotonic() > deadline:
            raise AssertionError(f"produce to {topic} did not settle: {error!r}")
        time.sleep(0.2)


def log_values(conn: RawConnection, topic: str, start: int = 0) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of partition 0 from ``start`` to the high watermark."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    while True:
        got = conn.fetch(topic, 0, offset)
        assert got.error_code == 0, got
        if offset >= got.high_watermark:
            return out
        records = MemoryRecords(got.records)
        progressed = False
        while (batch := records.next_batch()) is not None:
            for record in batch:
                out.append((record.offset, record.value))
            offset = batch.next_offset
            progressed = True
        assert progressed, f"Fetch {topic}@{offset} returned no batch"


def test_raw_duplicates_gaps_and_fencing(
    owned_broker: Broker, make_topic: Callable[..., str]
) -> None:
    topic = make_topic()
    ts = now_ms()
    a, b = [b"a0", b"a1", b"a2"], [b"b0", b"b1"]
    with RawConnection(owned_broker.bootstrap) as conn:
        pid, epoch = init_producer_id(conn)
        assert pid >= 0 and epoch >= 0
        first = idempotent_batch(pid, epoch, 0, a, ts)
        # The batch and three resends: one copy, the same base offset every time.
        acks = [produce_raw(conn, topic, first) for _ in range(4)]
        assert [(x.error_code, x.base_offset) for x in acks] == [(0, 0)] * 4
        assert produce_raw(conn, topic, idempotent_batch(pid, epoch, 3, b, ts)) == Ack(0, 3, -1)
        # Still one of the producer's last five batches: a duplicate.
        assert produce_raw(conn, topic, first).base_offset == 0

        # Sequence 5 was never sent: 7 leaves a gap.
        gap = produce_raw(conn, topic, idempotent_batch(pid, epoch, 7, [b"gap"], ts))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER

        # A new epoch starts at sequence 0; the old one is fenced, resends included.
        bumped = idempotent_batch(pid, epoch + 1, 0, [b"c0"], ts)
        assert produce_raw(conn, topic, bumped) == Ack(0, 5, -1)
        old = produce_raw(conn, topic, idempotent_batch(pid, epoch, 5, [b"old"], ts))
        assert old.error_code == INVALID_PRODUCER_EPOCH
        assert produce_raw(conn, topic, first).error_code == INVALID_PRODUCER_EPOCH
        expected = list(enumerate(a + b + [b"c0"]))
        assert log_values(conn, topic) == expected

    # A crash: the state comes back from the log (and any snapshot), not from memory.
    owned_broker.restart(kill=True)
    assert produce_settled(owned_broker.bootstrap, topic, bumped).base_offset == 5
    with RawConnection(owned_broker.bootstrap) as conn:
        assert log_values(conn, topic) == expected
        gap = produce_raw(conn, topic, idempotent_batch(pid, epoch + 1, 2, [b"gap"], ts))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        old = produce_raw(conn, topic, idempotent_batch(pid, epoch, 5, [b"old"], ts))
        assert old.error_code == INVALID_PRODUCER_EPOCH
        assert produce_raw(conn, topic, idempotent_batch(pid, epoch + 1, 1, [b"c1"], ts)) == Ack(
            0, 6, -1
        )
        assert log_values(conn, topic) == [*expected, (6, b"c1")]


def test_duplicate_ack_carries_batch_timestamp(
    broker: Broker, make_topic: Callable[..., str]
) -> None:
    """Kafka answers a duplicate with logAppendTime = the original batch's max timestamp
    (UnifiedLog.append: ``appendInfo.setLogAppendTime(duplicate.timestamp())``), on
    CreateTime and LogAppendTime topics alike."""
    create_time = make_topic()
    append_time = make_topic(configs={"message.timestamp.type": "LogAppendTime"})
    ts = now_ms() - 5_000
    with RawConnection(broker.bootstrap) as conn:
        pid, epoch = init_producer_id(conn)
        batch = idempotent_batch(pid, epoch, 0, [b"x", b"y"], ts)
        assert produce_raw(conn, create_time, batch) == Ack(0, 0, -1)
        assert produce_raw(conn, create_time, batch) == Ack(0, 0, ts + 1)
        appended = produce_raw(conn, append_time, batch)
        assert appended.error_code == 0 and appended.log_append_time >= ts + 5_000
        assert produce_raw(conn, append_time, batch) == appended


def test_producer_state_outlives_delete_records(
    broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient
) -> None:
    """DeleteRecords past all of a producer's batches does not make Kafka forget it: a
    resend is still a duplicate and a gap still OUT_OF_ORDER_SEQUENCE_NUMBER."""
    topic = make_topic()
    ts = now_ms()
    with RawConnection(broker.bootstrap) as conn:
        pid, epoch = init_producer_id(conn)
        first = idempotent_batch(pid, epoch, 0, [b"a0", b"a1", b"a2"], ts)
        assert produce_raw(conn, topic, first).base_offset == 0
        other_pid, other_epoch = init_producer_id(conn)
        other = idempotent_batch(other_pid, other_epoch, 0, [b"z"], ts)
        assert produce_raw(conn, topic, other).base_offset == 3
        deleted = admin.delete_records({TopicPartition(topic, 0): 4}, timeout_ms=15_000)
        assert deleted[TopicPartition(topic, 0)]["low_watermark"] == 4
        again = produce_raw(conn, topic, first)
        assert (again.error_code, again.base_offset) == (0, 0)
        gap = produce_raw(conn, topic, idempotent_batch(pid, epoch, 7, [b"gap"], ts))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert log_values(conn, topic, start=4) == []


# --- stock producers' defaults -------------------------------------------------------


def assert_idempotent_batches(bootstrap: str, topic: str, count: int) -> None:
    """Partition 0 holds ``count`` records in batches of one producer whose sequences
    follow the offsets (an idempotent producer wrote them)."""
    with RawConnection(bootstrap) as conn:
        batches = conn.all_batches(topic)
    assert sum(b.record_count for b in batches) == count
    assert batches[0].producer_id >= 0
    assert {b.producer_id for b in batches} == {batches[0].producer_id}
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]


def test_kafka_python_defaults(broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        futures = [producer.send(topic, f"v{i}".encode(), partition=0) for i in range(300)]
        producer.flush(timeout=30)
        assert [f.get(timeout=30).offset for f in futures] == list(range(300))
    finally:
        producer.close(timeout=5)
    assert_idempotent_batches(broker.bootstrap, topic, 300)


def run_java(
    *args: str, stdin: str = "", timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """One of Kafka's Java tools; fails the test on a non-zero exit or an ERROR logged."""
    env = dict(os.environ)
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256m")
    env.setdefault("KAFKA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    done = subprocess.run([str(RUN_CLASS), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert done.returncode == 0 and "ERROR" not in done.stderr, (
        f"{args[0]} exited {done.returncode}\nstdout:\n{done.stdout[-3000:]}\n"
        f"stderr:\n{done.stderr[-5000:]}"
    )
    return done


def test_java_producer_defaults(
    broker: Broker, make_topic: Callable[..., str], kafka_tools: Path
) -> None:
    """ProducerPerformance sets nothing but the bootstrap servers: Java's defaults."""
    topic = make_topic()
    run_java(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", "2000",
        "--record-size", "100", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={broker.bootstrap}",
    )
    assert_idempotent_batches(broker.bootstrap, topic, 2000)


# --- retries through a proxy that cuts connections ----------------------------------


@dataclass
class ChaosCluster:
    """A broker of its own that advertises ``proxy``'s port, so clients stay behind it."""

    broker: Broker
    proxy: ChaosProxy

    @property
    def bootstrap(self) -> str:
        return self.proxy.address


@pytest.fixture(scope="module")
def chaos(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ChaosCluster]:
    if request.config.getoption("bootstrap"):
        pytest.skip("needs a broker of its own (advertising the proxy); --bootstrap given")
    kind = "kafka" if request.config.getoption("kafka") else "josefk"
    tmp = tmp_path_factory.mktemp("chaos")
    data_dir = tmp / "data"
    port = free_port()
    proxy = ChaosProxy(("127.0.0.1", port), seed=CHAOS_SEED)
    proxy.start()
    advertised = f"advertised.listeners=PLAINTEXT://{proxy.address}"
    if kind == "kafka":
        command = [str(START_KRAFT), str(data_dir), str(port), "--override", advertised]
    else:
        command = [
            sys.executable, "-m", "josefk.server", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", advertised,
            "--override", f"log.dirs={data_dir}",
        ]
    data_dir.mkdir()
    broker = Broker(kind, f"127.0.0.1:{port}", command, data_dir, tmp / "broker.log",
                    start_timeout=90.0 if kind == "kafka" else 20.0)
    try:
        broker.start()
        yield ChaosCluster(broker, proxy)
    finally:
        broker.stop()
        proxy.close()


def create_topic(bootstrap: str, partitions: int) -> str:
    """A new topic, once it has leaders."""
    name = unique_topic_name("compat-chaos")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        spec = {"num_partitions": partitions, "configs": {}}
        result = admin.create_topics({name: spec}, timeout_ms=15_000, wait_for_metadata=True)
        [created] = result["topics"]
        assert created["error_code"] == 0, created
        return name
    finally:
        admin.close()


def produce_kafka_python(bootstrap: str, topic: str, count: int) -> None:
    """kafka-python with its defaults (idempotent, acks=all, retries): record i to
    partition i % CHAOS_PARTITIONS."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, client_id="chaos-kp")
    try:
        futures = [producer.send(topic, str(i).encode(), partition=i % CHAOS_PARTITIONS)
                   for i in range(count)]
        producer.flush(timeout=CHAOS_PRODUCE_TIMEOUT)
        failed = [(i, f.exception) for i, f in enumerate(futures) if not f.succeeded()]
        assert not failed, f"{len(failed)} records not delivered, first: {failed[:3]}"
    finally:
        producer.close(timeout=5)


def produce_confluent(bootstrap: str, topic: str, count: int) -> None:
    """confluent-kafka with enable.idempotence=true: record i to partition i % P."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
        # Java's and kafka-python's batch size rather than librdkafka's 1 MB: more
        # requests in flight, so cuts fall between and inside them.
        "batch.size": 16_384, "client.id": "chaos-confluent",
    })
    errors: list[Any] = []

    def on_delivery(err: confluent_kafka.KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(count):
        producer.produce(topic, str(i).encode(), partition=i % CHAOS_PARTITIONS,
                         on_delivery=on_delivery)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(CHAOS_PRODUCE_TIMEOUT)
    assert remaining == 0 and not errors, f"{remaining} undelivered, errors: {errors[:3]}"


def produce_java(bootstrap: str, topic: str, count: int) -> None:
    """The console producer (Java: idempotent by default); keys pick the partitions.
    Its own retries=3 and 1.5 s request timeout give way to the producer's defaults."""
    run_java(
        "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap,
        "--topic", topic, "--timeout", "5", "--message-send-max-retries", "2147483647",
        "--request-timeout-ms", "30000", "--reader-property", "parse.key=true",
        "--reader-property", "key.separator=:",
        stdin="".join(f"{i}:{i}\n" for i in range(count)), timeout=JAVA_TIMEOUT,
    )


CHAOS_PRODUCERS: dict[str, Callable[[str, str, int], None]] = {
    "kafka-python": produce_kafka_python,
    "confluent-kafka": produce_confluent,
    "java": produce_java,
}


def read_partitions(bootstrap: str, topic: str, partitions: int) -> dict[int, list[int]]:
    """Every record of every partition, as numbers, with a group-less (assign) consumer."""
    consumer = confluent_consumer(bootstrap)
    try:
        ends = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=15)
            assert low == 0, (p, low)
            ends[p] = high
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got: dict[int, list[int]] = {p: [] for p in range(partitions)}
        offsets: dict[int, list[int]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while any(len(got[p]) < ends[p] for p in got):
            assert time.monotonic() < deadline, {p: (len(got[p]), ends[p]) for p in got}
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error() is not None:
                    raise confluent_kafka.KafkaException(msg.error())
                got[msg.partition()].append(int(msg.value()))
                offsets[msg.partition()].append(msg.offset())
        for p in got:
            assert offsets[p] == list(range(ends[p])), f"partition {p}: offsets not dense"
        return got
    finally:
        consumer.close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("client", list(CHAOS_PRODUCERS))
def test_retries_through_cut_connections(
    chaos: ChaosCluster, client: str, request: pytest.FixtureRequest
) -> None:
    if client == "java":
        request.getfixturevalue("kafka_tools")
    topic = create_topic(chaos.bootstrap, CHAOS_PARTITIONS)
    chaos.proxy.arm(CHAOS_CUTS, up_max=100_000, down_max=600)
    try:
        CHAOS_PRODUCERS[client](chaos.bootstrap, topic, CHAOS_RECORDS)
    finally:
        chaos.proxy.disarm()
    cuts = list(chaos.proxy.cuts)
    got = read_partitions(chaos.bootstrap, topic, CHAOS_PARTITIONS)

    everything = sorted(n for values in got.values() for n in values)
    missing = sorted(set(range(CHAOS_RECORDS)) - set(everything))
    assert everything == list(range(CHAOS_RECORDS)), (
        f"{len(everything)} records for {CHAOS_RECORDS} numbers; missing {missing[:10]}; "
        f"cuts {cuts}")
    for p, values in got.items():
        assert values == sorted(values), f"partition {p} out of order; cuts {cuts}"
        if client != "java":  # the Python clients chose the partition: i % P
            assert values == list(range(p, CHAOS_RECORDS, CHAOS_PARTITIONS))
    assert len(cuts) >= CHAOS_MIN_CUTS, f"only {len(cuts)} cuts: {cuts}"
    # At least one response to produce requests was lost: the retry was a duplicate.
    assert {c.direction for c in cuts} == {UP, DOWN}, cuts
