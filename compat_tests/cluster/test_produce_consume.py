"""Records through the cluster: acks=all to three replicas, read back by a consumer group."""

from __future__ import annotations

import uuid
from collections import defaultdict

import confluent_kafka
from kafka import KafkaProducer

from ..clients import PRODUCE_TIMEOUT, confluent_consumer, confluent_poll, kafka_python_consume
from .harness import BROKER_IDS, Cluster, wait_until

N = 600

Records = dict[int, list[tuple[bytes, bytes]]]


def produce_keyed(cluster: Cluster, topic: str, count: int, tag: str = "") -> Records:
    """Produce ``count`` keyed records with kafka-python's defaults (idempotent) and acks=all.

    Returns what each partition got, in offset order (the acks' offsets run on without gaps).
    """
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5,
        request_timeout_ms=15_000, max_block_ms=15_000, client_id="cluster-producer",
    )
    try:
        sent = [(f"key-{i}".encode(), f"value {tag}{i} ".encode() * (1 + i % 9))
                for i in range(count)]
        futures = [producer.send(topic, key=k, value=v) for k, v in sent]
        producer.flush(timeout=PRODUCE_TIMEOUT)
        acked = [f.get(timeout=PRODUCE_TIMEOUT) for f in futures]
    finally:
        producer.close(timeout=5)
    per_partition: Records = defaultdict(list)
    offsets: dict[int, list[int]] = defaultdict(list)
    for record, meta in zip(sent, acked, strict=True):
        per_partition[meta.partition].append(record)
        offsets[meta.partition].append(meta.offset)
    for p, got in offsets.items():
        assert got == list(range(got[0], got[0] + len(got))), f"offsets of {topic}-{p}: {got}"
    return dict(per_partition)


def replica_sizes(cluster: Cluster, topic: str) -> dict[int, dict[int, int]]:
    """DescribeLogDirs: partition -> {broker id: bytes of its replica}."""
    sizes: dict[int, dict[int, int]] = defaultdict(dict)
    with cluster.admin() as admin:
        for broker in admin.describe_log_dirs([topic]):
            for log_dir in broker["log_dirs"]:
                for t in log_dir["topics"]:
                    for p in t["partitions"]:
                        sizes[p["partition_index"]][broker["broker"]] = p["partition_size"]
    return dict(sizes)


def wait_replicas_identical(cluster: Cluster, topic: str, partitions: int) -> None:
    """Every broker's replica of each partition holds the same number of bytes (> 0)."""

    def identical() -> bool:
        sizes = replica_sizes(cluster, topic)
        return len(sizes) == partitions and all(
            set(s) == set(BROKER_IDS) and len(set(s.values())) == 1 and min(s.values()) > 0
            for s in sizes.values()
        )

    wait_until(identical, 30, f"every replica of {topic} to hold the same bytes")


def check_partitions(cluster: Cluster, topic: str, expected: Records) -> None:
    """Each partition read from its leader holds exactly ``expected``, in order."""
    for p, records in expected.items():
        got = kafka_python_consume(cluster.bootstrap, topic, len(records), partition=p)
        assert [(g.offset, g.key, g.value) for g in got] == [
            (i, k, v) for i, (k, v) in enumerate(records)
        ], f"{topic}-{p}"


def test_acks_all_produce_and_group_consume(cluster: Cluster, topic: str) -> None:
    view = cluster.create_topic(topic, partitions=3, replication_factor=3)
    assert sorted(view.leaders(topic).values()) == list(BROKER_IDS), "every broker leads one"
    per_partition = produce_keyed(cluster, topic, N)
    assert set(per_partition) == {0, 1, 2}
    # Followers copy the leader's log byte for byte.
    wait_replicas_identical(cluster, topic, 3)
    check_partitions(cluster, topic, per_partition)

    # All of it again through a consumer group, whose commit is read back.
    group = f"cluster-group-{uuid.uuid4().hex[:8]}"
    consumer = confluent_consumer(
        cluster.bootstrap, **{"group.id": group, "enable.auto.offset.store": True}
    )
    try:
        consumer.subscribe([topic])
        got = confluent_poll(consumer, N, timeout=60)
        consumer.commit(asynchronous=False)
        committed = consumer.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(3)], timeout=15
        )
    finally:
        consumer.close()
    sent = [record for records in per_partition.values() for record in records]
    assert sorted((g.key, g.value) for g in got) == sorted(sent)
    assert {c.partition: c.offset for c in committed} == {
        p: len(records) for p, records in per_partition.items()
    }

    # The offsets live in __consumer_offsets, made with offsets.topic.replication.factor=3.
    internal = cluster.agreed_view(["__consumer_offsets"]).topics["__consumer_offsets"]
    assert internal.error_code == 0 and len(internal.partitions) == 50
    assert all(sorted(p.replicas) == list(BROKER_IDS) for p in internal.partitions.values())
