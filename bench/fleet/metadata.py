"""What one broker says about the cluster: full Metadata v8 on a bare socket.

kafka-python's request classes encode the request (bench/wire.py); the answer is read by
the small struct walk below instead of kafka-python's decoder, which takes seconds per
100,000-partition answer: that would be the figures' resolution, and CPU taken from the
brokers being timed. tests/bench checks the walk against kafka-python's decoder.
"""

from __future__ import annotations

import struct
import time
from typing import NamedTuple

from bench.wire import Wire

VERSION = 8  # the newest non-flexible Metadata: plain int32 arrays, int16 strings

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">hiiii")  # error, index, leader, leader epoch, replica count


# One partition as (topic, index, leader, replicas, isr): a plain tuple, as a NamedTuple
# costs a third of the walk at 100,000 partitions.
Partition = tuple[str, int, int, tuple[int, ...], tuple[int, ...]]
TOPIC, INDEX, LEADER, REPLICAS, ISR = range(5)


class View(NamedTuple):
    """One broker's Metadata answer and when it arrived (time.monotonic())."""

    at: float
    controller: int
    brokers: frozenset[int]
    partitions: list[Partition]


def _ints(n: int) -> struct.Struct:
    """The struct of ``n`` int32s, and of the array length that follows them."""
    if n not in _INTS:
        _INTS[n] = struct.Struct(f">{n}ii")
    return _INTS[n]


_INTS: dict[int, struct.Struct] = {}


def _partitions(buf: bytes, off: int, count: int, topic: str, out: list[Partition]) -> int:
    """Append a topic's ``count`` partitions read from ``off``; the offset after them.
    (The hot loop at 100,000 partitions: locals and cached structs only.)"""
    head, size = _PARTITION.unpack_from, _PARTITION.size
    for _ in range(count):
        _err, index, leader, _epoch, n = head(buf, off)
        off += size
        replicas = _ints(n).unpack_from(buf, off)
        off += 4 * n + 4
        isr = _ints(replicas[n]).unpack_from(buf, off)
        n_isr = replicas[n]
        off += 4 * n_isr + 4 + 4 * isr[n_isr]  # offline replicas skipped
        out.append((topic, index, leader, replicas[:n], isr[:n_isr]))
    return off


class _Reader:
    def __init__(self, buf: bytes, offset: int = 0) -> None:
        self.buf, self.off = buf, offset

    def int16(self) -> int:
        (v,) = _I16.unpack_from(self.buf, self.off)
        self.off += 2
        return v

    def int32(self) -> int:
        (v,) = _I32.unpack_from(self.buf, self.off)
        self.off += 4
        return v

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        self.off += n
        return self.buf[self.off - n:self.off].decode()


def parse(frame: bytes, at: float = 0.0) -> View:
    """A Metadata v8 response frame (correlation id first, size prefix removed)."""
    r = _Reader(frame, 8)  # correlation id, throttle time
    brokers = []
    for _ in range(r.int32()):
        brokers.append(r.int32())
        r.string()  # host
        r.off += 4  # port
        r.string()  # rack
    r.string()  # cluster id
    controller = r.int32()
    partitions = []
    for _ in range(r.int32()):
        r.off += 2  # topic error
        name = r.string() or ""
        r.off += 1  # is_internal
        count = r.int32()
        r.off = _partitions(frame, r.off, count, name, partitions)
        r.off += 4  # topic authorized operations
    return View(at, controller, frozenset(brokers), partitions)


class Observer:
    """Metadata of ``topics`` (None: all) from one broker over one kept connection
    (reopened after a failure)."""

    def __init__(self, port: int, topics: list[str] | None = None,
                 timeout: float = 30.0) -> None:
        self.port = port
        self.topics = topics
        self.timeout = timeout
        self._wire: Wire | None = None

    def view(self) -> View | None:
        """The broker's answer, or None when it cannot be had (closed, refused, timed out)."""
        from kafka.protocol.metadata import MetadataRequest

        try:
            if self._wire is None:
                self._wire = Wire(f"127.0.0.1:{self.port}", timeout=self.timeout,
                                  client_id="bench-fleet")
            named = None if self.topics is None else [
                MetadataRequest.MetadataRequestTopic(version=VERSION, name=t)
                for t in self.topics]
            self._wire.send(MetadataRequest[VERSION](
                topics=named, allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False), VERSION)
            frame = self._wire.receive_frame()
        except (OSError, ConnectionError):
            self.close()
            return None
        return parse(frame, time.monotonic())

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
            self._wire = None
