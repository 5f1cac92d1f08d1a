"""Bad input closes only the offending connection, with a log line; everyone else is served.

Each test runs a broker in-process (trio) and talks raw bytes to it, checking
after every abuse that a well-formed client on another connection still gets
answers and that acknowledged data is intact.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from josefk.server.broker import Broker
from josefk.server.config.broker import load_config

API_VERSIONS = 18


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header(api_key: int, version: int, correlation_id: int = 7, client: bytes = b"t") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with trio.open_nursery() as nursery:
        config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                    "log.dirs": str(tmp_path / "data"),
                                    "connections.max.idle.ms": "60000"})
        broker = await nursery.start(Broker(config).serve)
        yield broker
        nursery.cancel_scope.cancel()


async def connect(broker: Broker) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", broker.bound_ports[0])


async def read_frame(stream: trio.SocketStream) -> bytes:
    buf = b""
    with trio.fail_after(5):
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = await stream.receive_some(65536)
            assert chunk, "connection closed before a whole response arrived"
            buf += chunk
    return buf[4:]


async def api_versions_ok(broker: Broker, version: int = 3) -> list[int]:
    """A well-formed ApiVersions request on a fresh connection; returns the api keys."""
    stream = await connect(broker)
    async with stream:
        request = ApiVersionsRequest[version](client_software_name="t",
                                              client_software_version="1")
        request.with_header(correlation_id=42, client_id="good")
        await stream.send_all(request.encode(header=True, framed=True))
        payload = await read_frame(stream)
    assert struct.unpack(">i", payload[:4])[0] == 42
    response = ApiVersionsResponse[version].decode(payload[4:])
    assert response.error_code == 0
    return [k.api_key for k in response.api_keys]


async def closed_by_broker(stream: trio.SocketStream) -> bool:
    """True if the broker closes the connection (EOF) within 5 s without answering."""
    with trio.fail_after(5):
        try:
            data = await stream.receive_some(65536)
        except trio.BrokenResourceError:
            return True
    return data == b""


BAD_INPUTS = {
    "garbage": b"\x13\x37" * 40,
    "negative size": struct.pack(">i", -5) + b"x" * 10,
    "huge size": struct.pack(">i", 0x7FFFFFF0),
    "above socket.request.max.bytes": struct.pack(">i", 100 * 1024 * 1024 + 1),
    "size below a header": struct.pack(">i", 3) + b"abc",
    "unknown api key": frame(header(9999, 0)),
    "produce v1 (removed in Kafka 4)": frame(header(0, 1) + b"\x00" * 20),
    "undecodable metadata body": frame(header(3, 9) + b"\xff\xff\xff"),
    "array count beyond the bytes left": frame(header(3, 4) + struct.pack(">i", 0x7FFFFFFF)),
    "truncated client id": frame(struct.pack(">hhih", 18, 0, 1, 300) + b"abc"),
}


@pytest.mark.parametrize("bad", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
async def test_bad_input_closes_that_connection_only(
    broker: Broker, bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    bystander = await connect(broker)
    offender = await connect(broker)
    with caplog.at_level(logging.INFO, logger="josefk.server.network.connection"):
        await offender.send_all(bad)
        assert await closed_by_broker(offender)
    assert any("closing connection" in r.getMessage() for r in caplog.records)
    # The bystander, connected before the abuse, is still served, and so are newcomers.
    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=5, client_id="bystander")
    await bystander.send_all(request.encode(header=True, framed=True))
    payload = await read_frame(bystander)
    assert struct.unpack(">i", payload[:4])[0] == 5
    await bystander.aclose()
    assert API_VERSIONS in await api_versions_ok(broker)


async def test_api_versions_above_our_max_gets_error_35_and_our_range(broker: Broker) -> None:
    stream = await connect(broker)
    async with stream:
        # A future version is flexible: its request header ends with (empty) tagged fields.
        await stream.send_all(frame(header(API_VERSIONS, 99, correlation_id=11) + b"\x00"))
        payload = await read_frame(stream)
        correlation_id, error_code = struct.unpack(">ih", payload[:6])
        assert (correlation_id, error_code) == (11, 35)
        response = ApiVersionsResponse[0].decode(payload[4:])
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[API_VERSIONS] == (0, 4)
        # The connection stays open: the client retries with a version we listed.
        assert API_VERSIONS in await api_versions_ok(broker, version=3)


async def test_a_frame_split_into_single_bytes_is_served(broker: Broker) -> None:
    request = ApiVersionsRequest[2]()
    request.with_header(correlation_id=3, client_id="slow")
    data = request.encode(header=True, framed=True)
    stream = await connect(broker)
    async with stream:
        for i in range(len(data)):
            await stream.send_all(data[i:i + 1])
        payload = await read_frame(stream)
    assert struct.unpack(">i", payload[:4])[0] == 3


async def test_idle_connections_are_closed(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                    "log.dirs": str(tmp_path / "data"),
                                    "connections.max.idle.ms": "300"})
        broker = await nursery.start(Broker(config).serve)
        stream = await connect(broker)
        assert await closed_by_broker(stream)
        nursery.cancel_scope.cancel()



async def test_negative_idle_timeout_never_closes(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                    "log.dirs": str(tmp_path / "data"),
                                    "connections.max.idle.ms": "-1"})
        broker = await nursery.start(Broker(config).serve)
        stream = await connect(broker)
        await trio.sleep(0.5)
        request = ApiVersionsRequest[0]()
        request.with_header(correlation_id=8, client_id="patient")
        await stream.send_all(request.encode(header=True, framed=True))
        payload = await read_frame(stream)
        assert struct.unpack(">i", payload[:4])[0] == 8
        nursery.cancel_scope.cancel()


async def test_a_pipelining_client_that_does_not_read_is_not_answered_without_end(
        broker: Broker) -> None:
    """Answers wait to go out together only up to MAX_PENDING_BYTES: a client that sends
    thousands of requests and reads nothing holds the broker at what the socket takes,
    not at every answer (Kafka mutes a channel while an answer is unsent)."""
    for i in range(100):
        await broker.create_topic(f"topic-{i:03d}", 1)
    handled = 0
    dispatch = broker.dispatch

    async def counting(request: Any) -> Any:
        nonlocal handled
        handled += 1
        return await dispatch(request)

    broker.dispatch = counting  # type: ignore[method-assign]
    count = 3000
    stream = await connect(broker)
    async with stream:
        requests = []
        for i in range(count):
            request = MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False)
            request.with_header(correlation_id=i, client_id="pipeliner")
            requests.append(request.encode(header=True, framed=True))
        await stream.send_all(b"".join(requests))
        await trio.sleep(1)
        assert handled < count // 2  # about a socket's worth plus MAX_PENDING_BYTES
        received = 0
        buffered = b""
        with trio.fail_after(30):
            while received < count:
                buffered += await stream.receive_some(1 << 20)
                while len(buffered) >= 4 and len(buffered) >= 4 + struct.unpack(
                        ">i", buffered[:4])[0]:
                    size = struct.unpack(">i", buffered[:4])[0]
                    assert struct.unpack(">i", buffered[4:8])[0] == received
                    buffered = buffered[4 + size:]
                    received += 1
    assert handled == count
