"""Log directory failures across kinds: a Kafka 3.9.1 controller handles a josefk
broker's ``log_dir_event`` notification, and a josefk controller handles one written by a
Kafka 3.9.1 broker (broker 1 is Apache Kafka, brokers 2 and 3 josefk; EIO from FUSE)."""

from __future__ import annotations

import pytest

from .harness import FAILOVER_TIMEOUT, Cluster, wait_until
from .test_log_dir_failure import DiskCluster, disk_cluster_fixture, fail_dir_and_fail_over, repair

pytestmark = [
    pytest.mark.josefk_only("a mixed cluster is josefk brokers beside Apache Kafka 3.9.1"),
]

KINDS = {1: "kafka", 2: "josefk", 3: "josefk"}
KAFKA_ID = 1

# Kafka's broker starts alone first: it is the first controller.
disks = disk_cluster_fixture(lambda config: KINDS, first=KAFKA_ID)


@pytest.fixture
def cluster(disks: DiskCluster) -> Cluster:
    return disks.cluster


def test_kafka_controller_takes_a_josefk_broker_dir_offline(disks: DiskCluster,
                                                            topic: str) -> None:
    assert disks.cluster.controller_id() == KAFKA_ID
    expected = fail_dir_and_fail_over(disks, 2, topic)
    repair(disks, 2, topic, expected)


def test_josefk_controller_takes_a_kafka_broker_dir_offline(disks: DiskCluster,
                                                            topic: str) -> None:
    cluster = disks.cluster
    if cluster.controller_id() == KAFKA_ID:
        # A controlled shutdown of Kafka's broker hands the controller to a josefk broker.
        cluster[KAFKA_ID].terminate()
        wait_until(lambda: cluster.zk.exists("/controller")
                   and cluster.controller_id() != KAFKA_ID, FAILOVER_TIMEOUT,
                   "a josefk controller")
        cluster[KAFKA_ID].start()
    assert cluster.controller_id() != KAFKA_ID
    expected = fail_dir_and_fail_over(disks, KAFKA_ID, topic)
    repair(disks, KAFKA_ID, topic, expected)
