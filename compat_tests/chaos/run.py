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
from . import checker, clock, compaction, disk, group_checker, net, timeline, txn_checker
from .ensemble import Ensemble, Member, loopback_members, zk_node_names
from .exercises import EXERCISES, TOPIC
from .history import History
from .nemesis import DEFAULT_FAULTS, NEEDS_ENSEMBLE, NEEDS_NETWORK, Schedule
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
          "groups": group_checker.check_groups, "compact": compaction.check_compact}


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
    # ZooKeeper servers: 1 (standalone) or an ensemble of 3 (``ensemble.py``).
    zookeepers: int = 1
    topic: str = TOPIC
    # Set once faults injected by someone else are healed (the soak's one nemesis); the
    # exercise's own nemesis then has no faults.
    healed: threading.Event | None = None


@dataclass
class Outcome:
    """What a run produced: the checker's result and the files next to the history."""

    result: (checker.Result | txn_checker.TxnResult | group_checker.GroupResult
             | compaction.CompactResult)
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
    faults, notes = usable_faults(options.faults, options.zookeepers)
    reason = net.available()
    history_path = options.out / "history.jsonl"
    with (
        client_log(options.out / "clients.log"),
        History(history_path) as history,
        chaos_cluster(options, reason is None) as (cluster, network),
    ):
        history.record(
            "meta",
            seed=options.seed,
            target=options.target,
            topic=options.topic,
            partitions=options.partitions,
            duration=options.duration,
            faults=faults,
            network="namespaces" if network else "loopback",
            max_in_flight=options.max_in_flight,
            workload=options.workload,
            zookeepers=options.zookeepers,
            notes=notes,
        )
        EXERCISES[options.workload](options, faults, cluster, network, history)
    events = checker.load(history_path)
    result = CHECKS[options.workload](events)
    picture = options.out / "timeline.png"
    timeline.plot(events, picture, result)
    report = options.out / "report.txt"
    report.write_text(result.report() + "\n" + result.summary_line(options.seed) + "\n")
    return Outcome(result, history_path, picture, report, notes)


def usable_faults(wanted: list[str], zookeepers: int) -> tuple[list[str], list[str]]:
    """``wanted`` without the faults this machine cannot inject, and a note on each left
    out; faults on a ZooKeeper ensemble without one are an error."""
    if zookeepers == 1 and NEEDS_ENSEMBLE & set(wanted):
        raise ValueError(f"{sorted(NEEDS_ENSEMBLE & set(wanted))} needs --zookeepers 3")
    faults, notes = list(wanted), []
    reasons = (dict.fromkeys(NEEDS_NETWORK, net.available())
               | dict.fromkeys(clock.FAULTS, clock.available())
               | dict.fromkeys(disk.FAULTS, disk.available()))
    for fault, reason in sorted(reasons.items()):
        if fault in faults and reason is not None:
            faults.remove(fault)
            notes.append(f"no {fault} faults: {reason}")
            log.warning("no %s faults: %s", fault, reason)
    return faults, notes


@contextlib.contextmanager
def client_log(path: Path) -> Iterator[None]:
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
def chaos_cluster(options: Options,
                  namespaces: bool) -> Iterator[tuple[Cluster, net.Network | None]]:
    """ZooKeeper and brokers 1-3, in namespaces of their own when ``namespaces``."""
    home = options.out / "cluster"
    home.mkdir(parents=True, exist_ok=True)
    network: net.Network | None = None
    with contextlib.ExitStack() as stack:
        if namespaces:
            net.remove_stale()
            network = net.Network()
            stack.callback(network.destroy)
            zks = {name: ZOOKEEPER_HOST + i
                   for i, name in enumerate(zk_node_names(options.zookeepers))}
            network.create({**zks, **{f"b{i}": i for i in (1, 2, 3)}})
        zookeeper = (_zookeeper(home, network) if options.zookeepers == 1
                     else _ensemble(home, network, options.zookeepers))
        zookeeper.start()
        stack.callback(zookeeper.stop)

        faked = bool(clock.FAULTS & set(options.faults)) and clock.available() is None

        def placement(broker_id: int) -> dict[str, Any]:
            def wrap(command: list[str]) -> list[str]:
                if faked:
                    command = clock.wrap(home, broker_id, command)
                return network.wrap(f"b{broker_id}", command) if network else command

            if network is None:
                return {"wrap": wrap} if faked else {}
            return {"host": network.address(f"b{broker_id}"), "port": BROKER_PORT, "wrap": wrap}

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
        if disk.FAULTS & set(options.faults) and disk.available() is None:
            # A second log dir per broker on a small file system the faults can break.
            for b in (1, 2, 3):
                faulty = disk.BrokerDisk(home, b)
                stack.callback(faulty.unmount)
                cluster.brokers[b] = cluster.new_broker(b, options.target, extra={
                    "log.dirs": f"{home / f'broker-{b}' / 'data'},{faulty.mount()}"})
        cluster.start()
        log.info("cluster of %s brokers up in %.1fs", options.target, time.monotonic() - began)
        yield cluster, network


def _ensemble(home: Path, network: net.Network | None, count: int) -> Ensemble:
    if network is None:
        return Ensemble(home, loopback_members(count))
    names = zk_node_names(count)
    return Ensemble(
        home,
        [Member(network.address(name), ZOOKEEPER_PORT) for name in names],
        [lambda command, name=name: network.wrap(name, command) for name in names],
    )


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
