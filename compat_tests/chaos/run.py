"""One chaos run: ZooKeeper and three brokers, the workload, the nemesis, the checker.

ZooKeeper and each broker run in network namespaces of their own (``net.py``) so
the nemesis can cut links; the clients run here. Without namespaces (not root)
the run still kills and pauses, and says that it cannot partition.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cluster.harness import CLUSTER_START_TIMEOUT, Cluster, ZooKeeperServer
from . import checker, net, timeline
from .history import History
from .nemesis import FAULTS, Nemesis, Schedule
from .workload import (
    CLIENT_LOG,
    ProducerProcess,
    Workload,
    assigned_consumer,
    final_read,
    group_consumer,
)

log = logging.getLogger("chaos")

TOPIC = "chaos"
BROKER_PORT = 9092
ZOOKEEPER_PORT = 2181
ZOOKEEPER_HOST = 100
# Kafka's defaults where a user would keep them; leader rebalancing sooner than the
# default 300 s so that it happens within a run.
BROKER_CONFIG = {
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "20",
    "unclean.leader.election.enable": "false",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}
# How long the cluster may take to be whole again after the last heal.
RECOVERY_TIMEOUT = 120.0
FINAL_READ_TIMEOUT = 120.0


@dataclass
class Options:
    """What to run: against which broker, how long, which faults, where to write."""

    target: str = "josefk"
    duration: float = 300.0
    seed: int = 1
    faults: list[str] = field(default_factory=lambda: list(FAULTS))
    out: Path = Path("chaos-runs")
    partitions: int = 6
    producers: int = 3
    rate: float = 100.0
    max_in_flight: int = 1
    schedule: Schedule = field(default_factory=Schedule)


@dataclass
class Outcome:
    """What a run produced: the checker's result and the files next to the history."""

    result: checker.Result
    history: Path
    timeline: Path
    report: Path
    notes: list[str]

    @property
    def ok(self) -> bool:
        return self.result.ok


class HarnessError(RuntimeError):
    """The run could not complete (a broker would not start, the final read stalled)."""


def run(options: Options) -> Outcome:
    """Run the workload under the nemesis, check the history, draw the timeline."""
    options.out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    faults = list(options.faults)
    reason = net.available()
    if reason is not None and "partition" in faults:
        faults.remove("partition")
        notes.append(f"no partition faults: {reason}")
        log.warning("no partition faults: %s", reason)
    history_path = options.out / "history.jsonl"
    with (
        _client_log(options.out / "clients.log"),
        History(history_path) as history,
        _cluster(options, reason is None) as (cluster, network),
    ):
        history.record(
            "meta",
            seed=options.seed,
            target=options.target,
            topic=TOPIC,
            partitions=options.partitions,
            duration=options.duration,
            faults=faults,
            network="namespaces" if network else "loopback",
            max_in_flight=options.max_in_flight,
            notes=notes,
        )
        _exercise(options, faults, cluster, network, history)
    events = checker.load(history_path)
    result = checker.check(events)
    picture = options.out / "timeline.png"
    timeline.plot(events, picture)
    report = options.out / "report.txt"
    report.write_text(result.report() + "\n" + result.summary_line(options.seed) + "\n")
    return Outcome(result, history_path, picture, report, notes)


def _exercise(
    options: Options,
    faults: list[str],
    cluster: Cluster,
    network: net.Network | None,
    history: History,
) -> None:
    cluster.create_topic(TOPIC, options.partitions, 3, {"min.insync.replicas": "2"})
    workload = Workload(
        ",".join(b.bootstrap for b in cluster.brokers.values()),
        TOPIC,
        options.partitions,
        options.producers,
        options.rate,
        max_in_flight=options.max_in_flight,
    )
    stop_faults, stop_sends, stop_polls = threading.Event(), threading.Event(), threading.Event()
    nemesis = Nemesis(
        cluster, network, history, TOPIC, options.partitions, faults, options.seed, options.schedule
    )
    producers = [ProducerProcess(i, workload, history) for i in range(options.producers)]
    with _threads(stop_faults, stop_sends, stop_polls) as start:
        start(nemesis.run, stop_faults)
        sending = [start(p.run, stop_sends) for p in producers]
        start(assigned_consumer, workload, history, stop_polls)
        for i in range(1, workload.group_consumers + 1):
            start(group_consumer, i, workload, history, stop_polls)
        stop_faults.wait(options.duration)
        stop_faults.set()
        nemesis_thread = start.threads[0]
        nemesis_thread.join()
        if start.failures:
            raise HarnessError(f"the nemesis failed: {start.failures[0]!r}")
        history.record("phase", name="healed")
        stop_sends.set()
        for thread in sending:
            thread.join()
        cluster.restore()
        cluster.wait_in_sync(TOPIC, options.partitions, timeout=RECOVERY_TIMEOUT)
        stop_polls.set()
    history.record("phase", name="final-read")
    if not final_read(workload, history, FINAL_READ_TIMEOUT):
        raise HarnessError(
            f"the final read did not reach every high watermark within {FINAL_READ_TIMEOUT:.0f}s"
        )
    history.record("phase", name="done")
    log.info("nemesis injected %d faults", nemesis.injected)


class _Starter:
    """Starts daemon threads and remembers what they raised."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.failures: list[BaseException] = []

    def __call__(self, target: Any, *args: Any) -> threading.Thread:
        def body() -> None:
            try:
                target(*args)
            except BaseException as exc:  # noqa: BLE001 - reported by the runner
                log.exception("%s failed", getattr(target, "__qualname__", target))
                self.failures.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        self.threads.append(thread)
        return thread


@contextlib.contextmanager
def _threads(*stops: threading.Event) -> Iterator[_Starter]:
    """Threads that all end once every event in ``stops`` is set, as it is on the way out."""
    starter = _Starter()
    try:
        yield starter
    finally:
        for stop in stops:
            stop.set()
        for thread in starter.threads:
            thread.join(timeout=60)
    if starter.failures:
        raise HarnessError(f"a workload thread failed: {starter.failures[0]!r}")


@contextlib.contextmanager
def _client_log(path: Path) -> Iterator[None]:
    """The clients' own log lines into ``path`` rather than onto the terminal."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    CLIENT_LOG.addHandler(handler)
    CLIENT_LOG.propagate = False
    try:
        yield
    finally:
        CLIENT_LOG.removeHandler(handler)
        handler.close()


@contextlib.contextmanager
def _cluster(options: Options, namespaces: bool) -> Iterator[tuple[Cluster, net.Network | None]]:
    """ZooKeeper and brokers 1-3, in namespaces of their own when ``namespaces``."""
    home = options.out / "cluster"
    home.mkdir(parents=True, exist_ok=True)
    network: net.Network | None = None
    with contextlib.ExitStack() as stack:
        if namespaces:
            net.remove_stale()
            network = net.Network()
            stack.callback(network.destroy)
            network.create({"zk": ZOOKEEPER_HOST, **{f"b{i}": i for i in (1, 2, 3)}})
        zookeeper = _zookeeper(home, network)
        zookeeper.start()
        stack.callback(zookeeper.stop)

        def placement(broker_id: int) -> dict[str, Any]:
            if network is None:
                return {}
            node = f"b{broker_id}"
            return {
                "host": network.address(node),
                "port": BROKER_PORT,
                "wrap": lambda command: network.wrap(node, command),
            }

        began = time.monotonic()
        cluster = Cluster(
            zookeeper,
            home,
            dict.fromkeys((1, 2, 3), options.target),
            CLUSTER_START_TIMEOUT[options.target],
            BROKER_CONFIG,
            placement,
        )
        stack.callback(cluster.stop)
        cluster.start()
        log.info("cluster of %s brokers up in %.1fs", options.target, time.monotonic() - began)
        yield cluster, network


def _zookeeper(home: Path, network: net.Network | None) -> ZooKeeperServer:
    if network is None:
        return ZooKeeperServer(home / "zookeeper", home / "zookeeper.log")
    return ZooKeeperServer(
        home / "zookeeper",
        home / "zookeeper.log",
        host=network.address("zk"),
        port=ZOOKEEPER_PORT,
        wrap=lambda command: network.wrap("zk", command),
    )
