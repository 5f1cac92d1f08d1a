"""Three brokers seen as one by the scale bench (``python -m bench.scale --cluster``).

Each partition count runs against three josefk brokers, then three Apache Kafka 3.9.1
brokers in ZooKeeper mode (bench/cluster_brokers.py), on one ZooKeeper for the run,
with the same steps as a single broker: topics created with replication factor 3
(until every partition has a leader and three replicas in sync), produce and the
restart probes with acks=all. With three brokers and replication factor 3 every
broker hosts a replica of every partition. Memory is the three brokers' sum,
descriptors the most any one holds; a restart stops or kills all three at once and
times spawn to every port open, and to an acks=all answer on every partition.
"""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.brokers import BrokerError, BrokerProcess, port_open, process_tree, status_kib
from bench.cluster_brokers import Cluster, ZooKeeper


def measured_pid(broker: BrokerProcess) -> int:
    """The process to measure: the JVM for Kafka (its start script execs it), else the root."""
    if broker.kind == "kafka":
        for pid in process_tree(broker.pid):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                    return pid
    return broker.pid


def process_state(pid: int) -> dict[str, Any]:
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = None
    return {"pid": pid, "rss_mib": round(status_kib(pid, "VmRSS") / 1024, 1),
            "hwm_mib": round(status_kib(pid, "VmHWM") / 1024, 1), "fds": fds}


class ClusterTarget:
    """A three-broker :class:`Cluster` with the interface the scale bench's steps use."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.kind = cluster.kind
        self.data_dir = cluster.home

    @property
    def brokers(self) -> list[BrokerProcess]:
        return list(self.cluster.brokers.values())

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def _telling(self) -> BrokerProcess:
        """The first broker that died (whose log says why), else the first."""
        return next((b for b in self.brokers if not b.alive()), self.brokers[0])

    @property
    def proc(self) -> Any:
        return self._telling().proc

    @property
    def log_path(self) -> Path:
        return self._telling().log_path

    def alive(self) -> bool:
        return not self.cluster.dead()

    def listening(self) -> bool:
        return all(port_open(b.port, 0.05) for b in self.brokers)

    def start(self, timeout: float) -> float:
        return self.cluster.start(timeout)

    def spawn(self) -> float:
        began = time.monotonic()
        for b in self.brokers:
            b.spawn()
        return began

    def stop(self, kill: bool = False, timeout: float = 20.0) -> None:
        """All three at once (a clean stop of one at a time would move leaderships)."""
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            list(pool.map(lambda b: b.stop(kill=kill, timeout=timeout), self.brokers))

    def wait_unregistered(self, timeout: float) -> float:
        """Seconds until ZooKeeper has dropped the brokers' registrations: after a SIGKILL
        their sessions live on for zookeeper.session.timeout.ms, and a broker started
        meanwhile refuses to start (Kafka's and josefk's "node already exists")."""
        from kazoo.client import KazooClient

        began = time.monotonic()
        zk = KazooClient(hosts=self.cluster.zk_connect, timeout=10)
        zk.start(timeout=10)
        try:
            while zk.exists("/brokers/ids") and zk.get_children("/brokers/ids"):
                if time.monotonic() - began > timeout:
                    raise BrokerError(f"brokers still registered {timeout:.0f}s after SIGKILL")
                time.sleep(0.1)
        finally:
            zk.stop()
            zk.close()
        return time.monotonic() - began

    def state(self) -> dict[str, Any]:
        each = [process_state(measured_pid(b)) for b in self.brokers if b.alive()]
        fds = [s["fds"] for s in each if s["fds"] is not None]
        return {"brokers": each, "rss_mib": round(sum(s["rss_mib"] for s in each), 1),
                "hwm_mib": round(sum(s["hwm_mib"] for s in each), 1),
                "fds": max(fds) if fds else None}


def new_target(kind: str, zookeeper: ZooKeeper, home: Path, logs: Path, tag: str
               ) -> ClusterTarget:
    return ClusterTarget(Cluster(kind, zookeeper, home, logs, tag=tag))
