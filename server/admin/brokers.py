"""The admin client's connections: one per broker, found through a bootstrap server's
Metadata; Kafka error codes turned into ``AdminError``; retries of what a leader or
coordinator move makes fail for a moment."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import kafka.errors
import trio
from kafka.protocol.metadata import MetadataRequest

from josefk.server.admin.errors import AdminError
from josefk.server.network.peer import PeerConnection, PeerError
from josefk.server.security.client import PeerSecurity

T = TypeVar("T")

# Versions both josefk and Apache Kafka 4.x answer (Kafka 4.0 dropped the oldest ones).
METADATA_VERSION = 12

NETWORK_EXCEPTION = "NETWORK_EXCEPTION"
RETRIABLE = frozenset({
    NETWORK_EXCEPTION, "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE",
    "REQUEST_TIMED_OUT", "NOT_CONTROLLER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
    "REBALANCE_IN_PROGRESS", "BROKER_NOT_AVAILABLE",
})


def error_name(code: int) -> str:
    """Kafka's name of an error code (``Errors`` in Kafka's source)."""
    return str(kafka.errors.for_code(code).message)


def check(code: int, what: str, message: str | None = None) -> None:
    """Raise AdminError for a non-zero error code: ``what`` says what failed."""
    if code:
        detail = message or kafka.errors.for_code(code).description
        raise AdminError(error_name(code), f"{what}: {detail}")


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` (IPv6 as ``[addr]:port``) as (host, port) pairs."""
    servers = []
    for item in (x.strip() for x in bootstrap.split(",")):
        host, sep, port = item.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise AdminError("INVALID_CONFIG", f"bootstrap server {item!r} is not HOST:PORT")
        servers.append((host, int(port)))
    return servers


class Brokers:
    """Connections to a cluster's brokers by id, and to its bootstrap servers."""

    def __init__(self, bootstrap: list[tuple[str, int]], security: PeerSecurity,
                 client_id: str, timeout_s: float) -> None:
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._bootstrap = [self._connection(host, port) for host, port in bootstrap]
        self._peers: dict[int, PeerConnection] = {}
        self.endpoints: dict[int, tuple[str, int]] = {}

    def _connection(self, host: str, port: int) -> PeerConnection:
        return PeerConnection(host, port, self.client_id, self.timeout_s,
                              security=self.security)

    async def metadata(self, topics: list[str] | None = None) -> Any:
        """Metadata (all topics when ``topics`` is None) from any reachable broker; learns
        the brokers' endpoints from it."""
        response = await self.send_any(_metadata_request(topics), METADATA_VERSION)
        self.endpoints = {b.node_id: (b.host, b.port) for b in response.brokers}
        return response

    async def metadata_of(self, broker_id: int, topics: list[str] | None) -> Any:
        """Metadata as broker ``broker_id`` sees it."""
        return await self.send(broker_id, _metadata_request(topics), METADATA_VERSION)

    async def send_any(self, request: Any, version: int) -> Any:
        """``request`` to the bootstrap servers, then the other known brokers, in turn
        until one answers."""
        failures = []
        for peer in self._connections():
            try:
                return await peer.request(request, version)
            except PeerError as e:
                failures.append(e)
        refused = [e for e in failures if _failure_name(e) != NETWORK_EXCEPTION]
        raise AdminError(_failure_name((refused or failures)[0]),
                         f"no broker answered {type(request).__name__}: "
                         f"{'; '.join(str(e) for e in failures)}")

    async def send(self, broker_id: int, request: Any, version: int) -> Any:
        """``request`` to broker ``broker_id`` (known from the last Metadata)."""
        if broker_id not in self.endpoints:
            await self.metadata([])
        endpoint = self.endpoints.get(broker_id)
        if endpoint is None:
            raise AdminError("BROKER_NOT_AVAILABLE", f"broker {broker_id} is not in the cluster")
        peer = self._peers.get(broker_id)
        if peer is None or (peer.host, peer.port) != endpoint:
            stale = peer
            peer = self._peers[broker_id] = next(
                (b for b in self._bootstrap if (b.host, b.port) == endpoint), None
            ) or self._connection(*endpoint)
            if stale is not None and stale not in self._bootstrap:
                await stale.aclose()
        try:
            return await peer.request(request, version)
        except PeerError as e:
            raise AdminError(_failure_name(e), f"broker {broker_id}: {e}") from e

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()`` again, with a growing pause, while it fails with a retriable
        error and ``timeout_s`` has not passed."""
        deadline = trio.current_time() + self.timeout_s
        pause = 0.05
        while True:
            try:
                return await attempt()
            except AdminError as e:
                if e.error not in RETRIABLE or trio.current_time() + pause > deadline:
                    raise
            await trio.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _connections(self) -> list[PeerConnection]:
        """The bootstrap servers' connections first (reused as those brokers' own), then
        the other brokers'."""
        others = [p for p in self._peers.values() if p not in self._bootstrap]
        return [*self._bootstrap, *others]

    async def aclose(self) -> None:
        for peer in self._connections():
            await peer.aclose()


def _failure_name(error: PeerError) -> str:
    """What kind of failure a PeerError was: a refused SASL login (PeerConnection raises
    PeerError for it, wrapped in another), a failed TLS handshake, or the network."""
    cause = error.__cause__
    if isinstance(cause, PeerError):
        return "SASL_AUTHENTICATION_FAILED"
    if isinstance(cause, ssl.SSLError | trio.BrokenResourceError) and isinstance(
            cause.__cause__ or cause, ssl.SSLError):
        return "SSL_HANDSHAKE_FAILED"
    return NETWORK_EXCEPTION


def _metadata_request(topics: list[str] | None) -> MetadataRequest:
    named = None if topics is None else [
        MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return MetadataRequest(topics=named, allow_auto_topic_creation=False)
