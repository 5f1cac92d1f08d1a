"""Reads by offset (fetch) and lookups by timestamp (ListOffsets)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from josefk.log.config import LogConfig
from josefk.log.index import base as index_module
from josefk.log.log import Log, OffsetOutOfRangeError
from josefk.log.segment import TimestampOffset
from josefk.protocol.record_batch import BatchHeader, parse_header

from .conftest import BASE_TS, GZIP, NONE, build_batch, log_records, seg_name, slice_headers

COUNTS = [1, 3, 2, 4, 1, 2, 3, 1, 4, 2, 2, 3]


def fill(log: Log) -> list[tuple[BatchHeader, bytes]]:
    """Append batches of COUNTS records; returns each batch's header and bytes as stored."""
    out = []
    for i, count in enumerate(COUNTS):
        info = log.append_as_leader(build_batch(count, BASE_TS + i), leader_epoch=1, now=BASE_TS)
        segment = log.segments[log._segment_index_for(info.first_offset)]
        found = segment.translate_offset(info.first_offset)
        assert found is not None
        position, header = found
        out.append((header, segment.pread(position, header.size)))
    return out


@pytest.fixture
def filled(make_log) -> tuple[Log, list[tuple[BatchHeader, bytes]]]:
    log = make_log(segment_bytes=700, index_interval_bytes=100)
    batches = fill(log)
    assert len(log.segments) >= 3
    return log, batches


def holding(batches: list[tuple[BatchHeader, bytes]], offset: int) -> tuple[BatchHeader, bytes]:
    return next((h, b) for h, b in batches if h.base_offset <= offset <= h.last_offset)


def segment_tail(log: Log, batches: list[tuple[BatchHeader, bytes]], header: BatchHeader
                 ) -> list[tuple[BatchHeader, bytes]]:
    """The batches from ``header`` to the end of its segment."""
    i = log._segment_index_for(header.base_offset)
    end = log.segments[i + 1].base_offset if i + 1 < len(log.segments) else log.log_end_offset
    return [(h, b) for h, b in batches if header.base_offset <= h.base_offset < end]


def test_read_returns_the_whole_batch_holding_each_offset(filled) -> None:
    log, batches = filled
    assert log.log_end_offset == sum(COUNTS)
    for offset in range(log.log_end_offset):
        header, data = holding(batches, offset)
        fetch = log.read(offset, 1)  # below one batch: the first batch is returned whole
        assert fetch.read_bytes() == data
        assert fetch.length == header.size


def test_read_stays_within_one_segment(filled) -> None:
    log, batches = filled
    for header, _ in batches:
        tail = segment_tail(log, batches, header)
        fetch = log.read(header.base_offset + header.last_offset_delta, 1 << 20)
        assert fetch.read_bytes() == b"".join(b for _, b in tail)
        assert fetch.segment is log.segments[log._segment_index_for(header.base_offset)]


@pytest.mark.parametrize("extra", [0, 1, 37, 61, 200])
def test_read_is_bounded_by_max_bytes(filled, extra: int) -> None:
    log, batches = filled
    for header, _ in batches:
        tail = b"".join(b for _, b in segment_tail(log, batches, header))
        max_bytes = header.size + extra
        fetch = log.read(header.base_offset, max_bytes)
        assert fetch.length == min(max_bytes, len(tail))
        assert fetch.read_bytes() == tail[:fetch.length]  # may end in a partial batch


def test_read_without_min_one_message(filled) -> None:
    log, batches = filled
    header, data = batches[3]
    fetch = log.read(header.base_offset, 10, min_one_message=False)
    assert fetch.read_bytes() == data[:10]
    assert log.read(header.base_offset, 0, min_one_message=False).length == 0
    assert log.read(header.base_offset, 0).read_bytes() == data


def test_read_is_bounded_by_max_offset(filled) -> None:
    log, batches = filled
    for high_watermark in [h.base_offset for h, _ in batches] + [log.log_end_offset]:
        for header, _ in batches:
            fetch = log.read(header.base_offset, 1 << 20, max_offset=high_watermark)
            expected = [h for h, _ in segment_tail(log, batches, header)
                        if h.last_offset < high_watermark]
            assert [(h.base_offset, h.crc) for h in slice_headers(fetch)] == [
                (h.base_offset, h.crc) for h in expected]
            assert fetch.length == sum(h.size for h in expected)


def test_batch_straddling_the_high_watermark_is_not_returned(filled) -> None:
    log, batches = filled
    header = next(h for h, _ in batches if h.record_count >= 3)
    for high_watermark in range(header.base_offset, header.last_offset + 1):
        assert log.read(header.base_offset, 1 << 20, max_offset=high_watermark).length == 0
    assert log.read(header.base_offset, 1, max_offset=header.next_offset).length == header.size


def test_read_out_of_range_and_at_the_log_end(filled) -> None:
    log, batches = filled
    leo = log.log_end_offset
    assert log.read(leo, 1 << 20).length == 0
    assert log.read(leo, 1 << 20).read_bytes() == b""
    for offset in (leo + 1, leo + 1000, -1):
        with pytest.raises(OffsetOutOfRangeError) as info:
            log.read(offset, 1 << 20)
        assert info.value.error_code == 1
    log.high_watermark = leo
    assert batches[3][0].record_count == 4
    start = batches[3][0].base_offset + 1
    log.delete_records(start)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(start - 1, 1 << 20)
    # The batch holding the new log start offset is returned whole.
    assert log.read(start, 1).read_bytes() == batches[3][1]


def test_read_across_segment_boundaries(filled) -> None:
    log, batches = filled
    for segment in log.segments[1:]:
        previous = segment.base_offset - 1
        header, data = holding(batches, previous)
        assert log.read(previous, 1 << 20).read_bytes() == data  # the last batch of a segment
        first = log.read(segment.base_offset, 1)
        assert parse_header(first.read_bytes()).base_offset == segment.base_offset
        assert first.segment is segment
    assert [s.log_path.name for s in log.segments] == [
        seg_name(s.base_offset) for s in log.segments]


def test_read_an_empty_log(make_log) -> None:
    log = make_log()
    assert log.read(0, 1 << 20).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1 << 20)
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None


# --- timestamps ----------------------------------------------------------------------


def brute_force(records: list[tuple[int, int]], target: int, start: int = 0
                ) -> TimestampOffset | None:
    """The first record (in offset order) at or above ``start`` with timestamp >= target."""
    for offset, timestamp in records:
        if offset >= start and timestamp >= target:
            return TimestampOffset(timestamp, offset)
    return None


def brute_max(records: list[tuple[int, int]]) -> TimestampOffset:
    best = max(ts for _, ts in records)
    return next(TimestampOffset(ts, o) for o, ts in records if ts == best)


batch_specs = st.lists(
    st.tuples(st.lists(st.integers(0, 60), min_size=1, max_size=4), st.sampled_from([NONE, GZIP])),
    min_size=1, max_size=25)


@given(specs=batch_specs, index_interval=st.integers(0, 400), segment_bytes=st.integers(600, 2000))
@settings(max_examples=40, deadline=None)
def test_offset_for_timestamp_matches_a_brute_force_scan(
    specs: list[tuple[list[int], int]], index_interval: int, segment_bytes: int
) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval)
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", config)
        try:
            for deltas, codec in specs:
                log.append_as_leader(build_batch(timestamp=[BASE_TS + d for d in deltas],
                                                 compression=codec, value_size=100),
                                     leader_epoch=0, now=BASE_TS)
            records = log_records(log)
            assert [o for o, _ in records] == list(range(log.log_end_offset))
            for target in range(BASE_TS - 1, BASE_TS + 62):
                assert log.offset_for_timestamp(target) == brute_force(records, target), target
            assert log.max_timestamp_offset() == brute_max(records)
        finally:
            log.close()


def test_offset_for_timestamp_after_reopen_and_delete_records(make_log) -> None:
    log = make_log(segment_bytes=600, index_interval_bytes=50)
    stamps = [50, 10, 70, 30, 30, 90, 20, 80, 60, 40, 100, 5]
    for i, ts in enumerate(stamps):
        log.append_as_leader(build_batch(timestamp=[BASE_TS + ts, BASE_TS + ts - 1],
                                         compression=GZIP if i % 2 else NONE, value_size=100),
                             leader_epoch=0, now=BASE_TS)
    records = log_records(log)
    assert len(log.segments) >= 3
    directory, config, leo = log.directory, log.config, log.log_end_offset
    log.close()
    log = Log.open(directory, config, clean_shutdown=True, recovery_point=leo)
    try:
        for target in range(BASE_TS, BASE_TS + 102):
            assert log.offset_for_timestamp(target) == brute_force(records, target)
        assert log.max_timestamp_offset() == TimestampOffset(BASE_TS + 100, 20)
        log.high_watermark = leo
        log.delete_records(7)
        for target in range(BASE_TS, BASE_TS + 102):
            assert log.offset_for_timestamp(target) == brute_force(records, target, start=7)
    finally:
        log.close()


def test_max_timestamp_offset_is_the_record_not_the_batch(make_log) -> None:
    log = make_log(segment_bytes=400)
    log.append_as_leader(build_batch(timestamp=[BASE_TS + 1, BASE_TS + 9, BASE_TS + 2]),
                         leader_epoch=0, now=BASE_TS)
    for _ in range(4):
        log.append_as_leader(build_batch(timestamp=[BASE_TS + 3, BASE_TS + 9, BASE_TS + 9]),
                             leader_epoch=0, now=BASE_TS)
    assert len(log.segments) > 1
    # The first record with the largest timestamp: offset 1, inside the first batch.
    assert log.max_timestamp_offset() == TimestampOffset(BASE_TS + 9, 1)
    assert log.offset_for_timestamp(BASE_TS + 3) == TimestampOffset(BASE_TS + 9, 1)
    assert log.offset_for_timestamp(BASE_TS + 10) is None


@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_log_append_time(make_log, codec: int) -> None:
    log = make_log(message_timestamp_type="LogAppendTime",
                   segment_bytes=1000 if codec == NONE else 300)
    appends = [(3, BASE_TS + 500), (2, BASE_TS + 100), (4, BASE_TS + 900), (1, BASE_TS + 900)]
    first_offsets = []
    for count, now in appends:
        info = log.append_as_leader(
            build_batch(timestamp=[7, 3, 9, 1][:count], compression=codec, value_size=100),
            leader_epoch=0, now=now)
        assert (info.log_append_time, info.max_timestamp) == (now, now)
        first_offsets.append(info.first_offset)
    assert len(log.segments) > 1
    for segment in log.segments:
        for position, header in segment.batches_from(0):
            assert header.is_log_append_time
            assert header.compression == codec
            batch = DefaultRecordBatch(segment.pread(position, header.size))
            assert batch.validate_crc()
            assert {r.timestamp for r in batch} == {header.max_timestamp}
    expected_stamps = [now for count, now in appends for _ in range(count)]
    assert [ts for _, ts in log_records(log)] == expected_stamps
    assert log.offset_for_timestamp(BASE_TS) == TimestampOffset(BASE_TS + 500, 0)
    assert log.offset_for_timestamp(BASE_TS + 501) == TimestampOffset(BASE_TS + 900, 5)
    assert log.offset_for_timestamp(BASE_TS + 901) is None
    assert log.max_timestamp_offset() == TimestampOffset(BASE_TS + 900, first_offsets[2])


def test_create_time_is_kept_as_sent(make_log) -> None:
    log = make_log()
    info = log.append_as_leader(build_batch(timestamp=[BASE_TS + 5, BASE_TS + 2]),
                                leader_epoch=0, now=BASE_TS + 10**6)
    assert (info.log_append_time, info.max_timestamp, info.offset_of_max_timestamp) == (
        -1, BASE_TS + 5, 1)
    assert log_records(log) == [(0, BASE_TS + 5), (1, BASE_TS + 2)]


def test_reads_survive_evicted_indexes(make_log, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sealed indexes are dropped from memory past a budget; lookups must read them again."""
    monkeypatch.setattr(index_module, "SEALED_CACHE_BYTES", 40)
    log = make_log(segment_bytes=500, index_interval_bytes=50)
    for i in range(60):
        log.append_as_leader(build_batch(1 + i % 3, BASE_TS + (i * 37) % 100), leader_epoch=0,
                             now=BASE_TS)
    leo, directory, config = log.log_end_offset, log.directory, log.config
    log.close()
    log = Log.open(directory, config, clean_shutdown=True, recovery_point=leo)
    try:
        assert len(log.segments) > 10
        records = log_records(log)
        for offset in range(0, leo, 3):
            base = parse_header(log.read(offset, 1).read_bytes()).base_offset
            assert base <= offset < base + 3
        for target in range(BASE_TS - 1, BASE_TS + 101, 3):
            assert log.offset_for_timestamp(target) == brute_force(records, target)
    finally:
        log.close()


@pytest.mark.parametrize("end_cut", [0, 1, 70])
def test_walking_batch_headers_reads_many_small_ones_at_once(make_log, monkeypatch,
                                                              end_cut: int) -> None:
    """The headers walked are those read one by one, ``end`` cutting a batch off; small
    batches come many to a read, a large batch costs one header-sized read."""
    log = make_log(segment_bytes=10**7)
    sizes = [64] * 400 + [30_000, 64, 30_000, 30_000] + [64] * 200
    for value_size in sizes:
        log.append_as_leader(build_batch(value_size=value_size), leader_epoch=0, now=BASE_TS)
    [segment] = log.segments
    one_by_one, position = [], 0
    while position < segment.size:
        header = parse_header(segment.pread(position, 61))
        one_by_one.append((position, header))
        position += header.size
    end = segment.size - end_cut
    expected = [(p, h) for p, h in one_by_one if p + h.size <= end]
    reads: list[int] = []
    real_pread = segment.pread
    monkeypatch.setattr(segment, "pread", lambda at, n: reads.append(n) or real_pread(at, n))
    assert list(segment.batches_from(0, end)) == expected
    small_bytes = sum(h.size for _, h in one_by_one if h.size < 8192)
    assert len(reads) <= small_bytes // 8192 + 2 + 3 * 2  # each large batch: at most 2 reads
    assert 61 in reads  # the header after a large batch, read alone
