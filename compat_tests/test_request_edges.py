"""Requests a stock client would not send but a broker must answer as Kafka does.

- Fetch: a partition asked for twice is answered once, for the later ask (Kafka reads
  a request's partitions into a map).
- Metadata: a topic named twice is described once (Kafka takes the names as a set); at
  v0 an empty topic list means every topic.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka import KafkaProducer
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from .conftest import Broker
from .rawkafka import RawConnection, parse_batches


def ask(partition: int, offset: int) -> FetchRequest.FetchTopic.FetchPartition:
    return FetchRequest.FetchTopic.FetchPartition(
        partition=partition, current_leader_epoch=-1, fetch_offset=offset,
        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)


def test_a_partition_asked_for_twice_is_answered_once(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    try:
        for i in range(3):
            producer.send(topic, value=b"v%d" % i, partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    with RawConnection(broker.bootstrap) as conn:
        version = conn.pick_version(FetchRequest, 4, 12)
        request = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                ask(0, 0), ask(1, 0), ask(0, 2)])])
        response = conn.request(request, version)
    assert response.error_code == 0
    [answer] = response.responses
    assert [p.partition_index for p in answer.partitions] == [0, 1]
    first = answer.partitions[0]
    assert first.error_code == 0 and first.high_watermark == 3
    assert [(b.base_offset, b.record_count) for b in parse_batches(bytes(first.records))] == [
        (2, 1)]


def test_a_topic_named_twice_is_described_once(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    topic, other = make_topic(), make_topic()
    with RawConnection(broker.bootstrap) as conn:
        version = conn.pick_version(MetadataRequest, 1, 12)
        names = [topic, other, topic, topic]
        response = conn.request(MetadataRequest(topics=[
            MetadataRequest.MetadataRequestTopic(name=n) for n in names]), version)
    assert sorted(t.name for t in response.topics) == sorted([topic, other])


def test_metadata_v0_with_no_topics_describes_every_topic(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    with RawConnection(broker.bootstrap) as conn:
        lowest = conn.api_versions()[MetadataRequest.API_KEY][0]
        if lowest > 0:
            pytest.skip(f"this broker's Metadata starts at v{lowest}")
        response = conn.request(MetadataRequest(topics=[]), 0)
    assert topic in {t.name for t in response.topics}
