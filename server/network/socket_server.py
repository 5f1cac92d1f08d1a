"""Kafka's SocketServer: the listening sockets, their acceptors, the connection quotas,
and a task per connection that hands its requests to the broker's dispatch."""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Mapping
from typing import Any, Protocol

import trio

from josefk.protocol.framing import RECEIVE_SIZE
from josefk.server.config.broker import BrokerConfig
from josefk.server.network.acceptor import Acceptor
from josefk.server.network.connection import Connection, Dispatch, RequestObserver
from josefk.server.network.ip_rates import IpConnectionRates
from josefk.server.network.liveness import HangupWatch, IdleConnections
from josefk.server.network.quotas import ConnectionQuotas, TooManyConnections, ip_of
from josefk.server.security.listener import ListenerSecurity

logger = logging.getLogger(__name__)

# accept() failures that mean "not now", as trio.serve_listeners treats them.
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_S = 0.1


class ConnectionMetrics(Protocol):
    """What the server tells the metrics (``server.metrics.recorder.Recorder``)."""

    def connection_created(self, listener: str) -> None: ...

    def timer(self) -> RequestObserver: ...


async def _close_later(stream: trio.SocketStream, delay_s: float) -> None:
    """Kafka's DelayedCloseSocket: a throttled connection is closed when its time is up."""
    try:
        await trio.sleep(delay_s)
    finally:
        stream.socket.close()


class SocketServer:
    """Binds every listener, accepts connections within the quotas and serves each one."""

    def __init__(self, config: BrokerConfig, dispatch: Dispatch, enabled: frozenset[int],
                 listener_security: Mapping[str, ListenerSecurity],
                 metrics: ConnectionMetrics | None) -> None:
        self.config = config
        self._dispatch = dispatch
        self._enabled = enabled
        self._listener_security = listener_security
        self._metrics = metrics
        self.bound_ports: list[int] = []
        self.quotas: ConnectionQuotas | None = None
        self.ip_rates: IpConnectionRates | None = None
        self.idle_connections = IdleConnections[Connection](
            config.connections_max_idle_ms / 1000)
        self.hangups = HangupWatch()
        # Every connection receives into this one buffer (they all run in this broker's
        # trio thread), so an idle connection holds no receive buffer of its own.
        self._receive_buffer = bytearray(RECEIVE_SIZE)
        # The listener of each open connection, for KIP-402's closing of the excess.
        self.connection_listeners: dict[Connection, str] = {}

    async def start(self, nursery: trio.Nursery) -> dict[str, int]:
        """Bind every listener and accept on it in ``nursery``; the first port bound per
        listener name (a port 0 listener gets an ephemeral one)."""
        self.quotas = await trio.to_thread.run_sync(ConnectionQuotas.from_config, self.config)
        bound: dict[str, int] = {}
        for listener in self.config.listeners:
            listeners = await trio.open_tcp_listeners(
                listener.port, host=listener.bind_host,
                backlog=self.config.values["socket.listen.backlog.size"])
            for sock_listener in listeners:
                self._set_receive_buffer(sock_listener)
                self.bound_ports.append(sock_listener.socket.getsockname()[1])
                bound.setdefault(listener.name, self.bound_ports[-1])
                nursery.start_soon(self._accept, listener.name, sock_listener, nursery)
        nursery.start_soon(self.idle_connections.run)
        nursery.start_soon(self.hangups.run)
        return bound

    def _set_receive_buffer(self, listener: trio.SocketListener) -> None:
        """``socket.receive.buffer.bytes`` on the listening socket, which its accepted
        connections inherit (so the TCP window is sized from it from the first SYN)."""
        size = self.config.values["socket.receive.buffer.bytes"]
        if size != -1:
            listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)

    async def _accept(self, name: str, listener: trio.SocketListener,
                      nursery: trio.Nursery) -> None:
        """Kafka's Acceptor: count each connection against the quotas, then serve it."""
        failures = 0
        acceptor = Acceptor(listener, self.config.values["socket.send.buffer.bytes"])
        async with listener:
            try:
                while True:
                    try:
                        streams = await acceptor.accept()
                    except OSError as e:
                        if e.errno not in ACCEPT_CAPACITY_ERRNOS:
                            raise
                        # Out of descriptors (or memory): the connection waits in the
                        # backlog; everyone already connected is still served.
                        if not failures:
                            logger.warning("cannot accept connections: %s; retrying every "
                                           "%.1fs", e, ACCEPT_RETRY_S)
                        failures += 1
                        await trio.sleep(ACCEPT_RETRY_S)
                        continue
                    if failures:
                        logger.info("accepting connections again after %d failed attempts",
                                    failures)
                        failures = 0
                    for i, stream in enumerate(streams):
                        try:
                            await self._admit(name, stream, nursery)
                        except BaseException:
                            for other in streams[i + 1:]:
                                other.socket.close()
                            raise
            finally:
                acceptor.close()

    async def _admit(self, name: str, stream: trio.SocketStream, nursery: trio.Nursery
                     ) -> None:
        """Count a new connection against the quotas, then serve it (or close it)."""
        quotas = self.quotas
        assert quotas is not None
        try:
            await quotas.wait_for_slot(name)
            ip = ip_of(stream.socket.getpeername()[0])
            wait_ms = self.ip_rates.throttle_ms(ip) if self.ip_rates is not None else 0
            if wait_ms:
                logger.debug("connection from %s is over its creation rate: closing it "
                             "in %d ms", ip, wait_ms)
                nursery.start_soon(_close_later, stream, wait_ms / 1000)
                return
            quotas.inc(name, ip)
        except TooManyConnections as e:
            logger.info("Rejected connection from %s, address already has the "
                        "configured maximum of %d connections.", e.ip, e.count)
            stream.socket.close()
            return
        except OSError:  # the peer left while it waited
            stream.socket.close()
            return
        except BaseException:
            stream.socket.close()
            raise
        nursery.start_soon(self._serve_connection, stream, name, ip)
        if quotas.protected(name) and quotas.excess():
            self._close_excess(quotas)

    def _close_excess(self, quotas: ConnectionQuotas) -> None:
        """KIP-402: the inter-broker listener went over max.connections; close the least
        recently active connections of the other listeners."""
        others = [c for c in self.idle_connections.least_active()
                  if not c.closing and not quotas.protected(self.connection_listeners[c])]
        for connection in others[:quotas.excess()]:
            logger.info("max.connections %d exceeded: closing the least recently active "
                        "connection, from %s", self.config.max_connections, connection.peer)
            connection.close()

    async def _serve_connection(self, stream: trio.SocketStream, listener: str,
                                ip: Any) -> None:
        assert self.quotas is not None
        timer = None
        if self._metrics is not None:
            self._metrics.connection_created(listener)
            timer = self._metrics.timer()  # in this connection's own task (its context)
        connection = Connection(stream, self._dispatch, self._enabled,
                                self.config.socket_request_max_bytes, self.idle_connections,
                                self._receive_buffer, self._listener_security[listener],
                                observer=timer, hangups=self.hangups)
        self.connection_listeners[connection] = listener
        try:
            await connection.serve()
        finally:
            del self.connection_listeners[connection]
            self.quotas.dec(listener, ip)
