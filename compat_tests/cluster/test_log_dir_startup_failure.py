"""A broker restarts with one log directory failing (a real EIO, the FUSE file system of
`compat_tests.chaos.disk`): its replicas there stay offline, as in Kafka 3.9's ZooKeeper
mode. The controller's LeaderAndIsr (not a new partition) finds no log for them and the
broker makes none afresh in its healthy directory (Kafka's ``getOrCreateLog`` refuses
while a directory is offline), answers KAFKA_STORAGE_ERROR, and from then on answers it to
every read of those partitions (``markPartitionOffline``); the controller takes the
replicas offline, the other replicas serve. A restart with the directory repaired brings
them back into the ISR with every record. Root only; green on josefk and on Apache
Kafka 3.9.1 (``--kafka``).
"""

from __future__ import annotations

import pytest

from ..chaos import disk
from ..rawkafka import RawConnection
from ..test_offline_reads import fetch_error, list_offsets_error
from .conftest import broker_kinds
from .harness import BROKER_IDS, FAILOVER_TIMEOUT, partition_state, wait_until
from .test_log_dir_failure import (
    PARTITIONS,
    STORAGE_ERROR,
    DiskCluster,
    disk_cluster_fixture,
    partitions_in_dir,
)
from .test_produce_consume import check_partitions, produce_keyed

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(disk.available() is not None, reason=disk.available() or "")]

disks = disk_cluster_fixture(broker_kinds)
LATEST = -1


def test_a_log_dir_failing_at_startup_keeps_its_replicas_offline(disks: DiskCluster,
                                                                 topic: str) -> None:
    cluster = disks.cluster
    victim = next(b for b in BROKER_IDS if b != cluster.controller_id())
    cluster.create_topic(topic, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    before = produce_keyed(cluster, topic, 200, tag="before ")
    failing, _ = partitions_in_dir(cluster, victim, topic, disks.eio_dir(victim))
    assert failing, f"no partition of {topic} in broker {victim}'s second log dir"

    cluster[victim].terminate()
    disks.fail(victim)
    cluster[victim].start()
    for p in failing:
        wait_until(lambda p=p: victim not in partition_state(cluster.zk, topic, p)["isr"],
                   FAILOVER_TIMEOUT, f"broker {victim}'s replica of {topic}-{p} offline")
    healthy = cluster.home / f"broker-{victim}" / "data"  # as disk_cluster_fixture makes it
    in_healthy, error = partitions_in_dir(cluster, victim, topic, healthy)
    assert error == 0 and not in_healthy & failing, in_healthy  # not made afresh there
    with RawConnection(cluster[victim].bootstrap) as raw:
        for p in sorted(failing):
            # Once the controller's LeaderAndIsr reached the broker (NOT_LEADER_OR_FOLLOWER
            # before: it hosts nothing yet).
            wait_until(lambda p=p: (list_offsets_error(raw, topic, p, LATEST),
                                    fetch_error(raw, topic, p, 12))
                       == (STORAGE_ERROR, STORAGE_ERROR), FAILOVER_TIMEOUT,
                       f"{topic}-{p} answered KAFKA_STORAGE_ERROR by broker {victim}")
    during = produce_keyed(cluster, topic, 200, tag="during ")
    expected = {p: before.get(p, []) + during.get(p, []) for p in range(PARTITIONS)}
    check_partitions(cluster, topic, expected)

    disks.fail(victim, on=False)
    cluster[victim].terminate()
    cluster[victim].start()
    cluster.wait_in_sync(topic, PARTITIONS, timeout=FAILOVER_TIMEOUT * 3)
    check_partitions(cluster, topic, expected)
