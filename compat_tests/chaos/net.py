"""A private network of Linux network namespaces whose links the nemesis can cut.

Every node (ZooKeeper, each broker) runs in a namespace of its own, joined to a
bridge in the harness's namespace, where the clients run; nothing leaves the
machine. A cut from A to B makes A's packets to B vanish without a trace, as on
a real network: A's namespace routes B's address through a *sink*, a namespace
that is not a router and so drops what it is handed. No firewall is needed
(this machine's kernel has no nftables or tc actions in containers), only
``ip`` and the right to create namespaces (root).

A cut is one direction; a partition "both ways" is two cuts. Healing a node
removes every route through the sink in every namespace that mentions it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

OWNERS = Path(tempfile.gettempdir()) / "josefk-chaos-networks"
CLIENTS = "clients"  # the harness's own namespace: where the workload's clients run
SINK_HOST = 253
BRIDGE_HOST = 254


class NetworkUnavailable(RuntimeError):
    """This machine cannot make namespaces (not root, or no ``ip``)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def available() -> str | None:
    """None when namespaces can be made here; otherwise why not."""
    if shutil.which("ip") is None:
        return "no `ip` command (Debian package iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"jkc{secrets.token_hex(3)}probe"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


def _links() -> list[str]:
    """Names of this harness's links (bridges and veths) in the harness's namespace."""
    names = []
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith("jkc"):
            names.append(name)
    return names


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> None:
    """Delete the namespaces and bridge of earlier runs whose harness process is gone.

    A live run's namespaces may hold no process for a while (a killed broker, the
    sink), so ownership, not emptiness, decides: each run writes its pid to
    ``OWNERS/<run>``.
    """
    runs: set[str] = set()
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split(" ")[0]
        if name.startswith("jkc") and "-" in name:
            runs.add(name[3:].split("-")[0])
    for name in _links():
        if name.endswith("br"):
            runs.add(name[3:-2])
        elif "v" in name[3:]:
            runs.add(name[3:].split("v")[0])
    for run in runs:
        owner = OWNERS / run
        try:
            pid = int(owner.read_text())
        except (OSError, ValueError):
            pid = 0
        if pid and _alive(pid):
            continue
        Network(run=run).destroy()
        owner.unlink(missing_ok=True)


@dataclass
class Network:
    """A bridge, a sink, and one namespace per node, on a /24 of 10.231.0.0/16."""

    run: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: int = field(default_factory=lambda: secrets.randbelow(250))
    hosts: dict[str, int] = field(default_factory=dict)
    cuts: set[tuple[str, str]] = field(default_factory=set)

    @property
    def bridge(self) -> str:
        return f"jkc{self.run}br"

    def address(self, node: str) -> str:
        """The IPv4 address of ``node`` (the bridge's for the clients)."""
        host = BRIDGE_HOST if node == CLIENTS else self.hosts[node]
        return f"10.231.{self.subnet}.{host}"

    def namespace(self, node: str) -> str:
        return f"jkc{self.run}-{node}"

    def create(self, nodes: dict[str, int]) -> None:
        """The bridge, the sink and a namespace per node (name -> host number 1..250)."""
        OWNERS.mkdir(exist_ok=True)
        (OWNERS / self.run).write_text(str(os.getpid()))
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"10.231.{self.subnet}.{BRIDGE_HOST}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for node, host in {**nodes, "sink": SINK_HOST}.items():
            self._add_namespace(node, host)
        self.hosts.update(nodes)

    def _add_namespace(self, node: str, host: int) -> None:
        ns, veth = self.namespace(node), f"jkc{self.run}v{host}"
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("-n", ns, "addr", "add", f"10.231.{self.subnet}.{host}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def wrap(self, node: str, command: list[str]) -> list[str]:
        """``command`` run inside ``node``'s namespace (``ip netns exec`` execs it)."""
        return ["ip", "netns", "exec", self.namespace(node), *command]

    def _route(self, node: str, *args: str) -> None:
        prefix = () if node == CLIENTS else ("-n", self.namespace(node))
        _ip(*prefix, "route", *args, check=False)

    def cut(self, source: str, target: str) -> None:
        """Drop every packet ``source`` sends to ``target`` from now on."""
        sink = f"10.231.{self.subnet}.{SINK_HOST}"
        self._route(source, "replace", f"{self.address(target)}/32", "via", sink)
        self.cuts.add((source, target))

    def restore(self, source: str, target: str) -> None:
        """Undo :meth:`cut`."""
        self._route(source, "del", f"{self.address(target)}/32")
        self.cuts.discard((source, target))

    def heal(self) -> None:
        """Undo every cut."""
        for source, target in list(self.cuts):
            self.restore(source, target)

    def destroy(self) -> None:
        """Remove the namespaces, the bridge and any route left in the harness's namespace."""
        self.heal()
        prefix = f"jkc{self.run}-"
        for line in _ip("netns", "list", check=False).stdout.splitlines():
            if line.startswith(prefix):
                _ip("netns", "del", line.split(" ")[0], check=False)
        for name in _links():
            # The veths too: one whose namespace a process still held outlives it.
            if name == self.bridge or name.startswith(f"jkc{self.run}v"):
                _ip("link", "del", name, check=False)
        (OWNERS / self.run).unlink(missing_ok=True)
