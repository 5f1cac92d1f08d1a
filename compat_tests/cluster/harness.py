"""A ZooKeeper server and a cluster of brokers on it, for the cluster tests.

The brokers are Apache Kafka 3.9 in ZooKeeper mode (``tools/kafka39``) or
josefk, started with exactly the same Kafka configuration keys; ZooKeeper is a
real server (``tools/zookeeper``). Every wait here has a deadline.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kafka import KafkaAdminClient
from kafka.errors import KafkaError
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from josefk.testing import polling

from ..conftest import REPO, Broker, free_port
from ..rawkafka import RawConnection

ZOOKEEPER_LIBS = REPO / ".cache" / "zookeeper" / "libs"
KAFKA39_LIBS = REPO / ".cache" / "kafka39" / "libs"
ZOOKEEPER_START = REPO / "tools" / "zookeeper" / "start.sh"
KAFKA39_START = REPO / "tools" / "kafka39" / "start-zk-broker.sh"
KAFKA39_RUN_CLASS = REPO / "tools" / "kafka39" / "run-class.sh"

BROKER_IDS = (1, 2, 3)
# The keys of /brokers/ids/<id> (version 5); "rack" is there only with broker.rack set.
BROKER_KEYS = {
    "features", "listener_security_protocol_map", "endpoints", "jmx_port", "port", "host",
    "version", "timestamp",
}
SESSION_TIMEOUT_MS = 6000
# A dead broker's leaderships move once ZooKeeper expires its session (checked on
# tick boundaries, tickTime 2 s) and the controller reacts: give it that plus a margin.
FAILOVER_TIMEOUT = SESSION_TIMEOUT_MS / 1000 + 14
# How long Metadata on every broker may take to agree with ZooKeeper.
PROPAGATION_TIMEOUT = 15.0
ZOOKEEPER_START_TIMEOUT = 30.0
# How long a started broker may take to answer Metadata and register in ZooKeeper.
CLUSTER_START_TIMEOUT = {"josefk": 30.0, "kafka": 90.0}

T = TypeVar("T")


def wait_until(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll ``check`` until it returns a truthy value, and return that value.

    Connection errors inside ``check`` count as "not yet". After ``timeout``
    seconds the test fails (an AssertionError), naming ``what`` and the last value or error.
    """
    return polling.wait_until(check, timeout, what, interval=0.2, not_yet=(
        OSError, ConnectionError, KafkaError, KazooException, AssertionError))


# --- Metadata as one broker sees it -----------------------------------------


@dataclass(frozen=True)
class PartitionView:
    """One partition in a Metadata response."""

    error_code: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicView:
    """One topic in a Metadata response (topic id as ZooKeeper writes it: base64url)."""

    error_code: int
    topic_id: str
    partitions: dict[int, PartitionView]


@dataclass(frozen=True)
class MetadataView:
    """A Metadata response, reduced to what the cluster tests compare."""

    brokers: dict[int, tuple[str, int, str | None]]
    controller_id: int
    cluster_id: str | None
    topics: dict[str, TopicView]

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition -> leader id."""
        return {p: view.leader for p, view in self.topics[topic].partitions.items()}


def coordinator_of(cluster: Cluster, key: str, key_type: int = 0) -> int | None:
    """The coordinator of a group (``key_type`` 0) or a transactional id (1), as the first
    running broker that knows answers."""
    for b in cluster.running():
        with RawConnection(b.bootstrap, timeout=5.0) as conn:
            version = conn.pick_version(FindCoordinatorRequest, 1, 3)
            response = conn.request(FindCoordinatorRequest(key=key, key_type=key_type), version)
        if response.error_code == 0:
            return response.node_id
    return None


def zk_topic_id(topic_id: uuid.UUID | None) -> str:
    """A topic id as ZooKeeper's JSON holds it: URL-safe base64 of 16 bytes, unpadded."""
    raw = topic_id.bytes if topic_id is not None else bytes(16)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def metadata(bootstrap: str, topics: list[str] | None = None, timeout: float = 5.0) -> MetadataView:
    """Metadata (v1..v12, no auto-creation) from exactly the broker at ``bootstrap``."""
    with RawConnection(bootstrap, timeout=timeout, client_id="cluster-metadata") as conn:
        version = conn.pick_version(MetadataRequest, 1, 12)
        wanted = None if topics is None else [
            MetadataRequest.MetadataRequestTopic(name=t) for t in topics
        ]
        response = conn.request(
            MetadataRequest(topics=wanted, allow_auto_topic_creation=False), version
        )
    views = {}
    for t in response.topics:
        partitions = {
            p.partition_index: PartitionView(
                p.error_code, p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                tuple(p.isr_nodes),
            )
            for p in t.partitions
        }
        views[t.name] = TopicView(t.error_code, zk_topic_id(getattr(t, "topic_id", None)),
                                  partitions)
    return MetadataView(
        brokers={b.node_id: (b.host, b.port, b.rack) for b in response.brokers},
        controller_id=response.controller_id,
        cluster_id=response.cluster_id,
        topics=views,
    )


TOPIC_RESOURCE = 2


def topic_config(bootstrap: str, topic: str, key: str) -> str | None:
    """One config value of ``topic`` as exactly the broker at ``bootstrap`` describes it."""
    with RawConnection(bootstrap, timeout=5.0, client_id="cluster-configs") as conn:
        version = conn.pick_version(DescribeConfigsRequest, 1, 4)
        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=[key]
        )
        response = conn.request(DescribeConfigsRequest(resources=[resource]), version)
    [result] = response.results
    assert result.error_code == 0, result
    values = [c.value for c in result.configs if c.name == key]
    return values[0] if values else None


# --- ZooKeeper ----------------------------------------------------------------


def znode_json(zk: KazooClient, path: str) -> tuple[Any, ZnodeStat]:
    """The JSON a znode holds, decoded, with its stat (retried through a lost connection
    or an expired session: the chaos runs kill ZooKeeper under the harness too)."""
    data, stat = zk.retry(zk.get, path)
    assert data, f"{path} holds no data"
    return json.loads(data), stat


def partition_state(zk: KazooClient, topic: str, partition: int) -> dict[str, Any]:
    """/brokers/topics/<topic>/partitions/<p>/state, decoded."""
    return znode_json(zk, f"/brokers/topics/{topic}/partitions/{partition}/state")[0]


def zk_assignment(zk: KazooClient, topic: str) -> dict[int, list[int]]:
    """The replica assignment of /brokers/topics/<topic>: partition -> replicas."""
    doc = znode_json(zk, f"/brokers/topics/{topic}")[0]
    return {int(p): replicas for p, replicas in doc["partitions"].items()}


def zk_client(connect: str, timeout: float = 10.0) -> KazooClient:
    """A started kazoo client on ``host:port[/chroot]``."""
    client = KazooClient(hosts=connect, timeout=timeout,
                         connection_retry={"max_tries": -1, "max_delay": 2.0},
                         command_retry={"max_tries": -1, "max_delay": 2.0, "deadline": 60.0})
    try:
        with warnings.catch_warnings():
            # The chroot appears once the first broker has created it.
            warnings.filterwarnings("ignore", "No chroot path exists", UserWarning)
            client.start(timeout=timeout)
    except KazooTimeoutError:
        client.close()
        raise
    return client


class ZooKeeperServer(Broker):
    """A standalone ZooKeeper (tools/zookeeper/start.sh) on a free loopback port.

    A :class:`Broker` only in how it is started and stopped; ready means a client
    can open a session.
    """

    def __init__(
        self, data_dir: Path, log_path: Path, host: str = "127.0.0.1", port: int | None = None,
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        """``wrap`` turns the command into the one to run (say, in a network namespace)."""
        self.host = host
        self.port = port or free_port()
        command = [str(ZOOKEEPER_START), str(self.port), str(data_dir), host]
        super().__init__(
            kind="zookeeper",
            bootstrap=f"{host}:{self.port}",
            command=wrap(command) if wrap else command,
            data_dir=data_dir,
            log_path=log_path,
            start_timeout=ZOOKEEPER_START_TIMEOUT,
        )

    @property
    def connect(self) -> str:
        return self.bootstrap

    def _wait_ready(self, began: float) -> None:
        assert self.proc is not None
        deadline = began + self.start_timeout
        while self.proc.poll() is None:
            # A session, once the port accepts connections (kazoo would log each refusal).
            with contextlib.suppress(OSError, KazooTimeoutError):
                socket.create_connection((self.host, self.port), timeout=1.0).close()
                zk_client(self.connect, timeout=2.0).stop()
                return
            if time.monotonic() > deadline:
                self.stop(kill=True)
                pytest.fail(f"ZooKeeper did not accept a session on {self.connect} within "
                            f"{self.start_timeout:.0f}s", pytrace=False)
            time.sleep(0.1)
        pytest.fail(f"ZooKeeper exited with status {self.proc.returncode}; its output ends "
                    f"with:\n{self.log_tail()}", pytrace=False)


# --- brokers ------------------------------------------------------------------


def broker_config(
    broker_id: int, port: int, data_dir: Path, zk_connect: str, extra: dict[str, str] | None,
    host: str = "127.0.0.1",
) -> dict[str, str]:
    """The Kafka configuration keys every cluster broker gets, josefk or Kafka alike."""
    config = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://{host}:{port}",
        "log.dirs": str(data_dir),
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "zookeeper.connection.timeout.ms": "10000",
        "inter.broker.protocol.version": "3.9",
        "offsets.topic.replication.factor": "3",
        # Leaderships move only when a test makes them (kill, shutdown, ElectLeaders):
        # Kafka's automatic preferred-leader check also runs 5 s after every
        # controller failover, which would race the tests.
        "auto.leader.rebalance.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
    }
    config.update(extra or {})
    return config


# Set to N: josefk brokers run under tracemalloc, a heap snapshot every N seconds.
TRACEMALLOC_ENV = "JOSEFK_TRACEMALLOC_EVERY_S"
# Set to N: josefk brokers take a census of their objects by type every N seconds.
CENSUS_ENV = "JOSEFK_CENSUS_EVERY_S"


def broker_command(kind: str, properties: Path, config: dict[str, str]) -> list[str]:
    """The command line of a broker: josefk or Kafka 3.9, every key as --override."""
    overrides = [arg for key, value in config.items() for arg in ("--override", f"{key}={value}")]
    if kind == "kafka":
        # kafka.Kafka needs a properties file; it holds the same keys as the overrides.
        return [str(KAFKA39_START), str(properties), *overrides]
    census, traced = os.environ.get(CENSUS_ENV), os.environ.get(TRACEMALLOC_ENV)
    if census or traced:  # the soak's heap hunt: compat_tests/chaos/traced_broker.py
        heap = Path(config["log.dirs"].split(",")[0]).parent / "heap"
        mode = ["--census", census] if census else [traced]
        return [sys.executable, "-m", "compat_tests.chaos.traced_broker", *mode, str(heap),
                "serve", *overrides]
    return [sys.executable, "-m", "josefk.server", "serve", *overrides]


class ClusterBroker(Broker):
    """One broker of a cluster: start, SIGTERM, SIGKILL, SIGSTOP/SIGCONT, restart.

    Ready means it answers Metadata listing brokers and /brokers/ids/<id> exists.
    """

    def __init__(
        self,
        kind: str,
        broker_id: int,
        home: Path,
        zk_connect: str,
        zk: KazooClient | None,
        start_timeout: float,
        extra: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        """``wrap`` turns the command into the one to run (say, in a network namespace)."""
        home.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.port = port or free_port()
        self.zk = zk
        self.config = broker_config(broker_id, self.port, home / "data", zk_connect, extra, host)
        properties = home / "server.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in self.config.items()))
        command = broker_command(kind, properties, self.config)
        super().__init__(
            kind=kind,
            bootstrap=f"{host}:{self.port}",
            command=wrap(command) if wrap else command,
            data_dir=home / "data",
            log_path=home / "broker.log",
            start_timeout=start_timeout,
        )
        self.paused = False
        self._expect_exit = False

    def __repr__(self) -> str:
        return f"<ClusterBroker {self.kind} id={self.broker_id} {self.bootstrap}>"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def died(self) -> bool:
        """True when the process ended without the suite stopping it."""
        return self.proc is not None and self.proc.poll() is not None

    def start(self) -> None:
        """Start the process; wait for Metadata and the /brokers/ids registration."""
        began = time.monotonic()
        super().start()
        if self.zk is not None:
            remaining = max(5.0, self.start_timeout - (time.monotonic() - began))
            path = f"/brokers/ids/{self.broker_id}"
            wait_until(lambda: self.zk.exists(path), remaining, f"{path} ({self!r})")

    def start_after_crash(self) -> None:
        """:meth:`start` once ZooKeeper dropped the registration of a killed process.

        /brokers/ids/<id> stays until the dead process's session expires; until then
        Kafka and josefk alike refuse to start ("broker.id ... is in use").
        """
        if self.zk is not None:
            path = f"/brokers/ids/{self.broker_id}"
            session = int(self.config["zookeeper.session.timeout.ms"]) / 1000
            # Sessions expire on ZooKeeper's tick boundaries (2 s): a margin on top.
            wait_until(lambda: not self.zk.exists(path), session + 10,
                       f"{path} of the killed {self!r} to go")
        self.start()

    def kill(self) -> None:
        """SIGKILL: a crash."""
        self.resume()
        self.stop(kill=True)

    def terminate(self) -> float:
        """SIGTERM (a controlled shutdown) and wait for the exit; the seconds it took."""
        self.resume()
        began = time.monotonic()
        self.stop()
        return time.monotonic() - began

    def pause(self) -> None:
        """SIGSTOP: the process stays, its sockets and ZooKeeper session go silent."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.paused and self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def run_until_exit(self, timeout: float) -> tuple[int | None, str]:
        """Start the process expecting it to stop by itself: (exit status or None, its log).

        A process still running after ``timeout`` seconds is killed (status None).
        """
        self._expect_exit = True
        try:
            Broker.start(self)
        finally:
            self._expect_exit = False
        assert self.proc is not None and self.log_path is not None
        try:
            status: int | None = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = None
        self.stop(kill=True)
        return status, self.log_path.read_text(errors="replace")

    def _wait_ready(self, began: float) -> None:
        if not self._expect_exit:
            super()._wait_ready(began)


class Cluster:
    """Brokers (ids 1, 2, 3 by default) on one ZooKeeper, under a chroot of their own."""

    def __init__(
        self,
        zookeeper: ZooKeeperServer,
        home: Path,
        kinds: dict[int, str],
        start_timeout: float,
        config: dict[str, str] | None = None,
        placement: Callable[[int], dict[str, Any]] | None = None,
    ) -> None:
        """``config``: Kafka keys every broker of this cluster gets on top of the defaults;
        ``placement``: broker id -> :class:`ClusterBroker`'s host, port and wrap."""
        self.placement = placement or (lambda broker_id: {})
        self.zookeeper = zookeeper
        self.home = home
        self.config = dict(config or {})
        self.chroot = f"/josefk-{uuid.uuid4().hex[:12]}"
        self.zk_connect = zookeeper.connect + self.chroot
        # A broker under tracemalloc (TRACEMALLOC_ENV) starts and recovers a few times slower.
        self.start_timeout = start_timeout * (3 if os.environ.get(TRACEMALLOC_ENV) else 1)
        self.kinds = kinds
        # Kafka creates the chroot itself; this client sees it once a broker has.
        self.zk = zk_client(self.zk_connect)
        self.brokers = {
            broker_id: self.new_broker(broker_id, kind) for broker_id, kind in kinds.items()
        }

    def new_broker(
        self, broker_id: int, kind: str | None = None, extra: dict[str, str] | None = None,
        zk_connect: str | None = None, name: str | None = None,
    ) -> ClusterBroker:
        """A broker configured like the others (not started); ``extra`` adds keys."""
        kind = kind or next(iter(self.kinds.values()))
        return ClusterBroker(
            kind, broker_id, self.home / (name or f"broker-{broker_id}"),
            zk_connect or self.zk_connect, self.zk if zk_connect is None else None,
            self.start_timeout, {**self.config, **(extra or {})}, **self.placement(broker_id),
        )

    def __getitem__(self, broker_id: int) -> ClusterBroker:
        return self.brokers[broker_id]

    def start(self, controller: int | None = None) -> None:
        """Start every broker at once and wait until each is ready; with ``controller``,
        start that broker first and wait until it is the controller."""
        rest = list(self.brokers.values())
        if controller is not None:
            first = self.brokers[controller]
            rest.remove(first)
            first.start()
            wait_until(lambda: self.zk.exists("/controller") and
                       self.controller_id() == controller, self.start_timeout,
                       f"{first!r} to be the controller")
        with ThreadPoolExecutor(len(rest)) as pool:
            for future in [pool.submit(b.start) for b in rest]:
                future.result()

    def stop(self) -> None:
        """SIGKILL every broker (the data is thrown away) and close the client."""
        for b in self.brokers.values():
            b.kill()
        self.zk.stop()
        self.zk.close()

    def running(self) -> list[ClusterBroker]:
        return [b for b in self.brokers.values() if b.running and not b.paused]

    @property
    def bootstrap(self) -> str:
        """The running, unpaused brokers, comma-separated."""
        return ",".join(b.bootstrap for b in self.running())

    @contextlib.contextmanager
    def admin(self) -> Iterator[KafkaAdminClient]:
        """A kafka-python admin client on the running brokers."""
        client = KafkaAdminClient(
            bootstrap_servers=self.bootstrap, client_id="cluster-admin", request_timeout_ms=30_000
        )
        try:
            yield client
        finally:
            client.close()

    def controller_id(self) -> int:
        """The broker id /controller names."""
        return znode_json(self.zk, "/controller")[0]["brokerid"]

    def controller_epoch(self) -> int:
        return int(self.zk.retry(self.zk.get, "/controller_epoch")[0])

    def states(self, topic: str) -> dict[int, dict[str, Any]]:
        """Every partition's state znode of ``topic``."""
        return {
            p: partition_state(self.zk, topic, p)
            for p in sorted(map(int, self.zk.get_children(f"/brokers/topics/{topic}/partitions")))
        }

    def views(self, topics: list[str] | None = None) -> dict[int, MetadataView]:
        """Metadata from each running broker."""
        return {b.broker_id: metadata(b.bootstrap, topics) for b in self.running()}

    def agreed_view(
        self, topics: list[str], check: Callable[[MetadataView], bool] = lambda v: True,
        timeout: float = PROPAGATION_TIMEOUT, what: str = "the brokers' Metadata to agree",
    ) -> MetadataView:
        """Metadata once every running broker answers the same for ``topics`` and ``check``."""

        def agreed() -> MetadataView | None:
            views = list(self.views(topics).values())
            if not views:
                return None
            first = views[0]
            same = all(v.topics == first.topics and v.brokers == first.brokers
                       and v.controller_id == first.controller_id for v in views)
            return first if same and check(first) else None

        return wait_until(agreed, timeout, what)

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int = 3,
        configs: dict[str, str] | None = None, assignments: dict[int, list[int]] | None = None,
    ) -> MetadataView:
        """Create a topic (``assignments``: partition -> replicas, instead of the counts).

        Returns Metadata once every broker has all its leaders and full ISRs.
        """
        spec: dict[str, Any] = {"configs": configs or {}}
        if assignments is None:
            spec.update(num_partitions=partitions, replication_factor=replication_factor)
        else:
            spec["assignments"] = assignments
            partitions = len(assignments)
        with self.admin() as admin:
            result = admin.create_topics({name: spec}, timeout_ms=30_000)
        [created] = result["topics"]
        assert created["error_code"] == 0, created
        return self.wait_in_sync(name, partitions)

    def wait_in_sync(self, topic: str, partitions: int | None = None,
                     timeout: float = 60.0) -> MetadataView:
        """Metadata once every broker shows each partition led and its replicas all in sync."""

        def in_sync(view: MetadataView) -> bool:
            t = view.topics.get(topic)
            return (
                t is not None and t.error_code == 0
                and (partitions is None or len(t.partitions) == partitions)
                and all(p.leader >= 0 and set(p.isr) == set(p.replicas)
                        for p in t.partitions.values())
            )

        return self.agreed_view([topic], in_sync, timeout, f"{topic} fully in sync everywhere")

    def leader_of(self, topic: str, partition: int) -> ClusterBroker:
        return self.brokers[partition_state(self.zk, topic, partition)["leader"]]

    def restore(self) -> None:
        """Resume paused brokers and start stopped ones; wait until all are ready."""
        for b in self.brokers.values():
            b.resume()
        down = [b for b in self.brokers.values() if not b.running]
        for b in down:
            b.stop()
        with ThreadPoolExecutor(max(1, len(down))) as pool:
            for future in [pool.submit(b.start_after_crash) for b in down]:
                future.result()
        ids = set(self.brokers)
        wait_until(lambda: ids <= set(map(int, self.zk.get_children("/brokers/ids"))),
                   self.start_timeout, f"brokers {sorted(ids)} registered")
        self.agreed_view([], lambda v: ids <= set(v.brokers), what="every broker in Metadata")
