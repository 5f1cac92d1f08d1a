"""Produce requests the broker must refuse, with Kafka's error codes.

- A batch above the topic's max.message.bytes: MESSAGE_TOO_LARGE (10). The
  producers' own size limits are raised so the client really sends it; a record
  just under the limit on the same topic is accepted, so the limit is the topic's.
- A CreateTime more than message.timestamp.after.max.ms (default 1 hour in
  Kafka 4.x) in the future: INVALID_TIMESTAMP (32).
"""

from __future__ import annotations

from collections.abc import Callable

import confluent_kafka
import pytest
from kafka.errors import InvalidTimestampError, MessageSizeTooLargeError

from .clients import Rec, confluent_produce, kafka_python_consume, now_ms, produce
from .conftest import Broker

MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP = 32
HOUR_MS = 3_600_000
LIMIT = 10_000
FITS = b"f" * (LIMIT - 200)  # plus ~80 bytes of batch and record overhead
TOO_BIG = b"x" * (LIMIT * 3)


@pytest.fixture
def small_topic(make_topic: Callable[..., str]) -> str:
    return make_topic(configs={"max.message.bytes": str(LIMIT)})


def test_too_large_kafka_python(broker: Broker, small_topic: str) -> None:
    big = {"max_request_size": 10 * 1024 * 1024, "retries": 0}
    assert produce(broker.bootstrap, small_topic, [Rec(b"k", FITS)], **big) == [0]
    with pytest.raises(MessageSizeTooLargeError) as caught:
        produce(broker.bootstrap, small_topic, [Rec(b"k", TOO_BIG)], **big)
    assert caught.value.errno == MESSAGE_TOO_LARGE
    # Nothing of the refused batch was appended.
    assert produce(broker.bootstrap, small_topic, [Rec(b"k", b"after")], **big) == [1]
    got = kafka_python_consume(broker.bootstrap, small_topic, 2)
    assert [(g.offset, g.value) for g in got] == [(0, FITS), (1, b"after")]


def test_too_large_confluent(broker: Broker, small_topic: str) -> None:
    big = {"message.max.bytes": 10 * 1024 * 1024, "retries": 0}
    assert confluent_produce(broker.bootstrap, small_topic, [Rec(b"k", FITS)], **big) == [0]
    with pytest.raises(confluent_kafka.KafkaException) as caught:
        confluent_produce(broker.bootstrap, small_topic, [Rec(b"k", TOO_BIG)], **big)
    error = caught.value.args[0]
    assert error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE == MESSAGE_TOO_LARGE


def test_timestamp_too_far_ahead(broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic(configs={"retention.ms": "-1"})
    ahead = [Rec(b"k", b"future", (), now_ms() + 2 * HOUR_MS)]
    with pytest.raises(InvalidTimestampError) as caught:
        produce(broker.bootstrap, topic, ahead, retries=0)
    assert caught.value.errno == INVALID_TIMESTAMP
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        confluent_produce(broker.bootstrap, topic, ahead)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_TIMESTAMP
    # Old timestamps are fine (message.timestamp.before.max.ms is unlimited), and so
    # is the near future.
    fine = [
        Rec(b"k", b"old", (), now_ms() - 100 * 24 * HOUR_MS),
        Rec(b"k", b"soon", (), now_ms() + HOUR_MS // 2),
    ]
    assert produce(broker.bootstrap, topic, fine) == [0, 1]
    got = kafka_python_consume(broker.bootstrap, topic, 2)
    assert [(g.value, g.timestamp) for g in got] == [(r.value, r.timestamp) for r in fine]
