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

import contextlib
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field

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


def remove_stale() -> None:
    """Delete namespaces and bridges a killed earlier run left behind (no process in them)."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for line in listed:
        name = line.split(" ")[0]
        if name.startswith("jkc") and not _ip("netns", "pids", name, check=False).stdout.strip():
            _ip("netns", "del", name, check=False)
    for line in _ip("-o", "link", "show", "type", "bridge", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith("jkc") and name.endswith("br"):
            # A bridge with ports is in use by a live run.
            ports = _ip("-o", "link", "show", "master", name, check=False).stdout.strip()
            if not ports:
                _ip("link", "del", name, check=False)


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
        for node in [*self.hosts, "sink"]:
            _ip("netns", "del", self.namespace(node), check=False)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", self.bridge, check=False)
