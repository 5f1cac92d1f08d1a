"""DeleteRecords moves the log start offset; reads below it are out of range.

Out of range is OFFSET_OUT_OF_RANGE (1) on the wire; each client then applies
its auto.offset.reset: earliest -> the new log start, latest -> the end,
none/error -> an error to the application.
"""

from __future__ import annotations

from collections.abc import Callable

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import OffsetOutOfRangeError

from .clients import (
    Rec,
    confluent_consumer,
    confluent_poll,
    kafka_python_consumer,
    kafka_python_poll,
    produce,
)
from .conftest import Broker
from .rawkafka import RawConnection

OFFSET_OUT_OF_RANGE = 1
RECORDS = [Rec(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]


@pytest.fixture
def trimmed(broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient) -> str:
    """A topic with offsets 0-9 of which 0-3 were deleted with DeleteRecords."""
    topic = make_topic()
    assert produce(broker.bootstrap, topic, RECORDS) == list(range(10))
    tp = TopicPartition(topic, 0)
    result = admin.delete_records({tp: 4}, timeout_ms=15_000)
    assert result[tp]["error_code"] == 0
    assert result[tp]["low_watermark"] == 4
    return topic


def test_log_start_moves(broker: Broker, trimmed: str) -> None:
    tp = TopicPartition(trimmed, 0)
    consumer = kafka_python_consumer(broker.bootstrap)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 4}
        assert consumer.end_offsets([tp]) == {tp: 10}
    finally:
        consumer.close()
    with RawConnection(broker.bootstrap) as conn:
        below = conn.fetch(trimmed, 0, 0)
        assert below.error_code == OFFSET_OUT_OF_RANGE
        at = conn.fetch(trimmed, 0, 4)
        assert (at.error_code, at.log_start_offset, at.high_watermark) == (0, 4, 10)


def test_reset_earliest(broker: Broker, trimmed: str) -> None:
    tp = TopicPartition(trimmed, 0)
    consumer = kafka_python_consumer(broker.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = kafka_python_poll(consumer, 6)
    finally:
        consumer.close()
    assert [(g.offset, g.value) for g in got] == [(i, f"v{i}".encode()) for i in range(4, 10)]


def test_reset_latest(broker: Broker, trimmed: str) -> None:
    tp = TopicPartition(trimmed, 0)
    consumer = kafka_python_consumer(broker.bootstrap, auto_offset_reset="latest")
    try:
        consumer.assign([tp])
        consumer.seek(tp, 1)
        assert kafka_python_poll(consumer, 1, timeout=2.0) == []
        assert consumer.position(tp) == 10
        assert produce(broker.bootstrap, trimmed, [Rec(b"k", b"new")]) == [10]
        got = kafka_python_poll(consumer, 1)
    finally:
        consumer.close()
    assert [(g.offset, g.value) for g in got] == [(10, b"new")]


def test_reset_none(broker: Broker, trimmed: str) -> None:
    tp = TopicPartition(trimmed, 0)
    consumer = kafka_python_consumer(broker.bootstrap, auto_offset_reset="none")
    try:
        consumer.assign([tp])
        consumer.seek(tp, 2)
        with pytest.raises(OffsetOutOfRangeError):
            kafka_python_poll(consumer, 1, timeout=10.0)
    finally:
        consumer.close()


def test_delete_beyond_high_watermark(admin: KafkaAdminClient, trimmed: str) -> None:
    with pytest.raises(OffsetOutOfRangeError):
        admin.delete_records({TopicPartition(trimmed, 0): 11}, timeout_ms=15_000)


def test_confluent(broker: Broker, trimmed: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.delete_records(
        [confluent_kafka.TopicPartition(trimmed, 0, 7)], request_timeout=20
    ).values()
    assert future.result(timeout=20).low_watermark == 7

    consumer = confluent_consumer(broker.bootstrap, **{"auto.offset.reset": "error"})
    try:
        consumer.assign([confluent_kafka.TopicPartition(trimmed, 0, 5)])
        with pytest.raises(confluent_kafka.KafkaException) as caught:
            confluent_poll(consumer, 1, timeout=10.0)
        assert caught.value.args[0].code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET
        assert "out of range" in caught.value.args[0].str().lower()
    finally:
        consumer.close()

    consumer = confluent_consumer(broker.bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        consumer.assign([confluent_kafka.TopicPartition(trimmed, 0, 5)])
        got = confluent_poll(consumer, 3)
    finally:
        consumer.close()
    assert [(g.offset, g.value) for g in got] == [(i, f"v{i}".encode()) for i in range(7, 10)]

    # -1 deletes everything up to the high watermark.
    [future] = admin.delete_records(
        [confluent_kafka.TopicPartition(trimmed, 0, -1)], request_timeout=20
    ).values()
    assert future.result(timeout=20).low_watermark == 10
