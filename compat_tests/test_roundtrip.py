"""Produce and consume with every client and codec: what is read back is what was sent.

Besides keys, values, headers and timestamps, the batches are fetched raw to
check the broker stored and returned them with the producer's codec.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .clients import (
    CODEC_IDS,
    CODECS,
    CONSUMERS,
    CREATE_TIME,
    LOG_APPEND_TIME,
    PRODUCERS,
    Rec,
    kcat_consume,
    kcat_produce,
    now_ms,
    sample_records,
)
from .conftest import Broker
from .rawkafka import RawConnection

# kafka-python 3 is idempotent by default (like the Java client); aiokafka and
# librdkafka are not. The broker keeps the producer id and sequences as sent.
IDEMPOTENT_BY_DEFAULT = {"kafka-python": True, "aiokafka": False, "confluent-kafka": False}


def assert_batches(
    bootstrap: str, topic: str, codec: str, records: int, idempotent: bool = False
) -> None:
    """Every stored batch carries ``codec`` and together they hold ``records`` records.

    ``idempotent``: the batches carry one producer id and consecutive sequences from 0.
    """
    with RawConnection(bootstrap) as conn:
        batches = conn.all_batches(topic)
    assert batches, "no batch fetched"
    assert [b.codec for b in batches] == [CODEC_IDS[codec]] * len(batches), batches
    assert sum(b.record_count for b in batches) == records
    assert batches[0].base_offset == 0
    for prev, nxt in zip(batches, batches[1:], strict=False):
        assert nxt.base_offset == prev.next_offset
    if idempotent:
        assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
        assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]
    else:
        # (aiokafka sends base sequence 0 here, librdkafka -1: stored as sent either way)
        assert {b.producer_id for b in batches} == {-1}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_roundtrip(broker: Broker, make_topic: Callable[..., str], client: str, codec: str) -> None:
    topic = make_topic()
    sent = sample_records(now_ms() - 3_600_000)

    offsets = PRODUCERS[client](broker.bootstrap, topic, sent, compression=codec)
    assert offsets == list(range(len(sent)))

    got = CONSUMERS[client](broker.bootstrap, topic, len(sent))
    assert [g.offset for g in got] == list(range(len(sent)))
    assert [g.rec() for g in got] == sent
    assert {g.timestamp_type for g in got} == {CREATE_TIME}
    assert_batches(broker.bootstrap, topic, codec, len(sent), IDEMPOTENT_BY_DEFAULT[client])


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_cross_client(broker: Broker, make_topic: Callable[..., str], producer: str) -> None:
    """What one client produced (zstd) every other client reads identically."""
    topic = make_topic()
    sent = sample_records(now_ms() - 3_600_000)
    PRODUCERS[producer](broker.bootstrap, topic, sent, compression="zstd")
    for consumer, consume in CONSUMERS.items():
        got = consume(broker.bootstrap, topic, len(sent))
        assert [g.rec() for g in got] == sent, f"{producer} -> {consumer}"


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_roundtrip(broker: Broker, make_topic: Callable[..., str], kcat: str, codec: str):
    topic = make_topic()
    headers = (("origin", b"kcat"), ("empty", b""), ("origin", b"twice"))
    filler = "compresses well " * 64
    sent = [
        Rec(None if i % 6 == 5 else f"k{i}".encode(), f"v{i} {filler}".encode(), headers)
        for i in range(12)
    ]
    sent[4] = Rec(b"k4", None, headers)  # tombstone
    before = now_ms()
    kcat_produce(kcat, broker.bootstrap, topic, sent, compression=codec)
    after = now_ms()

    got = kcat_consume(kcat, broker.bootstrap, topic, len(sent))
    assert [g.offset for g in got] == list(range(len(sent)))
    assert [(g.key, g.value, g.headers) for g in got] == [(r.key, r.value, r.headers) for r in sent]
    assert {g.timestamp_type for g in got} == {CREATE_TIME}
    for g in got:
        assert before - 1000 <= g.timestamp <= after + 1000
    assert_batches(broker.bootstrap, topic, codec, len(sent))


def test_null_header_value(broker: Broker, make_topic: Callable[..., str]) -> None:
    """A header with a null value (length -1) stays null, distinct from an empty one.

    kafka-python refuses to send one, so librdkafka sends it; every client reads it.
    """
    topic = make_topic()
    sent = [Rec(b"k", b"v", (("null", None), ("empty", b""), ("x", b"1")), now_ms() - 1000)]
    assert PRODUCERS["confluent-kafka"](broker.bootstrap, topic, sent) == [0]
    for consumer, consume in CONSUMERS.items():
        got = consume(broker.bootstrap, topic, 1)
        assert [g.rec() for g in got] == sent, consumer


def test_log_append_time(broker: Broker, make_topic: Callable[..., str]) -> None:
    """With message.timestamp.type=LogAppendTime the broker stamps each batch itself."""
    topic = make_topic(configs={"message.timestamp.type": "LogAppendTime"})
    sent = sample_records(now_ms() - 3_600_000)
    before = now_ms()
    assert PRODUCERS["kafka-python"](broker.bootstrap, topic, sent) == list(range(len(sent)))
    after = now_ms()
    for consumer, consume in CONSUMERS.items():
        got = consume(broker.bootstrap, topic, len(sent))
        assert [(g.key, g.value, g.headers) for g in got] == [
            (r.key, r.value, r.headers) for r in sent
        ], consumer
        assert {g.timestamp_type for g in got} == {LOG_APPEND_TIME}, consumer
        for g in got:
            assert before <= g.timestamp <= after, (consumer, g.offset, g.timestamp)
    with RawConnection(broker.bootstrap) as conn:
        batches = conn.all_batches(topic)
    assert {b.timestamp_type for b in batches} == {LOG_APPEND_TIME}
