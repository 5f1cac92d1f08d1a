"""max.connections, max.connections.per.ip and its overrides, as Kafka's ConnectionQuotas;
and the socket options of connections (listen backlog, buffer sizes).

Brokers run in-process; clients connect from other loopback addresses (127.0.0.2, ...)
so each test controls exactly which address counts what.
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import struct
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from kafka.protocol.metadata import ApiVersionsRequest

from josefk.server.broker import Broker
from josefk.server.config.broker import load_config
from josefk.server.config.values import ConfigError
from josefk.server.network.peer import PeerConnection
from josefk.server.network.quotas import ip_of

REJECTED = "Rejected connection from {}, address already has the configured maximum of {} " \
           "connections."


@asynccontextmanager
async def running(tmp_path: Path, **overrides: str) -> AsyncIterator[Broker]:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
             **{k.replace("_", "."): v for k, v in overrides.items()}}
    async with trio.open_nursery() as nursery:
        broker = await nursery.start(Broker(load_config(None, props)).serve)
        yield broker
        nursery.cancel_scope.cancel()


async def connect(broker: Broker, source: str = "127.0.0.1", port: int | None = None
                  ) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", port or broker.bound_ports[0],
                                      local_address=source)


async def read_frame(stream: trio.SocketStream) -> bytes:
    buf = b""
    with trio.fail_after(5):
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = await stream.receive_some(65536)
            assert chunk, "connection closed before a whole response arrived"
            buf += chunk
    return buf[4:]


async def closed_by_broker(stream: trio.SocketStream) -> bool:
    """True if the broker closes the connection (EOF or reset) within 5 s, unanswered."""
    with trio.fail_after(5):
        try:
            data = await stream.receive_some(65536)
        except trio.BrokenResourceError:
            return True
    return data == b""


async def send_api_versions(stream: trio.SocketStream, correlation_id: int = 1) -> None:
    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=correlation_id, client_id="limits")
    await stream.send_all(request.encode(header=True, framed=True))


async def answered(stream: trio.SocketStream, correlation_id: int = 1) -> bool:
    """An ApiVersions round trip on ``stream`` succeeds."""
    await send_api_versions(stream, correlation_id)
    payload = await read_frame(stream)
    return struct.unpack(">i", payload[:4])[0] == correlation_id


async def eventually(check: Callable[[], bool], seconds: float = 5) -> None:
    with trio.fail_after(seconds):
        while not check():
            await trio.sleep(0.01)


async def test_one_over_the_per_ip_override_is_closed_at_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with running(tmp_path, max_connections_per_ip_overrides="127.0.0.2:2") as broker:
        first, second = await connect(broker, "127.0.0.2"), await connect(broker, "127.0.0.2")
        assert await answered(first) and await answered(second)
        with caplog.at_level(logging.INFO, logger="josefk.server.network.socket_server"):
            third = await connect(broker, "127.0.0.2")
            assert await closed_by_broker(third)
        assert REJECTED.format("127.0.0.2", 2) in caplog.messages
        # Another address has the default (no) limit.
        others = [await connect(broker, "127.0.0.1") for _ in range(3)]
        for i, other in enumerate(others):
            assert await answered(other, i)
        # A closed connection frees its address's slot.
        await first.aclose()
        await eventually(lambda: broker.quotas is not None
                         and broker.quotas.get(ip_of("127.0.0.2")) == 1)
        assert await answered(await connect(broker, "127.0.0.2"))


async def test_max_connections_per_ip_zero_refuses_all_but_the_overrides(tmp_path: Path) -> None:
    async with running(tmp_path, max_connections_per_ip="0",
                       max_connections_per_ip_overrides="127.0.0.1:100, localhost:100") as broker:
        assert await closed_by_broker(await connect(broker, "127.0.0.3"))
        assert await answered(await connect(broker, "127.0.0.1"))


async def test_at_max_connections_a_new_connection_waits_for_a_slot(tmp_path: Path) -> None:
    async with running(tmp_path, max_connections="2") as broker:
        first, second = await connect(broker), await connect(broker)
        assert await answered(first) and await answered(second)
        waiting = await connect(broker)  # the kernel completes the handshake
        await send_api_versions(waiting, 9)
        with trio.move_on_after(0.5) as unanswered:
            data = await waiting.receive_some(100)
            pytest.fail(f"a connection over max.connections was served or closed: {data!r}")
        assert unanswered.cancelled_caught
        await second.aclose()
        payload = await read_frame(waiting)
        assert struct.unpack(">i", payload[:4])[0] == 9
        assert broker.quotas is not None and broker.quotas.total == 2


async def test_the_inter_broker_listener_is_not_blocked_and_evicts_the_least_active(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with running(tmp_path, listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                       listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                       inter_broker_listener_name="INTERNAL", max_connections="2") as broker:
        client_port, internal_port = broker.bound_ports
        stale, recent = await connect(broker), await connect(broker)
        assert await answered(stale)
        await trio.sleep(0.05)
        assert await answered(recent)
        with caplog.at_level(logging.INFO, logger="josefk.server.network.socket_server"):
            internal = await connect(broker, port=internal_port)
            assert await answered(internal)
            assert await closed_by_broker(stale)
        assert any("max.connections 2 exceeded" in m for m in caplog.messages)
        assert await answered(recent, 2)
        assert broker.quotas is not None
        await eventually(lambda: broker.quotas is not None and broker.quotas.total == 2)
        # The client listener is full (recent + internal): a newcomer waits.
        newcomer = await connect(broker, port=client_port)
        await send_api_versions(newcomer)
        with trio.move_on_after(0.3) as unanswered:
            await newcomer.receive_some(100)
        assert unanswered.cancelled_caught


async def test_counts_return_to_zero(tmp_path: Path) -> None:
    async with running(tmp_path, max_connections_per_ip_overrides="127.0.0.2:5") as broker:
        streams = [await connect(broker, "127.0.0.2") for _ in range(7)]
        await eventually(lambda: broker.quotas is not None and broker.quotas.total == 5)
        for stream in streams:
            await stream.aclose()
        await eventually(lambda: broker.quotas is not None and broker.quotas.total == 0
                         and not broker.quotas.counts)


@pytest.mark.parametrize(("props", "message"), [
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip can be set to zero only if "
     "max.connections.per.ip.overrides property is set."),
    ({"max.connections.per.ip.overrides": "127.0.0.1"},
     "Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, "
     "end -1, length 9"),
    ({"max.connections.per.ip.overrides": "a:1,,b:2"}, "begin 0, end -1, length 0"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:many"}, 'For input string: "many"'),
    ({"max.connections.per.ip.overrides": "127.0.0.1:3000000000"}, "For input string"),
    # More digits than Python's int() takes (4300): Kafka's message, not Python's error.
    ({"max.connections.per.ip.overrides": "127.0.0.1:" + "9" * 5000}, "For input string"),
    ({"max.connections.per.ip.overrides": "bad host:1,ok:2,x/y:3"},
     "max.connections.per.ip.overrides contains invalid addresses : bad host,x/y"),
    ({"max.connections": "-1"}, "Value must be at least 0"),
    ({"max.connections.per.ip": "-1"}, "Value must be at least 0"),
])
def test_invalid_limits_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, props)
    assert message in str(e.value)


@pytest.mark.parametrize(("raw", "parsed"), [
    ("", {}),
    (" 127.0.0.1 : 5 , ::1:7,", {"127.0.0.1": 5, "::1": 7}),
    ("host-a:1,host-a:2", {"host-a": 2}),
    ("127.0.0.2:+3,10.0.0.1:-1", {"127.0.0.2": 3, "10.0.0.1": -1}),
])
def test_overrides_parse_as_kafka_does(raw: str, parsed: dict[str, int]) -> None:
    config = load_config(None, {"max.connections.per.ip.overrides": raw})
    assert dict(config.max_connections_per_ip_overrides) == parsed


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
@pytest.mark.parametrize("backlog", ["7", None])
async def test_socket_listen_backlog_size_is_the_listening_sockets_backlog(
        tmp_path: Path, backlog: str | None) -> None:
    overrides = {} if backlog is None else {"socket_listen_backlog_size": backlog}
    async with running(tmp_path, **overrides) as broker:
        port = broker.bound_ports[0]
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                             text=True, check=True).stdout.split()
    # ss shows a listening socket's accept-queue limit as its Send-Q (third column).
    assert int(out[2]) == int(backlog or 50)  # Kafka's default is 50


def _socket_buffers(local_port: int, peer_port: int) -> dict[str, int]:
    """The kernel's receive and send buffer limits (``rb``, ``tb``) of the broker's end
    of one connection, from ``ss -m``; the kernel doubles what SO_*BUF asked for."""
    out = subprocess.run(["ss", "-tnmH", "state", "established",
                          f"( sport = :{local_port} and dport = :{peer_port} )"],
                         capture_output=True, text=True, check=True).stdout
    skmem = out[out.index("skmem:(") + 7:out.index(")", out.index("skmem:("))]
    fields = dict(re.fullmatch(r"([a-z_]+)(\d+)", part).groups() for part in skmem.split(","))
    return {"rb": int(fields["rb"]), "tb": int(fields["tb"])}


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
@pytest.mark.parametrize(("send", "receive"), [("65536", "32768"), (None, None)])
async def test_socket_buffer_sizes_are_each_connections_so_sndbuf_and_so_rcvbuf(
        tmp_path: Path, send: str | None, receive: str | None) -> None:
    overrides = {} if send is None else {"socket_send_buffer_bytes": send,
                                         "socket_receive_buffer_bytes": receive}
    async with running(tmp_path, **overrides) as broker:
        stream = await connect(broker)
        assert await answered(stream)
        buffers = _socket_buffers(broker.bound_ports[0], stream.socket.getsockname()[1])
    # Kafka's defaults are 102400 for both.
    assert buffers == {"rb": 2 * int(receive or 102400), "tb": 2 * int(send or 102400)}


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
async def test_socket_buffer_sizes_of_minus_one_leave_the_kernels_autotuning(
        tmp_path: Path) -> None:
    async with running(tmp_path, socket_send_buffer_bytes="-1",
                       socket_receive_buffer_bytes="-1") as broker:
        stream = await connect(broker)
        assert await answered(stream)
        buffers = _socket_buffers(broker.bound_ports[0], stream.socket.getsockname()[1])
    # Unlocked buffers start from net.ipv4.tcp_rmem / tcp_wmem's defaults, not 2 × 102400.
    rmem = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[1])
    assert buffers["rb"] == rmem and buffers["tb"] != 2 * 102400


@pytest.mark.parametrize("size", [32768, -1])
async def test_a_followers_connection_has_replica_socket_receive_buffer_bytes(
        tmp_path: Path, size: int) -> None:
    async with running(tmp_path) as broker:
        peer = PeerConnection("127.0.0.1", broker.bound_ports[0], "broker-1-fetcher-0", 5,
                              receive_buffer=size)
        try:
            response = await peer.request(ApiVersionsRequest[0](), 0)
            assert response.error_code == 0
            assert peer._stream is not None
            got = peer._stream.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        finally:
            await peer.aclose()
    # The kernel doubles what was asked; without a size, tcp_rmem's default stands.
    rmem = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[1])
    assert got == (2 * size if size != -1 else rmem)


def test_creation_rates_throttle_broker_wide_and_per_listener(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from josefk.server.network import quotas
    from josefk.server.quotas.rate import RateConfig

    now = [1_000_000]
    monkeypatch.setattr(quotas, "_now_ms", lambda: now[0])
    rates = quotas.CreationRates(RateConfig(samples=11, window_ms=1000), 2,
                                 {"CLIENT": 2, "REPLICATION": 100})
    # At most 2/s over ten windows: the first 20 come at once, the 21st waits.
    assert [rates.record("CLIENT", False) for _ in range(20)] == [0] * 20
    assert rates.record("CLIENT", False) > 0
    # The protected inter-broker listener is held only by its own limit.
    assert rates.record("REPLICATION", True) == 0
    # A wait is at most one window, however far over the rate.
    assert max(rates.record("CLIENT", False) for _ in range(100)) == 1000
    rates.broker_limit = rates.listener_limits["CLIENT"] = 1000
    assert rates.record("CLIENT", False) == 0
    now[0] += 60_000  # a quiet minute: the old samples are gone
    rates.broker_limit = rates.listener_limits["CLIENT"] = 2
    assert rates.record("CLIENT", False) == 0
