"""A loopback TCP proxy that reads the Fetch requests and answers passing through it.

``FetchTap`` listens on ``127.0.0.1`` (a free port) and forwards every connection to
one broker, a whole frame at a time. Of each Fetch request it records the version,
the client id, the session id and epoch, how many partitions it names and forgets
and its size on the wire; of each Fetch answer the error code and session id. A
broker behind the tap must advertise the tap's address, or clients go around it
after their first Metadata.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass

from kafka.protocol.consumer import FetchRequest

FETCH = 1
FLEXIBLE_FROM = 12  # Fetch v12+: request header v2, response header v1 (tagged fields)
MAX_FRAME = 200 * 1024 * 1024


@dataclass
class FetchExchange:
    """One Fetch request as sent, and what its answer said (None until it came)."""

    client_id: str
    version: int
    correlation_id: int
    session_id: int
    session_epoch: int
    partitions: int
    forgotten: int
    size: int  # the request's frame on the wire, size prefix included
    response_error: int | None = None
    response_session_id: int | None = None


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def parse_fetch_request(frame: bytes) -> FetchExchange | None:
    """The Fetch request in ``frame`` (without its size prefix), or None for another api."""
    api_key, version, correlation_id, id_len = struct.unpack_from(">hhih", frame)
    if api_key != FETCH:
        return None
    client_id = frame[10:10 + max(id_len, 0)].decode("utf-8", "replace")
    pos = 10 + max(id_len, 0)
    if version >= FLEXIBLE_FROM:
        pos = _skip_tags(frame, pos)
    body = FetchRequest.decode(frame[pos:], version=version)
    return FetchExchange(
        client_id=client_id, version=version, correlation_id=correlation_id,
        session_id=body.session_id if version >= 7 else 0,
        session_epoch=body.session_epoch if version >= 7 else -1,
        partitions=sum(len(t.partitions) for t in body.topics),
        forgotten=sum(len(t.partitions) for t in body.forgotten_topics_data or ()),
        size=len(frame) + 4)


def parse_fetch_response(frame: bytes, version: int) -> tuple[int, int]:
    """(error code, session id) of a Fetch answer of ``version`` (v7+)."""
    pos = 4  # correlation id
    if version >= FLEXIBLE_FROM:
        pos = _skip_tags(frame, pos)
    _throttle, error_code, session_id = struct.unpack_from(">ihi", frame, pos)
    return error_code, session_id


class FetchTap:
    """Forward ``127.0.0.1:port`` to ``target``, recording every Fetch (thread safe)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.exchanges: list[FetchExchange] = []
        self.errors: list[str] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FetchTap:
        self._spawn(self._accept_loop)
        return self

    def fetches(self, client_id: str) -> list[FetchExchange]:
        """The Fetch requests ``client_id`` sent so far, in order."""
        with self._lock:
            return [e for e in self.exchanges if e.client_id == client_id]

    def close(self) -> None:
        self._stopping.set()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()

    def _spawn(self, target, *args) -> None:  # type: ignore[no-untyped-def]
        thread = threading.Thread(target=target, args=args, daemon=True, name="fetch-tap")
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            in_flight: dict[int, FetchExchange] = {}
            with self._lock:
                self._sockets += [client, upstream]
            self._spawn(self._pump, client, upstream, in_flight, True)
            self._spawn(self._pump, upstream, client, in_flight, False)

    def _pump(self, source: socket.socket, sink: socket.socket,
              in_flight: dict[int, FetchExchange], requests: bool) -> None:
        try:
            while True:
                head = _read_exact(source, 4)
                size = struct.unpack(">i", head)[0]
                if not 0 <= size <= MAX_FRAME:
                    raise ConnectionError(f"frame of {size} bytes")
                frame = _read_exact(source, size)
                if requests:
                    self._saw_request(frame, in_flight)
                else:
                    self._saw_response(frame, in_flight)
                sink.sendall(head + frame)
        except (OSError, ConnectionError):
            pass
        except Exception as e:  # a frame the tap cannot read: the test must know
            with self._lock:
                self.errors.append(repr(e))
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _saw_request(self, frame: bytes, in_flight: dict[int, FetchExchange]) -> None:
        exchange = parse_fetch_request(frame)
        if exchange is not None:
            in_flight[exchange.correlation_id] = exchange
            with self._lock:
                self.exchanges.append(exchange)

    def _saw_response(self, frame: bytes, in_flight: dict[int, FetchExchange]) -> None:
        exchange = in_flight.pop(struct.unpack_from(">i", frame)[0], None)
        if exchange is not None and exchange.version >= 7:
            error_code, session_id = parse_fetch_response(frame, exchange.version)
            with self._lock:
                exchange.response_error, exchange.response_session_id = error_code, session_id


def _read_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
