"""Which log to clean next, and what each log's cleaner has done (Kafka's LogCleanerManager).

Every method runs where logs are mutated (the server's event loop); only
:meth:`josefk.log.cleaner.cleaner.Cleaner.clean` runs on a worker thread. The first dirty
offset of each compacted log is kept in ``cleaner-offset-checkpoint`` in its log
dir (Kafka's checkpoint format: topic partition offset).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from josefk.log.checkpoint import CorruptCheckpointError, read_offsets
from josefk.log.cleaner.cleaner import CleaningPlan, SourceSegment
from josefk.log.cleaner.swap import CleanedSegmentWriter
from josefk.log.cleaner.txn import LastRecord
from josefk.log.clock import now_ms
from josefk.log.index.txn import AbortedTxn
from josefk.log.log import Log
from josefk.log.manager import LogManager, TopicPartition
from josefk.log.segment import LogSegment

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log's clean and cleanable bytes (Kafka's ``LogToClean``)."""

    tp: TopicPartition
    log: Log
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


class LogCleanerManager:
    """Chooses the filthiest log, hands out cleaning plans, records first dirty offsets."""

    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        # tp -> (first dirty offset, the log's truncation count when it was recorded)
        self.first_dirty: dict[TopicPartition, tuple[int, int]] = {}
        self.in_progress: dict[TopicPartition, CleaningPlan] = {}
        self.uncleanable: set[TopicPartition] = set()

    def load_checkpoints(self) -> None:
        for log_dir in self.log_manager.log_dirs:
            for tp, offset in _read_checkpoint(log_dir / CLEANER_CHECKPOINT_FILE).items():
                self.first_dirty[tp] = (offset, 0)

    # --- choosing ------------------------------------------------------------------------

    def cleanable(self, tp: TopicPartition, log: Log, now: int) -> LogToClean:
        """The log's dirty range: from the checkpointed first dirty offset (the log start
        offset if it is missing or no longer valid) to the first segment it may not
        clean: the active one, the one holding the last stable offset (the high watermark
        or an open transaction's first offset), or the first one
        younger than ``min.compaction.lag.ms``."""
        start = log.log_start_offset
        recorded, truncations = self.first_dirty.get(tp, (start, log.truncations))
        first_dirty = recorded
        if recorded < start or recorded > log.log_end_offset or truncations != log.truncations:
            first_dirty = start
        segments = log.segments
        active = segments[-1]
        uncleanable = min(log.last_stable_offset, active.base_offset)
        lag = max(log.config.min_compaction_lag_ms, 0)
        with_nexts = _with_next_bases(log)
        if lag > 0:
            for segment, next_base in with_nexts[:-1]:
                if next_base > first_dirty and segment.largest_timestamp() > now - lag:
                    uncleanable = min(uncleanable, segment.base_offset)
                    break
        # Snap to the base of the segment holding it: whole segments only.
        holder = next((s for s in reversed(segments) if s.base_offset <= uncleanable), active)
        first_uncleanable = max(holder.base_offset, segments[0].base_offset)
        clean_bytes = cleanable_bytes = 0
        for segment, next_base in with_nexts:
            if segment.base_offset >= first_uncleanable:
                break
            if next_base <= first_dirty:
                clean_bytes += segment.size
            else:
                cleanable_bytes += segment.size
        return LogToClean(tp, log, first_dirty, max(first_dirty, first_uncleanable),
                          clean_bytes, cleanable_bytes,
                          self._compaction_delay(log, with_nexts, first_dirty, now) > 0)

    @staticmethod
    def _compaction_delay(log: Log, with_nexts: list[tuple[LogSegment, int]], first_dirty: int,
                          now: int) -> int:
        """How far past ``max.compaction.lag.ms`` the oldest dirty segment is (0: not)."""
        lag = max(log.config.max_compaction_lag_ms, 0)
        if lag >= (1 << 62):
            return 0
        firsts = [ts for s, next_base in with_nexts[:-1] if next_base > first_dirty and s.size
                  and (ts := s.rolling_timestamp()) is not None and ts > 0]
        if not firsts:
            return 0
        return max(0, now - lag - min(firsts))

    def grab_filthiest(self, now: int | None = None) -> CleaningPlan | None:
        """The plan for the compacted log with the highest dirty ratio above its
        ``min.cleanable.dirty.ratio`` (or overdue by ``max.compaction.lag.ms``), marked
        in progress; None if no log needs cleaning."""
        now = now_ms() if now is None else now
        candidates = []
        for tp, log in self.log_manager.logs.items():
            if (not log.config.compact or tp in self.in_progress or tp in self.uncleanable
                    or len(log.segments) < 2):
                continue
            ltc = self.cleanable(tp, log, now)
            if ltc.clean_bytes + ltc.cleanable_bytes == 0:
                continue
            if ((ltc.need_compaction_now and ltc.cleanable_bytes > 0)
                    or ltc.cleanable_ratio > log.config.min_cleanable_dirty_ratio):
                candidates.append(ltc)
        if not candidates:
            return None
        filthiest = max(candidates, key=lambda c: c.cleanable_ratio)
        plan = self._plan(filthiest, now)
        self.in_progress[filthiest.tp] = plan
        return plan

    def _plan(self, ltc: LogToClean, now: int) -> CleaningPlan:
        log = ltc.log
        sources = []
        for segment, next_base in _with_next_bases(log):
            if segment.base_offset >= ltc.first_uncleanable:
                break
            fd = os.open(segment.log_path, os.O_RDONLY)
            sources.append(SourceSegment(segment, segment.size, next_base, fd,
                                         os.fstat(fd).st_mtime))
        producers = {pid: LastRecord(entry.last_offset, entry.epoch)
                     for pid, entry in log.producer_state.producers.items()}
        return CleaningPlan(f"{ltc.tp[0]}-{ltc.tp[1]}", log.config, ltc.first_dirty,
                            ltc.first_uncleanable, sources, producers, now,
                            _aborted_txns(log, ltc.first_uncleanable), tp=ltc.tp, log=log,
                            truncations=log.truncations)

    # --- during and after a pass -------------------------------------------------------------

    def replace(self, plan: CleaningPlan, group: list[SourceSegment],
                writer: CleanedSegmentWriter) -> bool:
        """Swap a cleaned group in, unless the pass was aborted or the log changed."""
        log = plan.log
        if plan.aborted.is_set() or self.log_manager.logs.get(plan.tp) is not log:
            return False
        return log.replace_segments([s.segment for s in group], writer.base_offset,
                                    plan.truncations) is not None

    def done(self, plan: CleaningPlan, end_offset: int | None, failed: bool = False) -> None:
        """The pass ended: record its end as the log's first dirty offset (if it finished)."""
        tp, log = plan.tp, plan.log
        self.in_progress.pop(tp, None)
        for source in plan.segments:
            os.close(source.fd)
        if failed:
            self.uncleanable.add(tp)
        elif end_offset is not None and self.log_manager.logs.get(tp) is log:
            self.first_dirty[tp] = (end_offset, log.truncations)

    def abort_all(self) -> None:
        for plan in self.in_progress.values():
            plan.aborted.set()

    def checkpoint_offsets(self) -> dict[Path, dict[TopicPartition, int]]:
        """``cleaner-offset-checkpoint`` of every log dir: first dirty offsets of its logs."""
        files: dict[Path, dict[TopicPartition, int]] = {
            d / CLEANER_CHECKPOINT_FILE: {} for d in self.log_manager.live_log_dirs}
        for tp, (offset, _) in self.first_dirty.items():
            if tp in self.log_manager.logs:
                files[self.log_manager.dir_of(*tp) / CLEANER_CHECKPOINT_FILE][tp] = offset
        return files


def _with_next_bases(log: Log) -> list[tuple[LogSegment, int]]:
    """Each segment with the base offset of the next (the log end offset for the last)."""
    segments = log.segments
    nexts = [s.base_offset for s in segments[1:]] + [log.log_end_offset]
    return list(zip(segments, nexts, strict=True))


def _aborted_txns(log: Log, end: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping the log below ``end``, whose markers may lie
    above it (Kafka's ``collectAbortedTransactions``, with whole entries)."""
    found: list[AbortedTxn] = []
    for segment in log.segments:
        txns, complete = segment.txn_index.collect(segment.base_offset, end)
        found += txns
        if complete:
            break
    return found


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return read_offsets(path)
    except CorruptCheckpointError as e:
        logger.warning("ignoring corrupt checkpoint: %s", e)
        return {}
