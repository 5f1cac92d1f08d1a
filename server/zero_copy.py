"""Responses whose record bytes go from segment files to the socket with sendfile.

A Fetch response is encoded by kafka-python with a short random sentinel in
place of each partition's records; the encoded frame is then cut at the
sentinels, whose length prefixes are rewritten for the real sizes, and the
segment bytes are sent with ``os.sendfile`` between the cuts. No record byte
passes through Python.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

from josefk.protocol.varint import uvarint

SENTINEL_SIZE = 16
_INT32 = struct.Struct(">i")


@dataclass(slots=True)
class FileRegion:
    """``length`` bytes of an open file from ``position``; ``release`` lets go of ``fd``
    once sent (the segment file stays open, pinned in the log's descriptor cache)."""

    fd: int
    position: int
    length: int
    release: Callable[[], None]

    def close(self) -> None:
        if self.fd >= 0:
            self.fd = -1
            self.release()


Part = bytes | memoryview | FileRegion


def new_sentinel() -> bytes:
    return os.urandom(SENTINEL_SIZE)


def splice(frame: bytearray, regions: dict[bytes, FileRegion], flexible: bool) -> list[Part]:
    """Replace each sentinel in an encoded, framed response by its file region.

    Non-flexible versions prefix records with an int32 length, flexible ones
    with an unsigned varint of length + 1; the frame's size prefix is rewritten.
    """
    if not regions:
        return [frame]
    view = memoryview(frame)
    located = sorted((frame.find(sentinel), region) for sentinel, region in regions.items())
    parts: list[Part] = []
    start = 4
    total = 0
    prefix_len = 1 if flexible else 4
    for at, region in located:
        if at < 0:
            raise ValueError("sentinel missing from the encoded response")
        parts.append(view[start : at - prefix_len])
        prefix = uvarint(region.length + 1) if flexible else _INT32.pack(region.length)
        parts.append(prefix)
        parts.append(region)
        total += at - prefix_len - start + len(prefix) + region.length
        start = at + SENTINEL_SIZE
    parts.append(view[start:])
    total += len(frame) - start
    return [_INT32.pack(total), *parts]
