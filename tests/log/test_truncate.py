"""Follower truncation (``truncate_to``) and restarting a log (``truncate_fully_and_start_at``)."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.log.config import LogConfig
from josefk.log.log import Log

from .conftest import BASE_TS, assert_valid_prefix, build_batch, files_with, log_batches, seg_name

OFFSET_ENTRY = struct.Struct(">ii")


def offset_index_entries(log: Log) -> dict[int, list[tuple[int, int]]]:
    """The absolute (offset, position) entries of every segment's offset index."""
    return {s.base_offset: s.offset_index.all_entries() for s in log.segments}


def expected_offset_index(log: Log, interval: int) -> dict[int, list[tuple[int, int]]]:
    """Kafka's rule, from the batches: index batch b if more than ``interval`` bytes were
    appended since the previous entry (the first batch of a segment never is)."""
    out = {}
    for segment in log.segments:
        entries, since = [], 0
        for position, header in segment.batches_from(0):
            if since > interval:
                entries.append((header.last_offset, position))
                since = 0
            since += header.size
        out[segment.base_offset] = entries
    return out


@given(counts=st.lists(st.integers(1, 4), min_size=1, max_size=30),
       cut=st.integers(0, 130), more=st.lists(st.integers(1, 4), max_size=6),
       interval=st.integers(0, 300))
@settings(max_examples=50, deadline=None)
def test_truncate_to_any_offset(counts: list[int], cut: int, more: list[int],
                                interval: int) -> None:
    config = LogConfig(segment_bytes=700, index_interval_bytes=interval)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = Log.open(directory, config)
        try:
            for i, count in enumerate(counts):
                log.append_as_leader(build_batch(count, BASE_TS + i), leader_epoch=i // 3,
                                     now=BASE_TS)
            before = log_batches(log)
            target = cut % (log.log_end_offset + 2)
            log.high_watermark = log.log_end_offset
            log.truncate_to(target)
            kept = [h for h in before if h.last_offset < target]
            leo = kept[-1].next_offset if kept else 0
            assert log.log_end_offset == leo
            assert log.high_watermark == leo
            assert [(h.base_offset, h.crc) for h in log_batches(log)] == [
                (h.base_offset, h.crc) for h in kept]
            assert files_with(directory, ".log") == [seg_name(s.base_offset) for s in log.segments]
            assert all(e[1] < leo for e in log.leader_epochs.entries)
            assert offset_index_entries(log) == expected_offset_index(log, interval)
            for i, count in enumerate(more):
                info = log.append_as_leader(build_batch(count, BASE_TS + 100 + i),
                                            leader_epoch=50, now=BASE_TS)
                assert info.first_offset == leo
                leo += count
            assert_valid_prefix(log)
            assert offset_index_entries(log) == expected_offset_index(log, interval)
            for header in log_batches(log):
                fetched = log.read(header.base_offset, 1).read_bytes()
                assert struct.unpack_from(">q", fetched)[0] == header.base_offset
            for segment in log.segments:
                segment.time_index.sanity_check(segment.read_next_offset())
        finally:
            log.close()
        # The truncated log reopens (uncleanly) to the same state.
        log = Log.open(directory, config, recovery_point=0)
        try:
            assert log.log_end_offset == leo
            assert offset_index_entries(log) == expected_offset_index(log, interval)
        finally:
            log.close()


def test_truncate_to_a_segment_base_drops_that_segment(make_log) -> None:
    log = make_log(segment_bytes=3 * len(build_batch(1)))
    for _ in range(9):
        log.append_as_leader(build_batch(1), leader_epoch=0, now=BASE_TS)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    log.truncate_to(3)
    assert log.log_end_offset == 3
    assert files_with(log.directory, ".log") == [seg_name(0)]
    assert log.active_segment.offset_index.writable
    assert log.append_as_leader(build_batch(1), leader_epoch=0, now=BASE_TS).first_offset == 3
    assert [h.base_offset for h in log_batches(log)] == [0, 1, 2, 3]


def test_truncate_at_or_past_the_end_is_a_no_op(make_log) -> None:
    log = make_log()
    log.append_as_leader(build_batch(3), leader_epoch=0, now=BASE_TS)
    for offset in (3, 4, 100):
        log.truncate_to(offset)
        assert log.log_end_offset == 3
        assert [h.base_offset for h in log_batches(log)] == [0]


def test_truncate_fully_and_start_at(make_log) -> None:
    log = make_log(segment_bytes=400)
    for _ in range(6):
        log.append_as_leader(build_batch(2), leader_epoch=1, now=BASE_TS)
    log.high_watermark = 12
    log.truncate_fully_and_start_at(40)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (
        40, 40, 40, 40)
    assert files_with(log.directory, ".log") == [seg_name(40)]
    assert files_with(log.directory, ".index") == [seg_name(40, ".index")]
    assert log.read(40, 1 << 20).length == 0
    assert log.append_as_leader(build_batch(1), leader_epoch=2, now=BASE_TS).first_offset == 40
    # Truncating below the first segment restarts the log the same way.
    log.truncate_to(7)
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    assert files_with(log.directory, ".log") == [seg_name(7)]


def test_open_an_empty_log_at_a_start_offset(make_log) -> None:
    log = make_log(open_kwargs={"log_start_offset": 50})
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert files_with(log.directory, ".log") == [seg_name(50)]
    assert log.append_as_leader(build_batch(2), leader_epoch=0, now=BASE_TS).first_offset == 50
    log.roll()
    log.roll()  # rolling an empty active segment at the LEO changes nothing
    assert files_with(log.directory, ".log") == [seg_name(50), seg_name(52)]


def test_truncate_at_the_end_drops_an_epoch_with_no_records(make_log) -> None:
    """A replica that became leader (epoch 1 at offset 3) and wrote nothing before it
    followed again must forget epoch 1, or its last fetched epoch diverges from the new
    leader's log forever (found in the mixed Kafka/josefk cluster; Kafka's truncateTo)."""
    log = make_log()
    log.append_as_leader(build_batch(3), leader_epoch=0, now=BASE_TS)
    log.leader_epochs.assign(1, 3)
    assert log.leader_epochs.latest_epoch == 1
    log.truncate_to(3)
    assert log.log_end_offset == 3
    assert log.leader_epochs.entries == [(0, 0)]
