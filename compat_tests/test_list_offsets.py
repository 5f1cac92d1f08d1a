"""ListOffsets: earliest, latest, by timestamp, max timestamp, and past the last record.

The topic holds three batches: offsets 0-4 at ``base + i*1000``, 5-9 likewise,
and offset 10 at ``base + 500`` (older than most). A timestamp lookup returns
the first offset *in log order* whose timestamp is >= the target, so ``base+500``
finds offset 1, not 10; and nothing is >= ``base+9001``, which must be "not
found" (kafka-python None, librdkafka -1), not an error.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable

import confluent_kafka
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaAdminClient, TopicPartition
from kafka.protocol.consumer import OffsetSpec as KpOffsetSpec

from .clients import Rec, confluent_consumer, kafka_python_consumer, now_ms, produce
from .conftest import Broker

# target timestamp offset from base -> (offset, record timestamp offset from base) or None
LOOKUPS: dict[int, tuple[int, int] | None] = {
    -10_000: (0, 0),
    0: (0, 0),
    500: (1, 1000),
    3000: (3, 3000),
    3500: (4, 4000),
    4500: (5, 5000),
    9000: (9, 9000),
    9001: None,
    10_000_000: None,
}


@pytest.fixture
def timed_topic(broker: Broker, make_topic: Callable[..., str]) -> tuple[str, int]:
    """A topic with the three batches described above; returns (topic, base)."""
    topic = make_topic()
    base = now_ms() - 3_600_000
    for first, last in ((0, 5), (5, 10)):
        recs = [
            Rec(f"k{i}".encode(), f"v{i}".encode(), (), base + i * 1000) for i in range(first, last)
        ]
        assert produce(broker.bootstrap, topic, recs) == list(range(first, last))
    late = [Rec(b"k10", b"v10", (), base + 500)]
    assert produce(broker.bootstrap, topic, late) == [10]
    return topic, base


def test_kafka_python(broker: Broker, timed_topic: tuple[str, int]) -> None:
    topic, base = timed_topic
    tp = TopicPartition(topic, 0)
    consumer = kafka_python_consumer(broker.bootstrap)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 11}
        for delta, want in LOOKUPS.items():
            found = consumer.offsets_for_times({tp: base + delta})[tp]
            if want is None:
                assert found is None, (delta, found)
            else:
                assert found is not None, delta
                assert (found.offset, found.timestamp) == (want[0], base + want[1]), delta
    finally:
        consumer.close()


def test_kafka_python_admin_specs(broker: Broker, timed_topic: tuple[str, int]) -> None:
    topic, base = timed_topic
    tp = TopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
    try:
        got = {
            spec: admin.list_partition_offsets({tp: spec})[tp]
            for spec in (KpOffsetSpec.EARLIEST, KpOffsetSpec.LATEST, KpOffsetSpec.MAX_TIMESTAMP)
        }
    finally:
        admin.close()
    assert got[KpOffsetSpec.EARLIEST].offset == 0
    assert got[KpOffsetSpec.LATEST].offset == 11
    # MAX_TIMESTAMP: the record with the largest timestamp (offset 9), not the last one.
    assert (got[KpOffsetSpec.MAX_TIMESTAMP].offset, got[KpOffsetSpec.MAX_TIMESTAMP].timestamp) == (
        9,
        base + 9000,
    )


def test_aiokafka(broker: Broker, timed_topic: tuple[str, int]) -> None:
    topic, base = timed_topic
    tp = AioTopicPartition(topic, 0)

    async def lookups() -> tuple[dict, dict, dict]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
        await consumer.start()
        try:
            first = await consumer.beginning_offsets([tp])
            end = await consumer.end_offsets([tp])
            by_time = {
                delta: (await consumer.offsets_for_times({tp: base + delta}))[tp]
                for delta in LOOKUPS
            }
            return first, end, by_time
        finally:
            await consumer.stop()

    first, end, by_time = asyncio.run(asyncio.wait_for(lookups(), 30))
    assert first == {tp: 0}
    assert end == {tp: 11}
    for delta, want in LOOKUPS.items():
        found = by_time[delta]
        if want is None:
            assert found is None, (delta, found)
        else:
            assert found is not None, delta
            assert (found.offset, found.timestamp) == (want[0], base + want[1]), delta


def test_confluent(broker: Broker, timed_topic: tuple[str, int]) -> None:
    topic, base = timed_topic
    consumer = confluent_consumer(broker.bootstrap)
    try:
        assert consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=10
        ) == (0, 11)
        for delta, want in LOOKUPS.items():
            [found] = consumer.offsets_for_times(
                [confluent_kafka.TopicPartition(topic, 0, base + delta)], timeout=10
            )
            assert found.error is None, (delta, found.error)
            assert found.offset == (-1 if want is None else want[0]), delta
    finally:
        consumer.close()

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max": OffsetSpec.max_timestamp(),
        "t3500": OffsetSpec.for_timestamp(base + 3500),
    }
    results = {}
    for name, spec in specs.items():
        tp = confluent_kafka.TopicPartition(topic, 0)
        [future] = admin.list_offsets({tp: spec}, request_timeout=10).values()
        results[name] = future.result(timeout=15)
    assert results["earliest"].offset == 0
    assert results["latest"].offset == 11
    assert (results["max"].offset, results["max"].timestamp) == (9, base + 9000)
    assert (results["t3500"].offset, results["t3500"].timestamp) == (4, base + 4000)


def test_kcat_query(broker: Broker, timed_topic: tuple[str, int], kcat: str) -> None:
    topic, base = timed_topic
    # kcat prints "<topic> [<partition>] offset <n>"; -1 means no such offset (OFFSET_END).
    # One partition may appear once per query, hence one run per timestamp.
    for delta, want in ((3500, 4), (9001, -1)):
        args = [kcat, "-Q", "-b", broker.bootstrap, "-m", "10", "-t", f"{topic}:0:{base + delta}"]
        done = subprocess.run(args, capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().split() == [topic, "[0]", "offset", str(want)], delta
