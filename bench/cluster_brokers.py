"""ZooKeeper and clusters of three brokers (or N: bench/fleet) for the replication
benchmark (bench/cluster.py).

- ZooKeeper: ``tools/zookeeper/start.sh PORT DIR`` (Apache ZooKeeper 3.8, jars in
  .cache/zookeeper/libs), one server for a whole run; each cluster gets a chroot
  of its own (``/bench-<kind>-<hex>``), which the brokers create.
- josefk: ``python -m josefk.server serve --log-level WARNING --override ...`` (the level
  from ``JOSEFK_BENCH_LOG_LEVEL`` if set, e.g. INFO for a timeline of the controller).
- Apache Kafka 3.9.1 in ZooKeeper mode: ``tools/kafka39/start-zk-broker.sh
  server.properties --override ...`` (jars in .cache/kafka39/libs) with the JVM
  settings of Kafka's own ``kafka-server-start.sh`` / ``kafka-run-class.sh``:
  ``-Xmx1G -Xms1G`` and G1 with ``MaxGCPauseMillis=20``; log4j at INFO into the
  broker's log file (tools/kafka39/log4j-broker.properties).

Both get exactly the same Kafka configuration keys, those the cluster tests give
(compat_tests/cluster/harness.py ``broker_config``); everything else is each
broker's default (replica fetchers, fetch sizes, no fsync per write). Every wait
here has a deadline and raises :class:`BrokerError` when it passes.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from bench.brokers import (
    QUIET_CLIENT,
    REPO,
    BrokerError,
    BrokerProcess,
    free_port,
    port_open,
    process_tree,
    status_kib,
)
from bench.cpu import cpu_seconds

ZOOKEEPER_START = REPO / "tools" / "zookeeper" / "start.sh"
KAFKA39_START = REPO / "tools" / "kafka39" / "start-zk-broker.sh"
ZOOKEEPER_LIBS = REPO / ".cache" / "zookeeper" / "libs"
KAFKA39_LIBS = REPO / ".cache" / "kafka39" / "libs"
KAFKA39_POM = REPO / "tools" / "kafka39" / "pom.xml"

BROKER_IDS = (1, 2, 3)
SESSION_TIMEOUT_MS = 6000
# What bin/kafka-server-start.sh and bin/kafka-run-class.sh of the Kafka distribution
# give the broker's JVM (tools/kafka39/run-class.sh alone would use JVM defaults).
KAFKA_HEAP_OPTS = "-Xmx1G -Xms1G"
KAFKA_JVM_PERFORMANCE_OPTS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 "
                              "-XX:InitiatingHeapOccupancyPercent=35 "
                              "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15")


def kafka39_version() -> str:
    match = re.search(r"<kafka.version>(.*?)</kafka.version>", KAFKA39_POM.read_text())
    return match.group(1) if match else "3.9"


def cluster_available(kinds: list[str]) -> str | None:
    """None when the clusters of ``kinds`` can be started here, else why not."""
    if not any(ZOOKEEPER_LIBS.glob("*.jar")):
        return f"no ZooKeeper jars in {ZOOKEEPER_LIBS} (make zookeeper-jars)"
    if "kafka" in kinds and not any(KAFKA39_LIBS.glob("*.jar")):
        return f"no Kafka 3.9 jars in {KAFKA39_LIBS} (make kafka39-jars)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "java not found"
    return None


def broker_config(broker_id: int, port: int, data_dir: Path, zk_connect: str) -> dict[str, str]:
    """The keys compat_tests/cluster/harness.py gives every cluster broker, josefk or Kafka."""
    return {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(data_dir),
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "zookeeper.connection.timeout.ms": "10000",
        "inter.broker.protocol.version": "3.9",
        "offsets.topic.replication.factor": "3",
        "auto.leader.rebalance.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
    }


class _Process(BrokerProcess):
    """A :class:`BrokerProcess` with a fixed command and extra environment."""

    def __init__(self, kind: str, data_dir: Path, port: int, log_path: Path,
                 command: list[str], env: dict[str, str] | None = None) -> None:
        super().__init__(kind, data_dir, port, log_path=log_path, command=command)
        self.extra_env = env or {}

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.extra_env}


# --- memory from /proc ---------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    return sum(status_kib(p, "VmRSS") for p in process_tree(pid)) / 1024


# --- ZooKeeper ----------------------------------------------------------------------------------


def zk_ruok(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


class ZooKeeper:
    """One standalone ZooKeeper server on a free loopback port."""

    def __init__(self, home: Path, log_path: Path) -> None:
        self.port = free_port()
        self.proc = _Process("zookeeper", home, self.port, log_path,
                             [str(ZOOKEEPER_START), str(self.port), str(home)])

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> float:
        began = self.proc.spawn()
        deadline = began + timeout
        while not zk_ruok(self.port):
            if not self.proc.alive():
                raise BrokerError(f"ZooKeeper exited; log:\n{self.proc.log_tail()}")
            if time.monotonic() > deadline:
                self.proc.stop(kill=True)
                raise BrokerError(f"ZooKeeper did not answer ruok in {timeout:.0f}s; "
                                  f"log:\n{self.proc.log_tail()}")
            time.sleep(0.1)
        return time.monotonic() - began

    def alive(self) -> bool:
        return self.proc.alive()

    def stop(self) -> None:
        self.proc.stop(timeout=20)


# --- a cluster ----------------------------------------------------------------------------------


class Cluster:
    """Brokers of one kind (ids ``broker_ids``, default 1-3) on ``zookeeper`` under a fresh
    chroot, data under ``home``; ``extra`` are more keys for every broker and
    ``kafka_heap`` the Kafka brokers' KAFKA_HEAP_OPTS."""

    def __init__(self, kind: str, zookeeper: ZooKeeper, home: Path, logs: Path,
                 tag: str = "", broker_ids: Sequence[int] = BROKER_IDS,
                 extra: dict[str, str] | None = None,
                 kafka_heap: str = KAFKA_HEAP_OPTS) -> None:
        self.kind = kind
        self.home = home
        self.broker_ids = tuple(broker_ids)
        self.chroot = f"/bench-{kind}-{uuid.uuid4().hex[:10]}"
        self.zk_connect = zookeeper.connect + self.chroot
        self.brokers: dict[int, _Process] = {}
        for broker_id in self.broker_ids:
            port = free_port()
            data = home / f"broker-{broker_id}" / "data"
            data.mkdir(parents=True, exist_ok=True)
            config = {**broker_config(broker_id, port, data, self.zk_connect),
                      **(extra or {})}
            overrides = [a for k, v in config.items() for a in ("--override", f"{k}={v}")]
            env: dict[str, str] = {}
            if kind == "kafka":
                properties = home / f"broker-{broker_id}" / "server.properties"
                properties.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
                command = [str(KAFKA39_START), str(properties), *overrides]
                env = {"KAFKA_HEAP_OPTS": kafka_heap,
                       "KAFKA_OPTS": KAFKA_JVM_PERFORMANCE_OPTS}
            else:
                command = [str(_python()), "-m", "josefk.server", "serve",
                           "--log-level", os.environ.get("JOSEFK_BENCH_LOG_LEVEL", "WARNING"),
                           *overrides]
            self.brokers[broker_id] = _Process(
                kind, data, port, logs / f"{kind}{tag}-broker-{broker_id}.log", command, env)

    def __repr__(self) -> str:
        return f"<Cluster {self.kind} {self.zk_connect}>"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def pids(self) -> dict[int, int]:
        return {i: b.pid for i, b in self.brokers.items()}

    def dead(self) -> list[int]:
        return [i for i, b in self.brokers.items() if not b.alive()]

    def command_line(self, broker_id: int = 1) -> str:
        return " ".join(self.brokers[broker_id].command())

    def start(self, timeout: float) -> float:
        """Start them all at once; wait until each answers Metadata listing every broker
        and a controller. Returns the seconds it took."""
        began = time.monotonic()
        for b in self.brokers.values():
            b.spawn()
        deadline = began + timeout
        waiting = dict(self.brokers)
        last: dict[int, str] = {}
        while waiting:
            for broker_id, b in list(waiting.items()):
                if not b.alive():
                    raise BrokerError(f"{self.kind} broker {broker_id} exited with status "
                                      f"{b.proc.returncode if b.proc else '?'}; log:\n"
                                      f"{b.log_tail(20)}")
                state = _broker_view(b.port, self.broker_ids)
                if state is True:
                    del waiting[broker_id]
                else:
                    last[broker_id] = state
            if waiting and time.monotonic() > deadline:
                raise BrokerError(
                    f"{self.kind} brokers {sorted(waiting)} not ready in {timeout:.0f}s "
                    f"(last: {last}); log of broker {min(waiting)}:\n"
                    f"{waiting[min(waiting)].log_tail(20)}")
            if waiting:
                time.sleep(0.25)
        return time.monotonic() - began

    def cpu(self) -> dict[int, float]:
        """user + sys CPU seconds so far, per broker."""
        return {i: cpu_seconds(b.pid) for i, b in self.brokers.items() if b.alive()}

    def rss(self) -> dict[int, float]:
        return {i: round(rss_mib(b.pid), 1) for i, b in self.brokers.items() if b.alive()}

    def stop(self) -> float:
        """SIGKILL every broker (the data is thrown away); the seconds it took."""
        began = time.monotonic()
        for b in self.brokers.values():
            b.stop(kill=True, timeout=20)
        return time.monotonic() - began


def _python() -> Path:
    import sys

    return Path(sys.executable)


def _broker_view(port: int, broker_ids: Sequence[int] = BROKER_IDS) -> bool | str:
    """True when the broker on ``port`` answers Metadata with all of ``broker_ids`` and a
    controller; otherwise what it answered (or why not)."""
    if not port_open(port):
        return "port closed"
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", **QUIET_CLIENT})
    try:
        md = admin.list_topics(timeout=2)
    except Exception as exc:  # not ready yet
        return f"{type(exc).__name__}: {exc}"
    ids = set(md.brokers)
    if ids >= set(broker_ids) and md.controller_id in broker_ids:
        return True
    return f"brokers {sorted(ids)}, controller {md.controller_id}"
