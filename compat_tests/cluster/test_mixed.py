"""A mixed cluster: one Apache Kafka 3.9.1 broker and two josefk brokers on one ZooKeeper.

The proof that josefk speaks Kafka's ZooKeeper-mode protocol: each kind leads
partitions the other follows, and leadership moves between them. Runs only
against josefk (it needs josefk brokers) and Kafka 3.9's jars.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.protocol.producer import InitProducerIdRequest

from ..rawkafka import RawConnection
from .conftest import cluster_fixture
from .harness import (
    CLUSTER_START_TIMEOUT,
    FAILOVER_TIMEOUT,
    Cluster,
    ZooKeeperServer,
    partition_state,
    wait_until,
)
from .test_produce_consume import check_partitions, produce_keyed, wait_replicas_identical

pytestmark = [
    pytest.mark.josefk_only("a mixed cluster is josefk brokers beside Apache Kafka 3.9.1"),
]

KINDS = {1: "kafka", 2: "josefk", 3: "josefk"}
KAFKA_ID = 1
PREFERRED = 0


cluster = cluster_fixture(
    lambda config: KINDS, "Broker 1 is Apache Kafka 3.9.1, brokers 2 and 3 are josefk."
)


def test_both_kinds_lead_and_follow(cluster: Cluster, topic: str) -> None:
    view = cluster.create_topic(topic, partitions=3, replication_factor=3)
    leaders = view.leaders(topic)
    assert {KINDS[b] for b in leaders.values()} == {"kafka", "josefk"}, leaders
    per_partition = produce_keyed(cluster, topic, 600)
    assert set(per_partition) == {0, 1, 2}
    wait_replicas_identical(cluster, topic, 3)
    check_partitions(cluster, topic, per_partition)


def test_leadership_moves_between_kinds(cluster: Cluster, topic: str) -> None:
    view = cluster.create_topic(topic, partitions=3, replication_factor=3)
    led_by_kafka = [p for p, leader in view.leaders(topic).items() if leader == KAFKA_ID]
    assert led_by_kafka, view.leaders(topic)
    before = produce_keyed(cluster, topic, 300, tag="before ")

    # Kafka's broker crashes: josefk brokers take over its partitions.
    cluster[KAFKA_ID].kill()
    for p in led_by_kafka:
        wait_until(
            lambda p=p: partition_state(cluster.zk, topic, p)["leader"] in (2, 3),
            FAILOVER_TIMEOUT, f"a josefk leader for {topic}-{p}",
        )
    check_partitions(cluster, topic, before)

    # Back, Kafka's broker catches up from josefk leaders and leads again when asked.
    cluster[KAFKA_ID].start()
    cluster.wait_in_sync(topic, 3)
    with cluster.admin() as admin:
        response = admin.elect_leaders(PREFERRED, {topic: led_by_kafka}, timeout_ms=30_000)
    assert response.error_code == 0
    cluster.agreed_view(
        [topic], lambda v: all(v.leaders(topic)[p] == KAFKA_ID for p in led_by_kafka),
        what="Kafka's broker to lead its preferred partitions again",
    )
    after = produce_keyed(cluster, topic, 300, tag="after ")
    wait_replicas_identical(cluster, topic, 3)
    check_partitions(
        cluster, topic, {p: before.get(p, []) + after.get(p, []) for p in range(3)}
    )


def test_a_kafka_controller_allocates_producer_ids_in_paths_josefk_created(
        zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """josefk used to create the top-level znodes with empty values where Kafka writes
    null ones; a Kafka controller then failed to parse ``/latest_producer_id_block`` and
    answered every AllocateProducerIds with UNKNOWN_SERVER_ERROR, so the first block of
    the cluster could never be handed out (issue 32)."""
    fresh = Cluster(zookeeper, tmp_path, {1: "kafka", 2: "josefk"},
                    CLUSTER_START_TIMEOUT["kafka"])
    try:
        fresh[2].start()  # alone: josefk creates the paths and is the controller
        assert fresh.controller_id() == 2
        fresh[2].terminate()
        fresh[1].start()
        wait_until(lambda: fresh.controller_id() == 1, FAILOVER_TIMEOUT, "Kafka as controller")
        fresh[2].start()
        with RawConnection(fresh[2].bootstrap, timeout=30) as conn:
            version = conn.pick_version(InitProducerIdRequest, 0, 4)
            answer = conn.request(InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60_000), version)
        assert answer.error_code == 0 and answer.producer_id >= 0, answer
        assert fresh.zk.get("/latest_producer_id_block")[0], "the block Kafka allocated"
    finally:
        fresh.stop()
