"""The nemesis's network: a cut drops packets silently, one direction at a time, and heals."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from . import net

SERVER = """
import socket, sys
server = socket.create_server((sys.argv[1], 7000))
while True:
    conn, _ = server.accept()
    conn.sendall(b"hello")
    conn.close()
"""


@pytest.fixture
def network() -> Iterator[net.Network]:
    reason = net.available()
    if reason is not None:
        pytest.skip(f"no network namespaces here: {reason}")
    network = net.Network()
    network.create({"a": 1, "b": 2})
    try:
        yield network
    finally:
        network.destroy()


def _serve(network: net.Network, node: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", SERVER, network.address(node)]
    server = subprocess.Popen(network.wrap(node, command))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _reach(network, "clients", node, timeout=1.0) == "hello":
            return server
        time.sleep(0.1)
    server.kill()
    raise AssertionError(f"the test server in {node} did not start")


def _reach(network: net.Network, source: str, target: str, timeout: float = 1.5) -> str:
    """What a connection from ``source`` to ``target``'s server reads, or the error's name."""
    code = (
        "import socket, sys\n"
        "try:\n"
        f"    address = ({network.address(target)!r}, 7000)\n"
        f"    s = socket.create_connection(address, timeout={timeout})\n"
        "    print(s.recv(16).decode())\n"
        "except OSError as e:\n"
        "    print(type(e).__name__)\n"
    )
    command = [sys.executable, "-c", code]
    if source != net.CLIENTS:
        command = network.wrap(source, command)
    return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()


def test_cuts_drop_silently_in_one_direction_and_heal(network: net.Network) -> None:
    server = _serve(network, "b")
    try:
        assert _reach(network, "a", "b") == "hello"
        network.cut("a", "b")
        # A silent drop: the connection attempt times out, nothing refuses it.
        assert _reach(network, "a", "b") == "TimeoutError"
        assert _reach(network, "clients", "b") == "hello"
        network.restore("a", "b")
        assert _reach(network, "a", "b") == "hello"
        # Only b's answers vanish: a's handshake never completes either.
        network.cut("b", "a")
        assert _reach(network, "a", "b") == "TimeoutError"
        network.cut(net.CLIENTS, "b")
        assert _reach(network, "clients", "b") == "TimeoutError"
        network.heal()
        assert _reach(network, "a", "b") == "hello"
        assert _reach(network, "clients", "b") == "hello"
    finally:
        server.kill()
        server.wait()


def test_stale_networks_go_and_live_ones_stay(network: net.Network) -> None:
    def namespaces(run: str) -> int:
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return sum(line.startswith(f"jkc{run}-") for line in listed.splitlines())

    orphan = net.Network()
    orphan.create({"x": 1})
    (net.OWNERS / orphan.run).write_text("0")  # its harness is gone
    net.remove_stale()
    assert namespaces(orphan.run) == 0
    assert orphan.bridge not in net._links()
    assert namespaces(network.run) == 3  # a, b and the sink: ours is alive


def test_the_address_plan() -> None:
    network = net.Network(run="0000", subnet=7, hosts={"b1": 1})
    assert network.address("b1") == "10.231.7.1"
    assert network.address(net.CLIENTS) == "10.231.7.254"
    assert socket.inet_aton(network.address("b1"))
