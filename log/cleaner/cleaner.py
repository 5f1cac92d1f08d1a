"""The log cleaner's core (Kafka's ``Cleaner``): compact one log's clean and dirty sections.

Plain synchronous code, run on a worker thread. It reads segments through file
descriptors of its own, never the live segments' state, and writes replacement
segments beside them; the swap itself is handed to a ``replace`` callback that
the caller runs where the log is mutated (the event loop), which refuses it if
the log changed underneath (truncation, retention, deletion).

A pass (Kafka's ``doClean``):

1. build the offset map of the dirty section [first dirty, first uncleanable):
   key -> offset of its last record, until the map is full;
2. group the segments below the map's end by size (``segment.bytes``, index
   size, a 32-bit offset range);
3. copy each group into one ``.cleaned`` segment, keeping a record when it is
   the last of its key (or past the map), and a tombstone until its batch's
   delete horizon (set to now + ``delete.retention.ms`` when the cleaner first
   keeps it, KIP-534); a batch whose records all go survives as an empty batch
   header when it holds a live producer's last sequence or ends the pass;
4. swap it in. Offsets never change.

Aborted transactional data is left out of the map and discarded, and markers go
once their transaction's data has (:mod:`josefk.log.cleaner.txn`).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from josefk.log.checkpoint import fsync_dir
from josefk.log.cleaner.keys import keyed_records
from josefk.log.cleaner.swap import CleanedSegmentWriter, read_batches
from josefk.log.cleaner.txn import CleanedTransactions, LastRecord, is_last_of_producer
from josefk.log.config import LogConfig
from josefk.log.index.txn import AbortedTxn
from josefk.log.records import (
    Record,
    build_batch,
    delete_horizon_ms,
    empty_batch,
    record_at,
    record_key,
    records_payload,
    scan_records,
)
from josefk.log.segment import LogSegment
from josefk.protocol.record_batch import BatchHeader, parse_header

logger = logging.getLogger(__name__)

INT32_MAX = (1 << 31) - 1
# What one OffsetMap entry really costs, at worst, so that a map of
# ``memory // BYTES_PER_ENTRY`` slots stays within ``memory`` (the cleaner thread's
# share of log.cleaner.dedupe.buffer.size). Kafka's SkimpyOffsetMap is a buffer of
# exactly that size at 24 bytes an entry (a 16-byte MD5 hash, an 8-byte offset); a
# dict entry is a key object (a key under 16 bytes: up to 48 bytes as allocated; an
# MD5 digest: 49 requested, 64 allocated), an offset int (32) and its share of the
# dict's table, which doubles when 2/3 full and holds both tables while it copies.
# Measured on CPython 3.11, per entry, short keys / MD5 digests: tracemalloc 111 /
# 112 just before a resize, 144 / 145 just after, 174 / 175 at the copy's peak;
# RSS (which sees allocator rounding and pools) 126 / 142, 157 / 173 and 186 / 202.
# The worst of those, rounded up: a full map (load factor 1.0) fits the memory.
BYTES_PER_ENTRY = 208


class CleaningAbortedError(Exception):
    """The pass stopped: the broker is stopping or the log changed underneath."""


class OffsetMap:
    """Key -> offset of its last record in the dirty section, bounded like Kafka's map:
    at most ``slots * load_factor`` keys (never more than ``slots``); :meth:`for_memory`
    sizes the slots so that the map's real memory stays within a byte budget.

    Keys of 16 bytes or more are stored as their MD5 digest (as Kafka stores every
    key); shorter keys as themselves, which cannot collide with a digest.
    """

    def __init__(self, slots: int, load_factor: float = 0.9) -> None:
        self.slots = slots
        self.max_entries = min(slots, int(slots * load_factor))
        if self.max_entries < 1:
            raise ValueError("offset map is too small to hold a single key: raise "
                             "log.cleaner.dedupe.buffer.size or lower log.cleaner.threads")
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    @classmethod
    def for_memory(cls, memory: int, load_factor: float = 0.9) -> OffsetMap:
        """A map whose entries, however many it takes, use at most ``memory`` bytes."""
        return cls(memory // BYTES_PER_ENTRY, load_factor)

    @staticmethod
    def _hash(key: bytes) -> bytes:
        return key if len(key) < 16 else hashlib.md5(key, usedforsecurity=False).digest()

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        self._map[self._hash(key)] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def put_all(self, offsets: list[int], keys: list[bytes]) -> bool:
        """`put` each (offset, key) in order, offsets increasing; False (and the rest
        left out) at the first new key that finds the map full."""
        m = self._map
        if len(m) + len(keys) > self.max_entries:  # may fill up: key by key
            for offset, key in zip(offsets, keys, strict=True):
                if self.full and self.get(key) < 0:
                    return False
                self.put(key, offset)
            return True
        if keys and max(map(len, keys)) >= 16:
            keys = [self._hash(k) for k in keys]
        m.update(zip(keys, offsets, strict=True))
        if offsets:
            self.latest_offset = max(self.latest_offset, offsets[-1])
        return True

    def survivors(self) -> list[int]:
        """Every offset the map holds, sorted: in the dirty section, the records kept."""
        return sorted(self._map.values())

    def get(self, key: bytes) -> int:
        """The key's last offset, or -1 if the dirty section does not hold it."""
        return self._map.get(self._hash(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    @property
    def utilization(self) -> float:
        """Keys over slots, as Kafka's: the share of the map's memory budget in use."""
        return len(self._map) / self.slots


class Throttler:
    """``log.cleaner.io.max.bytes.per.second``, shared by every cleaner thread."""

    def __init__(self, bytes_per_second: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = bytes_per_second
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._start = clock()
        self._bytes = 0.0

    def maybe_throttle(self, nbytes: int) -> None:
        if self.rate <= 0 or self.rate >= 1e300:
            return
        with self._lock:
            self._bytes += nbytes
            elapsed = self._clock() - self._start
            wait = self._bytes / self.rate - elapsed
            if elapsed > 1.0 and wait <= 0:
                self._start, self._bytes = self._clock(), 0.0
        if wait > 0:
            self._sleep(min(wait, 1.0))


@dataclass
class CleanerStats:
    """What a pass did, for its INFO line."""

    start: float = field(default_factory=time.monotonic)
    map_done: float = 0.0
    end: float = 0.0
    map_bytes_read: int = 0
    map_records_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    buffer_utilization: float = 0.0

    def summary(self, name: str) -> str:
        elapsed = max(self.end - self.start, 1e-9)
        return (f"cleaned {name}: {_size(self.bytes_read)} of log read, "
                f"{_size(self.bytes_written)} written "
                f"({100 * (1 - self.bytes_written / max(self.bytes_read, 1)):.1f}% smaller), "
                f"{self.records_read} records read, {self.records_written} kept, in "
                f"{elapsed:.3f} s ({self.map_done - self.start:.3f} s building the offset map "
                f"over {_size(self.map_bytes_read)}, {100 * self.buffer_utilization:.1f}% of "
                f"the map used), {self.bytes_read / (1 << 20) / elapsed:.1f} MB/s")


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


@dataclass
class SourceSegment:
    """One segment of the cleaned range, as the pass saw it when it started: the live
    segment (for the swap), its size, the base offset of the next one, and a file
    descriptor of the pass's own (still readable if the segment is deleted meanwhile)."""

    segment: LogSegment
    size: int
    next_base: int
    fd: int
    mtime: float

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset


@dataclass
class CleaningPlan:
    """One log to clean (Kafka's ``LogToClean``), captured where the log is mutated."""

    name: str
    config: LogConfig
    first_dirty: int
    first_uncleanable: int
    segments: list[SourceSegment]  # every segment below first_uncleanable
    active_producers: dict[int, LastRecord]
    now_ms: int
    # Aborted transactions overlapping the cleanable range, from the .txnindex files.
    aborted_txns: list[AbortedTxn] = field(default_factory=list)
    tp: tuple[str, int] = ("", 0)
    log: Any = None  # the Log, for the swap (never touched by the worker thread)
    truncations: int = 0  # the log's truncation count when planned
    aborted: threading.Event = field(default_factory=threading.Event)


#: Swap a group's segments for the cleaned one; False if the log changed meanwhile.
Replace = Callable[[list[SourceSegment], CleanedSegmentWriter], bool]


class Cleaner:
    """One cleaner thread's offset map and the cleaning of one log at a time."""

    def __init__(self, offset_map: OffsetMap, throttler: Throttler | None = None) -> None:
        self.offset_map = offset_map
        self.throttler = throttler or Throttler(0)
        self._survivors: list[int] = []  # the offset map's offsets, sorted, for a pass

    def clean(self, plan: CleaningPlan, replace: Replace) -> tuple[int, CleanerStats]:
        """Clean ``plan``'s log up to the end of the offset map; returns that end (the
        next first dirty offset) and the pass's statistics."""
        stats = CleanerStats()
        self.build_offset_map(plan, stats)
        end_offset = self.offset_map.latest_offset + 1
        self._survivors = self.offset_map.survivors()
        stats.map_done = time.monotonic()
        segments = [s for s in plan.segments if s.base_offset < end_offset]
        # One transaction state for the whole pass: a transaction may span groups.
        txns = CleanedTransactions(plan.aborted_txns)
        for group in group_segments(segments, plan.config.segment_bytes,
                                    plan.first_uncleanable):
            self._clean_group(plan, group, stats, replace, txns)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end = time.monotonic()
        return end_offset, stats

    # --- the offset map ----------------------------------------------------------------

    def build_offset_map(self, plan: CleaningPlan, stats: CleanerStats) -> None:
        """Map the dirty section's keys, leaving out aborted transactional batches and
        control batches (Kafka's ``buildOffsetMap``)."""
        offset_map = self.offset_map
        offset_map.clear()
        start, end = plan.first_dirty, plan.first_uncleanable
        txns = CleanedTransactions(t for t in plan.aborted_txns
                                   if t.last_offset >= start and t.first_offset < end)
        for source in plan.segments:
            if source.next_base <= start or source.base_offset >= end:
                continue
            for _, header, batch in read_batches(source.fd, source.size):
                self._check_aborted(plan)
                if header.base_offset >= end:
                    break
                if header.is_control:
                    txns.on_control_batch(header, batch)
                    skip = True
                else:
                    skip = txns.on_data_batch(header)
                if header.last_offset < start:
                    continue
                self.throttler.maybe_throttle(header.size)
                stats.map_bytes_read += header.size
                if skip:
                    stats.map_records_read += header.record_count
                else:
                    stats.map_records_read += header.record_count
                    offsets, keys = _keys(batch, header)
                    if header.base_offset < start:
                        first = bisect.bisect_left(offsets, start)
                        offsets, keys = offsets[first:], keys[first:]
                    if not offset_map.put_all(offsets, keys):
                        return
                offset_map.update_latest_offset(header.last_offset)
            offset_map.update_latest_offset(min(source.next_base, end) - 1)

    # --- copying -----------------------------------------------------------------------

    def _clean_group(self, plan: CleaningPlan, group: list[SourceSegment], stats: CleanerStats,
                     replace: Replace, txns: CleanedTransactions) -> None:
        first = group[0].segment
        writer = CleanedSegmentWriter(first.directory, first.base_offset,
                                      plan.config.index_interval_bytes,
                                      plan.config.segment_index_bytes)
        kept_before = len(txns.kept_index)
        try:
            for source in group:
                for _, header, batch in read_batches(source.fd, source.size):
                    self._check_aborted(plan)
                    self.throttler.maybe_throttle(header.size)
                    stats.bytes_read += header.size
                    out = self.filter_batch(plan, header, batch, stats, txns)
                    if out is not None:
                        writer.append(out[1], out[0])
                        stats.bytes_written += out[0].size
                        self.throttler.maybe_throttle(out[0].size)
            for txn in txns.kept_index[kept_before:]:
                writer.add_aborted_txn(txn)
            writer.finish(group[-1].mtime)
            self._check_aborted(plan)
            if not replace(group, writer):
                raise CleaningAbortedError(f"{plan.name} changed while it was being cleaned")
        except BaseException:
            writer.delete()
            raise
        fsync_dir(first.directory)  # the swap's renames, made durable off the event loop

    def filter_batch(self, plan: CleaningPlan, header: BatchHeader, batch: bytes | memoryview,
                     stats: CleanerStats, txns: CleanedTransactions
                     ) -> tuple[BatchHeader, bytes | memoryview] | None:
        """What of one batch goes to the cleaned segment: the batch as it is, a rebuilt
        one, an empty header, or nothing (Kafka's ``cleanInto`` and ``filterTo``)."""
        horizon = delete_horizon_ms(header)
        if header.is_control:
            txn_done = txns.on_control_batch(header, batch)
            discard = txn_done and horizon is not None and horizon <= plan.now_ms
        else:
            txn_done = False
            discard = txns.on_data_batch(header)  # aborted data
        retain_empty = (is_last_of_producer(header, plan.active_producers)
                        or header.next_offset == plan.first_uncleanable)
        if (discard and not retain_empty) or (not discard and self._none_survive(plan, header)):
            stats.records_read += header.record_count
            if not discard and retain_empty:
                rebuilt = empty_batch(header)
                return parse_header(rebuilt), rebuilt
            return None
        kept: list[Record] = []
        removed = tombstones = False
        data, fields = scan_records(batch, header)
        base_offset, now_ms = header.base_offset, plan.now_ms
        for f in fields:
            key = record_key(data, f)
            if not discard and (header.is_control or self._retain(
                    base_offset + f.offset_delta, key, f.has_value, horizon, now_ms)):
                kept.append(record_at(data, header, f, key))
                tombstones = tombstones or not f.has_value
            else:
                removed = True
        stats.records_read += header.record_count
        stats.records_written += len(kept)
        if kept:
            # A marker whose transaction is gone waits out delete.retention.ms like a
            # tombstone; the first pass keeping it stamps the horizon.
            stamp = horizon is None and (tombstones or txn_done)
            if not removed and not stamp:
                return header, batch
            if stamp:
                horizon = plan.now_ms + plan.config.delete_retention_ms
            rebuilt = build_batch(header, kept, horizon)
            return parse_header(rebuilt), rebuilt
        if retain_empty:
            rebuilt = empty_batch(header)
            return parse_header(rebuilt), rebuilt
        return None

    def _none_survive(self, plan: CleaningPlan, header: BatchHeader) -> bool:
        """A data batch wholly inside the mapped dirty section keeps exactly the records
        whose offsets the map holds (each key's last): with none of those in its range it
        keeps nothing, and need not be read."""
        if (header.is_control or header.base_offset < plan.first_dirty
                or header.last_offset > self.offset_map.latest_offset):
            return False
        survivors = self._survivors
        i = bisect.bisect_left(survivors, header.base_offset)
        return i == len(survivors) or survivors[i] > header.last_offset

    def _retain(self, offset: int, key: bytes | None, has_value: bool, horizon: int | None,
                now_ms: int) -> bool:
        if offset > self.offset_map.latest_offset:
            return True
        if key is None:
            return False
        if offset < self.offset_map.get(key):
            return False
        return has_value or horizon is None or now_ms < horizon

    @staticmethod
    def _check_aborted(plan: CleaningPlan) -> None:
        if plan.aborted.is_set():
            raise CleaningAbortedError(f"cleaning of {plan.name} aborted")


def _keys(batch: bytes | memoryview, header: BatchHeader) -> tuple[list[int], list[bytes]]:
    data = records_payload(batch, header)
    return keyed_records(data if isinstance(data, bytes) else bytes(data),
                         header.record_count, header.base_offset)


def group_segments(segments: list[SourceSegment], max_size: int, first_uncleanable: int
                   ) -> list[list[SourceSegment]]:
    """Consecutive segments whose total size fits one segment and whose offsets fit a
    32-bit range from the group's base (Kafka's ``groupSegmentsBySize``; the cleaned
    segment's writer keeps its indexes within ``segment.index.bytes`` itself)."""
    groups: list[list[SourceSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        i += 1
        while i < len(segments):
            candidate = segments[i]
            last_offset = candidate.next_base - 1 if candidate.next_base else first_uncleanable - 1
            if (size + candidate.size > max_size
                    or (candidate.size and last_offset - group[0].base_offset > INT32_MAX)):
                break
            group.append(candidate)
            size += candidate.size
            i += 1
        groups.append(group)
    return groups
