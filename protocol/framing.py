"""Split a byte stream into Kafka frames (4-byte big-endian size, then payload)."""

from __future__ import annotations

from collections.abc import Iterator

from .exceptions import FramingError

__all__ = [
    "DEFAULT_MAX_REQUEST_SIZE",
    "MIN_REQUEST_SIZE",
    "SIZE_PREFIX_LEN",
    "FrameDecoder",
    "frame",
]

SIZE_PREFIX_LEN = 4
# socket.request.max.bytes default in Kafka.
DEFAULT_MAX_REQUEST_SIZE = 100 * 1024 * 1024
# Request header v1: api_key int16, api_version int16, correlation_id int32,
# client_id length int16 (a null client id has no bytes after it).
MIN_REQUEST_SIZE = 2 + 2 + 4 + 2


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix `payload` with its 4-byte big-endian size."""
    return len(payload).to_bytes(SIZE_PREFIX_LEN, "big") + bytes(payload)


class FrameDecoder:
    """Incremental frame splitter: `feed()` bytes, then take complete frames.

    Frames are returned without their size prefix. Every size prefix is checked
    as soon as its 4 bytes arrive, even behind frames not yet taken: one outside
    [min_size, max_size] raises `FramingError`, and nothing is ever allocated
    from a claimed size. Bytes are appended to one bytearray and consumed by
    advancing an offset, compacting only once the consumed part is at least half
    the buffer, so each byte is copied O(1) times. After a `FramingError` the
    decoder stays failed (the stream is out of sync).
    """

    __slots__ = ("_buf", "_pos", "_scan", "_max", "_min", "_broken")

    def __init__(
        self,
        max_size: int = DEFAULT_MAX_REQUEST_SIZE,
        min_size: int = MIN_REQUEST_SIZE,
    ) -> None:
        if not 0 <= min_size <= max_size <= 0x7FFFFFFF:
            raise ValueError(f"bad frame size bounds: min={min_size} max={max_size}")
        self._buf = bytearray()
        self._pos = 0  # offset in _buf of the first unconsumed byte (a size prefix)
        self._scan = 0  # offset in _buf of the first size prefix not yet checked
        self._max = max_size
        self._min = min_size
        self._broken = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    @property
    def pending_size(self) -> int | None:
        """Payload size of the frame at the head, if its size prefix has arrived."""
        if len(self._buf) - self._pos < SIZE_PREFIX_LEN:
            return None
        return self._size_at(self._pos)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes; raise `FramingError` on an invalid size prefix."""
        if self._broken:
            raise FramingError("decoder already failed; the stream is out of sync")
        if self._pos and self._pos * 2 >= len(self._buf):
            del self._buf[: self._pos]
            self._scan -= self._pos
            self._pos = 0
        self._buf += data
        while self._scan + SIZE_PREFIX_LEN <= len(self._buf):
            size = self._size_at(self._scan)
            if size < self._min or size > self._max:
                self._broken = True
                raise FramingError(f"invalid frame size {size} (allowed {self._min}..{self._max})")
            self._scan += SIZE_PREFIX_LEN + size

    def next_frame(self) -> bytes | None:
        """Return the next complete frame's payload, or None if none is complete."""
        size = self.pending_size
        if size is None:
            return None
        start = self._pos + SIZE_PREFIX_LEN
        end = start + size
        if end > len(self._buf):
            return None
        payload = bytes(memoryview(self._buf)[start:end])
        self._pos = end
        if end == len(self._buf):
            self._buf.clear()
            self._pos = self._scan = 0
        return payload

    def frames(self) -> Iterator[bytes]:
        """Yield every complete frame currently buffered."""
        while (payload := self.next_frame()) is not None:
            yield payload

    def _size_at(self, pos: int) -> int:
        return int.from_bytes(self._buf[pos : pos + SIZE_PREFIX_LEN], "big", signed=True)
