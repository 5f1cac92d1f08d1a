"""A blocking client for the live run: connections to one listener (TLS, SASL PLAIN or SCRAM
as it needs), a fuzz case sent on one, and the clean ApiVersions + Metadata check."""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from josefk.server.security.errors import AuthenticationError
from josefk.server.security.scram_client import ScramClient

# The users of compat_tests/security/conftest.py (PLAIN_USERS, SCRAM_USERS).
LOGINS = {"PLAIN": ("alice", "alice-secret"),
          "SCRAM-SHA-256": ("scram-alice", "scram-alice-secret"),
          "SCRAM-SHA-512": ("scram-alice", "scram-alice-secret")}
MECHANISMS = tuple(LOGINS)


class LoginFailed(Exception):
    """The broker refused a correct login (or answered it with nonsense)."""


@dataclass(frozen=True)
class Endpoint:
    """One listener of the broker under fuzz, and the files to reach it."""

    listener: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    port: int
    ca: str
    client_cert: str
    client_key: str

    @property
    def tls(self) -> bool:
        return self.listener in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.listener.startswith("SASL_")

    @cached_property
    def contexts(self) -> dict[bool, ssl.SSLContext]:
        """TLS client contexts, without and with the client certificate."""
        out = {}
        for with_cert in (False, True):
            context = ssl.create_default_context(cafile=self.ca)
            if with_cert:
                context.load_cert_chain(self.client_cert, self.client_key)
            out[with_cert] = context
        return out

    def client_hello(self) -> bytes:
        """The first bytes a TLS client sends (a seed for fuzzing before the handshake)."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = self.contexts[False].wrap_bio(incoming, outgoing, server_hostname="localhost")
        with contextlib.suppress(ssl.SSLWantReadError):
            tls.do_handshake()
        return outgoing.read()


def connect(endpoint: Endpoint, *, secure: bool = True, mechanism: str = "PLAIN",
            client_cert: bool = False, timeout: float = 10.0) -> socket.socket:
    """A connection to the listener: with ``secure``, through TLS and SASL as the listener
    needs; without, TLS only for SASL_SSL (SSL then gets the raw bytes, before the TLS
    handshake) and no SASL."""
    sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if endpoint.tls and (secure or endpoint.sasl):
            sock = endpoint.contexts[client_cert].wrap_socket(sock, server_hostname="localhost")
        if secure and endpoint.sasl:
            sasl_login(sock, mechanism)
    except BaseException:
        sock.close()
        raise
    return sock


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def exchange(sock: socket.socket, request: ApiMessage, version: int) -> Any:
    """Send one request, read and decode its response."""
    request.with_header(correlation_id=7, client_id="fuzz-clean")
    sock.sendall(request.encode(version=version, header=True, framed=True))
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    frame = _read_exact(sock, size)
    response = request.header.get_response_class().decode(frame, version=version, header=True)
    if response.header.correlation_id != 7:
        raise LoginFailed(f"correlation id {response.header.correlation_id}, expected 7")
    return response


def sasl_login(sock: socket.socket, mechanism: str) -> None:
    """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate v2."""
    answer = exchange(sock, SaslHandshakeRequest[1](mechanism=mechanism), 1)
    if answer.error_code:
        raise LoginFailed(f"SaslHandshake {mechanism}: error {answer.error_code}")
    user, password = LOGINS[mechanism]
    if mechanism == "PLAIN":
        _authenticate(sock, mechanism, f"\0{user}\0{password}".encode())
        return
    scram = ScramClient(mechanism, user, password)
    server_first = _authenticate(sock, mechanism, scram.evaluate(b""))
    server_final = _authenticate(sock, mechanism, scram.evaluate(server_first))
    try:
        scram.evaluate(server_final)
    except AuthenticationError as e:
        raise LoginFailed(f"{mechanism}: {e.message}") from None


def _authenticate(sock: socket.socket, mechanism: str, token: bytes) -> bytes:
    answer = exchange(sock, SaslAuthenticateRequest[2](auth_bytes=token), 2)
    if answer.error_code:
        raise LoginFailed(f"{mechanism}: {answer.error_message}")
    return bytes(answer.auth_bytes)


def send_case(sock: socket.socket, stream: bytes, drain_s: float = 1.0) -> bool:
    """Send the case, close our side, and read what comes back until the broker closes or
    ``drain_s`` passes; whether anything came back."""
    deadline = time.monotonic() + drain_s
    answered = False
    try:
        sock.sendall(stream)
        _close_write(sock)
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                break
            answered = True
    except (OSError, ssl.SSLError):  # reset, or the time is up
        pass
    finally:
        sock.close()
    return answered


def _close_write(sock: socket.socket) -> None:
    """Our side done: the broker reads the frames, then EOF (TLS: close_notify, which leaves
    the session able to carry the answers), answers, and closes."""
    if not isinstance(sock, ssl.SSLSocket):
        sock.shutdown(socket.SHUT_WR)
        return
    sock.setblocking(False)
    with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLWantWriteError):
        sock.unwrap()  # sends close_notify; would then wait for the broker's
    sock.setblocking(True)


def clean_check(endpoint: Endpoint, timeout: float = 10.0) -> frozenset[int]:
    """A normal client's ApiVersions v3 and Metadata v12 on a fresh connection, all within
    ``timeout``; the api keys the broker serves. Raises when the broker does not answer."""
    sock = connect(endpoint, mechanism="PLAIN", client_cert=True, timeout=timeout)
    try:
        versions = exchange(sock, ApiVersionsRequest[3](client_software_name="fuzz",
                                                        client_software_version="1"), 3)
        if versions.error_code:
            raise LoginFailed(f"ApiVersions error {versions.error_code}")
        metadata = exchange(sock, MetadataRequest[12](topics=[], allow_auto_topic_creation=False),
                            12)
        if not metadata.brokers:
            raise LoginFailed("Metadata lists no broker")
        return frozenset(api.api_key for api in versions.api_keys)
    finally:
        sock.close()
