"""The offset index (``.index``) and time index (``.timeindex``): Kafka's entry formats,
floor lookups, truncation, preallocation and trimming."""

from __future__ import annotations

import struct
import tempfile
from bisect import bisect_right
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.log.index.base import CorruptIndexError
from josefk.log.index.offset import OffsetIndex
from josefk.log.index.time import TimeIndex

from .conftest import BASE_TS, build_batch, seg_name

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


@st.composite
def offset_entries(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    """A base offset and strictly increasing (offset, position) entries."""
    base = draw(st.integers(0, 1 << 40))
    deltas = draw(st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 5000)), max_size=60))
    entries, offset, position = [], base - 1, 0
    for offset_step, position_step in deltas:
        offset += offset_step
        position += position_step
        entries.append((offset, position))
    return base, entries


def floor_reference(entries: list[tuple[int, int]], key: int, default: tuple[int, int]
                    ) -> tuple[int, int]:
    """The last entry whose first field is <= ``key``, computed with bisect."""
    slot = bisect_right([e[0] for e in entries], key) - 1
    return entries[slot] if slot >= 0 else default


@given(offset_entries(), st.lists(st.integers(-5, 70_000), min_size=1, max_size=20))
@settings(max_examples=60, deadline=None)
def test_offset_index_lookup_is_the_floor_entry(
    data: tuple[int, list[tuple[int, int]]], probes: list[int]
) -> None:
    base, entries = data
    with tempfile.TemporaryDirectory() as tmp:
        index = OffsetIndex(Path(tmp) / seg_name(base, ".index"), base, 8 * 64, writable=True)
        for offset, position in entries:
            index.append(offset, position)
        assert index.entries == len(entries)
        assert index.all_entries() == entries
        targets = [base + p for p in probes] + [o for o, _ in entries] + [o + 1 for o, _ in entries]
        for target in targets:
            assert index.lookup(target) == floor_reference(entries, target, (base, 0))
        index.close()


@given(offset_entries(), st.integers(-5, 70_000))
@settings(max_examples=60, deadline=None)
def test_offset_index_truncate_to(data: tuple[int, list[tuple[int, int]]], probe: int) -> None:
    base, entries = data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / seg_name(base, ".index")
        index = OffsetIndex(path, base, 8 * 64, writable=True)
        for offset, position in entries:
            index.append(offset, position)
        target = entries[probe % len(entries)][0] if entries and probe % 2 else base + probe
        index.truncate_to(target)
        kept = [e for e in entries if e[0] < target]
        assert index.all_entries() == kept
        index.close()
        assert path.read_bytes() == b"".join(OFFSET_ENTRY.pack(o - base, p) for o, p in kept)


def test_offset_index_file_format_preallocation_and_trim(tmp_path: Path) -> None:
    path = tmp_path / seg_name(100, ".index")
    index = OffsetIndex(path, 100, 100, writable=True)  # 100 bytes: 12 entries of 8
    assert index.max_entries == 12
    assert path.stat().st_size == 96  # preallocated, rounded down to whole entries
    for i in range(5):
        index.append(100 + 3 * i, 40 * i + 40)
    index.flush()
    assert path.stat().st_size == 96
    raw = path.read_bytes()
    assert raw[:40] == b"".join(OFFSET_ENTRY.pack(3 * i, 40 * i + 40) for i in range(5))
    assert raw[40:] == bytes(56)
    index.close()
    assert path.stat().st_size == 40

    sealed = OffsetIndex(path, 100, 100, writable=False)
    assert sealed.entries == 5
    assert sealed.lookup(107) == (106, 120)
    assert sealed.lookup(99) == (100, 0)
    assert path.stat().st_size == 40
    sealed.close()

    reopened = OffsetIndex(path, 100, 100, writable=True)
    assert reopened.entries == 5
    assert path.stat().st_size == 96
    reopened.append(200, 1000)
    assert reopened.all_entries()[-1] == (200, 1000)
    reopened.close()
    assert path.stat().st_size == 48


def test_offset_index_full_and_ordering(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / seg_name(0, ".index"), 0, 20, writable=True)
    assert index.max_entries == 2
    index.append(5, 100)
    with pytest.raises(ValueError):
        index.append(5, 200)  # offsets must increase
    assert not index.is_full
    index.append(9, 200)
    assert index.is_full
    with pytest.raises(RuntimeError):
        index.append(12, 300)
    assert index.all_entries() == [(5, 100), (9, 200)]
    index.close()


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / seg_name(10, ".index")
    path.write_bytes(OFFSET_ENTRY.pack(5, 100) + OFFSET_ENTRY.pack(2, 200))
    index = OffsetIndex(path, 10, 1024, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(1000)
    index.close()
    path.write_bytes(OFFSET_ENTRY.pack(2, 100) + OFFSET_ENTRY.pack(5, 200))
    index = OffsetIndex(path, 10, 1024, writable=False)
    index.sanity_check(1000)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(200)  # a position at or past the end of the log
    index.close()


@st.composite
def time_appends(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    """A base offset and (timestamp, offset) appends with non-decreasing offsets."""
    base = draw(st.integers(0, 1 << 40))
    steps = draw(st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 50)), max_size=60))
    appends, offset = [], base
    for ts, offset_step in steps:
        offset += offset_step
        appends.append((BASE_TS + ts, offset))
    return base, appends


@given(time_appends(), st.lists(st.integers(-10, 2010), min_size=1, max_size=20))
@settings(max_examples=60, deadline=None)
def test_time_index_keeps_only_increasing_timestamps_and_floors(
    data: tuple[int, list[tuple[int, int]]], probes: list[int]
) -> None:
    base, appends = data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / seg_name(base, ".timeindex")
        index = TimeIndex(path, base, 12 * 100, writable=True)
        expected: list[tuple[int, int]] = []
        for ts, offset in appends:
            index.maybe_append(ts, offset)
            if not expected or ts > expected[-1][0]:
                expected.append((ts, offset))
        assert index.all_entries() == expected
        assert index.last_entry() == (expected[-1] if expected else (-1, base))
        for probe in probes + [ts - BASE_TS for ts, _ in expected]:
            target = BASE_TS + probe
            assert index.lookup(target) == floor_reference(expected, target, (-1, base))
        index.close()
        assert path.read_bytes() == b"".join(TIME_ENTRY.pack(t, o - base) for t, o in expected)


@given(time_appends(), st.integers(0, 3000))
@settings(max_examples=60, deadline=None)
def test_time_index_truncate_to(data: tuple[int, list[tuple[int, int]]], probe: int) -> None:
    base, appends = data
    with tempfile.TemporaryDirectory() as tmp:
        index = TimeIndex(Path(tmp) / seg_name(base, ".timeindex"), base, 12 * 100,
                          writable=True)
        for ts, offset in appends:
            index.maybe_append(ts, offset)
        entries = index.all_entries()
        target = base + probe
        index.truncate_to(target)
        assert index.all_entries() == [e for e in entries if e[1] < target]
        index.close()


def test_time_index_file_format_preallocation_and_trim(tmp_path: Path) -> None:
    path = tmp_path / seg_name(50, ".timeindex")
    index = TimeIndex(path, 50, 100, writable=True)  # 100 bytes: 8 entries of 12
    assert index.max_entries == 8
    assert path.stat().st_size == 96
    index.maybe_append(BASE_TS + 10, 52)
    index.maybe_append(BASE_TS + 10, 55)  # not above the last timestamp: skipped
    index.maybe_append(BASE_TS + 5, 56)  # lower: skipped
    index.maybe_append(BASE_TS + 30, 60)
    with pytest.raises(ValueError):
        index.maybe_append(BASE_TS + 40, 59)  # offsets never go back
    index.close()
    assert path.read_bytes() == TIME_ENTRY.pack(BASE_TS + 10, 2) + TIME_ENTRY.pack(BASE_TS + 30, 10)
    sealed = TimeIndex(path, 50, 100, writable=False)
    assert sealed.all_entries() == [(BASE_TS + 10, 52), (BASE_TS + 30, 60)]
    assert sealed.lookup(BASE_TS + 29) == (BASE_TS + 10, 52)
    assert sealed.lookup(BASE_TS + 9) == (-1, 50)
    sealed.close()


def test_time_index_skips_no_timestamp_on_empty_index(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / seg_name(0, ".timeindex"), 0, 120, writable=True)
    index.maybe_append(-1, 0)
    assert index.entries == 0
    index.close()


def test_time_index_full_reserves_the_last_slot(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / seg_name(0, ".timeindex"), 0, 36, writable=True)
    assert index.max_entries == 3
    index.maybe_append(BASE_TS + 1, 1)
    index.maybe_append(BASE_TS + 2, 2)
    assert index.is_full
    index.maybe_append(BASE_TS + 3, 3, skip_full_check=True)  # the closing entry has room
    assert index.entries == 3
    index.close()


def test_segment_indexes_are_preallocated_while_active_and_trimmed_on_close(make_log) -> None:
    log = make_log(segment_index_bytes=1000, index_interval_bytes=0)
    for i in range(6):
        log.append_as_leader(build_batch(2, BASE_TS + i), leader_epoch=0, now=BASE_TS)
    directory = log.directory
    index_path = directory / seg_name(0, ".index")
    time_path = directory / seg_name(0, ".timeindex")
    assert index_path.stat().st_size == 1000 // 8 * 8
    assert time_path.stat().st_size == 1000 // 12 * 12
    log.close()
    # Batch i (of 2 records) is indexed from the second batch on: its last offset 2i + 1.
    size = len(build_batch(2))
    assert index_path.read_bytes() == b"".join(
        OFFSET_ENTRY.pack(2 * i + 1, size * i) for i in range(1, 6))
    assert time_path.read_bytes() == b"".join(
        TIME_ENTRY.pack(BASE_TS + i, 2 * i + 1) for i in range(1, 6))


def test_an_index_left_preallocated_by_a_crash_is_read_only_as_far_as_written(
    tmp_path: Path,
) -> None:
    """After a crash the active index is still its preallocated 10 MiB, mostly a hole;
    start-up reads the written blocks only (it read all of it: six minutes for 10,000
    partitions in a cluster)."""
    path = tmp_path / seg_name(0, ".index")
    max_bytes = 10 << 20
    index = OffsetIndex(path, 0, max_bytes, writable=True)
    for i in range(5):
        index.append(10 * i, 100 * i)
    index.flush()
    index.drop()  # the crash: no trim
    assert path.stat().st_size == max_bytes
    reopened = OffsetIndex(path, 0, max_bytes, writable=True)
    assert reopened.all_entries()[:5] == [(10 * i, 100 * i) for i in range(5)]
    assert reopened.entries * 8 <= 64 << 10  # the written blocks, not 10 MiB of zeros
    assert path.stat().st_size == max_bytes  # still preallocated for appends
