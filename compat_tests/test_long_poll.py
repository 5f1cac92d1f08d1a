"""Long polling: a fetch waiting for data returns as soon as data arrives.

A consumer (or a raw Fetch) with a large max wait on an empty partition gets a
record produced 0.5 s later well before the wait runs out; a fetch with nothing
to return waits about max wait, not less; a fetch with data returns at once.
Bounds are generous: these check behaviour, not speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import confluent_kafka
import pytest
from kafka import KafkaProducer, TopicPartition

from .clients import confluent_consumer, confluent_poll, kafka_python_consumer, kafka_python_poll
from .conftest import Broker
from .rawkafka import RawConnection, parse_batches

DELAY = 0.5
LONG_WAIT_MS = 5000
BOUND = 3.0


@pytest.fixture
def producer(broker: Broker) -> Iterator[KafkaProducer]:
    """A connected producer, so a delayed send goes out promptly."""
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
    try:
        yield prod
    finally:
        prod.close(timeout=5)


def produce_later(producer: KafkaProducer, topic: str, value: bytes) -> threading.Thread:
    """Send one record to partition 0 after DELAY seconds, from a thread."""
    # Warm up the producer's metadata for the topic before the clock starts.
    producer.partitions_for(topic)

    def run() -> None:
        time.sleep(DELAY)
        producer.send(topic, value=value, partition=0).get(timeout=10)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_raw_fetch_wakes_up(
    broker: Broker, make_topic: Callable[..., str], producer: KafkaProducer
) -> None:
    topic = make_topic()
    with RawConnection(broker.bootstrap, timeout=LONG_WAIT_MS / 1000 + 5) as conn:
        conn.api_versions()
        thread = produce_later(producer, topic, b"wake up")
        began = time.monotonic()
        got = conn.fetch(topic, 0, 0, max_wait_ms=LONG_WAIT_MS, min_bytes=1)
        elapsed = time.monotonic() - began
    thread.join(10)
    assert got.error_code == 0
    batches = parse_batches(got.records)
    assert [(b.base_offset, b.record_count) for b in batches] == [(0, 1)]
    assert DELAY * 0.8 <= elapsed < BOUND, f"fetch returned after {elapsed:.2f}s"


def test_raw_fetch_waits_for_max_wait(broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    with RawConnection(broker.bootstrap, timeout=10) as conn:
        conn.api_versions()
        began = time.monotonic()
        got = conn.fetch(topic, 0, 0, max_wait_ms=1000, min_bytes=1)
        elapsed = time.monotonic() - began
    assert (got.error_code, got.high_watermark, got.records) == (0, 0, b"")
    assert 0.8 <= elapsed < 3.5, f"empty fetch with max_wait_ms=1000 returned after {elapsed:.2f}s"


def test_raw_fetch_with_data_is_immediate(
    broker: Broker, make_topic: Callable[..., str], producer: KafkaProducer
) -> None:
    topic = make_topic()
    producer.send(topic, value=b"already here", partition=0).get(timeout=10)
    with RawConnection(broker.bootstrap, timeout=10) as conn:
        conn.api_versions()
        began = time.monotonic()
        got = conn.fetch(topic, 0, 0, max_wait_ms=LONG_WAIT_MS, min_bytes=1)
        elapsed = time.monotonic() - began
    assert got.error_code == 0 and got.high_watermark == 1
    assert [b.record_count for b in parse_batches(got.records)] == [1]
    assert elapsed < 1.5, f"fetch with data available took {elapsed:.2f}s"


def test_kafka_python_consumer(
    broker: Broker, make_topic: Callable[..., str], producer: KafkaProducer
) -> None:
    topic = make_topic()
    tp = TopicPartition(topic, 0)
    consumer = kafka_python_consumer(broker.bootstrap, fetch_max_wait_ms=LONG_WAIT_MS)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert kafka_python_poll(consumer, 1, timeout=0.5) == []  # connected, fetch in flight
        thread = produce_later(producer, topic, b"for kafka-python")
        began = time.monotonic()
        got = kafka_python_poll(consumer, 1, timeout=LONG_WAIT_MS / 1000 + 5)
        elapsed = time.monotonic() - began
    finally:
        consumer.close()
    thread.join(10)
    assert [(g.offset, g.value) for g in got] == [(0, b"for kafka-python")]
    assert elapsed < BOUND, f"record arrived after {elapsed:.2f}s"


def test_confluent_consumer(
    broker: Broker, make_topic: Callable[..., str], producer: KafkaProducer
) -> None:
    topic = make_topic()
    consumer = confluent_consumer(broker.bootstrap, **{"fetch.wait.max.ms": LONG_WAIT_MS})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        assert confluent_poll(consumer, 1, timeout=0.5) == []
        thread = produce_later(producer, topic, b"for librdkafka")
        began = time.monotonic()
        got = confluent_poll(consumer, 1, timeout=LONG_WAIT_MS / 1000 + 5)
        elapsed = time.monotonic() - began
    finally:
        consumer.close()
    thread.join(10)
    assert [(g.offset, g.value) for g in got] == [(0, b"for librdkafka")]
    assert elapsed < BOUND, f"record arrived after {elapsed:.2f}s"
