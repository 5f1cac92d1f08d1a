"""A connection from this broker to another broker: the controller's requests to
brokers, a broker's requests to the controller (Kafka's NetworkClient, one request at
a time). Requests and responses are kafka-python message classes. On a secured
inter-broker listener the connection opens with TLS and logs in with SASL first."""

from __future__ import annotations

import logging
import socket
import struct
from typing import Any

import trio

from josefk.server.security.client import PLAINTEXT_PEERS, PeerSecurity

logger = logging.getLogger(__name__)


class PeerError(Exception):
    """The peer could not be reached or answered with something unreadable."""


class PeerConnection:
    """Lazily connected; a failed request closes the socket and the next reconnects."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 receive_buffer: int = -1, security: PeerSecurity = PLAINTEXT_PEERS) -> None:
        """`receive_buffer`: the socket's SO_RCVBUF (a follower's
        ``replica.socket.receive.buffer.bytes``); -1 leaves the kernel's default."""
        self.host, self.port = host, port
        self.receive_buffer = receive_buffer
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._stream: trio.abc.Stream | None = None
        self._correlation_id = 0
        self._lock = trio.Lock()

    async def request(self, request: Any, version: int) -> Any:
        """Send ``request`` at ``version`` and return the decoded response; raises
        PeerError (after closing the connection) on any failure or timeout."""
        async with self._lock:
            try:
                with trio.fail_after(self.timeout_s):
                    return await self._exchange(request, version)
            except Exception as e:  # unreachable, timed out, or unreadable (any decoder error)
                await self.aclose()
                raise PeerError(f"{self.host}:{self.port}: {type(e).__name__}: {e}") from e

    async def _exchange(self, request: Any, version: int) -> Any:
        if self._stream is None:
            self._stream = await self._connect()
        return await self._send_and_receive(request, version)

    async def _connect(self) -> trio.abc.Stream:
        sock_stream = await trio.open_tcp_stream(self.host, self.port)
        if self.receive_buffer != -1:
            sock_stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                                          self.receive_buffer)
        stream: trio.abc.Stream = sock_stream
        if self.security.tls is not None:
            tls = trio.SSLStream(sock_stream, self.security.tls, server_hostname=self.host)
            await tls.do_handshake()
            stream = tls
        self._stream = stream
        await self._login()
        return stream

    async def _login(self) -> None:
        """SASL on the inter-broker listener: SaslHandshake, then the mechanism's tokens in
        SaslAuthenticate requests until it completes (Kafka's SaslClientAuthenticator)."""
        client = self.security.sasl_client()
        if client is None:
            return
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        shake = await self._send_and_receive(
            SaslHandshakeRequest(mechanism=client.mechanism_name), 1)
        if shake.error_code:
            raise PeerError(f"SASL handshake for {client.mechanism_name}: error "
                            f"{shake.error_code} (the peer offers {shake.mechanisms})")
        token = client.evaluate(b"")
        while True:
            answer = await self._send_and_receive(SaslAuthenticateRequest(auth_bytes=token), 1)
            if answer.error_code:
                raise PeerError(f"SASL {client.mechanism_name} login as "
                                f"{self.security.username!r}: {answer.error_message}")
            if client.complete:
                return
            token = client.evaluate(bytes(answer.auth_bytes))
            if client.complete:
                return

    async def _send_and_receive(self, request: Any, version: int) -> Any:
        assert self._stream is not None
        self._correlation_id += 1
        cid = self._correlation_id
        request.with_header(correlation_id=cid, client_id=self.client_id)
        await self._stream.send_all(request.encode(version=version, header=True, framed=True))
        size = struct.unpack(">i", await self._read_exact(4))[0]
        frame = await self._read_exact(size)
        response = request.header.get_response_class().decode(frame, version=version,
                                                              header=True)
        if response.header.correlation_id != cid:
            raise ValueError(f"correlation id {response.header.correlation_id}, expected {cid}")
        return response

    async def _read_exact(self, n: int) -> bytes:
        assert self._stream is not None
        buf = bytearray()
        while len(buf) < n:
            chunk = await self._stream.receive_some(n - len(buf))
            if not chunk:
                raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    @classmethod
    async def once(cls, endpoint: tuple[str, int], client_id: str, timeout_s: float,
                   request: Any, version: int, what: str,
                   security: PeerSecurity = PLAINTEXT_PEERS) -> Any | None:
        """One request on a connection of its own; None (logged) when it fails."""
        peer = cls(*endpoint, client_id, timeout_s, security=security)
        try:
            return await peer.request(request, version)
        except PeerError as e:
            logger.warning("%s failed: %s", what, e)
            return None
        finally:
            await peer.aclose()

    async def aclose(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()


class PeerPool:
    """Connections to other brokers kept open by broker id; one is made anew when that
    broker's address changes."""

    def __init__(self, client_id: str, timeout_s: float,
                 security: PeerSecurity = PLAINTEXT_PEERS) -> None:
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self._peers: dict[int, PeerConnection] = {}

    def get(self, broker_id: int, endpoint: tuple[str, int] | None) -> PeerConnection | None:
        """The connection to ``broker_id`` at ``endpoint``; None without an endpoint."""
        if endpoint is None:
            return None
        peer = self._peers.get(broker_id)
        if peer is None or (peer.host, peer.port) != endpoint:
            peer = self._peers[broker_id] = PeerConnection(*endpoint, self.client_id,
                                                           self.timeout_s,
                                                           security=self.security)
        return peer
