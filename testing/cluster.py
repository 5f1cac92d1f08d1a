"""Three josefk brokers as processes on one ZooKeeper: the ``kafka_cluster`` fixture.

Processes, not threads like ``kafka_broker``: a test kills (SIGKILL) and pauses
(SIGSTOP) a broker, which takes a process of its own, and a broker dying must take
nothing else with it.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from josefk.testing.admin import cluster_view, create_topic
from josefk.testing.polling import free_port, wait_until
from josefk.testing.process import ManagedProcess, ProcessExited

BROKER_IDS = (1, 2, 3)
# A dead broker's leaderships move once ZooKeeper expires its session: short, for
# failover tests, but long enough for a loaded machine not to expire a live one.
SESSION_TIMEOUT_MS = 6000
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0

# Every broker of a cluster gets these (a test's kafka_cluster_config goes on top).
CLUSTER_SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "zookeeper.connection.timeout.ms": "20000",
    # Leaderships move only when a test makes them (kill, stop, pause).
    "auto.leader.rebalance.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "controlled.shutdown.retry.backoff.ms": "500",
}


class Registry(Protocol):
    """Whether ZooKeeper still holds a broker's registration."""

    def registered(self, broker_id: int) -> bool: ...


def _not_yet() -> tuple[type[BaseException], ...]:
    from josefk.server.admin import AdminError

    return (AdminError, OSError, TimeoutError)


class ClusterBroker:
    """One broker process of a :class:`KafkaCluster`: ``python -m josefk.server serve``
    with every key as ``--override``."""

    def __init__(self, broker_id: int, home: Path, zookeeper_connect: str,
                 overrides: Mapping[str, str], registry: Registry) -> None:
        self.id = broker_id
        self.port = free_port()
        self.metrics_port = free_port()
        self.home = home
        self.registry = registry
        self.config = {
            **CLUSTER_SETTINGS,
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(home / "data"),
            "zookeeper.connect": zookeeper_connect,
            "metrics.listener": self.metrics_url,
            **overrides,
        }
        command = [sys.executable, "-m", "josefk.server", "serve",
                   *(arg for k, v in self.config.items() for arg in ("--override", f"{k}={v}"))]
        self.process = ManagedProcess(f"josefk broker {broker_id}", command,
                                      home / "broker.log")

    def __repr__(self) -> str:
        return f"<ClusterBroker id={self.id} {self.bootstrap} pid={self.pid}>"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.running

    @property
    def paused(self) -> bool:
        return self.process.paused

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the process; return once its Metadata lists itself (it registered in
        ZooKeeper and the controller told it about itself)."""
        self.process.start()
        try:
            wait_until(self._serving, timeout, f"{self!r} to serve", interval=0.1,
                       not_yet=_not_yet())
        except BaseException:
            self.process.kill()
            raise

    def _serving(self) -> bool:
        self.process.check_running()
        return any(b.id == self.id for b in cluster_view(self.bootstrap, timeout=2.0).brokers)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (a crash by default) and wait for the process to end."""
        self.process.kill(sig, STOP_TIMEOUT_S)

    def pause(self) -> None:
        """SIGSTOP: the broker stays, silent to clients, brokers and ZooKeeper."""
        self.process.pause()

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self.process.resume()

    def stop(self) -> None:
        """A clean stop: SIGTERM (a controlled shutdown that moves its leaderships away
        first), SIGKILL if it takes longer than a minute."""
        self.process.resume()
        self.process.stop(STOP_TIMEOUT_S)

    def restart(self, timeout: float = START_TIMEOUT_S) -> None:
        """Stop the broker if it runs (cleanly), wait until ZooKeeper dropped its
        registration (after a kill: its session timeout), start it again."""
        if self.running:
            self.stop()
        session_s = int(self.config["zookeeper.session.timeout.ms"]) / 1000
        wait_until(lambda: not self.registry.registered(self.id), session_s + timeout,
                   f"ZooKeeper to drop broker {self.id}'s registration", interval=0.2)
        self.start(timeout)


class KafkaCluster:
    """Brokers (ids 1, 2, 3) on the ZooKeeper at ``zookeeper``, under a chroot of their own."""

    def __init__(self, zookeeper: str, home: Path, overrides: Mapping[str, str] | None = None,
                 broker_ids: tuple[int, ...] = BROKER_IDS) -> None:
        self.home = home
        self.chroot = f"/josefk-testing-{uuid.uuid4().hex[:12]}"
        self.zookeeper_connect = zookeeper + self.chroot
        self._zookeeper = zookeeper
        self._zk: Any = None  # a kazoo client under the chroot, once started
        self.brokers = {
            i: ClusterBroker(i, home / f"broker-{i}", self.zookeeper_connect,
                             dict(overrides or {}), self)
            for i in broker_ids
        }

    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start every broker at once; return when each one's Metadata lists them all."""
        self._zk = _kazoo(self._zookeeper, self.chroot)
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            for future in [pool.submit(b.start, timeout) for b in self.brokers.values()]:
                future.result()
        wait_until(self._complete, timeout, "every broker to see the whole cluster",
                   interval=0.1, not_yet=_not_yet())

    def _complete(self) -> bool:
        ids = set(self.brokers)
        for b in self.brokers.values():
            view = cluster_view(b.bootstrap, timeout=2.0)
            if {x.id for x in view.brokers} != ids or view.controller_id not in ids:
                return False
        return True

    def close(self) -> None:
        """Kill every broker (the data is a test's, thrown away) and the ZooKeeper client;
        then raise :class:`ProcessExited` if a broker had died without being told to."""
        crashed = [b for b in self.brokers.values() if b.process.died]
        try:
            for b in self.brokers.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    b.kill()
        finally:
            if self._zk is not None:
                self._zk.stop()
                self._zk.close()
        if crashed:
            raise ProcessExited("\n\n".join(
                f"broker {b.id} died during the tests (status {b.process.proc.returncode}); "
                f"its output ends with:\n{b.process.log_tail()}" for b in crashed))

    def registered(self, broker_id: int) -> bool:
        return self._zk.exists(f"/brokers/ids/{broker_id}") is not None

    def controller_id(self) -> int:
        """The broker id ZooKeeper's ``/controller`` names (-1 while there is none)."""
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self._zk.get("/controller")
        except NoNodeError:
            return -1
        return int(json.loads(data)["brokerid"])

    def leader(self, topic: str, partition: int = 0) -> ClusterBroker:
        """The broker leading ``topic``'s ``partition`` (its state znode's leader)."""
        data, _ = self._zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return self.brokers[int(json.loads(data)["leader"])]

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: Mapping[str, str] | None = None) -> None:
        """Create a topic; return once every running broker knows each partition's leader."""
        running = ",".join(b.bootstrap for b in self.brokers.values()
                           if b.running and not b.paused)
        create_topic(running, name, partitions, replication_factor, config)


def _kazoo(zookeeper: str, chroot: str) -> Any:
    """A started kazoo client under ``chroot`` (created first: Kafka would, a little later)."""
    from kazoo.client import KazooClient

    root = KazooClient(hosts=zookeeper, timeout=10.0)
    root.start(timeout=20.0)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    client = KazooClient(hosts=zookeeper + chroot, timeout=10.0)
    client.start(timeout=20.0)
    return client
