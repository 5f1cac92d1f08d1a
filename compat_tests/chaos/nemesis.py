"""The nemesis: one fault at a time on a seeded schedule, each healed before the next.

Faults (``FAULTS``):

- ``kill``: SIGKILL a random broker; restart it once ZooKeeper let its session go.
- ``kill-controller`` / ``kill-leader``: the same for the controller, or for the leader
  of a random partition of the workload's topic.
- ``pause``: SIGSTOP a random broker's process, SIGCONT it later.
- ``partition``: cut a random broker off from the other brokers, from ZooKeeper, from
  the clients, from brokers and ZooKeeper (the clients still reach it) or from all of
  them, in one direction or both (``net.py``).
- ``zk-kill``: SIGKILL ZooKeeper itself (every member of an ensemble), restart it later
  (its data directory stays).
- ``zk-expire``: cut a random broker off from ZooKeeper (both ways) for longer than its
  session timeout, so that ZooKeeper expires its session on purpose: it must register
  again, and if it was the controller another broker takes over.
- ``zk-node-kill``: SIGKILL one member of a ZooKeeper ensemble (``--zookeepers 3``), its
  leader or a follower, and restart it later; the others keep a quorum.
- ``clock-jump``: step a random broker's wall clock (libfaketime, ``clock.py``) forward or
  back by one to fifteen minutes, and step it back to the true time when healed.
- ``disk-full`` / ``disk-error``: a random broker's second log directory (``disk.py``)
  fills up (ENOSPC) or returns EIO; its partitions fail over (Kafka's offline log
  directory); healed by repairing it and restarting the broker.

Every start and heal goes to the history and to the log with its time.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..cluster.harness import SESSION_TIMEOUT_MS, Cluster, ClusterBroker, partition_state
from . import clock, disk
from .history import Recorder
from .net import CLIENTS, Network

log = logging.getLogger("chaos.nemesis")

FAULTS = ("kill", "kill-controller", "kill-leader", "pause", "partition", "zk-kill",
          "zk-expire", "zk-node-kill", "clock-jump", "disk-full", "disk-error")
# The faults of a default run (``make chaos``, the runs in ``make test``).
DEFAULT_FAULTS = ("kill", "kill-controller", "kill-leader", "pause", "partition")
# Those and the ZooKeeper faults of a single ZooKeeper: every fault that needs neither an
# ensemble nor libfaketime (the groups run in ``make test``, the soak).
ZOOKEEPER_FAULTS = (*DEFAULT_FAULTS, "zk-kill", "zk-expire")
NEEDS_NETWORK = frozenset({"partition", "zk-expire"})
NEEDS_ENSEMBLE = frozenset({"zk-node-kill"})
# How far a clock jumps, in seconds either way: under the hour that Kafka 4 allows a
# record's timestamp to run ahead of the broker's clock (log.message.timestamp.after.max.ms).
CLOCK_JUMP_S = (60, 900)
# zk-expire holds the cut this much longer than the session timeout (ZooKeeper expires
# sessions on its tick boundaries).
EXPIRY_MARGIN_S = 6.0
PEERS = ("brokers", "zookeeper", "clients", "cluster", "all")
DIRECTIONS = ("both", "in", "out")


@dataclass(frozen=True)
class Schedule:
    """How long faults last and how long the calm between them is (seconds)."""

    hold: tuple[float, float] = (3.0, 12.0)
    calm: tuple[float, float] = (2.0, 6.0)


class Nemesis:
    """Injects ``faults`` into ``cluster`` until stopped; thread-safe start/stop."""

    def __init__(
        self,
        cluster: Cluster,
        network: Network | None,
        history: Recorder,
        topic: str,
        partitions: int,
        faults: list[str],
        seed: int,
        schedule: Schedule = Schedule(),
        node_of: Callable[[int], str] = lambda broker_id: f"b{broker_id}",
        zk_nodes: tuple[str, ...] = ("zk",),
    ) -> None:
        """``zk_nodes``: the network nodes of ZooKeeper (one per ensemble member)."""
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; choose from {FAULTS}")
        if NEEDS_NETWORK & set(faults) and network is None:
            raise ValueError(f"{sorted(NEEDS_NETWORK & set(faults))} faults need network "
                             "namespaces")
        if NEEDS_ENSEMBLE & set(faults) and not hasattr(cluster.zookeeper, "nodes"):
            raise ValueError(f"{sorted(NEEDS_ENSEMBLE & set(faults))} faults need a "
                             "ZooKeeper ensemble (--zookeepers 3)")
        if clock.FAULTS & set(faults) and not all(
                clock.offset_file(cluster.home, b).exists() for b in cluster.brokers):
            raise ValueError("clock-jump faults need brokers started under libfaketime")
        if disk.FAULTS & set(faults) and not all(
                disk.mounted(cluster.home, b) for b in cluster.brokers):
            raise ValueError("disk faults need brokers with a faulty second log directory "
                             "(disk.BrokerDisk)")
        self.cluster = cluster
        self.network = network
        self.history = history
        self.topic = topic
        self.partitions = partitions
        self.faults = faults
        self.rng = random.Random(seed)
        self.schedule = schedule
        self.node_of = node_of
        self.zk_nodes = zk_nodes
        self.injected = 0

    def run(self, stop: threading.Event) -> None:
        """Faults until ``stop`` is set; the fault under way is healed before returning."""
        if not self.faults:
            stop.wait()
            return
        while not stop.wait(self.rng.uniform(*self.schedule.calm)):
            fault = self.rng.choice(self.faults)
            hold = self.rng.uniform(*self.schedule.hold)
            getattr(self, "_" + fault.replace("-", "_"))(hold, stop)
            self.injected += 1

    # --- faults ---------------------------------------------------------------------

    def _kill(
        self,
        hold: float,
        stop: threading.Event,
        broker: ClusterBroker | None = None,
        fault: str = "kill",
    ) -> None:
        broker = broker or self._random_broker()
        self._begin(fault, [broker.broker_id], "SIGKILL")
        broker.kill()
        stop.wait(hold)
        broker.start_after_crash()
        self._end(fault, [broker.broker_id], "restarted and registered")

    def _kill_controller(self, hold: float, stop: threading.Event) -> None:
        broker = self.cluster.brokers[self.cluster.controller_id()]
        self._kill(hold, stop, broker, "kill-controller")

    def _kill_leader(self, hold: float, stop: threading.Event) -> None:
        partition = self.rng.randrange(self.partitions)
        leader = partition_state(self.cluster.zk, self.topic, partition)["leader"]
        broker = self.cluster.brokers.get(leader) or self._random_broker()
        self._kill(hold, stop, broker, "kill-leader")

    def _pause(self, hold: float, stop: threading.Event) -> None:
        broker = self._random_broker()
        self._begin("pause", [broker.broker_id], "SIGSTOP")
        broker.pause()
        stop.wait(hold)
        broker.resume()
        self._end("pause", [broker.broker_id], "SIGCONT")

    def _partition(self, hold: float, stop: threading.Event) -> None:
        assert self.network is not None
        broker = self._random_broker()
        node = self.node_of(broker.broker_id)
        peers = self.rng.choice(PEERS)
        direction = self.rng.choice(DIRECTIONS)
        others = self._peer_nodes(node, peers)
        detail = f"{node} cut from {peers} ({direction})"
        self._begin("partition", [broker.broker_id], detail)
        for other in others:
            if direction in ("both", "out"):
                self.network.cut(node, other)
            if direction in ("both", "in"):
                self.network.cut(other, node)
        stop.wait(hold)
        self.network.heal()
        self._end("partition", [broker.broker_id], "healed")

    def _zk_kill(self, hold: float, stop: threading.Event) -> None:
        zookeeper = self.cluster.zookeeper
        self._begin("zk-kill", [], "SIGKILL ZooKeeper")
        zookeeper.stop(kill=True)
        stop.wait(hold)
        zookeeper.start()
        self._end("zk-kill", [], "ZooKeeper restarted")

    def _zk_expire(self, hold: float, stop: threading.Event) -> None:
        assert self.network is not None
        broker = self._random_broker()
        node = self.node_of(broker.broker_id)
        cut = SESSION_TIMEOUT_MS / 1000 + EXPIRY_MARGIN_S
        self._begin("zk-expire", [broker.broker_id], f"{node} cut from ZooKeeper for {cut:.0f}s")
        for zk in self.zk_nodes:
            self.network.cut(node, zk)
            self.network.cut(zk, node)
        stop.wait(cut)
        self.network.heal()
        self._end("zk-expire", [broker.broker_id], "healed; its session expired")

    def _zk_node_kill(self, hold: float, stop: threading.Event) -> None:
        nodes = self.cluster.zookeeper.nodes  # type: ignore[attr-defined]
        role = self.rng.choice(("leader", "follower"))
        leader = next((n for n in nodes if n.mode() == "leader"), None)
        chosen = [n for n in nodes if (n is leader) == (role == "leader")] or nodes
        node = self.rng.choice(chosen)
        self._begin("zk-node-kill", [], f"SIGKILL ZooKeeper {node.myid} "
                    f"({'leader' if node is leader else 'follower'})")
        node.stop(kill=True)
        stop.wait(hold)
        node.start()
        self._end("zk-node-kill", [], f"ZooKeeper {node.myid} restarted ({node.mode()})")

    def _clock_jump(self, hold: float, stop: threading.Event) -> None:
        broker = self._random_broker()
        seconds = self.rng.choice((-1, 1)) * self.rng.randint(*CLOCK_JUMP_S)
        self._begin("clock-jump", [broker.broker_id], f"wall clock {seconds:+d}s")
        clock.jump(self.cluster.home, broker.broker_id, seconds)
        stop.wait(hold)
        clock.jump(self.cluster.home, broker.broker_id, 0)
        self._end("clock-jump", [broker.broker_id], "wall clock true again")

    def _disk_full(self, hold: float, stop: threading.Event) -> None:
        self._disk("disk-full", "its second log dir fills up (ENOSPC)", hold, stop)

    def _disk_error(self, hold: float, stop: threading.Event) -> None:
        self._disk("disk-error", "its second log dir returns EIO", hold, stop)

    def _disk(self, fault: str, detail: str, hold: float, stop: threading.Event) -> None:
        broker = self._random_broker()
        faulty = disk.BrokerDisk(self.cluster.home, broker.broker_id)
        self._begin(fault, [broker.broker_id], detail)
        faulty.break_(fault)
        stop.wait(hold)
        faulty.repair()
        broker.terminate()  # a failed log directory comes back only with a restart (Kafka)
        broker.start()
        self._end(fault, [broker.broker_id], "repaired and restarted")

    # --- helpers --------------------------------------------------------------------

    def _peer_nodes(self, node: str, peers: str) -> list[str]:
        brokers = [self.node_of(b) for b in self.cluster.brokers if self.node_of(b) != node]
        return {
            "brokers": brokers,
            "zookeeper": [*self.zk_nodes],
            "clients": [CLIENTS],
            "cluster": [*brokers, *self.zk_nodes],  # the clients still reach it: split brain
            "all": [*brokers, *self.zk_nodes, CLIENTS],
        }[peers]

    def _random_broker(self) -> ClusterBroker:
        return self.cluster.brokers[self.rng.choice(sorted(self.cluster.brokers))]

    def _begin(self, fault: str, targets: list[int], detail: str) -> None:
        t = self.history.record("nemesis", f="start", fault=fault, targets=targets, detail=detail)
        log.info("%7.1fs fault %s on %s: %s", t, fault, targets, detail)

    def _end(self, fault: str, targets: list[int], detail: str) -> None:
        t = self.history.record("nemesis", f="stop", fault=fault, targets=targets, detail=detail)
        log.info("%7.1fs healed %s on %s: %s", t, fault, targets, detail)
