"""Take every connection waiting in a listening socket's queue at once."""

from __future__ import annotations

import os
import socket

import trio

# At most this many connections are taken in one go, then others get a turn.
MAX_BATCH = 64


class Acceptor:
    """Like Kafka's Acceptor thread, which accepts every ready connection per select:
    trio's ``SocketListener.accept`` passes through the scheduler once per connection,
    so under a burst the listen queue (``socket.listen.backlog.size``, 50 by default)
    overflows while the connections already accepted take their turns, and the
    overflowing clients retry their SYN a second later.
    """

    def __init__(self, listener: trio.SocketListener) -> None:
        sock = listener.socket
        self._fd = sock.fileno()
        # A second descriptor of the same listening socket, for synchronous accepts.
        self._sock = socket.socket(sock.family, sock.type, sock.proto, fileno=os.dup(self._fd))
        self._sock.setblocking(False)

    def close(self) -> None:
        self._sock.close()

    async def accept(self) -> list[trio.SocketStream]:
        """Wait for connections, then return every one already queued (up to MAX_BATCH).

        An error with none accepted yet (EMFILE, say) is raised; after some, those are
        returned and the error comes again on the next call.
        """
        await trio.lowlevel.checkpoint()
        while True:
            streams: list[trio.SocketStream] = []
            while len(streams) < MAX_BATCH:
                try:
                    conn, _ = self._sock.accept()
                except BlockingIOError:
                    break
                except OSError:
                    if streams:
                        break
                    raise
                streams.append(trio.SocketStream(trio.socket.from_stdlib_socket(conn)))
            if streams:
                return streams
            await trio.lowlevel.wait_readable(self._fd)
