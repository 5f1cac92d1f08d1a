"""The sparse offset index: relative offset → file position of a batch."""

from __future__ import annotations

import struct

from josefk.log.index.base import CorruptIndexError, IndexFile


class OffsetIndex(IndexFile):
    """Entries of 4-byte relative offset + 4-byte position, as in Kafka's ``.index``.

    An entry names a batch by its last offset and its position in the ``.log``
    file, so the floor entry of any offset is at or before the batch holding it.
    """

    entry = struct.Struct(">ii")

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        return self.base_offset + raw[0], raw[1]

    def last_offset(self) -> int:
        last = self.last()
        return last[0] if last is not None else self.base_offset

    def append(self, offset: int, position: int) -> None:
        last = self.last()
        if last is not None and offset <= last[0]:
            raise ValueError(f"index offset {offset} is not above {last[0]}")
        self._append_raw(offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The floor entry (offset, position) for ``offset``, or (base offset, 0)."""
        slot = self._floor_slot(offset)
        return self.entry_at(slot) if slot >= 0 else (self.base_offset, 0)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        slot = self._floor_slot(offset)
        if slot >= 0 and self.entry_at(slot)[0] == offset:
            self._truncate_entries(slot)
        else:
            self._truncate_entries(slot + 1)

    def sanity_check(self, log_size: int) -> None:
        previous_offset, previous_position = self.base_offset - 1, -1
        for offset, position in self.all_entries():
            if offset <= previous_offset or position <= previous_position or position >= log_size:
                raise CorruptIndexError(
                    f"{self.path}: entry ({offset}, {position}) is out of order or past the log"
                )
            previous_offset, previous_position = offset, position
