"""N brokers of one kind on one ZooKeeper (bench/cluster_brokers.py's :class:`Cluster`),
what they need before they start (memory, descriptors), and one broker's signals."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.cluster_brokers import Cluster, ZooKeeper

MIB = 1 << 20
# Both kinds get these on top of the cluster tests' keys: small index files, as bench.scale
# gives them (Kafka preallocates 10 MiB per index and maps it, per partition).
OVERRIDES = {"log.index.size.max.bytes": "65536", "num.partitions": "1"}
# Every cluster of a run leaves its chroot in the one ZooKeeper: ~200,000 znodes per
# 100,000 partitions, more than tools/zookeeper/start.sh's default 128 MiB heap holds.
ZOOKEEPER_HEAP, ZOOKEEPER_MIB = "-Xmx1g", 600
# Resident memory: josefk measured ~50 MiB bare and ~8 KiB per replica (bench/results/scale);
# a JVM holds its heap plus roughly this much besides (metaspace, code cache, threads).
JOSEFK_BASE_MIB, JOSEFK_PER_REPLICA_KIB = 80, 10
JVM_OVERHEAD_MIB = 400
# Kafka keeps each replica's active segment open (josefk caps its open files).
KAFKA_FDS_BASE = 1_000


@dataclass(frozen=True)
class Size:
    kind: str
    brokers: int
    partitions: int
    replication: int = 3

    @property
    def replicas_per_broker(self) -> int:
        return -(-self.partitions * self.replication // self.brokers)

    def key(self) -> str:
        return f"{self.brokers}x{self.partitions}"


def heap_mib(heap_opts: str) -> int:
    """The -Xmx of KAFKA_HEAP_OPTS in MiB (1024 when there is none: the JVM's default is
    larger on this machine, so that only understates)."""
    m = re.search(r"-Xmx(\d+)([kKmMgG]?)", heap_opts)
    if not m:
        return 1024
    scale = {"": 1 / MIB, "k": 1 / 1024, "m": 1, "g": 1024}[m.group(2).lower()]
    return int(int(m.group(1)) * scale)


def needed_mib(size: Size, kafka_heap: str) -> int:
    """Estimated resident memory of ``size``'s brokers and the ZooKeeper."""
    if size.kind == "kafka":
        each = heap_mib(kafka_heap) + JVM_OVERHEAD_MIB
    else:
        each = JOSEFK_BASE_MIB + size.replicas_per_broker * JOSEFK_PER_REPLICA_KIB // 1024
    return each * size.brokers + ZOOKEEPER_MIB


def available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0


def refusal(size: Size, kafka_heap: str, free_mib: int, nofile: int) -> str | None:
    """Why ``size`` cannot run here (None when it fits)."""
    need = needed_mib(size, kafka_heap)
    if need > free_mib * 0.85:
        return (f"{size.kind} {size.brokers} brokers x {size.partitions:,} partitions needs "
                f"~{need:,} MiB, more than 85% of MemAvailable {free_mib:,} MiB")
    if files_needed(size) > nofile:
        return (f"kafka {size.brokers} brokers x {size.partitions:,} partitions needs "
                f"~{files_needed(size):,} open files per broker, more than RLIMIT_NOFILE "
                f"{nofile:,}")
    return None


def map_warning(size: Size) -> str | None:
    """Kafka maps each replica's two index files: past vm.max_map_count it fails with
    "Map failed" (Kafka's documentation asks operators to raise the limit for many
    partitions; josefk maps none)."""
    if size.kind != "kafka":
        return None
    limit = int(Path("/proc/sys/vm/max_map_count").read_text())
    maps = 2 * size.replicas_per_broker
    if maps <= limit * 0.9:
        return None
    return (f"kafka {size.brokers} brokers x {size.partitions:,} partitions may map ~{maps:,} "
            f"index files per broker against vm.max_map_count {limit:,} "
            "(sysctl -w vm.max_map_count=262144 as root raises it)")


def raise_nofile(wanted: int) -> int:
    """Raise the descriptor limit the brokers inherit: to ``wanted`` when allowed (root),
    else to the hard limit. Returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for limit in (max(wanted, hard), hard):
        with contextlib.suppress(ValueError, OSError):
            if soft < limit:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
                break
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def files_needed(size: Size) -> int:
    return size.replicas_per_broker + KAFKA_FDS_BASE if size.kind == "kafka" else 0


class Fleet:
    """A :class:`Cluster` of ``size.brokers`` brokers (ids 1..N), one signalled at a time."""

    def __init__(self, size: Size, zookeeper: ZooKeeper, home: Path, logs: Path,
                 kafka_heap: str) -> None:
        self.size = size
        self.cluster = Cluster(size.kind, zookeeper, home, logs, tag=f"-{size.key()}",
                               broker_ids=range(1, size.brokers + 1), extra=OVERRIDES,
                               kafka_heap=kafka_heap)

    @property
    def ids(self) -> list[int]:
        return list(self.cluster.brokers)

    def port(self, broker_id: int) -> int:
        return self.cluster.brokers[broker_id].port

    def live(self) -> list[int]:
        return [i for i, b in self.cluster.brokers.items() if b.alive()]

    def signal(self, broker_id: int, sig: signal.Signals) -> float:
        """Send ``sig`` to the broker's process group; the monotonic time just before."""
        proc = self.cluster.brokers[broker_id].proc
        assert proc is not None
        began = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        return began

    def exit_watch(self, broker_id: int) -> Callable[[float], float | None]:
        """Watch the broker's process from now on: the function returned waits up to its
        argument (seconds) for the exit and gives its monotonic time (None: still running)."""
        proc = self.cluster.brokers[broker_id].proc
        assert proc is not None
        exited: list[float] = []
        done = threading.Event()

        def watch() -> None:
            proc.wait()
            exited.append(time.monotonic())
            done.set()

        threading.Thread(target=watch, daemon=True).start()
        return lambda timeout: exited[0] if done.wait(timeout) else None

    def reap(self, broker_id: int) -> None:
        """Make sure the broker is gone (SIGKILL) and its log closed."""
        self.cluster.brokers[broker_id].stop(kill=True, timeout=20)

    def spawn(self, broker_id: int) -> float:
        return self.cluster.brokers[broker_id].spawn()

    def wait_unregistered(self, broker_id: int, timeout: float) -> bool:
        """Whether ZooKeeper let /brokers/ids/<id> go within ``timeout`` (a SIGKILLed
        broker's session outlives it for zookeeper.session.timeout.ms, and a restart
        before that is refused)."""
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.cluster.zk_connect, timeout=10)
        zk.start(timeout=10)
        deadline = time.monotonic() + timeout
        try:
            while zk.exists(f"/brokers/ids/{broker_id}") is not None:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.1)
            return True
        finally:
            zk.stop()
            zk.close()

    def start(self, timeout: float) -> float:
        return self.cluster.start(timeout)

    def stop(self) -> None:
        self.cluster.stop()

    def rss_mib(self) -> dict[int, float]:
        return self.cluster.rss()
