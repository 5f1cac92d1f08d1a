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
# A connection handling request after request without waiting for its socket yields to
# the other tasks every so many requests.
YIELD_EVERY = 16
# At most this many buffers in one writev (Linux's IOV_MAX is 1024).
MAX_IOV = 512
# Answers to pipelined requests wait to go out together up to this many bytes; past it
# they are sent before the next request is handled, so a client that pipelines
# thousands of requests cannot make the broker hold all their answers at once.
MAX_PENDING_BYTES = 1 << 20
# The peer is gone: these end the connection quietly, as trio's broken stream does.
_GONE = (errno.EPIPE, errno.ECONNRESET, errno.ETIMEDOUT, errno.ENOTCONN, errno.EHOSTUNREACH)

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
                 max_request_size: int, idle: IdleConnections,
                 scratch: bytearray | None = None) -> None:
        self.stream = stream
        self.dispatch = dispatch
        self.enabled = enabled
        # The broker's connections share one receive buffer (see FrameDecoder).
        self.decoder = FrameDecoder(max_size=max_request_size, scratch=scratch)
        self._fd = stream.socket.fileno()
        self._unyielded = 0
        self.idle = idle
        self.last_active = time.monotonic()
        self._scope = trio.CancelScope()
        # Response bytes not yet sent: answers to pipelined requests go out in one send.
        self._pending: list[bytes | bytearray | memoryview] = []
        self._pending_bytes = 0
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
        deferred = False
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                await self._handle(frame)
                if self._pending_bytes > MAX_PENDING_BYTES:
                    await self._flush()
                await self._maybe_yield()
                continue
            tried = bool(self._pending) and not deferred
            count = self._read_nowait() if tried else None
            if count:
                # More requests arrived meanwhile (a pipelining client): their answers
                # go out with these, in one send; a deferred answer waits once at most.
                deferred = True
                continue
            await self._flush()
            deferred = False
            if count == 0:
                return
            self.idle.touch(self)
            if not await self._receive(wait_first=tried):
                return
            self.idle.touch(self)

    async def _maybe_yield(self) -> None:
        """The socket calls below wait only when they must; a client that keeps this
        connection busy still lets everyone else (and cancellation) in regularly."""
        self._unyielded += 1
        if self._unyielded >= YIELD_EVERY:
            self._unyielded = 0
            await trio.lowlevel.checkpoint()

    def _read_nowait(self) -> int | None:
        """Receive what has arrived straight into the frame decoder's buffer: the byte
        count, 0 when the peer closed, None when nothing has.

        On the socket's descriptor, not trio's socket methods: those pass through
        the scheduler on every call, which cost more than the request itself.
        """
        target = self.decoder.receive_buffer()
        try:
            count = os.readv(self._fd, [target])
        except BlockingIOError:
            return None
        except OSError as e:
            _raise_if_gone(e)
            raise
        finally:
            target.release()
        self.decoder.received(count)
        return count

    async def _receive(self, wait_first: bool = False) -> int:
        """Wait for bytes and receive them (see `_read_nowait`); 0 when the peer closed."""
        if wait_first:
            self._unyielded = 0
            await trio.lowlevel.wait_readable(self._fd)
        while (count := self._read_nowait()) is None:
            self._unyielded = 0
            await trio.lowlevel.wait_readable(self._fd)
        await self._maybe_yield()
        return count

    async def _handle(self, frame: bytes | bytearray) -> None:
        try:
            request = decode_request(frame, self.enabled)
        except UnsupportedVersionError as e:
            if e.api_key != API_VERSIONS:
                raise
            self._queue(api_versions_unsupported_frame(e.correlation_id))
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
                    self._queue(part)
        finally:
            for part in parts:
                if isinstance(part, FileRegion):
                    part.close()

    def _queue(self, part: bytes | bytearray | memoryview) -> None:
        self._pending.append(part)
        self._pending_bytes += len(part)

    async def _flush(self) -> None:
        pending = self._pending
        while pending:
            try:
                sent = os.writev(self._fd, pending[:MAX_IOV])
            except BlockingIOError:
                self._unyielded = 0
                await trio.lowlevel.wait_writable(self._fd)
                continue
            except OSError as e:
                _raise_if_gone(e)
                raise
            self._pending_bytes -= sent
            done = 0
            while done < len(pending) and sent >= len(pending[done]):
                sent -= len(pending[done])
                done += 1
            del pending[:done]
            if sent:
                pending[0] = memoryview(pending[0])[sent:]

    async def _sendfile(self, region: FileRegion) -> None:
        """Zero-copy: segment file → socket, waiting for writability on EAGAIN."""
        position, remaining = region.position, region.length
        while remaining > 0:
            try:
                sent = os.sendfile(self._fd, region.fd, position, remaining)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._fd)
                continue
            except OSError as e:
                _raise_if_gone(e)
                raise
            if sent == 0:
                # The file shrank under us (truncated): pad so the frame stays whole;
                # the client drops the partial batch at the end of a partition's data.
                await self.stream.send_all(bytes(remaining))
                return
            position += sent
            remaining -= sent
            await trio.lowlevel.checkpoint()


def _raise_if_gone(error: OSError) -> None:
    """A socket error that means the peer is gone ends the connection quietly."""
    if error.errno in _GONE:
        raise trio.BrokenResourceError(str(error)) from error
