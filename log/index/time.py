"""The time index: the largest timestamp so far → the offset of its batch."""

from __future__ import annotations

import struct

from josefk.log.index.base import CorruptIndexError, IndexFile

NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    """Entries of 8-byte timestamp + 4-byte relative offset, as in Kafka's ``.timeindex``.

    Timestamps strictly increase: an entry is added only when a batch raises the
    segment's largest timestamp.
    """

    entry = struct.Struct(">qi")

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        return raw[0], self.base_offset + raw[1]

    def last_entry(self) -> tuple[int, int]:
        last = self.last()
        return last if last is not None else (NO_TIMESTAMP, self.base_offset)

    @property
    def is_full(self) -> bool:
        """Full one entry early, as in Kafka: the last slot is kept for the closing entry."""
        return self.entries >= self.max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append if ``timestamp`` is above the last entry's (Kafka's maybeAppend)."""
        if not skip_full_check and self.is_full:
            raise RuntimeError(f"{self.path} is full")
        last_timestamp, last_offset = self.last_entry()
        if self.entries and offset < last_offset:
            raise ValueError(f"time index offset {offset} is below {last_offset}")
        if timestamp > last_timestamp and self.entries < self.max_entries:
            self._append_raw(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The last entry with a timestamp <= ``timestamp``, or (-1, base offset)."""
        slot = self._floor_slot(timestamp)
        return self.entry_at(slot) if slot >= 0 else (NO_TIMESTAMP, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        # Offsets never decrease along the index, so the floor of offset - 1 is the last keeper.
        self._truncate_entries(self._floor_slot(offset - 1, key_of=1) + 1)

    def sanity_check(self, next_offset: int) -> None:
        previous_timestamp, previous_offset = None, self.base_offset
        for timestamp, offset in self.all_entries():
            if (
                (previous_timestamp is not None and timestamp <= previous_timestamp)
                or offset < previous_offset
                or offset >= max(next_offset, self.base_offset + 1)
            ):
                raise CorruptIndexError(
                    f"{self.path}: entry ({timestamp}, {offset}) is out of order or past the log"
                )
            previous_timestamp, previous_offset = timestamp, offset
