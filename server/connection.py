"""One client connection: frames in, one request at a time, responses out in order."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar

import trio

from josefk.protocol.exceptions import FramingError, ProtocolError, UnsupportedVersionError
from josefk.protocol.framing import FrameDecoder
from josefk.protocol.messages import Request, api_versions_unsupported_frame, decode_request
from josefk.server.zero_copy import FileRegion, Part

logger = logging.getLogger(__name__)

API_VERSIONS = 18
RECEIVE_SIZE = 256 * 1024

Dispatch = Callable[[Request], Awaitable[Sequence[Part] | None]]

#: The peer host of the connection whose request is being handled (each connection
#: runs in its own task, so its own context); Kafka reports it as ``/host``.
client_host: ContextVar[str] = ContextVar("client_host", default="")


class CloseConnection(Exception):
    """A handler's verdict that the client must be disconnected (e.g. acks=0 errors)."""


class IdleConnections:
    """Kafka's IdleExpiryManager: the open connections, least recently active first.

    One task closes those idle longer than ``connections.max.idle.ms`` (negative: never).
    A deadline per receive would do it too, but with thousands of idle connections
    trio's deadline heap fills with stale entries, and their garbage-collection cost
    shows in every other client's latency.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lru: OrderedDict[Connection, None] = OrderedDict()

    def add(self, connection: Connection) -> None:
        self._lru[connection] = None

    def touch(self, connection: Connection) -> None:
        connection.last_active = time.monotonic()
        self._lru.move_to_end(connection)

    def remove(self, connection: Connection) -> None:
        self._lru.pop(connection, None)

    def least_active(self) -> list[Connection]:
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


class Connection:
    """Serves one socket until the peer leaves, misbehaves, or idles out.

    Kafka mutes a channel while its request is in flight; here that is simply
    the loop: read a frame, handle it, write the response, read the next.
    """

    def __init__(self, stream: trio.SocketStream, dispatch: Dispatch, enabled: frozenset[int],
                 max_request_size: int, idle: IdleConnections) -> None:
        self.stream = stream
        self.dispatch = dispatch
        self.enabled = enabled
        self.decoder = FrameDecoder(max_size=max_request_size)
        self.idle = idle
        self.last_active = time.monotonic()
        self._scope = trio.CancelScope()
        # Response bytes not yet sent: answers to pipelined requests go out in one send.
        self._pending: list[bytes | bytearray | memoryview] = []
        try:
            host, port = stream.socket.getpeername()[:2]
            self.peer = f"{host}:{port}"
            client_host.set(f"/{host}")
        except OSError:
            self.peer = "?"

    @property
    def closing(self) -> bool:
        return self._scope.cancel_called

    def close(self) -> None:
        """Disconnect the peer (what is queued is still flushed, briefly)."""
        self._scope.cancel()

    async def serve(self) -> None:
        self.idle.add(self)
        try:
            with self._scope:
                await self._loop()
        except (ProtocolError, CloseConnection) as e:
            logger.warning("closing connection from %s: %s", self.peer, e)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            logger.debug("connection from %s dropped", self.peer)
        except Exception:
            # A bug in one request must not take the broker (or anyone else) down.
            logger.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self.idle.remove(self)
            with trio.CancelScope(shield=True):
                # Answers to the requests before a bad one still go out, briefly.
                with trio.move_on_after(1), contextlib.suppress(
                        trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await self._flush()
                await self.stream.aclose()

    async def _loop(self) -> None:
        while True:
            frame = self.decoder.next_frame()
            if frame is None:
                # No more requests buffered: send the answers gathered so far at once.
                await self._flush()
                self.idle.touch(self)
                data = await self.stream.receive_some(RECEIVE_SIZE)
                if not data:
                    return
                self.idle.touch(self)
                self.decoder.feed(data)
                continue
            await self._handle(frame)

    async def _handle(self, frame: bytes) -> None:
        try:
            request = decode_request(frame, self.enabled)
        except UnsupportedVersionError as e:
            if e.api_key != API_VERSIONS:
                raise
            self._pending.append(api_versions_unsupported_frame(e.correlation_id))
            return
        except FramingError:
            raise
        parts = await self.dispatch(request)
        if parts is not None:
            await self._send(parts)

    async def _send(self, parts: Sequence[Part]) -> None:
        """Queue a response's bytes; file regions go out at once, after what is queued."""
        try:
            for part in parts:
                if isinstance(part, FileRegion):
                    await self._flush()
                    await self._sendfile(part)
                else:
                    self._pending.append(part)
        finally:
            for part in parts:
                if isinstance(part, FileRegion):
                    part.close()

    async def _flush(self) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        await self.stream.send_all(data)

    async def _sendfile(self, region: FileRegion) -> None:
        """Zero-copy: segment file → socket, waiting for writability on EAGAIN."""
        sock = self.stream.socket
        position, remaining = region.position, region.length
        while remaining > 0:
            try:
                sent = os.sendfile(sock.fileno(), region.fd, position, remaining)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            except OSError as e:
                if e.errno in (errno.EPIPE, errno.ECONNRESET):
                    raise trio.BrokenResourceError from e
                raise
            if sent == 0:
                # The file shrank under us (truncated): pad so the frame stays whole;
                # the client drops the partial batch at the end of a partition's data.
                await self.stream.send_all(bytes(remaining))
                return
            position += sent
            remaining -= sent
            await trio.lowlevel.checkpoint()
