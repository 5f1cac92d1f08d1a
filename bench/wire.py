"""A bare Kafka protocol connection for the benches: kafka-python's request classes on
one socket, several requests in flight, answers decoded or left as bytes."""

from __future__ import annotations

import socket
import struct
from typing import Any


class Wire:
    """One socket; kafka-python's request classes; several requests in flight."""

    def __init__(self, bootstrap: str, timeout: float = 30.0,
                 client_id: str = "bench") -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.client_id = client_id
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0
        self.pending: dict[int, tuple[Any, int]] = {}
        self.buf = bytearray()

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Any, version: int) -> int:
        self.cid += 1
        request.with_header(correlation_id=self.cid, client_id=self.client_id)
        self.sock.sendall(request.encode(version=version, header=True, framed=True))
        self.pending[self.cid] = (request, version)
        return self.cid

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(1 << 16, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _next(self) -> tuple[bytes, Any, int]:
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        (cid,) = struct.unpack_from(">i", frame, 0)
        request, version = self.pending.pop(cid)
        return frame, request, version

    def receive_frame(self) -> bytes:
        """The next response, undecoded (the frame after its size)."""
        return self._next()[0]

    def receive(self) -> Any:
        frame, request, version = self._next()
        return request.header.get_response_class().decode(frame, version=version, header=True)

    def call(self, request: Any, version: int) -> Any:
        self.send(request, version)
        return self.receive()
