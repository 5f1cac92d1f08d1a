"""One client connection: frames in, one request at a time, responses out in order."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
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


class Connection:
    """Serves one socket until the peer leaves, misbehaves, or idles out.

    Kafka mutes a channel while its request is in flight; here that is simply
    the loop: read a frame, handle it, write the response, read the next.
    """

    def __init__(self, stream: trio.SocketStream, dispatch: Dispatch, enabled: frozenset[int],
                 max_request_size: int, idle_timeout_s: float) -> None:
        self.stream = stream
        self.dispatch = dispatch
        self.enabled = enabled
        self.decoder = FrameDecoder(max_size=max_request_size)
        self.idle_timeout_s = idle_timeout_s
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
                with trio.move_on_after(self.idle_timeout_s) as idle:
                    data = await self.stream.receive_some(RECEIVE_SIZE)
                if idle.cancelled_caught:
                    logger.info("closing idle connection from %s", self.peer)
                    return
                if not data:
                    return
                self.last_active = time.monotonic()
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
