"""Request frames built field by field from kafka-python's schemas (the ones josefk decodes
with), by a ``Chooser`` that picks every value, count and length. ``Plain`` picks valid,
populated values (seed frames); ``strategies.Drawn`` draws them with hypothesis and may
corrupt any length, count or size prefix on the way."""

from __future__ import annotations

import struct
from typing import Any, Protocol

from kafka.protocol.api_message import ApiMessage
from kafka.record.memory_records import MemoryRecordsBuilder

from josefk.protocol.header import is_flexible

FIXED_SIZES = {"int8": 1, "bool": 1, "int16": 2, "uint16": 2, "int32": 4, "bitfield": 4,
               "int64": 8, "float64": 8, "uuid": 16}
# Values a field of that name gets from Plain (anything else: zero).
PLAIN_INTS = {"partition_index": 0, "partition": 0, "timeout_ms": 1000, "acks": 1,
              "max_wait_ms": 0, "max_bytes": 1 << 20, "partition_max_bytes": 1 << 20,
              "replica_id": -1, "producer_id": -1, "producer_epoch": -1, "generation_id": -1,
              "num_partitions": 1, "replication_factor": 1, "current_leader_epoch": -1,
              "leader_epoch": -1, "session_epoch": -1, "last_fetched_epoch": -1,
              "log_start_offset": -1, "timestamp": -1, "session_timeout_ms": 10000,
              "rebalance_timeout_ms": 10000, "isolation_level": 0, "min_bytes": 1}


class Chooser(Protocol):
    """Picks what goes into a request being encoded."""

    def null(self, name: str) -> bool:
        """Whether a nullable field (or an optional tagged one) is left out."""
        ...

    def count(self, name: str) -> int:
        """How many elements an array gets."""
        ...

    def fixed(self, type_str: str, name: str) -> bytes:
        """The encoding of a fixed-size field."""
        ...

    def text(self, name: str) -> bytes:
        """A string field's bytes."""
        ...

    def blob(self, type_str: str, name: str) -> bytes:
        """A bytes or records field's bytes."""
        ...

    def length(self, n: int) -> int:
        """The length or count written for ``n`` bytes or elements (``n`` unless corrupted)."""
        ...


def uvarint(n: int) -> bytes:
    n &= 0xFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length(n: int, compact: bool, width: int) -> bytes:
    """A length or count: int16/int32, or compact (unsigned varint of n + 1)."""
    if compact:
        return uvarint(n + 1)
    fmt = ">h" if width == 2 else ">i"
    lo, hi = (-(1 << 15), (1 << 15) - 1) if width == 2 else (-(1 << 31), (1 << 31) - 1)
    return struct.pack(fmt, min(max(n, lo), hi))


def encode_struct(fields: dict[str, Any], version: int, flexible: bool, ch: Chooser,
                  in_tagged: bool = False) -> bytes:
    """A struct's fields in order, then (flexible) its tagged fields."""
    out = bytearray()
    tagged: list[tuple[int, bytes]] = []
    for f in fields.values():
        if not f.for_version_q(version):
            continue
        if flexible and f.tagged_field_q(version):
            if not in_tagged and not ch.null(f.name):
                tagged.append((f.tag, _field(f, version, True, ch, True)))
            continue
        out += _field(f, version, flexible, ch, in_tagged)
    if flexible:
        out += uvarint(ch.length(len(tagged)))
        for tag, value in sorted(tagged):
            out += uvarint(tag) + uvarint(ch.length(len(value))) + value
    return bytes(out)


def _field(f: Any, version: int, flexible: bool, ch: Chooser, in_tagged: bool) -> bytes:
    nullable = f.nullable_for_version_q(version)
    if f.is_array():
        if nullable and ch.null(f.name):
            return _length(-1, flexible, 4)
        n = ch.count(f.name)
        if f.is_struct_array():
            items = [encode_struct(f.fields, version, flexible, ch, in_tagged) for _ in range(n)]
        else:
            items = [_simple(f.array_of.type_str, False, flexible, f.name, ch) for _ in range(n)]
        return _length(ch.length(n), flexible, 4) + b"".join(items)
    if f.is_struct():
        if nullable and ch.null(f.name):
            return b"\xff"
        body = encode_struct(f.fields, version, flexible, ch, in_tagged)
        return (b"\x01" + body) if nullable else body
    return _simple(f.type_str, nullable, flexible, f.name, ch)


def _simple(type_str: str, nullable: bool, compact: bool, name: str, ch: Chooser) -> bytes:
    if type_str in FIXED_SIZES:
        return ch.fixed(type_str, name)
    width = 2 if type_str == "string" else 4
    if nullable and ch.null(name):
        return _length(-1, compact, width)
    data = ch.text(name) if type_str == "string" else ch.blob(type_str, name)
    return _length(ch.length(len(data)), compact, width) + data


def encode_request(cls: type[ApiMessage], version: int, ch: Chooser, correlation_id: int = 1,
                   client_id: bytes = b"fuzz") -> bytes:
    """A whole frame: size prefix, request header (v1, or v2 when flexible), body."""
    flexible = is_flexible(int(cls.API_KEY), version)
    header = struct.pack(">hhih", int(cls.API_KEY), version, correlation_id, len(client_id))
    header += client_id + (b"\x00" if flexible else b"")
    payload = header + encode_struct(cls.fields, version, flexible, ch)
    return struct.pack(">i", ch.length(len(payload))) + payload


def record_batch(count: int = 2, magic: int = 2) -> bytes:
    """A valid uncompressed record batch of ``count`` small records."""
    builder = MemoryRecordsBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for i in range(count):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * 8,
                       headers=[])
    builder.close()
    return bytes(builder.buffer())


class Plain:
    """Valid values: one element per array, short names, a real record batch."""

    def __init__(self, topic: str = "fuzz-topic") -> None:
        self.topic = topic.encode()

    def null(self, name: str) -> bool:
        return False

    def count(self, name: str) -> int:
        return 1

    def fixed(self, type_str: str, name: str) -> bytes:
        size = FIXED_SIZES[type_str]
        if type_str == "uuid":
            return bytes(16)
        value = PLAIN_INTS.get(name, 0)
        if type_str == "bool":
            value = 0
        return value.to_bytes(size, "big", signed=type_str != "uint16")

    def text(self, name: str) -> bytes:
        if name in ("topic", "name", "topic_name"):
            return self.topic
        return b"fuzz"

    def blob(self, type_str: str, name: str) -> bytes:
        return record_batch() if type_str == "records" else b"fuzz"

    def length(self, n: int) -> int:
        return n
