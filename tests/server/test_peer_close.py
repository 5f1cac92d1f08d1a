"""A client killed while its request waits frees its connection at once (issue 32).

The broker reads nothing from a connection while one of its requests is handled; a
client SIGKILLed meanwhile used to keep its socket (and the connection's task) until the
answer: a JoinGroup held open by another member for the rebalance timeout, a long-poll
Fetch for ``fetch.max.wait.ms``. Kafka's selector notices the close at once; so does the
broker now, and the dead member's join then ends as any silent member's: its session
times out and the group goes on without it.

The clients are real kafka-python consumers in a child process, killed with SIGKILL;
what is asserted is the broker's own descriptors (``/proc/self/fd``, the broker runs in
this process) for the child's connections, long before the wait would have ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from josefk.testing.admin import create_topic
from josefk.testing.inprocess import InProcessBroker
from josefk.testing.polling import wait_until

pytestmark = pytest.mark.timeout(120)

#: What the waits would last without the fix: far beyond every wait below.
HELD_MS = 60_000
SESSION_MS = 6_000
FREED_WITHIN_S = 5.0


@pytest.fixture
def broker(tmp_path: os.PathLike[str]) -> Iterator[InProcessBroker]:
    server = InProcessBroker(tmp_path, {"group.min.session.timeout.ms": "1000"})
    server.start()
    try:
        create_topic(server.bootstrap, "t", 1, 1)
        yield server
    finally:
        server.stop()


def tcp_rows() -> list[tuple[int, int, int]]:
    """(local port, remote port, inode) of every TCP socket of this network namespace."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                rows.append((int(fields[1].rsplit(":", 1)[1], 16),
                             int(fields[2].rsplit(":", 1)[1], 16), int(fields[9])))
    return rows


def socket_inodes(pid: int | str) -> set[int]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def client_ports(pid: int, broker_port: int) -> set[int]:
    """The local ports of the process's connections to the broker."""
    mine = socket_inodes(pid)
    return {local for local, remote, inode in tcp_rows()
            if remote == broker_port and inode in mine}


def broker_descriptors(broker_port: int, ports: set[int]) -> int:
    """The broker's open sockets (descriptors of this process) to those client ports."""
    ours = socket_inodes("self")
    return sum(1 for local, remote, inode in tcp_rows()
               if local == broker_port and remote in ports and inode in ours)


def spawn(script: str, bootstrap: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), bootstrap])


def waiting_ports(server: InProcessBroker) -> set[int]:
    """The client ports of the broker's connections with a request in flight."""
    return {int(peer.rsplit(":", 1)[1])
            for peer in server.broker.sockets.hangups.waiting_peers}


def connected_ports(server: InProcessBroker) -> set[int]:
    """The client ports of the broker's connections still served (their task alive)."""
    return {int(c.peer.rsplit(":", 1)[1]) for c in server.broker.connection_listeners}


def parked(server: InProcessBroker, child: subprocess.Popen[bytes], what: str) -> set[int]:
    """Once one of the child's requests waits in the broker: the child's client ports."""
    port = server.broker.bound_ports[0]

    def waiting() -> set[int] | None:
        ports = client_ports(child.pid, port)
        return ports if ports & waiting_ports(server) else None

    return wait_until(waiting, 30, f"{what} waiting")


def kill_and_expect_freed(server: InProcessBroker, child: subprocess.Popen[bytes],
                          ports: set[int]) -> None:
    port = server.broker.bound_ports[0]
    assert broker_descriptors(port, ports) >= 1
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    wait_until(lambda: broker_descriptors(port, ports) == 0, FREED_WITHIN_S,
               "the broker closing the dead client's sockets")
    wait_until(lambda: not connected_ports(server) & ports, FREED_WITHIN_S,
               "the dead client's connection tasks ending")


VICTIM_MEMBER = f"""
    import sys
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id="g", client_id="victim",
                             session_timeout_ms={SESSION_MS}, heartbeat_interval_ms=1000,
                             max_poll_interval_ms={HELD_MS}, request_timeout_ms={HELD_MS + 5000})
    consumer.subscribe(["t"])
    while True:
        consumer.poll(timeout_ms=1000)
"""


def members(admin: KafkaAdminClient) -> tuple[str, list[str]]:
    group = admin.describe_groups(["g"])["g"]
    return group["group_state"], sorted(m["client_id"] for m in group["members"])


def test_a_killed_member_waiting_in_join_group_is_disconnected_at_once(
        broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap
    keeper = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", client_id="keeper",
                           session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000,
                           max_poll_interval_ms=HELD_MS, request_timeout_ms=HELD_MS + 5000)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    child = None
    try:
        keeper.subscribe(["t"])
        wait_until(lambda: keeper.poll(timeout_ms=200) is not None and keeper.assignment(),
                   30, "the keeper's assignment")
        # The keeper stops polling: the victim's rebalance waits for it up to HELD_MS.
        child = spawn(VICTIM_MEMBER, bootstrap)
        wait_until(lambda: members(admin)[0] == "PreparingRebalance", 30, "the rebalance")
        kill_and_expect_freed(broker, child, parked(broker, child, "the victim's JoinGroup"))

        # The dead member's join ends as a silent member's does: its session expires,
        # and the group goes on with the keeper alone.
        def keeper_alone() -> bool:
            keeper.poll(timeout_ms=200)
            return members(admin) == ("Stable", ["keeper"])

        wait_until(keeper_alone, 4 * SESSION_MS / 1000 + 10, "the keeper alone in the group")
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(10)
        admin.close()
        keeper.close()


LONG_POLLER = f"""
    import sys
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=sys.argv[1], client_id="poller",
                             fetch_max_wait_ms={HELD_MS}, request_timeout_ms={HELD_MS + 5000},
                             connections_max_idle_ms={HELD_MS + 10_000}, enable_auto_commit=False)
    consumer.assign([TopicPartition("t", 0)])
    consumer.seek_to_end()
    while True:
        consumer.poll(timeout_ms=1000)
"""


def test_a_killed_consumer_in_a_long_poll_fetch_is_disconnected_at_once(
        broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send("t", b"before").get(timeout=10)
    child = spawn(LONG_POLLER, bootstrap)
    try:
        ports = parked(broker, child, "the consumer's Fetch")
        kill_and_expect_freed(broker, child, ports)
        # The broker serves on: the Fetch's wait ended with its connection.
        producer.send("t", b"after").get(timeout=10)
        assert not waiting_ports(broker) & ports
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        producer.close(timeout=5)
