"""A small HTTP/1.1 GET server on trio: one request per connection, a route table."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

import trio

from josefk.server.config.listeners import parse_http_endpoint

logger = logging.getLogger(__name__)

#: A request head (request line and headers) longer than this is refused.
MAX_HEAD = 8192
#: The whole request head must arrive within this many seconds.
READ_TIMEOUT_S = 10.0
#: An answer must be written within this many seconds.
WRITE_TIMEOUT_S = 30.0
#: A handler must answer within this many seconds.
HANDLER_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Response:
    """What a route answers: a status, a content type and the body."""

    status: int
    content_type: str
    body: bytes


#: A route's handler: called with the parsed query string (last value of each name).
Handler = Callable[[Mapping[str, str]], Awaitable[Response]]


class BadRequest(Exception):
    """The request head is malformed, too long or too slow; the connection is closed."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def text(status: int, message: str) -> Response:
    return Response(status, "text/plain; charset=utf-8", message.encode() + b"\n")


def encode(response: Response, head_only: bool = False) -> bytes:
    """The bytes of an HTTP/1.1 answer; the connection closes after it."""
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    # The pages are live views: never cached, and never sniffed as another type.
    head = (f"HTTP/1.1 {response.status} {reason}\r\n"
            f"Content-Type: {response.content_type}\r\n"
            f"Content-Length: {len(response.body)}\r\n"
            "Cache-Control: no-store\r\n"
            "X-Content-Type-Options: nosniff\r\n"
            "Connection: close\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """(method, path, query) of a request head without its blank line; BadRequest if
    it is not an HTTP/1.x request line."""
    line = head.split(b"\r\n", 1)[0]
    try:
        method, target, version = line.decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise BadRequest(400, "malformed request line") from None
    if not version.startswith("HTTP/1.") or not target.startswith("/"):
        raise BadRequest(400, "not an HTTP/1.x request")
    url = urlsplit(target)
    return method, url.path, dict(parse_qsl(url.query))


async def read_head(stream: trio.abc.ReceiveStream) -> bytes:
    """The request head up to its blank line; BadRequest if longer than MAX_HEAD, cut
    short, or slower than READ_TIMEOUT_S."""
    buffer = bytearray()
    with trio.move_on_after(READ_TIMEOUT_S) as scope:
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end >= 0:
                return bytes(buffer[:end])
            if len(buffer) > MAX_HEAD:
                raise BadRequest(431, f"request head over {MAX_HEAD} bytes")
            chunk = await stream.receive_some(MAX_HEAD + 4 - len(buffer) + 1)
            if not chunk:
                raise BadRequest(400, "connection closed mid-request")
            buffer += chunk
    assert scope.cancelled_caught
    raise BadRequest(408, f"request head not received within {READ_TIMEOUT_S:g} s")


class HttpServer:
    """Serves GET (and HEAD) on a route table; unknown paths get 404, other methods 405.

    A client that sends garbage, too much or too slowly is answered with an error status
    where it can still read one, logged in one line, and closed; a handler's exception is
    a 500 and a log line with its traceback, never a reason to stop serving.
    """

    def __init__(self, routes: Mapping[str, Handler]) -> None:
        self.routes: dict[str, Handler] = dict(routes)

    def mount(self, routes: Mapping[str, Handler]) -> None:
        """Add routes (a path already taken is replaced)."""
        self.routes.update(routes)

    async def answer(self, method: str, path: str, query: Mapping[str, str]) -> Response:
        handler = self.routes.get(path)
        if handler is None:
            return text(404, f"no such page: {path}")
        if method not in ("GET", "HEAD"):
            return text(405, f"{method} is not allowed here")
        try:
            with trio.fail_after(HANDLER_TIMEOUT_S):
                return await handler(query)
        except Exception:
            logger.exception("metrics HTTP: the handler of %s failed", path)
            return text(500, "internal error")

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one connection: one request, one answer, close."""
        peer = _peer(stream)
        try:
            async with stream:
                try:
                    method, path, query = parse_head(await read_head(stream))
                except BadRequest as e:
                    logger.info("metrics HTTP: closing %s: %s", peer, e)
                    with trio.move_on_after(1):
                        await stream.send_all(encode(text(e.status, str(e))))
                    return
                response = await self.answer(method, path, query)
                if method == "HEAD" and response.status == 200:
                    payload = encode(response, head_only=True)
                else:
                    payload = encode(response)
                with trio.move_on_after(WRITE_TIMEOUT_S):
                    await stream.send_all(payload)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            logger.info("metrics HTTP: connection from %s failed: %s", peer, e)

    async def serve(self, listeners: list[trio.SocketListener],
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Accept on `listeners` until cancelled."""
        await trio.serve_listeners(self.handle, listeners, task_status=task_status)


def bound_address(listeners: list[trio.SocketListener]) -> tuple[str, int]:
    """(host, port) of the first listener, as bound."""
    host, port = listeners[0].socket.getsockname()[:2]
    return host, port


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"


def metrics_endpoint(values: Mapping[str, object], first_listener_host: str | None
                     ) -> tuple[str, int] | None:
    """Where to serve: ``metrics.listener``'s host and port, else ``metrics.port`` on the
    host of the broker's first listener; None when both are unset (-1), the default."""
    listener = values.get("metrics.listener")
    if isinstance(listener, str) and listener:
        return parse_http_endpoint(listener)
    port = values.get("metrics.port", -1)
    if not isinstance(port, int) or port < 0:
        return None
    return first_listener_host or "", port
