"""A ZooKeeper ensemble of real servers (``tools/zookeeper/start.sh`` with ``MYID
SERVERS``), started and stopped as one, whose members the nemesis kills one at a time.

It stands where the harness expects one :class:`ZooKeeperServer`: ``connect`` lists every
member, ``start`` and ``stop`` act on all of them (``zk-kill`` kills the whole ensemble).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..cluster.harness import ZooKeeperServer
from ..conftest import free_port

QUORUM_PORT = 2888
ELECTION_PORT = 3888


@dataclass(frozen=True)
class Member:
    """Where one member listens: its client port, and its quorum and election ports."""

    host: str
    port: int
    quorum_port: int = QUORUM_PORT
    election_port: int = ELECTION_PORT

    @property
    def server(self) -> str:
        return f"{self.host}:{self.quorum_port}:{self.election_port}"


def loopback_members(count: int) -> list[Member]:
    """``count`` members on 127.0.0.1, each on free ports (no namespaces)."""
    return [Member("127.0.0.1", free_port(), free_port(), free_port()) for _ in range(count)]


class EnsembleNode(ZooKeeperServer):
    """One member (``myid`` from 1): ready once it serves sessions, so within a quorum."""

    def __init__(self, myid: int, members: list[Member], home: Path,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> None:
        self.myid = myid
        me = members[myid - 1]
        super().__init__(home / f"zookeeper-{myid}", home / f"zookeeper-{myid}.log",
                         host=me.host, port=me.port)
        command = [*(self.command or []), str(myid), ",".join(m.server for m in members)]
        self.command = wrap(command) if wrap else command

    def mode(self, timeout: float = 2.0) -> str:
        """``leader``, ``follower``, or ``down`` (ZooKeeper's ``srvr`` four-letter word)."""
        with contextlib.suppress(OSError):
            with socket.create_connection((self.host, self.port), timeout=timeout) as sock:
                sock.sendall(b"srvr")
                answer = b""
                while chunk := sock.recv(4096):
                    answer += chunk
            for line in answer.decode(errors="replace").splitlines():
                if line.startswith("Mode:"):
                    return line.split(":", 1)[1].strip()
        return "down"


class Ensemble:
    """Members 1..n of one ensemble; ``wraps[i]`` runs member i+1 (say, in a namespace)."""

    def __init__(self, home: Path, members: list[Member],
                 wraps: list[Callable[[list[str]], list[str]] | None] | None = None) -> None:
        wraps = wraps or [None] * len(members)
        self.nodes = [EnsembleNode(i + 1, members, home, wraps[i]) for i in range(len(members))]

    @property
    def connect(self) -> str:
        """Every member's ``host:port``, comma-separated, as ``zookeeper.connect`` takes it."""
        return ",".join(n.connect for n in self.nodes)

    def start(self) -> None:
        """Start every member that is not running, at once: none serves before a quorum."""
        down = [n for n in self.nodes if n.proc is None or n.proc.poll() is not None]
        with ThreadPoolExecutor(max(1, len(down))) as pool:
            for future in [pool.submit(n.start) for n in down]:
                future.result()

    def stop(self, kill: bool = False) -> None:
        for node in self.nodes:
            node.stop(kill=kill)

    def leader(self) -> EnsembleNode | None:
        """The member that says it leads, if one does."""
        return next((n for n in self.nodes if n.mode() == "leader"), None)


def zk_node_names(count: int) -> tuple[str, ...]:
    """The network nodes of ZooKeeper: ``zk`` alone, or ``zk1`` .. ``zkN`` for an ensemble."""
    return ("zk",) if count == 1 else tuple(f"zk{i}" for i in range(1, count + 1))
