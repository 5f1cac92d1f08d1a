"""The aborted-transaction index: a segment's ``<base>.txnindex``, Kafka's TransactionIndex.

One 34-byte big-endian entry per transaction aborted by a marker in the segment:
``version int16 (0), producerId int64, firstOffset int64, lastOffset int64,
lastStableOffset int64``; lastOffset is the ABORT marker's offset, lastStableOffset
the partition's LSO once the transaction completed. Entries are in increasing
lastOffset order. The file exists only once a first entry is written.

A read_committed fetch from ``fetch_offset`` gets the entries that overlap its
range; the search goes on into later segments until an entry's lastStableOffset
reaches the upper bound (a transaction's marker lies in the segment that holds it,
possibly long after its first offset).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from josefk.log.index.base import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries of an index file's bytes (a torn tail entry is ignored)."""
    entries = []
    for pos in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version > VERSION:
            raise CorruptIndexError(f"aborted transaction version {version} at {pos}")
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


class TransactionIndex:
    """The ``.txnindex`` of one segment, kept in memory and appended to its file."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # read on first use

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            self._entries = decode_entries(data)
        return self._entries

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} does not follow "
                             f"{entries[-1].last_offset} in {self.path}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, txn.encode())
        finally:
            os.close(fd)
        entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound_offset: int
                ) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset), and whether the search is
        complete (an entry's last stable offset reached the upper bound)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions whose marker is at or after ``offset``."""
        entries = self.entries
        keep = next((i for i, t in enumerate(entries) if t.last_offset >= offset), len(entries))
        if keep < len(entries):
            self._rewrite(entries[:keep])

    def reset(self) -> None:
        if self.path.exists() or self._entries:
            self._rewrite([])

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if self.path.exists():
            os.truncate(self.path, len(entries) * ENTRY.size)
        self._entries = list(entries)

    def sanity_check(self) -> None:
        for txn in self.entries:
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(f"aborted transaction {txn} in {self.path} ends before "
                                        f"the segment's base offset {self.base_offset}")

    def read_bytes(self) -> bytes:
        return b"".join(t.encode() for t in self.entries)

    def flush(self, sync: bool = True) -> None:
        if sync and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []
