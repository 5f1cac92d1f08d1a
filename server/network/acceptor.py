"""Take every connection waiting in a listening socket's queue at once."""

from __future__ import annotations

import errno
import logging
import os
import socket

import trio

logger = logging.getLogger(__name__)

# At most this many connections are taken in one go, then others get a turn.
MAX_BATCH = 64
# The errors of one connection that failed before it was accepted (Linux reports them
# from accept(): a firewall's EPERM, a reset, ...): that connection is gone, the next
# is taken. The list is trio's SocketListener's.
_SKIPPED = frozenset(getattr(errno, name) for name in (
    "EPERM", "ECONNABORTED", "EPROTO", "ENETDOWN", "ENOPROTOOPT", "EHOSTDOWN", "ENONET",
    "EHOSTUNREACH", "EOPNOTSUPP", "ENETUNREACH", "ENOSR", "ESOCKTNOSUPPORT",
    "EPROTONOSUPPORT", "ETIMEDOUT", "ECONNRESET") if hasattr(errno, name))


class Acceptor:
    """Like Kafka's Acceptor thread, which accepts every ready connection per select:
    trio's ``SocketListener.accept`` passes through the scheduler once per connection,
    so under a burst the listen queue (``socket.listen.backlog.size``, 50 by default)
    overflows while the connections already accepted take their turns, and the
    overflowing clients retry their SYN a second later.
    """

    def __init__(self, listener: trio.SocketListener, send_buffer: int = -1) -> None:
        """`send_buffer`: each connection's SO_SNDBUF (``socket.send.buffer.bytes``);
        -1 leaves the operating system's default, as in Kafka."""
        sock = listener.socket
        self._send_buffer = send_buffer
        self._fd = sock.fileno()
        # A second descriptor of the same listening socket, for synchronous accepts.
        self._sock = socket.socket(sock.family, sock.type, sock.proto, fileno=os.dup(self._fd))
        self._sock.setblocking(False)

    def close(self) -> None:
        self._sock.close()

    def _configure(self, conn: socket.socket) -> None:
        """Kafka's socket options for an accepted connection (trio adds TCP_NODELAY)."""
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if self._send_buffer != -1:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)

    async def accept(self) -> list[trio.SocketStream]:
        """Wait for connections, then return every one already queued (up to MAX_BATCH).

        A connection that failed before it was accepted is skipped (see `_SKIPPED`).
        Another error with none accepted yet (EMFILE, say) is raised; after some, those
        are returned and the error comes again on the next call.
        """
        await trio.lowlevel.checkpoint()
        while True:
            streams: list[trio.SocketStream] = []
            while len(streams) < MAX_BATCH:
                try:
                    conn, _ = self._sock.accept()
                except BlockingIOError:
                    break
                except OSError as e:
                    if e.errno in _SKIPPED:
                        logger.info("a connection failed before it was accepted: %s", e)
                        continue
                    if streams:
                        break
                    raise
                try:
                    self._configure(conn)
                except OSError as e:
                    logger.info("a connection failed as it was accepted: %s", e)
                    conn.close()
                    continue
                streams.append(trio.SocketStream(trio.socket.from_stdlib_socket(conn)))
            if streams:
                return streams
            await trio.lowlevel.wait_readable(self._fd)
