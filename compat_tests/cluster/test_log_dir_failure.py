"""A broker's log directory returns I/O errors (a real EIO, from a FUSE file system
switched to fail): the directory goes offline as in Kafka 3.9's ZooKeeper mode.

Each broker has two log directories, the second on the EIO-on-demand file system
(`compat_tests.chaos.disk`). Once one fails, its broker writes
``/log_dir_event_notification/log_dir_event_<seq>``; the controller asks that broker
about its replicas (LeaderAndIsr), and those answered KAFKA_STORAGE_ERROR go offline:
new leaders among the other ISR members, the ISR shrinks, the notification is
deleted. The broker keeps running and serving its other directory; acks=all producers
lose nothing and never hang; a restart with the directory repaired brings the replicas
back into the ISR. Root only; green on josefk and on Apache Kafka 3.9.1 (``--kafka``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ..chaos import disk
from .conftest import broker_kinds, first_controller, need_jars
from .harness import (
    BROKER_IDS,
    CLUSTER_START_TIMEOUT,
    FAILOVER_TIMEOUT,
    Cluster,
    ZooKeeperServer,
    partition_state,
    wait_until,
)
from .test_produce_consume import Records, check_partitions, produce_keyed

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(disk.available() is not None, reason=disk.available() or "")]

PARTITIONS = 6
STORAGE_ERROR = 56


class DiskCluster:
    """A cluster whose brokers each have a second log directory on an EIO file system."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.mounts: dict[int, tuple[Path, Path, subprocess.Popen[bytes]]] = {}

    def mount(self, broker_id: int) -> Path:
        home = self.cluster.home
        backing, mount = home / f"eio-{broker_id}-backing", home / f"eio-{broker_id}"
        self.mounts[broker_id] = (backing, mount, disk.mount_eio_fs(backing, mount))
        return mount

    def fail(self, broker_id: int, on: bool = True) -> None:
        disk.set_eio(self.mounts[broker_id][0], on)

    def eio_dir(self, broker_id: int) -> Path:
        return self.mounts[broker_id][1]

    def unmount_all(self) -> None:
        for backing, mount, process in self.mounts.values():
            disk.set_eio(backing, False)
            disk.unmount_eio_fs(mount, process)


def disk_cluster_fixture(kinds: Callable[[pytest.Config], dict[int, str]],
                         first: int | None = None) -> Callable[..., Iterator[DiskCluster]]:
    """A module's cluster of ``kinds`` with EIO-capable second log directories; broker
    ``first`` starts alone first (so that it becomes the controller)."""

    def fixture(request: pytest.FixtureRequest, zookeeper: ZooKeeperServer,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiskCluster]:
        chosen = kinds(request.config)
        leader = first if first is not None else first_controller(request.config)
        need_jars(request.config, kafka="kafka" in chosen.values())
        timeout = max(CLUSTER_START_TIMEOUT[k] for k in chosen.values())
        cluster = Cluster(zookeeper, tmp_path_factory.mktemp("cluster"), chosen, timeout)
        disks = DiskCluster(cluster)
        try:
            for broker_id, kind in chosen.items():
                mount = disks.mount(broker_id)
                data = cluster.home / f"broker-{broker_id}" / "data"
                cluster.brokers[broker_id] = cluster.new_broker(
                    broker_id, kind, extra={"log.dirs": f"{data},{mount}"})
            if leader is not None:
                cluster[leader].start()
                wait_until(lambda: cluster.zk.exists("/controller"), timeout, "a controller")
            for broker_id in chosen:
                if broker_id != leader:
                    cluster[broker_id].start()
            yield disks
        finally:
            cluster.stop()
            disks.unmount_all()

    return pytest.fixture(scope="module", name="disks")(fixture)


disks = disk_cluster_fixture(broker_kinds)


@pytest.fixture
def cluster(disks: DiskCluster) -> Cluster:
    return disks.cluster


def partitions_in_dir(cluster: Cluster, broker_id: int, topic: str, log_dir: Path
                      ) -> tuple[set[int], int]:
    """DescribeLogDirs of one broker: (the topic's partitions in ``log_dir``, its error)."""
    with cluster.admin() as admin:
        answer = admin.describe_log_dirs([topic], brokers=[broker_id])
    for broker in answer:
        for d in broker["log_dirs"]:
            if Path(d["log_dir"]) == log_dir:
                return ({p["partition_index"] for t in d["topics"] if t["name"] == topic
                         for p in t["partitions"]}, d["error_code"])
    raise AssertionError(f"broker {broker_id} does not list {log_dir}: {answer}")


def fail_dir_and_fail_over(disks: DiskCluster, victim: int, topic: str) -> Records:
    """Fail the victim's EIO directory under an acks=all producer and check Kafka's
    behaviour; returns every record acknowledged (all still readable)."""
    cluster = disks.cluster
    cluster.create_topic(topic, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    before = produce_keyed(cluster, topic, 300, tag="before ")
    failing, _ = partitions_in_dir(cluster, victim, topic, disks.eio_dir(victim))
    assert failing, f"no partition of {topic} in broker {victim}'s second log dir"

    disks.fail(victim)
    # Acks=all through the failure: nothing hangs, nothing acknowledged is lost.
    during = produce_keyed(cluster, topic, 300, tag="during ")

    for p in failing:
        wait_until(lambda p=p: (lambda s: s["leader"] != victim and victim not in s["isr"])(
            partition_state(cluster.zk, topic, p)), FAILOVER_TIMEOUT,
            f"{topic}-{p} led and replicated without broker {victim}")
    wait_until(lambda: not cluster.zk.get_children("/log_dir_event_notification"),
               FAILOVER_TIMEOUT, "the log dir event notification deleted")
    assert cluster[victim].running, cluster[victim].log_tail()
    _, error = partitions_in_dir(cluster, victim, topic, disks.eio_dir(victim))
    assert error == STORAGE_ERROR
    # The victim's other directory still serves: its replicas there stay in the ISR.
    healthy = set(range(PARTITIONS)) - failing
    for p in healthy:
        assert victim in partition_state(cluster.zk, topic, p)["isr"], p
    everything = {p: before.get(p, []) + during.get(p, []) for p in range(PARTITIONS)}
    check_partitions(cluster, topic, everything)
    return everything


def repair(disks: DiskCluster, victim: int, topic: str, expected: Records) -> None:
    """Heal the file system and restart the victim: its replicas catch up and rejoin."""
    cluster = disks.cluster
    disks.fail(victim, on=False)
    cluster[victim].terminate()
    cluster[victim].start()
    cluster.wait_in_sync(topic, PARTITIONS, timeout=FAILOVER_TIMEOUT * 3)
    after = produce_keyed(cluster, topic, 60, tag="after ")
    check_partitions(cluster, topic, {p: expected[p] + after.get(p, [])
                                      for p in range(PARTITIONS)})


def test_a_failed_log_dir_fails_over_and_comes_back(disks: DiskCluster, topic: str) -> None:
    cluster = disks.cluster
    victim = next(b for b in BROKER_IDS if b != cluster.controller_id())
    expected = fail_dir_and_fail_over(disks, victim, topic)
    repair(disks, victim, topic, expected)
