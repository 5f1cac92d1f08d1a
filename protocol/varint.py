"""Zigzag varints (and varlongs) of the record format v2: record lengths, deltas, sizes."""

from __future__ import annotations

from josefk.protocol.record_batch import CorruptRecordError


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint (or varlong) at ``pos``: (value, position after it)."""
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def write_varint(value: int, out: bytearray) -> None:
    """Append ``value`` as a zigzag varint (or varlong)."""
    v = (value << 1) ^ (value >> 63)
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint: the lengths of flexible versions."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
