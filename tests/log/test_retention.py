"""Retention by time and size, and DeleteRecords: whole segments only, below the HW."""

from __future__ import annotations

import os

import pytest

from josefk.log.clock import now_ms
from josefk.log.log import Log, OffsetOutOfRangeError

from .conftest import BASE_TS, build_batch, files_with, seg_name

SIZE = len(build_batch(1))
DELAY = 60_000  # file.delete.delay.ms


def fill(log: Log) -> None:
    """Ten one-record batches, three per segment: bases 0, 3, 6, 9; epochs 0, 1, 2.

    Segment k holds timestamps BASE_TS + 10k + (0, 1, 2).
    """
    for i in range(10):
        ts = BASE_TS + 10 * (i // 3) + i % 3
        log.append_as_leader(build_batch(1, ts), leader_epoch=min(i // 3, 2), now=BASE_TS)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]


@pytest.fixture
def filled(make_log):
    def factory(**config) -> Log:
        log = make_log(segment_bytes=3 * SIZE, **config)
        fill(log)
        log.high_watermark = log.log_end_offset
        return log
    return factory


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_retention_ms_deletes_expired_whole_segments(filled) -> None:
    log = filled(retention_ms=100)
    assert log.enforce_retention(now=BASE_TS + 2 + 100) == 0  # not older than retention.ms
    assert log.enforce_retention(now=BASE_TS + 2 + 101) == 1
    assert bases(log) == [3, 6, 9]
    assert log.log_start_offset == 3
    # Segment 1 holds an expired batch (BASE_TS + 10) but its largest timestamp is not.
    assert log.enforce_retention(now=BASE_TS + 12 + 100) == 0
    assert log.enforce_retention(now=BASE_TS + 22 + 101) == 2
    assert bases(log) == [9]
    assert log.log_start_offset == 9
    with pytest.raises(OffsetOutOfRangeError):
        log.read(8, 1 << 20)
    assert log.read(9, 1 << 20).length == SIZE


def test_deleted_segments_are_renamed_then_removed_after_the_delay(filled) -> None:
    log = filled(retention_ms=100)
    directory = log.directory
    assert log.enforce_retention(now=BASE_TS + 12 + 101) == 2
    deleted = [seg_name(b, s) + ".deleted" for b in (0, 3) for s in (".log", ".index",
                                                                       ".timeindex")]
    assert files_with(directory, ".deleted") == sorted(deleted)
    assert files_with(directory, ".log") == [seg_name(6), seg_name(9)]
    log.delete_expired_files(now=BASE_TS + 12 + 101)
    assert files_with(directory, ".deleted") == sorted(deleted)
    log.delete_expired_files(now=BASE_TS + 12 + 101 + DELAY)
    assert files_with(directory, ".deleted") == []
    assert files_with(directory, ".log") == [seg_name(6), seg_name(9)]


def open_files_named(suffix: str) -> list[str]:
    """This process's open descriptors whose file name ends with ``suffix``."""
    names = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
             if os.path.exists(f"/proc/self/fd/{fd}")]
    return [n for n in names if n.removesuffix(" (deleted)").endswith(suffix)]


def test_a_segment_renamed_for_deletion_holds_no_descriptor(filled) -> None:
    """A compacted topic renames segments faster than file.delete.delay.ms removes them:
    their descriptors must not wait for the delay (the soak's descriptor saw-tooth)."""
    log = filled(retention_ms=100)
    held = [log.read(offset, 1 << 20) for offset in (0, 3, 6)]  # descriptors now cached
    assert len(open_files_named(".log")) >= 3
    assert log.enforce_retention(now=BASE_TS + 12 + 101) == 2
    assert open_files_named(".deleted") == []
    # A fetch still holding a renamed segment reads it under its new name.
    first = held[0]
    assert len(first.segment.pread(first.position, first.length)) == first.length == 3 * SIZE


def test_delete_delay_uses_the_callers_clock(filled) -> None:
    log = filled(retention_ms=100)
    now = BASE_TS + 12 + 101
    assert log.enforce_retention(now=now) == 2
    log.delete_expired_files(now=now + DELAY)
    assert files_with(log.directory, ".deleted") == []


def test_retention_never_deletes_above_the_high_watermark(filled) -> None:
    log = filled(retention_ms=100)
    log.high_watermark = 5
    assert log.enforce_retention(now=BASE_TS + 10**6) == 1
    assert bases(log) == [3, 6, 9]
    log.high_watermark = 6  # segment 1 now lies wholly below the high watermark
    assert log.enforce_retention(now=BASE_TS + 10**6) == 1
    assert bases(log) == [6, 9]
    log.high_watermark = 9
    assert log.enforce_retention(now=BASE_TS + 10**6) == 1
    assert bases(log) == [9]  # the active segment is not fully replicated yet


def test_retention_ms_can_delete_the_active_segment(filled) -> None:
    log = filled(retention_ms=100)
    assert log.enforce_retention(now=BASE_TS + 10**6) == 4
    assert bases(log) == [10]
    assert log.log_start_offset == log.log_end_offset == 10
    assert files_with(log.directory, ".log") == [seg_name(10)]
    assert log.read(10, 1 << 20).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 1 << 20)
    info = log.append_as_leader(build_batch(1), leader_epoch=3, now=BASE_TS)
    assert info.first_offset == 10
    assert log.enforce_retention(now=BASE_TS + 10**6) == 0  # now above the high watermark


@pytest.mark.parametrize(("retention_bytes", "remaining"), [
    # A segment goes only if what remains is still at least retention.bytes.
    (10 * SIZE, [0, 3, 6, 9]), (7 * SIZE + 1, [0, 3, 6, 9]), (7 * SIZE, [3, 6, 9]),
    (4 * SIZE + 1, [3, 6, 9]), (4 * SIZE, [6, 9]), (SIZE, [9]), (SIZE - 1, [9]), (0, [10])])
def test_retention_bytes(filled, retention_bytes: int, remaining: list[int]) -> None:
    log = filled(retention_bytes=retention_bytes, retention_ms=-1)
    log.enforce_retention(now=BASE_TS + 10**9)
    assert bases(log) == remaining
    assert log.log_start_offset == remaining[0]
    assert files_with(log.directory, ".log") == [seg_name(b) for b in remaining]


@pytest.mark.parametrize("config", [
    {"retention_ms": -1}, {"retention_ms": 100, "cleanup_policy": "compact"}])
def test_no_time_retention(filled, config: dict) -> None:
    log = filled(**config)
    assert log.enforce_retention(now=BASE_TS + 10**9) == 0
    assert bases(log) == [0, 3, 6, 9]


def test_delete_records_advances_the_log_start_offset(filled) -> None:
    log = filled()
    assert log.delete_records(4) == 4
    assert log.log_start_offset == 4
    assert bases(log) == [3, 6, 9]  # segment 0 lies wholly below offset 4
    assert files_with(log.directory, ".log.deleted") == [seg_name(0) + ".deleted"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 1 << 20)
    assert log.read(4, 1).read_bytes()[:8] == (4).to_bytes(8, "big")
    assert log.leader_epochs.entries == [(1, 4), (2, 6)]
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n2\n1 4\n2 6\n"
    assert log.delete_records(2) == 4  # never backwards
    assert log.delete_records(9) == 9
    assert bases(log) == [9]


def test_delete_records_up_to_the_high_watermark_only(filled) -> None:
    log = filled()
    log.high_watermark = 7
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.delete_records(8)
    assert info.value.error_code == 1
    assert log.log_start_offset == 0
    assert log.delete_records(7) == 7
    assert bases(log) == [6, 9]
    log.high_watermark = 10
    assert log.delete_records(10) == 10
    assert bases(log) == [9]  # the active segment stays
    assert log.read(10, 1 << 20).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 1 << 20)


def test_delete_records_survives_a_reopen(filled) -> None:
    log = filled()
    log.delete_records(5)
    directory, config = log.directory, log.config
    log.close()
    assert files_with(directory, ".deleted") == []
    assert files_with(directory, ".log") == [seg_name(3), seg_name(6), seg_name(9)]
    log = Log.open(directory, config, log_start_offset=5, clean_shutdown=True, recovery_point=10)
    try:
        assert log.log_start_offset == 5
        assert log.log_end_offset == 10
        with pytest.raises(OffsetOutOfRangeError):
            log.read(4, 1 << 20)
        assert log.read(5, 1).read_bytes()[:8] == (5).to_bytes(8, "big")
        assert log.leader_epochs.entries == [(1, 5), (2, 6)]
    finally:
        log.close()
    # Without the checkpointed value the log starts at its first segment.
    log = Log.open(directory, config, clean_shutdown=True, recovery_point=10)
    try:
        assert log.log_start_offset == 3
    finally:
        log.close()


def test_retention_after_delete_records_starts_at_the_next_segment(filled) -> None:
    log = filled(retention_ms=100)
    log.delete_records(1)
    assert bases(log) == [0, 3, 6, 9]
    assert log.enforce_retention(now=BASE_TS + 2 + 101) == 1
    assert log.log_start_offset == 3


def test_segments_without_timestamps_expire_by_file_mtime(make_log) -> None:
    log = make_log(segment_bytes=3 * SIZE, retention_ms=5000)
    for _ in range(7):
        log.append_as_leader(build_batch(1, -1), leader_epoch=0, now=BASE_TS)
    assert bases(log) == [0, 3, 6]
    log.high_watermark = log.log_end_offset
    old = (now_ms() - 10_000) / 1000
    os.utime(log.directory / seg_name(0), (old, old))
    assert log.enforce_retention(now=now_ms()) == 1
    assert bases(log) == [3, 6]


def test_high_watermark_is_clamped_to_the_log(filled) -> None:
    log = filled()
    log.high_watermark = 100
    assert log.high_watermark == 10
    log.delete_records(4)
    log.high_watermark = 2
    assert log.high_watermark == 4


def test_delete_removes_the_directory_with_pending_deletes(filled) -> None:
    log = filled(retention_ms=100)
    assert log.enforce_retention(now=BASE_TS + 12 + 101) == 2
    assert files_with(log.directory, ".deleted")
    log.delete()
    assert not log.directory.exists()
