"""``/metrics`` of three brokers on a real ZooKeeper: consumer lag as Kafka's own
``kafka-consumer-groups.sh --describe`` reports it (partitions led by other brokers asked
with ListOffsets), and under-replicated partitions while a follower is paused."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import require_kafka_jars
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from metrics_scrape import Samples, scrape, total

from josefk.testing.polling import wait_until

RUN_CLASS = Path(__file__).resolve().parents[3] / "tools" / "kafka" / "run-class.sh"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
URP = "kafka_server_replicamanager_underreplicatedpartitions"


@pytest.fixture(scope="module")
def kafka_cluster_config() -> dict[str, str]:
    # A paused follower leaves the ISR after 3 s instead of 30.
    return {"replica.lag.time.max.ms": "3000"}


def _scrape_running(cluster: Any) -> dict[int, Samples]:
    return {i: scrape(b.metrics_url) for i, b in cluster.brokers.items()
            if b.running and not b.paused}


def _produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for partition, count in counts.items():
        for i in range(count):
            producer.send(topic, value=f"{partition}-{i}".encode(), partition=partition)
    producer.flush(timeout=60)
    producer.close()


def _describe_group(bootstrap: str, group: str) -> dict[int, tuple[int, int, int]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) from Kafka 4.3's tool."""
    done = subprocess.run([str(RUN_CLASS), GROUP_COMMAND, "--bootstrap-server", bootstrap,
                           "--describe", "--group", group], capture_output=True, text=True,
                          timeout=120, check=True)
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    header = next(i for i, cells in enumerate(lines) if cells and cells[0] == "GROUP")
    rows = [dict(zip(lines[header], cells, strict=False)) for cells in lines[header + 1:]
            if len(cells) >= len(lines[header]) - 3]
    return {int(r["PARTITION"]): (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]),
                                  int(r["LAG"])) for r in rows}


@pytest.mark.timeout(240)
def test_consumer_lag_matches_kafka_consumer_groups(kafka_cluster: Any) -> None:
    require_kafka_jars()
    topic, group = "metrics-lag", "metrics-lag-group"
    kafka_cluster.create_topic(topic, partitions=3, replication_factor=3)
    _produce(kafka_cluster.bootstrap, topic, {0: 10, 1: 20, 2: 30})
    committed = {0: 4, 1: 20, 2: 11}
    consumer = KafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap, group_id=group,
                             enable_auto_commit=False)
    consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                     for p, o in committed.items()})
    consumer.close()

    described = _describe_group(kafka_cluster.bootstrap, group)
    assert described == {0: (4, 10, 6), 1: (20, 20, 0), 2: (11, 30, 19)}

    lags: dict[int, dict[int, float]] = {}
    for broker_id, samples in _scrape_running(kafka_cluster).items():
        for (name, labels), v in samples.items():
            found = dict(labels)
            if name == "kafka_consumergroup_lag" and found["consumergroup"] == group:
                lags.setdefault(broker_id, {})[int(found["partition"])] = v
    [(coordinator, lag)] = lags.items()  # only the group's coordinator reports it
    assert lag == {p: float(row[2]) for p, row in described.items()}
    # Some of those high watermarks came from other brokers, through ListOffsets.
    assert any(kafka_cluster.leader(topic, p).id != coordinator for p in committed)


@pytest.mark.timeout(300)
def test_under_replicated_partitions_while_a_follower_is_paused(kafka_cluster: Any) -> None:
    topic = "metrics-urp"
    kafka_cluster.create_topic(topic, partitions=6, replication_factor=3)
    _produce(kafka_cluster.bootstrap, topic, dict.fromkeys(range(6), 5))

    def replicated() -> dict[int, Samples] | None:
        scraped = _scrape_running(kafka_cluster)
        return scraped if all(total(s, URP) == 0 for s in scraped.values()) else None

    before = wait_until(replicated, 60, "every partition fully replicated", interval=0.5)
    assert sum(total(s, "kafka_server_replicamanager_partitioncount")
               for s in before.values()) >= 18
    # Followers fetched the records: replication bytes, not a topic's bytes out.
    assert sum(total(s, "kafka_server_brokertopicmetrics_replicationbytesout_total")
               for s in before.values()) > 0
    assert sum(total(s, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
               for s in before.values()) == 0
    controller = kafka_cluster.controller_id()
    victim = next(b for i, b in kafka_cluster.brokers.items() if i != controller)
    # Partitions of the topic the victim follows while a live broker leads them.
    followed = [p for p in range(6) if kafka_cluster.leader(topic, p).id != victim.id]
    assert followed
    shrinks = sum(total(s, "kafka_server_replicamanager_isrshrinks_total")
                  for s in before.values())

    victim.pause()
    try:
        def under_replicated() -> float:
            return sum(total(s, URP) for s in _scrape_running(kafka_cluster).values())

        wait_until(lambda: under_replicated() >= len(followed), 60,
                   f"{len(followed)} under-replicated partitions with broker {victim.id} paused",
                   interval=0.5)
        during = _scrape_running(kafka_cluster)
        assert sum(total(s, "kafka_server_replicamanager_isrshrinks_total")
                   for s in during.values()) > shrinks
    finally:
        victim.resume()

    after = wait_until(replicated, 120, "the ISRs whole again after resuming", interval=0.5)
    assert len(after) == 3
    assert sum(total(s, "kafka_server_replicamanager_isrexpands_total")
               for s in after.values()) >= 1
