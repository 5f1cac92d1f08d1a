"""Segment rolling: Kafka's four conditions, each on its own, and the files they leave."""

from __future__ import annotations

import struct

import pytest

from josefk.log.clock import now_ms
from josefk.log.log import Log
from josefk.log.segment import INT32_MAX

from .conftest import BASE_TS, assert_valid_prefix, build_batch, files_with, log_batches, seg_name

SIZE = len(build_batch(1))


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_batches_are_the_same_size() -> None:
    assert all(len(build_batch(1, BASE_TS + i)) == SIZE for i in range(100))


@pytest.mark.parametrize(("segment_bytes", "per_segment"), [
    (3 * SIZE, 3), (3 * SIZE - 1, 2), (3 * SIZE + SIZE - 1, 3), (4 * SIZE, 4)])
def test_roll_on_segment_bytes(make_log, segment_bytes: int, per_segment: int) -> None:
    log = make_log(segment_bytes=segment_bytes)
    for i in range(10):
        info = log.append_as_leader(build_batch(1, BASE_TS), leader_epoch=0, now=BASE_TS)
        assert info.first_offset == i
    expected = list(range(0, 10, per_segment))
    assert bases(log) == expected
    assert files_with(log.directory, ".log") == [seg_name(b) for b in expected]
    assert files_with(log.directory, ".index") == [seg_name(b, ".index") for b in expected]
    assert files_with(log.directory, ".timeindex") == [seg_name(b, ".timeindex") for b in expected]
    for segment in log.segments[:-1]:
        assert segment.size == per_segment * SIZE
        assert (log.directory / seg_name(segment.base_offset)).stat().st_size == segment.size
    assert log.log_end_offset == 10
    assert_valid_prefix(log)


def test_rolled_segment_indexes_are_trimmed(make_log) -> None:
    log = make_log(segment_bytes=4 * SIZE, index_interval_bytes=0)
    for i in range(6):
        log.append_as_leader(build_batch(1, BASE_TS + i), leader_epoch=0, now=BASE_TS)
    assert bases(log) == [0, 4]
    directory = log.directory
    # Offsets 1..3 were indexed; the closing time entry equals the last one.
    assert (directory / seg_name(0, ".index")).read_bytes() == b"".join(
        struct.pack(">ii", i, i * SIZE) for i in (1, 2, 3))
    assert (directory / seg_name(0, ".timeindex")).read_bytes() == b"".join(
        struct.pack(">qi", BASE_TS + i, i) for i in (1, 2, 3))
    # The new active segment's indexes are preallocated again.
    assert (directory / seg_name(4, ".index")).stat().st_size == 10 * 1024 * 1024


def test_roll_on_segment_ms_measured_from_the_first_batch(make_log) -> None:
    log = make_log(segment_ms=1000)
    append = log.append_as_leader
    append(build_batch(1, BASE_TS), leader_epoch=0, now=BASE_TS)
    # The wall clock does not matter while batches carry timestamps.
    append(build_batch(1, BASE_TS + 900), leader_epoch=0, now=BASE_TS + 10**9)
    append(build_batch(1, BASE_TS + 1000), leader_epoch=0, now=BASE_TS)
    assert bases(log) == [0]
    # 1001 ms after the *first* batch of the segment (not the previous one): roll.
    append(build_batch(1, BASE_TS + 1001), leader_epoch=0, now=BASE_TS)
    assert bases(log) == [0, 3]
    append(build_batch(1, BASE_TS + 2001), leader_epoch=0, now=BASE_TS)
    assert bases(log) == [0, 3]
    append(build_batch(1, BASE_TS + 2002), leader_epoch=0, now=BASE_TS)
    assert bases(log) == [0, 3, 5]
    assert files_with(log.directory, ".log") == [seg_name(0), seg_name(3), seg_name(5)]


def test_segment_ms_uses_the_max_timestamp_of_the_incoming_batch(make_log) -> None:
    log = make_log(segment_ms=1000)
    log.append_as_leader(build_batch(1, BASE_TS), leader_epoch=0, now=BASE_TS)
    log.append_as_leader(build_batch(timestamp=[BASE_TS, BASE_TS + 5000, BASE_TS]),
                         leader_epoch=0, now=BASE_TS)
    assert bases(log) == [0, 1]


def test_segment_ms_survives_a_reopen(make_log) -> None:
    log = make_log(segment_ms=1000)
    log.append_as_leader(build_batch(1, BASE_TS), leader_epoch=0, now=BASE_TS)
    log.append_as_leader(build_batch(1, BASE_TS + 500), leader_epoch=0, now=BASE_TS)
    log.close()
    log = make_log(segment_ms=1000, open_kwargs={"clean_shutdown": True, "recovery_point": 2})
    log.append_as_leader(build_batch(1, BASE_TS + 1001), leader_epoch=0, now=BASE_TS)
    assert bases(log) == [0, 2]


def test_segment_ms_does_not_roll_an_empty_segment(make_log) -> None:
    log = make_log(segment_ms=1000)
    log.append_as_leader(build_batch(1, BASE_TS + 10**9), leader_epoch=0, now=BASE_TS + 10**9)
    assert bases(log) == [0]


def test_segment_ms_without_timestamps_uses_the_segment_creation_time(make_log) -> None:
    log = make_log(segment_ms=60_000)
    log.append_as_leader(build_batch(1, -1), leader_epoch=0, now=now_ms())
    log.append_as_leader(build_batch(1, -1), leader_epoch=0, now=now_ms())
    assert bases(log) == [0]
    log.append_as_leader(build_batch(1, -1), leader_epoch=0, now=now_ms() + 120_000)
    assert bases(log) == [0, 2]


def test_segment_ms_with_log_append_time_uses_now(make_log) -> None:
    log = make_log(segment_ms=1000, message_timestamp_type="LogAppendTime")
    log.append_as_leader(build_batch(1, 0), leader_epoch=0, now=BASE_TS)
    log.append_as_leader(build_batch(1, 0), leader_epoch=0, now=BASE_TS + 1000)
    assert bases(log) == [0]
    log.append_as_leader(build_batch(1, 0), leader_epoch=0, now=BASE_TS + 1001)
    assert bases(log) == [0, 2]


def test_roll_when_offset_index_is_full(make_log) -> None:
    # 40 bytes: 5 offset entries, 3 time entries; constant timestamps add one time entry.
    log = make_log(segment_index_bytes=40, index_interval_bytes=0)
    for _ in range(14):
        log.append_as_leader(build_batch(1, BASE_TS), leader_epoch=0, now=BASE_TS)
    # Batch 0 is never indexed, batches 1..5 fill the 5 entries: the next batch rolls.
    assert bases(log) == [0, 6, 12]
    assert (log.directory / seg_name(0, ".index")).stat().st_size == 40
    assert (log.directory / seg_name(6, ".index")).stat().st_size == 40
    # One time entry: the max timestamp, first seen at offset 0.
    assert (log.directory / seg_name(0, ".timeindex")).read_bytes() == struct.pack(
        ">qi", BASE_TS, 0)
    assert_valid_prefix(log)


def test_roll_when_time_index_is_full(make_log) -> None:
    # 40 bytes: 5 offset entries, 3 time entries; rising timestamps fill the time index first.
    log = make_log(segment_index_bytes=40, index_interval_bytes=0)
    for i in range(12):
        log.append_as_leader(build_batch(1, BASE_TS + i), leader_epoch=0, now=BASE_TS)
    first = log.segments[0]
    assert len(log.segments) > 1
    assert not first.offset_index.is_full  # the time index caused the roll
    last = log.segments[1].base_offset - 1
    entries = first.time_index.all_entries()
    assert 2 <= len(entries) <= 3
    assert entries[-1] == (BASE_TS + last, last)
    assert_valid_prefix(log)


def test_roll_when_time_index_is_full_at_kafkas_boundary(make_log) -> None:
    log = make_log(segment_index_bytes=40, index_interval_bytes=0)
    for i in range(7):
        log.append_as_leader(build_batch(1, BASE_TS + i), leader_epoch=0, now=BASE_TS)
    # Kafka: full at max_entries - 1 = 2 entries (batches 1, 2), so batch 3 starts a segment.
    assert bases(log) == [0, 3, 6]


def test_roll_on_relative_offset_overflow(make_log) -> None:
    log = make_log()
    log.append_as_follower(build_batch(1, BASE_TS, base_offset=0))
    log.append_as_follower(build_batch(1, BASE_TS, base_offset=INT32_MAX))
    assert bases(log) == [0]  # relative offset INT32_MAX still fits
    log.append_as_follower(build_batch(1, BASE_TS, base_offset=INT32_MAX + 1))
    assert bases(log) == [0, INT32_MAX + 1]
    log.append_as_follower(build_batch(1, BASE_TS, base_offset=(1 << 32) + 5))
    assert bases(log) == [0, INT32_MAX + 1, (1 << 32) + 5]
    assert files_with(log.directory, ".log") == [
        "00000000000000000000.log", "00000000002147483648.log", "00000000004294967301.log"]
    assert log.log_end_offset == (1 << 32) + 6
    assert [h.base_offset for h in log_batches(log)] == [0, INT32_MAX, INT32_MAX + 1,
                                                         (1 << 32) + 5]
    assert log.read(INT32_MAX, 1 << 20).read_bytes() == bytes(
        build_batch(1, BASE_TS, base_offset=INT32_MAX))


def test_roll_on_overflow_of_the_last_offset_of_a_batch(make_log) -> None:
    log = make_log()
    log.append_as_follower(build_batch(1, BASE_TS, base_offset=0))
    log.append_as_follower(build_batch(3, BASE_TS, base_offset=INT32_MAX - 1))
    # The batch's last offset INT32_MAX + 1 does not fit segment 0: it starts a new one.
    assert bases(log) == [0, INT32_MAX - 1]
    assert log.log_end_offset == INT32_MAX + 2


def test_overflow_after_truncate_fully_and_start_at(make_log) -> None:
    log = make_log()
    log.append_as_leader(build_batch(2), leader_epoch=0, now=BASE_TS)
    log.truncate_fully_and_start_at((1 << 31) + 5)
    assert files_with(log.directory, ".log") == ["00000000002147483653.log"]
    info = log.append_as_leader(build_batch(2), leader_epoch=0, now=BASE_TS)
    assert (info.first_offset, info.last_offset) == ((1 << 31) + 5, (1 << 31) + 6)
    assert bases(log) == [(1 << 31) + 5]
    assert log.log_start_offset == (1 << 31) + 5


def test_roll_from_an_empty_active_segment_keeps_segments_and_files_in_step(make_log) -> None:
    log = make_log()
    log.append_as_follower(build_batch(1, BASE_TS, base_offset=(1 << 31) + 5))
    assert log.log_end_offset == (1 << 31) + 6
    on_disk = [int(name[:20]) for name in files_with(log.directory, ".log")]
    assert bases(log) == on_disk
    start = log.log_start_offset
    log.close()
    reopened = Log.open(log.directory, log.config, log_start_offset=start,
                        clean_shutdown=True, recovery_point=(1 << 31) + 6)
    try:
        assert bases(reopened) == on_disk
        assert reopened.log_start_offset == start
    finally:
        reopened.close()


def test_retention_after_a_roll_from_an_empty_active_segment(make_log) -> None:
    log = make_log()
    log.append_as_follower(build_batch(1, BASE_TS, base_offset=(1 << 31) + 5))
    log.high_watermark = log.log_end_offset
    assert log.enforce_retention(now=BASE_TS + 10**12) >= 1
    assert bases(log) == [(1 << 31) + 6]
    assert files_with(log.directory, ".log") == [seg_name((1 << 31) + 6)]


def test_multi_batch_append_that_fills_the_index(make_log) -> None:
    log = make_log(segment_index_bytes=40, index_interval_bytes=0)
    data = b"".join(build_batch(1, BASE_TS + i) for i in range(8))
    info = log.append_as_leader(data, leader_epoch=0, now=BASE_TS)
    assert (info.first_offset, info.last_offset) == (0, 7)
    assert log.log_end_offset == 8
    assert_valid_prefix(log)
