"""Every acknowledged record survives a restart: clean (SIGTERM) or a crash (SIGKILL).

Only when the suite started the broker itself (it restarts it on the same port
and data directory). Records are produced with acks=all and every ack awaited.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.consumer import OffsetSpec
from kafka.structs import OffsetAndMetadata

from .clients import Rec, kafka_python_consume, now_ms, produce
from .conftest import Broker

N = 2000
# Commits of one group: over 1 MiB of history in its __consumer_offsets partition.
PARTITIONS, ROUNDS = 100, 300


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_acked_records_survive(
    owned_broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient, kill: bool
) -> None:
    topic = make_topic(partitions=2, configs={"retention.ms": "987654321"})
    base = now_ms() - 60_000
    sent = [
        Rec(
            f"k{i}".encode(),
            f"value {i} ".encode() * (1 + i % 7),
            (("i", str(i).encode()),),
            base + i,
        )
        for i in range(N)
    ]
    # Small batches: many batches per partition, some compressed, some not.
    offsets = produce(owned_broker.bootstrap, topic, sent[: N // 2], batch_size=2048)
    assert offsets == list(range(N // 2))
    offsets = produce(
        owned_broker.bootstrap, topic, sent[N // 2 :], compression="lz4", batch_size=4096
    )
    assert offsets == list(range(N // 2, N))
    assert produce(owned_broker.bootstrap, topic, [Rec(b"p1", b"one")], partition=1) == [0]
    if not kill:
        admin.delete_records({TopicPartition(topic, 0): 10}, timeout_ms=15_000)

    owned_broker.restart(kill=kill)

    first = 0 if kill else 10
    got = kafka_python_consume(owned_broker.bootstrap, topic, N - first, offset=first)
    assert [g.offset for g in got] == list(range(first, N))
    assert [g.rec() for g in got] == sent[first:]
    [p1] = kafka_python_consume(owned_broker.bootstrap, topic, 1, partition=1)
    assert (p1.offset, p1.value) == (0, b"one")

    # Offsets go on where they were; the topic kept its config.
    assert produce(owned_broker.bootstrap, topic, [Rec(b"k", b"after")]) == [N]
    fresh = KafkaAdminClient(bootstrap_servers=owned_broker.bootstrap, request_timeout_ms=15_000)
    try:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        configs = fresh.describe_configs([resource])["topic"][topic]
        assert configs["retention.ms"]["value"] == "987654321"
        if not kill:
            # A clean shutdown keeps the log start offset DeleteRecords set.
            tp = TopicPartition(topic, 0)
            assert fresh.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 10
    finally:
        fresh.close()


def test_a_long_offsets_history_is_read_back_after_a_restart(
    owned_broker: Broker, make_topic: Callable[..., str], topic_name: str
) -> None:
    """A group's partition of ``__consumer_offsets`` holding 30,000 commits: after a
    restart the broker serves at once and the group's last commits come back (josefk
    and Kafka load such a partition in the background, answering
    COORDINATOR_LOAD_IN_PROGRESS meanwhile, which clients retry)."""
    topic = make_topic(partitions=PARTITIONS)
    other = make_topic(partitions=1)
    consumer = KafkaConsumer(bootstrap_servers=owned_broker.bootstrap, group_id=topic_name,
                             enable_auto_commit=False)
    try:
        for n in range(ROUNDS):
            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(n, "", -1)
                             for p in range(PARTITIONS)})
    finally:
        consumer.close()

    owned_broker.restart()

    assert produce(owned_broker.bootstrap, other, [Rec(b"k", b"served")]) == [0]
    consumer = KafkaConsumer(bootstrap_servers=owned_broker.bootstrap, group_id=topic_name,
                             enable_auto_commit=False)
    try:
        committed = {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()
    assert committed == dict.fromkeys(range(PARTITIONS), ROUNDS - 1)
