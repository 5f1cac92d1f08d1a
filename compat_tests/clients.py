"""One produce and one consume function per stock client, on plain records.

Every function takes a bootstrap address and bounds its own waiting, so a broker
that does not answer makes the calling test fail within seconds.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import confluent_kafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Record-batch attribute bits 0-2.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CREATE_TIME, LOG_APPEND_TIME = 0, 1

PRODUCE_TIMEOUT = 20.0
CONSUME_TIMEOUT = 20.0

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Rec:
    """A record to produce (timestamp None: the client picks one)."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None


@dataclass(frozen=True)
class Got:
    """A record as a client read it back."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int
    timestamp_type: int

    def rec(self) -> Rec:
        """The record without its offset and timestamp type, to compare with what was sent."""
        return Rec(self.key, self.value, self.headers, self.timestamp)

    @classmethod
    def of(cls, m: Any) -> Got:
        """From a kafka-python or aiokafka ConsumerRecord."""
        return cls(m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp,
                   m.timestamp_type)


def now_ms() -> int:
    return int(time.time() * 1000)


def sample_records(base_ts: int) -> list[Rec]:
    """Twenty records with every shape a client can send.

    Values compress well (so every client really compresses each batch), and
    among them are null keys, an empty key, an empty value, a binary value, a
    tombstone (key, null value), headers (none, several, a repeated key, an empty
    value, a non-ASCII key) and a timestamp that goes backwards.
    """
    filler = b"josefk compatibility filler, compresses well. " * 40
    recs: list[Rec] = []
    for i in range(20):
        key: bytes | None = f"key-{i:02d}".encode()
        value: bytes | None = filler + f" record {i}".encode()
        headers: Headers = ()
        if i % 5 == 1:
            key = None
        if i % 4 == 2:
            headers = (("trace", f"t-{i}".encode()), ("empty", b""), ("trace", b"again"))
        recs.append(Rec(key, value, headers, base_ts + i * 1000))
    recs[3] = Rec(b"", b"empty key " + filler, (("ключ", "значение".encode()),), base_ts + 3000)
    recs[7] = Rec(b"key-07", b"", (), base_ts + 7000)
    recs[9] = Rec(b"bin", bytes(range(256)) * 8, (("bin", bytes(range(256))),), base_ts + 9000)
    recs[12] = Rec(b"key-12", None, (), base_ts + 12000)  # tombstone
    recs[15] = Rec(b"key-15", filler, (), base_ts - 5000)  # timestamp goes backwards
    return recs


def _deadline(seconds: float) -> float:
    return time.monotonic() + seconds


# --- kafka-python -----------------------------------------------------------


def kafka_python_produce(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    compression: str = "none",
    partition: int = 0,
    **config: object,
) -> list[int]:
    """Produce with kafka-python (acks=all); the offset of every record."""
    settings: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "acks": "all",
        "compression_type": None if compression == "none" else compression,
        "linger_ms": 20,
        "request_timeout_ms": 15_000,
        "max_block_ms": 15_000,
        "client_id": "compat-kafka-python",
    }
    settings.update(config)
    producer = KafkaProducer(**settings)
    try:
        futures = [
            producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                timestamp_ms=r.timestamp,
                partition=partition,
            )
            for r in recs
        ]
        producer.flush(timeout=PRODUCE_TIMEOUT)
        return [f.get(timeout=PRODUCE_TIMEOUT).offset for f in futures]
    finally:
        producer.close(timeout=5)


def produce(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    compression: str = "none",
    partition: int = 0,
    **config: object,
) -> list[int]:
    """Produce for a test's setup: kafka-python (acks=all) without idempotence.

    kafka-python 3 and the Java client are idempotent by default (InitProducerId,
    producer ids and sequences); the round-trip tests cover that. Setup uses the
    least a broker must support, so each test checks its own feature.
    """
    config.setdefault("enable_idempotence", False)
    return kafka_python_produce(bootstrap, topic, recs, compression, partition, **config)


def kafka_python_consumer(bootstrap: str, **config: object) -> KafkaConsumer:
    """A group-less kafka-python consumer (assign/seek only, no commits)."""
    settings: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "request_timeout_ms": 15_000,
        "client_id": "compat-kafka-python",
    }
    settings.update(config)
    return KafkaConsumer(**settings)


def kafka_python_poll(
    consumer: KafkaConsumer, count: int, timeout: float = CONSUME_TIMEOUT
) -> list[Got]:
    """Poll until ``count`` records arrived or ``timeout`` passed."""
    got: list[Got] = []
    deadline = _deadline(timeout)
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(Got.of(m) for m in records)
    return got


def kafka_python_consume(
    bootstrap: str, topic: str, count: int, partition: int = 0, offset: int = 0
) -> list[Got]:
    """Read ``count`` records from ``offset`` with kafka-python."""
    consumer = kafka_python_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        return kafka_python_poll(consumer, count)
    finally:
        consumer.close()


# --- aiokafka ---------------------------------------------------------------


async def _aiokafka_produce(
    bootstrap: str, topic: str, recs: Sequence[Rec], compression: str, partition: int
) -> list[int]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=None if compression == "none" else compression,
        linger_ms=20,
        request_timeout_ms=15_000,
        client_id="compat-aiokafka",
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                value=r.value,
                key=r.key,
                partition=partition,
                timestamp_ms=r.timestamp,
                headers=list(r.headers),
            )
            for r in recs
        ]
        results = await asyncio.gather(*futures)
        return [md.offset for md in results]
    finally:
        await producer.stop()


def aiokafka_produce(
    bootstrap: str, topic: str, recs: Sequence[Rec], compression: str = "none", partition: int = 0
) -> list[int]:
    """Produce with aiokafka (acks=all); the offset of every record."""
    coro = _aiokafka_produce(bootstrap, topic, recs, compression, partition)
    return asyncio.run(asyncio.wait_for(coro, PRODUCE_TIMEOUT + 10))


async def _aiokafka_consume(
    bootstrap: str, topic: str, count: int, partition: int, offset: int
) -> list[Got]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=15_000,
        client_id="compat-aiokafka",
    )
    await consumer.start()
    try:
        tp = AioTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        got: list[Got] = []
        deadline = _deadline(CONSUME_TIMEOUT)
        while len(got) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(tp, timeout_ms=200)
            for records in batches.values():
                got.extend(Got.of(m) for m in records)
        return got
    finally:
        await consumer.stop()


def aiokafka_consume(
    bootstrap: str, topic: str, count: int, partition: int = 0, offset: int = 0
) -> list[Got]:
    """Read ``count`` records from ``offset`` with aiokafka."""
    coro = _aiokafka_consume(bootstrap, topic, count, partition, offset)
    return asyncio.run(asyncio.wait_for(coro, CONSUME_TIMEOUT + 10))


# --- confluent-kafka (librdkafka) -------------------------------------------

CONFLUENT_TIMESTAMP_TYPES = {
    confluent_kafka.TIMESTAMP_CREATE_TIME: CREATE_TIME,
    confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME,
}


def confluent_produce(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    compression: str = "none",
    partition: int = 0,
    **config: object,
) -> list[int]:
    """Produce with confluent-kafka (acks=all); the offset of every record.

    A delivery error is raised as ``confluent_kafka.KafkaException``.
    """
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "compression.type": compression,
        "linger.ms": 20,
        "message.timeout.ms": int(PRODUCE_TIMEOUT * 1000),
        "client.id": "compat-confluent",
    }
    settings.update(config)
    producer = confluent_kafka.Producer(settings)
    reports: dict[int, tuple[confluent_kafka.KafkaError | None, int]] = {}

    def delivered(index: int) -> Callable[[confluent_kafka.KafkaError | None, object], None]:
        def on_delivery(err: confluent_kafka.KafkaError | None, msg: confluent_kafka.Message):
            reports[index] = (err, msg.offset())

        return on_delivery

    for i, r in enumerate(recs):
        kwargs: dict[str, object] = {"headers": list(r.headers)} if r.headers else {}
        if r.timestamp is not None:
            kwargs["timestamp"] = r.timestamp
        producer.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=partition,
            on_delivery=delivered(i),
            **kwargs,
        )
    remaining = producer.flush(PRODUCE_TIMEOUT + 5)
    assert remaining == 0, f"{remaining} messages not delivered"
    offsets = []
    for i in range(len(recs)):
        err, offset = reports[i]
        if err is not None:
            raise confluent_kafka.KafkaException(err)
        offsets.append(offset)
    return offsets


def confluent_consumer(bootstrap: str, **config: object) -> confluent_kafka.Consumer:
    """A confluent-kafka consumer meant for assign() (its group id is never used)."""
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"compat-unused-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "client.id": "compat-confluent",
    }
    settings.update(config)
    return confluent_kafka.Consumer(settings)


def confluent_got(msg: confluent_kafka.Message) -> Got:
    ts_type, ts = msg.timestamp()
    return Got(
        msg.offset(),
        msg.key(),
        msg.value(),
        tuple(msg.headers() or ()),
        ts,
        CONFLUENT_TIMESTAMP_TYPES.get(ts_type, -1),
    )


def confluent_poll(
    consumer: confluent_kafka.Consumer, count: int, timeout: float = CONSUME_TIMEOUT
) -> list[Got]:
    """Poll until ``count`` records arrived or ``timeout`` passed; errors raise."""
    got: list[Got] = []
    deadline = _deadline(timeout)
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            raise confluent_kafka.KafkaException(msg.error())
        got.append(confluent_got(msg))
    return got


def confluent_consume(
    bootstrap: str, topic: str, count: int, partition: int = 0, offset: int = 0
) -> list[Got]:
    """Read ``count`` records from ``offset`` with confluent-kafka."""
    consumer = confluent_consumer(bootstrap)
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, offset)])
        return confluent_poll(consumer, count)
    finally:
        consumer.close()


# --- kcat -------------------------------------------------------------------

KCAT_KEY_DELIM = b"\x1f"
KCAT_MSG_DELIM = b"\x1e"


def kcat_produce(
    kcat: str, bootstrap: str, topic: str, recs: Sequence[Rec], compression: str = "none"
) -> None:
    """Produce text records with kcat (-K/-D delimiters, -Z: empty value = null).

    kcat sets headers for all messages at once (-H), so every record must carry
    the same headers; it cannot set timestamps or an empty key (empty = no key).
    """
    headers = {r.headers for r in recs}
    assert len(headers) == 1, "kcat sends the same headers with every record"
    args = [kcat, "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-q", "-Z"]
    args += ["-K", "\\x1f", "-D", "\\x1e", "-X", "acks=all"]
    if compression != "none":
        args += ["-z", compression]
    for name, value in headers.pop():
        args += ["-H", f"{name}={value.decode()}"]
    payload = b""
    for r in recs:
        assert r.timestamp is None, "kcat cannot set timestamps"
        assert r.key != b"" and r.value != b"", "kcat sends empty keys/values as null"
        assert KCAT_KEY_DELIM not in (r.key or b"") + (r.value or b"")
        assert KCAT_MSG_DELIM not in (r.key or b"") + (r.value or b"")
        if r.key is not None:
            payload += r.key + KCAT_KEY_DELIM
        payload += (r.value or b"") + KCAT_MSG_DELIM
    done = subprocess.run(args, input=payload, capture_output=True, timeout=PRODUCE_TIMEOUT + 10)
    assert done.returncode == 0, f"kcat -P failed ({done.returncode}): {done.stderr.decode()}"


def kcat_consume(kcat: str, bootstrap: str, topic: str, count: int, offset: int = 0) -> list[Got]:
    """Read ``count`` records from partition 0 with kcat -C -J (text keys/values only)."""
    args = [kcat, "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", str(offset)]
    args += ["-c", str(count), "-e", "-J", "-q", "-m", "10"]
    done = subprocess.run(args, capture_output=True, timeout=CONSUME_TIMEOUT + 10)
    assert done.returncode == 0, f"kcat -C failed ({done.returncode}): {done.stderr.decode()}"
    got = []
    for line in done.stdout.decode().splitlines():
        msg = json.loads(line)
        flat = msg.get("headers") or []
        headers = tuple((flat[i], flat[i + 1].encode()) for i in range(0, len(flat), 2))
        got.append(
            Got(
                msg["offset"],
                None if msg["key"] is None else msg["key"].encode(),
                None if msg["payload"] is None else msg["payload"].encode(),
                headers,
                msg["ts"],
                {"create": CREATE_TIME, "logappend": LOG_APPEND_TIME}.get(msg["tstype"], -1),
            )
        )
    return got


PRODUCERS: dict[str, Callable[..., list[int]]] = {
    "kafka-python": kafka_python_produce,
    "aiokafka": aiokafka_produce,
    "confluent-kafka": confluent_produce,
}
CONSUMERS: dict[str, Callable[..., list[Got]]] = {
    "kafka-python": kafka_python_consume,
    "aiokafka": aiokafka_consume,
    "confluent-kafka": confluent_consume,
}
