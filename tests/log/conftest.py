"""Shared helpers for the storage engine tests: batch builders, log inspection, fixtures."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.log.cleaner.cleaner import Cleaner, OffsetMap
from josefk.log.cleaner.manager import LogCleanerManager
from josefk.log.config import LogConfig
from josefk.log.log import FetchSlice, Log
from josefk.log.manager import LogManager
from josefk.log.segment import LogSegment
from josefk.protocol.record_batch import (
    BatchHeader,
    assign_offset,
    check_batch,
    iter_batches,
    set_leader_epoch,
)

BASE_TS = 1_700_000_000_000
INT32_MAX = (1 << 31) - 1
NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4


def build_batch(
    count: int = 1,
    timestamp: int | Sequence[int] = BASE_TS,
    *,
    value_size: int = 64,
    compression: int = NONE,
    base_offset: int = 0,
    leader_epoch: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    """A v2 batch built by kafka-python: ``count`` records (or one per timestamp given)."""
    timestamps = [timestamp] * count if isinstance(timestamp, int) else list(timestamp)
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for delta, ts in enumerate(timestamps):
        value = (b"value-%d;" % delta * value_size)[:value_size]
        builder.append(delta, timestamp=ts, key=b"k%d" % delta, value=value, headers=[])
    buf = bytearray(builder.build())
    # kafka-python falls back to no compression when it would not shrink the batch.
    assert buf[22] & 0x07 == compression, "records too small to compress"
    assign_offset(buf, 0, base_offset)
    set_leader_epoch(buf, 0, leader_epoch)
    return buf


def seg_name(base_offset: int, suffix: str = ".log") -> str:
    """Kafka's segment file name: the base offset in 20 digits plus ``suffix``."""
    return f"{base_offset:020d}{suffix}"


def files_with(directory: Path, suffix: str) -> list[str]:
    """Sorted names of the files in ``directory`` ending in ``suffix``."""
    return sorted(name for name in os.listdir(directory) if name.endswith(suffix))


def segment_batches(segment: LogSegment) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch of a segment, each CRC-checked."""
    out = []
    for position, header in segment.batches_from(0):
        check_batch(segment.pread(position, header.size))
        out.append((position, header))
    return out


def log_batches(log: Log) -> list[BatchHeader]:
    """Every batch header of the log, in order, each CRC-checked."""
    return [h for segment in log.segments for _, h in segment_batches(segment)]


def log_records(log: Log) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of the log, decoded by kafka-python."""
    out = []
    for segment in log.segments:
        for position, header in segment.batches_from(0):
            batch = DefaultRecordBatch(segment.pread(position, header.size))
            out.extend((record.offset, record.timestamp) for record in batch)
    return out


def slice_headers(fetch: FetchSlice) -> list[BatchHeader]:
    """Headers of the whole batches in a fetch slice."""
    return [h for _, h in iter_batches(fetch.read_bytes())]


def assert_valid_prefix(log: Log) -> None:
    """Every batch CRC-valid, offsets strictly increasing, LEO after the last batch."""
    headers = log_batches(log)
    next_offset = log.segments[0].base_offset
    for header in headers:
        assert header.base_offset >= next_offset
        next_offset = header.next_offset
    assert log.log_end_offset == (headers[-1].next_offset if headers else
                                  log.active_segment.base_offset)


def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the files fsynced from now on, in order."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.fixture
def make_log(tmp_path: Path) -> Iterator[Callable[..., Log]]:
    """Open a log in ``tmp_path/<name>``; every log opened is closed at teardown."""
    opened: list[Log] = []

    def factory(name: str = "topic-0", *, open_kwargs: dict[str, Any] | None = None,
                **config: Any) -> Log:
        log = Log.open(tmp_path / name, LogConfig(**config), **(open_kwargs or {}))
        opened.append(log)
        return log

    yield factory
    for log in opened:
        with contextlib.suppress(Exception):  # already closed, or broken by the test
            log.close()


def clean_pass(lm: LogManager, cleaners: LogCleanerManager | None = None, now: int | None = None,
          slots: int = 10_000) -> int | None:
    """One pass, synchronously (the swap runs inline); the new first dirty offset."""
    cleaners = cleaners or LogCleanerManager(lm)
    plan = cleaners.grab_filthiest(now)
    if plan is None:
        return None
    end = None
    try:
        end, _ = Cleaner(OffsetMap(slots)).clean(
            plan, lambda group, writer: cleaners.replace(plan, group, writer))
    finally:
        cleaners.done(plan, end)
    return end
