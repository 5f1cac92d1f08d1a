"""Connection limits as a client sees them: ``max.connections.per.ip`` (and overrides),
``max.connections``, and their validation at start-up.

- Over an address's limit the broker accepts the connection and closes it at once,
  without answering; other addresses are not affected; a closed connection frees a slot.
- At ``max.connections`` the next connection is not refused: it gets no answer until
  another connection closes, then its pending request is served.
- Over ``max.connection.creation.rate`` new connections are not refused: they wait.
- ``max.connections.per.ip=0`` without overrides, or an override without a count,
  stops the broker from starting.

Raw sockets bound to other loopback addresses (127.0.0.2, 127.0.0.3) give each case
its own source address. Each limit gets a broker of its own.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.metadata import ApiVersionsRequest

from .conftest import Broker, broker_command, broker_of_its_own, free_port

# A broker may take this long to notice a close and free the slot.
SETTLE = 10.0


@contextlib.contextmanager
def own_broker(request: pytest.FixtureRequest, tmp: Path, overrides: dict[str, str]
               ) -> Iterator[Broker]:
    with broker_of_its_own(request.config, tmp, "connection limits", overrides) as broker:
        yield broker


@pytest.fixture(scope="module")
def per_ip_broker(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    overrides = {"max.connections.per.ip": "0",
                 "max.connections.per.ip.overrides": "127.0.0.1:1000,127.0.0.2:2"}
    with own_broker(request, tmp_path_factory.mktemp("per-ip"), overrides) as broker:
        yield broker


MAX_CONNECTIONS = 5


@pytest.fixture(scope="module")
def capped_broker(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    overrides = {"max.connections": str(MAX_CONNECTIONS)}
    with own_broker(request, tmp_path_factory.mktemp("capped"), overrides) as broker:
        yield broker


def connect(broker: Broker, source: str = "127.0.0.1") -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect((host, int(port)))
    return sock


def send_api_versions(sock: socket.socket, correlation_id: int) -> None:
    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=correlation_id, client_id="compat-limits")
    sock.sendall(request.encode(header=True, framed=True))


def read_response(sock: socket.socket) -> bytes | None:
    """One response frame, or None if the broker closed (EOF or reset) first."""
    buf = b""
    try:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
    except ConnectionResetError:
        return None
    return buf[4:]


def answered(sock: socket.socket, correlation_id: int) -> bool:
    """ApiVersions on ``sock`` gets its answer (False if the broker closes the socket)."""
    send_api_versions(sock, correlation_id)
    payload = read_response(sock)
    return payload is not None and struct.unpack(">i", payload[:4])[0] == correlation_id


def closed_unanswered(sock: socket.socket) -> bool:
    """The broker closes ``sock`` without answering an ApiVersions sent on it."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        send_api_versions(sock, 99)
    return read_response(sock) is None


def poll(what: str, check: Callable[[], bool], timeout: float = SETTLE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        time.sleep(0.1)


def test_over_the_per_ip_limit_a_connection_is_closed_at_once(per_ip_broker: Broker) -> None:
    first, second = connect(per_ip_broker, "127.0.0.2"), connect(per_ip_broker, "127.0.0.2")
    try:
        assert answered(first, 1) and answered(second, 2)
        with connect(per_ip_broker, "127.0.0.2") as third:
            assert closed_unanswered(third)
        # 127.0.0.1's override is far away: its connections are served.
        with connect(per_ip_broker) as other, connect(per_ip_broker) as another:
            assert answered(other, 3) and answered(another, 4)
    finally:
        first.close()

    def slot_freed() -> bool:
        with connect(per_ip_broker, "127.0.0.2") as sock:
            return answered(sock, 5)

    try:
        poll("a closed connection frees its address's slot", slot_freed)
    finally:
        second.close()


def test_max_connections_per_ip_zero_refuses_addresses_without_an_override(
        per_ip_broker: Broker) -> None:
    with connect(per_ip_broker, "127.0.0.3") as sock:
        assert closed_unanswered(sock)
    admin = KafkaAdminClient(bootstrap_servers=per_ip_broker.bootstrap,
                             client_id="compat-limits", request_timeout_ms=15_000)
    try:
        assert admin.describe_cluster()["brokers"]
    finally:
        admin.close()


def test_at_max_connections_a_new_connection_waits_for_a_slot(capped_broker: Broker) -> None:
    held: list[socket.socket] = []
    try:
        time.sleep(1)  # the readiness probe's connection must have closed
        for i in range(MAX_CONNECTIONS):
            sock = connect(capped_broker)
            held.append(sock)
            sock.settimeout(SETTLE)
            assert answered(sock, i), "a connection under max.connections was refused"
        waiting = connect(capped_broker)
        held.append(waiting)
        send_api_versions(waiting, 42)
        waiting.settimeout(2)
        with pytest.raises(TimeoutError):
            data = waiting.recv(100)
            pytest.fail(f"over max.connections a connection was served or closed: {data!r}")
        held.pop(0).close()
        waiting.settimeout(SETTLE)
        payload = read_response(waiting)
        assert payload is not None, "the waiting connection was closed instead of served"
        assert struct.unpack(">i", payload[:4])[0] == 42
    finally:
        for sock in held:
            sock.close()


CREATION_RATE = 5
# Kafka's rate divides by at least ten one-second windows, so the first 10 * rate
# connections come at once; the rest are held back to the rate.
RATE_CONNECTIONS = 10 * CREATION_RATE + 30


def test_over_the_creation_rate_connections_wait(request: pytest.FixtureRequest,
                                                 tmp_path: Path) -> None:
    overrides = {"max.connection.creation.rate": str(CREATION_RATE)}
    with own_broker(request, tmp_path, overrides) as broker:
        time.sleep(1)  # the readiness probe's connection counts too
        began = time.monotonic()
        for i in range(RATE_CONNECTIONS):
            with connect(broker) as sock:
                sock.settimeout(SETTLE)
                assert answered(sock, i), "over the creation rate a connection was refused"
        elapsed = time.monotonic() - began
    # The 30 beyond the first burst cannot come faster than the rate allows (the
    # bound holds however slow the machine; unthrottled, all take well under a second).
    assert elapsed >= (RATE_CONNECTIONS - 10 * CREATION_RATE - 5) / CREATION_RATE, elapsed


@pytest.mark.parametrize("overrides", [
    {"max.connections.per.ip": "0"},
    {"max.connections.per.ip.overrides": "127.0.0.1"},
], ids=["per-ip-zero-without-overrides", "override-without-count"])
def test_invalid_limits_stop_the_broker_from_starting(
        request: pytest.FixtureRequest, tmp_path: Path, overrides: dict[str, str]) -> None:
    if request.config.getoption("bootstrap"):
        pytest.skip("needs a broker of its own; --bootstrap given")
    kind = "kafka" if request.config.getoption("kafka") else "josefk"
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    done = subprocess.run(broker_command(kind, data_dir, free_port(), overrides),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=90)
    output = (done.stdout + done.stderr).decode("utf-8", "replace")
    assert done.returncode != 0, output[-3000:]
    assert "max.connections.per.ip" in output, output[-3000:]
