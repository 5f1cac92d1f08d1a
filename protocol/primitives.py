"""Field encodings shared by the hand-written response encoders (Metadata, Produce):
lengths and strings in both the classic and the flexible (compact) forms."""

from __future__ import annotations

import struct

from josefk.protocol.varint import uvarint

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
NO_TAGS = b"\x00"

# Compact lengths (n + 1) of small arrays and strings, by far the common case.
_COMPACT_LEN = [uvarint(n + 1) for n in range(128)]


def compact_len(n: int) -> bytes:
    return _COMPACT_LEN[n] if n < 127 else uvarint(n + 1)


def array_len(n: int, flexible: bool) -> bytes:
    return compact_len(n) if flexible else I32.pack(n)


def string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = s.encode("utf-8")
    return (compact_len(len(raw)) if flexible else I16.pack(len(raw))) + raw
