"""Split a byte stream into Kafka frames (4-byte big-endian size, then payload)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from .exceptions import FramingError

__all__ = [
    "DEFAULT_MAX_REQUEST_SIZE",
    "MIN_REQUEST_SIZE",
    "OWN_BUFFER_FROM",
    "RECEIVE_SIZE",
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
# The receive buffer's size: what one receive may bring.
RECEIVE_SIZE = 256 * 1024
# A frame at least this big that has not fully arrived gets a buffer of its own,
# which the rest of it is received into directly.
OWN_BUFFER_FROM = 64 * 1024
# That buffer starts at most this big and doubles as the frame arrives, so a size
# prefix alone (up to socket.request.max.bytes) never reserves the memory it claims.
OWN_BUFFER_START = 1024 * 1024


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix `payload` with its 4-byte big-endian size."""
    return len(payload).to_bytes(SIZE_PREFIX_LEN, "big") + bytes(payload)


class FrameDecoder:
    """Incremental frame splitter: receive into `receive_buffer()` and report the
    count with `received()` (or `feed()` bytes), then take complete frames.

    Frames are returned without their size prefix. Every size prefix is checked
    as soon as its 4 bytes arrive, even behind frames not yet taken: one outside
    [min_size, max_size] raises `FramingError`, and nothing is ever allocated
    from a claimed size before it is checked. After a `FramingError` the decoder
    stays failed (the stream is out of sync).

    Bytes are received into a scratch buffer, which many decoders may share when
    each takes what it received before anyone else receives (one trio thread,
    no await between the receive and `received()`): complete frames are copied
    out of it at once, and the start of an incomplete one is kept. A big frame
    (``own_buffer_from`` and up) still arriving gets a buffer of its own that the
    rest of it is received into, so the bulk of a big request (Produce) is copied
    by the kernel alone and returned as that bytearray. The buffer starts at 1 MiB
    (or twice what has arrived) and doubles as the frame arrives: memory follows
    the bytes received, not the size claimed.
    """

    __slots__ = ("_scratch", "_partial", "_frames", "_big", "_big_size", "_big_filled", "_max",
                 "_min", "_own_from", "_broken")

    def __init__(
        self,
        max_size: int = DEFAULT_MAX_REQUEST_SIZE,
        min_size: int = MIN_REQUEST_SIZE,
        scratch: bytearray | None = None,
        own_buffer_from: int = OWN_BUFFER_FROM,
    ) -> None:
        if not 0 <= min_size <= max_size <= 0x7FFFFFFF:
            raise ValueError(f"bad frame size bounds: min={min_size} max={max_size}")
        self._scratch = bytearray(RECEIVE_SIZE) if scratch is None else scratch
        if not SIZE_PREFIX_LEN <= own_buffer_from <= len(self._scratch):
            raise ValueError(f"own_buffer_from {own_buffer_from} outside "
                             f"{SIZE_PREFIX_LEN}..{len(self._scratch)}")
        # The start of an incomplete frame smaller than own_buffer_from (or of a prefix).
        self._partial = bytearray()
        self._frames: deque[bytes | bytearray] = deque()
        self._big: bytearray | None = None
        self._big_size = 0  # the frame's size; the buffer grows to it
        self._big_filled = 0
        self._max = max_size
        self._min = min_size
        self._own_from = own_buffer_from
        self._broken = False

    @property
    def max_size(self) -> int:
        return self._max

    @max_size.setter
    def max_size(self, value: int) -> None:
        """The bound for frames not yet split (a SASL connection's grows once it is
        authenticated: ``sasl.server.max.receive.size`` before, the request limit after)."""
        if not self._min <= value <= 0x7FFFFFFF:
            raise ValueError(f"bad frame size bound {value}")
        self._max = value

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames (size prefixes included)."""
        queued = sum(SIZE_PREFIX_LEN + len(f) for f in self._frames)
        big = 0 if self._big is None else SIZE_PREFIX_LEN + self._big_filled
        return queued + len(self._partial) + big

    @property
    def pending_size(self) -> int | None:
        """Payload size of the frame at the head, if its size prefix has arrived."""
        if self._frames:
            return len(self._frames[0])
        if self._big is not None:
            return self._big_size
        if len(self._partial) < SIZE_PREFIX_LEN:
            return None
        return int.from_bytes(self._partial[:SIZE_PREFIX_LEN], "big", signed=True)

    def receive_buffer(self) -> memoryview:
        """Where the next receive goes; report its byte count with `received()`
        before anyone else receives into this decoder's scratch buffer."""
        if self._broken:
            raise FramingError("decoder already failed; the stream is out of sync")
        big = self._big
        if big is not None:
            if self._big_filled == len(big):
                big += bytes(min(len(big), self._big_size - len(big)))
            return memoryview(big)[self._big_filled:]
        return memoryview(self._scratch)

    def received(self, count: int) -> None:
        """Take `count` bytes received into `receive_buffer()`; raise `FramingError`
        on an invalid size prefix."""
        big = self._big
        if big is not None:
            self._big_filled += count
            if self._big_filled == self._big_size:
                self._frames.append(big)
                self._big = None
            return
        partial = self._partial
        if not partial:
            with memoryview(self._scratch) as scratch:
                data = scratch[:count]
                used = self._split(data)
                partial += data[used:]
                data.release()
            return
        with memoryview(self._scratch) as scratch:
            partial += scratch[:count]
        with memoryview(partial) as data:
            used = self._split(data)
        del partial[:used]

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes; raise `FramingError` on an invalid size prefix."""
        view = memoryview(data).cast("B")
        if not view:
            self.receive_buffer()  # a failed decoder says so even for nothing
        while view:
            target = self.receive_buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            target.release()
            self.received(n)
            view = view[n:]

    def next_frame(self) -> bytes | bytearray | None:
        """Return the next complete frame's payload, or None if none is complete."""
        return self._frames.popleft() if self._frames else None

    def frames(self) -> Iterator[bytes | bytearray]:
        """Yield every complete frame currently buffered."""
        while (payload := self.next_frame()) is not None:
            yield payload

    def _split(self, data: memoryview) -> int:
        """Queue the complete frames at the start of `data` and start a big one's own
        buffer; return how many bytes of `data` that took."""
        pos, end = 0, len(data)
        while end - pos >= SIZE_PREFIX_LEN:
            size = int.from_bytes(data[pos:pos + SIZE_PREFIX_LEN], "big", signed=True)
            if size < self._min or size > self._max:
                self._broken = True
                raise FramingError(f"invalid frame size {size} (allowed {self._min}..{self._max})")
            start = pos + SIZE_PREFIX_LEN
            if end - start >= size:
                self._frames.append(bytes(data[start:start + size]))
                pos = start + size
            elif size >= self._own_from:
                have = end - start
                big = self._big = bytearray(min(size, max(OWN_BUFFER_START, 2 * have)))
                big[:have] = data[start:end]
                self._big_size, self._big_filled = size, have
                return end
            else:
                break
        return pos
