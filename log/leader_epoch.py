"""The leader epoch cache: which epoch's leader wrote from which offset (KIP-101)."""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path

from josefk.log.checkpoint import (
    CorruptCheckpointError,
    fsync_dir,
    read_entries,
    write_entries,
)

CHECKPOINT_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

logger = logging.getLogger(__name__)


class LeaderEpochCache:
    """Epoch → start offset, kept in ``leader-epoch-checkpoint`` and truncated with the log."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / CHECKPOINT_NAME
        self._entries: list[tuple[int, int]] = []
        self._unsynced = False  # written without an fsync: sync() owes one
        try:
            self._entries = [(int(e), int(o)) for e, o in read_entries(self.path, 2)]
        except (CorruptCheckpointError, ValueError) as e:
            # Recovery re-assigns epochs from the batches themselves.
            logger.warning("ignoring corrupt leader epoch checkpoint %s: %s", self.path, e)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer than the latest."""
        if epoch < 0:
            return
        if self._entries and (epoch <= self.latest_epoch or start_offset < self._entries[-1][1]):
            return
        self._entries.append((epoch, start_offset))
        # An epoch that starts at offset 0 describes no record yet: its file need not be
        # durable before the records are (Log.flush syncs it first). A new partition's
        # first leadership then costs no fsync (thousands of partitions are created at once).
        self._flush(sync=start_offset > 0)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka answers it.

        The end offset is the start of the first later epoch, or the log end
        offset for the latest epoch. An epoch between known ones answers with the
        largest known epoch below it; one below all of them with itself and the
        first start offset; one above all of them with (-1, -1).
        """
        if not self._entries or epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest_epoch:
            return epoch, log_end_offset
        epochs = [e for e, _ in self._entries]
        later = bisect_right(epochs, epoch)
        if later == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if later == 0:
            return epoch, self._entries[0][1]
        return epochs[later - 1], self._entries[later][1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that start at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, o) for e, o in self._entries if o < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly below ``start_offset``; the one holding it now starts there."""
        before = [i for i, (_, o) in enumerate(self._entries) if o <= start_offset]
        if not before:
            return
        last = before[-1]
        epoch = self._entries[last][0]
        kept = [(epoch, start_offset)] + self._entries[last + 1 :]
        if kept != self._entries:
            self._entries = kept
            self._flush()

    def clear(self) -> None:
        self._entries = []
        self._flush()

    def _flush(self, sync: bool = True) -> None:
        self._unsynced = not sync
        write_entries(self.path, list(self._entries), sync)

    def sync(self) -> None:
        """Make a write made without an fsync durable (the log flushes its records)."""
        if not self._unsynced:
            return
        self._unsynced = False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.path.parent)

    def epoch_for(self, offset: int) -> int:
        """The epoch whose leader wrote ``offset`` (-1 if unknown)."""
        epoch = UNDEFINED_EPOCH
        for e, start in self._entries:
            if start > offset:
                break
            epoch = e
        return epoch
