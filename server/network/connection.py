"""One client connection: frames in, one request at a time, responses out in order."""

from __future__ import annotations

import contextlib
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Protocol

import trio

from josefk.protocol.exceptions import FramingError, ProtocolError, UnsupportedVersionError
from josefk.protocol.framing import FrameDecoder
from josefk.protocol.header import parse_request_header
from josefk.protocol.messages import (
    Request,
    api_versions_unsupported_frame,
    decode_request,
    encode_response,
)
from josefk.server.network.liveness import HangupWatch, IdleConnections
from josefk.server.network.transport import HandshakeError, PlainTransport, TlsTransport
from josefk.server.network.zero_copy import FileRegion, Part
from josefk.server.security.authentication import Answer, Authenticator, SaslStateError
from josefk.server.security.listener import PLAINTEXT, ListenerSecurity
from josefk.server.security.principal import ANONYMOUS, NoMatchingRule, ssl_principal
from josefk.server.security.session import Session, current_session

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
# Before authentication only these are decoded; anything else closes the connection.
_SASL_KEYS = frozenset({API_VERSIONS, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate

Dispatch = Callable[[Request], Awaitable[Sequence[Part] | None]]

#: The peer host of the connection whose request is being handled (each connection
#: runs in its own task, so its own context); Kafka reports it as ``/host``.
client_host: ContextVar[str] = ContextVar("client_host", default="")
#: Seconds the request being handled earned its client in throttling (client quotas):
#: the dispatcher sets it; the answer goes out, then the connection reads nothing more
#: for that long (Kafka mutes the channel after the response, KIP-219).
throttle_s: ContextVar[float] = ContextVar("throttle_s", default=0.0)


class RequestObserver(Protocol):
    """Told when a connection reads bytes, starts and finishes handling a request, and
    has written its answers (the metrics' request timer)."""

    def read(self) -> None: ...

    def start(self) -> None: ...

    def handled(self, request: Request) -> None: ...

    def sent(self) -> None: ...


class AuthenticationFailed(Exception):
    """The peer failed TLS or SASL authentication (logged at INFO, as Kafka does)."""


class CloseConnection(Exception):
    """A handler's verdict that the client must be disconnected (e.g. acks=0 errors)."""


class Connection:
    """Serves one socket until the peer leaves, misbehaves, or idles out.

    Kafka mutes a channel while its request is in flight; here that is simply
    the loop: read a frame, handle it, write the response, read the next.
    """

    def __init__(self, stream: trio.SocketStream, dispatch: Dispatch, enabled: frozenset[int],
                 max_request_size: int, idle: IdleConnections,
                 scratch: bytearray | None = None,
                 security: ListenerSecurity = PLAINTEXT,
                 observer: RequestObserver | None = None,
                 hangups: HangupWatch | None = None) -> None:
        self.stream = stream
        self.hangups = hangups
        self.observer = observer
        self.security = security
        self.max_request_size = max_request_size
        self.authenticator: Authenticator | None = None
        self.dispatch = dispatch
        self.enabled = enabled
        # The broker's connections share one receive buffer (see FrameDecoder).
        self.decoder = FrameDecoder(max_size=max_request_size, scratch=scratch)
        self._fd = stream.socket.fileno()
        self.transport = PlainTransport(self._fd)
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
            self.peer = host = "?"
        self.host = host
        self._closed_by_broker = False

    @property
    def closing(self) -> bool:
        return self._scope.cancel_called

    @property
    def socket(self) -> trio.socket.SocketType:
        return self.stream.socket

    def close(self) -> None:
        """Disconnect the peer (what is queued is still flushed, briefly)."""
        self._closed_by_broker = True
        self._scope.cancel()

    async def serve(self) -> None:
        self.idle.add(self)
        try:
            with self._scope:
                await self._secure()
                await self._loop()
            if self._scope.cancelled_caught and not self._closed_by_broker:
                logger.info("closing connection from %s: not authenticated within %.0f s",
                            self.peer, self.security.authentication_timeout_s)
        except (ProtocolError, CloseConnection, SaslStateError) as e:
            logger.warning("closing connection from %s: %s", self.peer, e)
        except (AuthenticationFailed, HandshakeError, NoMatchingRule) as e:
            logger.info("Failed authentication with %s (%s)", self.peer, e)
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
                    self.transport.close_notify()
                    await self.transport.drain()
                await self.stream.aclose()

    async def _secure(self) -> None:
        """TLS handshake, then the principal (TLS), or SASL's exchange to come; a peer
        not authenticated within the listener's bound is closed."""
        security = self.security
        if security.tls is None and security.sasl is None:
            self._authenticated(ANONYMOUS)
            return
        self._scope.deadline = trio.current_time() + security.authentication_timeout_s
        if security.tls is not None:
            self.transport = TlsTransport(self._fd, security.tls)
            await self.transport.handshake()
        if security.sasl is None:
            assert security.principal_mapper is not None
            self._authenticated(ssl_principal(self.transport.peer_certificate,
                                              security.principal_mapper))
            return
        self.authenticator = Authenticator(security.sasl, self.peer)
        self.decoder.max_size = min(self.max_request_size, security.sasl_max_receive_size)

    def _authenticated(self, principal: str) -> None:
        self._scope.deadline = float("inf")
        self.decoder.max_size = self.max_request_size
        current_session.set(Session(principal, self.host, self.security.listener,
                                    self.security.protocol))

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

        On the socket's descriptor (through the transport), not trio's socket methods:
        those pass through the scheduler on every call, which cost more than the request.
        """
        target = self.decoder.receive_buffer()
        try:
            count = self.transport.read_into(target)
        finally:
            target.release()
        if count is not None:
            self.decoder.received(count)
            if self.observer is not None:
                self.observer.read()
        return count

    async def _receive(self, wait_first: bool = False) -> int:
        """Wait for bytes and receive them (see `_read_nowait`); 0 when the peer closed."""
        if wait_first and not self.transport.has_buffered():
            self._unyielded = 0
            await trio.lowlevel.wait_readable(self._fd)
        while (count := self._read_nowait()) is None:
            self._unyielded = 0
            await trio.lowlevel.wait_readable(self._fd)
        await self._maybe_yield()
        return count

    async def _handle(self, frame: bytes | bytearray) -> None:
        auth = self.authenticator
        if auth is not None and not auth.authenticated:
            if auth.expects_raw_token:
                await self._answer(None, auth.raw_token(bytes(frame)))
                return
            api_key = parse_request_header(frame).api_key
            if api_key not in _SASL_KEYS:
                raise SaslStateError(f"unexpected request (api key {api_key}) before "
                                     "authentication")
        try:
            request = decode_request(frame, self.enabled)
        except UnsupportedVersionError as e:
            if e.api_key != API_VERSIONS:
                raise
            self._queue(api_versions_unsupported_frame(e.correlation_id))
            return
        except FramingError:
            raise
        if auth is not None:
            if auth.intercepts(request.api_key):
                await self._answer(request, self._sasl(auth, request))
                return
            auth.admit(request.api_key)
        hangups = self.hangups
        if hangups is not None:
            # Nothing is read meanwhile: the watch notices a client that leaves.
            hangups.waiting(self)
        try:
            await self._dispatch(request)
        finally:
            if hangups is not None:
                hangups.answered(self)

    async def _dispatch(self, request: Request) -> None:
        observer = self.observer
        if observer is None:
            parts = await self.dispatch(request)
        else:
            observer.start()
            parts = await self.dispatch(request)
            observer.handled(request)
        if parts is not None:
            await self._send(parts)
        mute = throttle_s.get()
        if mute:
            throttle_s.set(0.0)
            await self._flush()
            await trio.sleep(mute)

    @staticmethod
    def _sasl(auth: Authenticator, request: Request) -> Answer:
        if request.api_key == 17:
            return auth.handshake(request.api_version, request.body.mechanism)
        return auth.authenticate(request.api_version, bytes(request.body.auth_bytes))

    async def _answer(self, request: Request | None, answer: Answer) -> None:
        """Send what the authenticator answered; on failure, after its delay, close."""
        if answer.delay_s:
            await trio.sleep(answer.delay_s)
        if answer.body is not None and request is not None:
            self._queue(encode_response(request.api_key, request.api_version,
                                        request.correlation_id, answer.body))
        elif answer.raw is not None:
            self._queue(struct.pack(">i", len(answer.raw)) + answer.raw)
        auth = self.authenticator
        if answer.close:
            await self._flush()
            raise AuthenticationFailed(answer.reason or "SASL authentication failed")
        if auth is not None and auth.authenticated and auth.principal is not None:
            self._authenticated(auth.principal)

    async def _send(self, parts: Sequence[Part]) -> None:
        """Queue a response's bytes; file regions go out at once, after what is queued."""
        try:
            for part in parts:
                if isinstance(part, FileRegion):
                    await self._flush()
                    await self.transport.send_region(part)
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
            sent = self.transport.write(pending[:MAX_IOV])
            if sent is None:
                self._unyielded = 0
                await trio.lowlevel.wait_writable(self._fd)
                continue
            self._pending_bytes -= sent
            done = 0
            while done < len(pending) and sent >= len(pending[done]):
                sent -= len(pending[done])
                done += 1
            del pending[:done]
            if sent:
                pending[0] = memoryview(pending[0])[sent:]
        await self.transport.drain()
        if self.observer is not None:
            self.observer.sent()
