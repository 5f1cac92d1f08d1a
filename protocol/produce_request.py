"""ProduceRequest (v3-v13) decoded without copying its records; v13 names topics by id.

Produce is the one request whose size is its payload; kafka-python's decoder
copies each partition's records out of the frame. Here they stay views into the
frame (which must not change while they are used). The decoder checks what the
generic walk (`messages.walk_body`) checks of other requests: every length
within the body, no null where none is allowed, no array longer than the bytes
left, strings of at most 32,767 bytes; it raises `ProtocolError` otherwise.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from .exceptions import ProtocolError
from .header import read_uvarint
from .primitives import I16, I32

__all__ = ["FIRST_FLEXIBLE", "TOPIC_ID_VERSION", "PartitionProduceData", "ProduceRequestData",
           "TopicProduceData", "decode_produce"]

FIRST_FLEXIBLE = 9
TOPIC_ID_VERSION = 13  # topic ids replace names (KIP-516)
_ACKS_TIMEOUT = struct.Struct(">hi")
_MAX_STRING = 0x7FFF


class PartitionProduceData(NamedTuple):
    index: int
    records: memoryview | None


class TopicProduceData(NamedTuple):
    """A topic's partitions: by name (v3-v12), or by ``topic_id`` (v13+, name "" until the
    broker resolves it)."""

    name: str
    partition_data: list[PartitionProduceData]
    topic_id: uuid.UUID | None = None


class ProduceRequestData(NamedTuple):
    """The fields of ProduceRequest the broker reads, under kafka-python's names."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicProduceData]


def decode_produce(body: memoryview, version: int) -> ProduceRequestData:
    """Decode a ProduceRequest body; records are views into ``body``."""
    flexible = version >= FIRST_FLEXIBLE
    end = len(body)
    pos = 0

    def length(width: int) -> int:
        nonlocal pos
        if flexible:
            if pos < end and body[pos] < 0x80:  # a one-byte varint, the common case
                pos += 1
                return body[pos - 1] - 1
            n, pos = read_uvarint(body, pos, end)
            return n - 1
        if pos + width > end:
            raise ProtocolError("truncated length")
        n = (I16 if width == 2 else I32).unpack_from(body, pos)[0]
        pos += width
        return n

    def count() -> int:
        n = length(4)
        if n < 0:
            raise ProtocolError(f"invalid array count {n}")
        if n > end - pos:  # Kafka's own guard: each element takes a byte or more
            raise ProtocolError(f"array count {n} exceeds the {end - pos} bytes left")
        return n

    def chunk(n: int) -> memoryview:
        nonlocal pos
        if pos + n > end:
            raise ProtocolError(f"length {n} overruns the body")
        pos += n
        return body[pos - n:pos]

    def string(nullable: bool) -> str | None:
        n = length(2)
        if n < 0:
            if not nullable:
                raise ProtocolError("null in a non-nullable field")
            return None
        if n > _MAX_STRING:
            raise ProtocolError(f"string length {n} over 32767")
        return str(chunk(n), "utf-8")

    def skip_tags() -> None:
        nonlocal pos
        if not flexible:
            return
        if pos < end and body[pos] == 0:
            pos += 1
            return
        tags, pos = read_uvarint(body, pos, end)
        for _ in range(tags):
            _, pos = read_uvarint(body, pos, end)
            size, pos = read_uvarint(body, pos, end)
            chunk(size)

    transactional_id = string(nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack(chunk(_ACKS_TIMEOUT.size))
    topics = []
    for _ in range(count()):
        topic_id = uuid.UUID(bytes=bytes(chunk(16))) if version >= TOPIC_ID_VERSION else None
        name = "" if topic_id is not None else string(nullable=False)
        partitions = []
        for _ in range(count()):
            index = I32.unpack(chunk(4))[0]
            n = length(4)
            partitions.append(PartitionProduceData(index, None if n < 0 else chunk(n)))
            skip_tags()
        topics.append(TopicProduceData(name or "", partitions, topic_id))
        skip_tags()
    skip_tags()
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)
