"""Deleting a partition log's data (mixed into :class:`josefk.log.log.Log`).

DeleteRecords, time and size retention, the delayed removal of ``.deleted`` files
that readers may still be sending from, and the swap of compacted segments in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from josefk.log.cleaner.swap import CLEANED_SUFFIX, SWAP_SUFFIX, rename_suffix
from josefk.log.clock import now_ms
from josefk.log.errors import OffsetOutOfRangeError
from josefk.log.leader_epoch import LeaderEpochCache
from josefk.log.producer_state import ProducerStateManager
from josefk.log.segment import LogSegment

if TYPE_CHECKING:
    from josefk.log.config import LogConfig


class LogDeletion:
    """Which whole segments of a Log go, and when their files are removed."""

    directory: Path
    config: LogConfig
    segments: list[LogSegment]
    _base_offsets: list[int]
    leader_epochs: LeaderEpochCache
    producer_state: ProducerStateManager
    log_start_offset: int
    log_end_offset: int
    _high_watermark: int
    truncations: int
    pending_deletes: list[tuple[int, LogSegment]]
    delete_watch: set[Any] | None
    _flush_lock: threading.Lock

    if TYPE_CHECKING:
        @property
        def active_segment(self) -> LogSegment: ...

        def size_in_bytes(self) -> int: ...

        def roll(self, base_offset: int | None = None) -> LogSegment: ...

    # --- deletion: DeleteRecords and retention -------------------------------------

    def delete_records(self, offset: int, now: int | None = None) -> int:
        """Advance the log start offset to ``offset`` (DeleteRecords); returns the new one."""
        now = now_ms() if now is None else now
        if offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete below {offset}: the high watermark is {self._high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epochs.truncate_from_start(offset)
            self.producer_state.truncate_head(offset)
            self._delete_segments_below_start(now)
        return self.log_start_offset

    def _delete_segments_below_start(self, now: int) -> int:
        return self._delete_old_segments(
            now, lambda segment, next_base: next_base is not None
            and next_base <= self.log_start_offset)

    def enforce_retention(self, now: int | None = None) -> int:
        """Delete whole segments past ``retention.ms`` or ``retention.bytes``; returns how many."""
        now = now_ms() if now is None else now
        deleted = self._delete_segments_below_start(now)
        if not self.config.delete:
            return deleted
        if self.config.retention_ms >= 0:
            limit = self.config.retention_ms
            deleted += self._delete_old_segments(
                now, lambda segment, _: now - segment.largest_timestamp() > limit)
        if self.config.retention_bytes >= 0:
            excess = self.size_in_bytes() - self.config.retention_bytes

            def over_size(segment: LogSegment, _: int | None) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_old_segments(now, over_size)
        return deleted

    def _delete_old_segments(self, now: int,
                             predicate: Callable[[LogSegment, int | None], bool]) -> int:
        """Delete leading segments while ``predicate(segment, next_base)`` holds.

        Only segments wholly below the high watermark go; the active segment goes
        only if it is non-empty and fully replicated, and a fresh one replaces it.
        """
        doomed: list[LogSegment] = []
        for i, segment in enumerate(self.segments):
            next_base = self._base_offsets[i + 1] if i + 1 < len(self.segments) else None
            upper = next_base if next_base is not None else self.log_end_offset
            if next_base is None and (segment.size == 0 or
                                      self._high_watermark < self.log_end_offset):
                break
            if upper > self._high_watermark or not predicate(segment, next_base):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        if doomed[-1] is self.active_segment:
            self.roll()
        with self._flush_lock:  # a flush in a worker thread reads both lists together
            for segment in doomed:
                self.segments.remove(segment)
                self._base_offsets.remove(segment.base_offset)
        for segment in doomed:
            self._schedule_delete(segment, now)
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epochs.truncate_from_start(new_start)
            self.producer_state.truncate_head(new_start)
        return len(doomed)

    def _schedule_delete(self, segment: LogSegment, now: int) -> None:
        segment.rename_for_deletion()
        self.pending_deletes.append((now + self.config.file_delete_delay_ms, segment))
        if self.delete_watch is not None:
            self.delete_watch.add(self)

    def _delete_now(self, segment: LogSegment) -> None:
        segment.delete_files()

    def delete_expired_files(self, now: int | None = None) -> None:
        """Remove ``.deleted`` files whose delay has passed (readers may still hold them)."""
        now = now_ms() if now is None else now
        due = [s for deadline, s in self.pending_deletes if deadline <= now]
        self.pending_deletes = [(d, s) for d, s in self.pending_deletes if d > now]
        for segment in due:
            segment.delete_files()

    # --- compaction ---------------------------------------------------------------------

    def replace_segments(self, old: list[LogSegment], base_offset: int, truncations: int,
                         now: int | None = None) -> LogSegment | None:
        """Swap the inactive segments ``old`` for the cleaned segment written beside them
        (``<base>.log.cleaned`` and its indexes), in the crash-safe steps of
        :mod:`josefk.log.cleaner.swap`. Returns the new segment, or None (and nothing
        changes) if ``old`` is no longer a run of this log's inactive segments or the
        log was truncated since ``truncations`` was read. The replaced segments are
        deleted as retention deletes (after ``file.delete.delay.ms``), so readers
        still sending from them finish."""
        now = now_ms() if now is None else now
        try:
            first = next(i for i, s in enumerate(self.segments) if s is old[0])
        except StopIteration:
            return None
        run = self.segments[first:first + len(old)]
        if (truncations != self.truncations or len(run) != len(old)
                or any(a is not b for a, b in zip(run, old, strict=True))
                or first + len(old) >= len(self.segments)):
            return None
        rename_suffix(self.directory, base_offset, CLEANED_SUFFIX, SWAP_SUFFIX)
        for segment in old:
            self._schedule_delete(segment, now)
        rename_suffix(self.directory, base_offset, SWAP_SUFFIX, "")
        cleaned = LogSegment(self.directory, base_offset, self.config.index_interval_bytes,
                             self.config.segment_index_bytes, active=False)
        with self._flush_lock:
            self.segments[first:first + len(old)] = [cleaned]
            self._base_offsets[first:first + len(old)] = [base_offset]
        return cleaned
