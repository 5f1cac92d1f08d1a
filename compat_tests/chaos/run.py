"""One chaos run: ZooKeeper and three brokers, the workload, the nemesis, the checker.

ZooKeeper and each broker run in network namespaces of their own (``net.py``) so
the nemesis can cut links; the clients run here. Without namespaces (not root)
the run still kills and pauses, and says that it cannot partition.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cluster.harness import CLUSTER_START_TIMEOUT, Cluster, ZooKeeperServer
from . import checker, group_checker, net, timeline, txn_checker
from .exercises import EXERCISES, TOPIC
from .history import History
from .nemesis import DEFAULT_FAULTS, NEEDS_NETWORK, Schedule
from .workload import CLIENT_LOG

log = logging.getLogger("chaos")

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


# The checker of each workload's history.
CHECKS = {"queue": checker.check, "txn": txn_checker.check_txn,
          "groups": group_checker.check_groups}


@dataclass
class Options:
    """What to run: against which broker, how long, which faults, where to write."""

    target: str = "josefk"
    duration: float = 300.0
    seed: int = 1
    faults: list[str] = field(default_factory=lambda: list(DEFAULT_FAULTS))
    out: Path = Path("chaos-runs")
    partitions: int = 6
    producers: int = 3
    rate: float = 100.0
    max_in_flight: int = 1
    schedule: Schedule = field(default_factory=Schedule)
    # "queue" (idempotent producers, workload.py), "txn" (transactions, txn_workload.py)
    # or "groups" (members joining, leaving, killed: group_workload.py).
    workload: str = "queue"


@dataclass
class Outcome:
    """What a run produced: the checker's result and the files next to the history."""

    result: checker.Result | txn_checker.TxnResult | group_checker.GroupResult
    history: Path
    timeline: Path
    report: Path
    notes: list[str]

    @property
    def ok(self) -> bool:
        return self.result.ok


def run(options: Options) -> Outcome:
    """Run the workload under the nemesis, check the history, draw the timeline."""
    options.out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    faults = list(options.faults)
    reason = net.available()
    for fault in sorted(NEEDS_NETWORK & set(faults)) if reason is not None else []:
        faults.remove(fault)
        notes.append(f"no {fault} faults: {reason}")
        log.warning("no %s faults: %s", fault, reason)
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
            workload=options.workload,
            notes=notes,
        )
        EXERCISES[options.workload](options, faults, cluster, network, history)
    events = checker.load(history_path)
    result = CHECKS[options.workload](events)
    picture = options.out / "timeline.png"
    timeline.plot(events, picture)
    report = options.out / "report.txt"
    report.write_text(result.report() + "\n" + result.summary_line(options.seed) + "\n")
    return Outcome(result, history_path, picture, report, notes)


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
