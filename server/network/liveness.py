"""Which connections to close: those idle too long (Kafka's IdleExpiryManager), and
those whose client hung up while their request waits.

A connection reads nothing while one of its requests is handled (Kafka mutes the
channel), so a client killed while its JoinGroup waits for the rebalance, or its Fetch
for data, would keep its socket, its task and its descriptor until the answer, minutes
later. Kafka's selector sees the close at once, frees the channel and drops the answer.

Here one task looks every :data:`CHECK_INTERVAL_S` at the connections with a request in
flight and asks the kernel for their TCP state (``TCP_INFO``), which reading the socket
could not tell behind a pipelined request: a peer that sent its FIN (``CLOSE_WAIT``) or
a reset (``CLOSE``) is gone, and its connection is closed. The waiting request is
cancelled with it; what it started goes on as for any client that left (a member's
pending join stays until its session times out, as in Kafka).
"""

from __future__ import annotations

import logging
import socket
import time
from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

import trio

logger = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.5
#: Linux's TCP states (``include/net/tcp_states.h``) of a socket whose peer is gone.
TCP_CLOSE, TCP_CLOSE_WAIT = 7, 8
_GONE = frozenset({TCP_CLOSE, TCP_CLOSE_WAIT})
_TCP_INFO = getattr(socket, "TCP_INFO", None)  # Linux only: elsewhere nothing is watched


class Idle(Protocol):
    """A connection as the idle expiry sees it."""

    peer: str
    last_active: float

    def close(self) -> None: ...


C = TypeVar("C", bound=Idle)


class IdleConnections(Generic[C]):
    """Kafka's IdleExpiryManager: the open connections, least recently active first.

    One task closes those idle longer than ``connections.max.idle.ms`` (negative: never).
    A deadline per receive would do it too, but with thousands of idle connections
    trio's deadline heap fills with stale entries, and their garbage-collection cost
    shows in every other client's latency.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lru: OrderedDict[C, None] = OrderedDict()

    def add(self, connection: C) -> None:
        self._lru[connection] = None

    def touch(self, connection: C) -> None:
        connection.last_active = time.monotonic()
        self._lru.move_to_end(connection)

    def remove(self, connection: C) -> None:
        self._lru.pop(connection, None)

    def least_active(self) -> list[C]:
        """Every connection, least recently active first."""
        return list(self._lru)

    async def run(self) -> None:
        if self.timeout_s < 0:
            return
        while True:
            await trio.sleep(min(1.0, self.timeout_s / 2))
            oldest = time.monotonic() - self.timeout_s
            expired = []
            for connection in self._lru:
                if connection.last_active > oldest:
                    break
                expired.append(connection)
            for connection in expired:
                logger.info("closing idle connection from %s", connection.peer)
                self.remove(connection)
                connection.close()


class Sockopts(Protocol):
    def getsockopt(self, level: int, option: int, buflen: int) -> bytes: ...


class Watched(Protocol):
    """A connection as the watch sees it."""

    peer: str

    @property
    def socket(self) -> Sockopts: ...

    def close(self) -> None: ...


def peer_gone(sock: Sockopts) -> bool:
    """Whether the peer of the TCP socket has closed or reset it."""
    if _TCP_INFO is None:
        return False
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 1)
    except OSError:  # closed meanwhile, or not TCP
        return False
    return bool(info) and info[0] in _GONE


class HangupWatch:
    """The connections whose request is in flight (`waiting` .. `answered`), and the
    task (`run`) that closes those whose peer left."""

    def __init__(self, interval_s: float = CHECK_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._waiting: dict[Watched, None] = {}

    def waiting(self, connection: Watched) -> None:
        self._waiting[connection] = None

    def answered(self, connection: Watched) -> None:
        self._waiting.pop(connection, None)

    @property
    def waiting_peers(self) -> list[str]:
        """The peers of the connections with a request in flight."""
        return [c.peer for c in self._waiting]

    def check(self) -> list[Watched]:
        """Close the waiting connections whose peer is gone; those closed."""
        gone = [c for c in self._waiting if peer_gone(c.socket)]
        for connection in gone:
            logger.info("closing connection from %s: the client closed it while its "
                        "request waited", connection.peer)
            self.answered(connection)
            connection.close()
        return gone

    async def run(self) -> None:
        if _TCP_INFO is None:
            return
        while True:
            await trio.sleep(self.interval_s)
            self.check()
