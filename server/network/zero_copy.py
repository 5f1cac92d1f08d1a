"""Responses whose record bytes go from segment files to the socket with sendfile.

A response is a list of parts: bytes, and file regions that the connection sends
with ``os.sendfile`` in their place. A Fetch response's records of more than a few
KiB are such regions, so no record byte passes through Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


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
