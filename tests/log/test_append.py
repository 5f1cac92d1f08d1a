"""Appends: offset and epoch assignment, validation, and all-or-nothing writes."""

from __future__ import annotations

import pytest

from josefk.log.log import Log
from josefk.protocol.record_batch import RecordBatchError, parse_header

from .conftest import BASE_TS, build_batch, log_batches, log_records, seg_name


def log_size(log: Log) -> int:
    return (log.directory / seg_name(log.active_segment.base_offset)).stat().st_size


def test_leader_append_assigns_offsets_and_epochs(make_log) -> None:
    log = make_log()
    data = (build_batch(2, BASE_TS + 3, base_offset=77, leader_epoch=9)
            + build_batch(3, BASE_TS + 8, base_offset=0, leader_epoch=-1)
            + build_batch(1, BASE_TS + 5))
    info = log.append_as_leader(data, leader_epoch=4, now=BASE_TS)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (BASE_TS + 8, 4)
    assert (info.log_append_time, info.log_start_offset) == (-1, 0)
    assert [(h.base_offset, h.record_count, h.partition_leader_epoch) for h in info.batches] == [
        (0, 2, 4), (2, 3, 4), (5, 1, 4)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in log_batches(log)] == [
        (0, 4), (2, 4), (5, 4)]
    assert [o for o, _ in log_records(log)] == list(range(6))
    assert log.log_end_offset == 6
    info = log.append_as_leader(build_batch(2), leader_epoch=5, now=BASE_TS)
    assert (info.first_offset, info.last_offset) == (6, 7)


def test_invalid_batches_write_nothing(make_log) -> None:
    log = make_log()
    log.append_as_leader(build_batch(2), leader_epoch=0, now=BASE_TS)
    size = log_size(log)
    corrupt = build_batch(2)
    corrupt[-1] ^= 1
    for data, code in [(build_batch(1) + corrupt, 2), (build_batch(1) + corrupt[:-5], 2),
                       (b"", 87), (b"\x00" * 70, 2)]:
        with pytest.raises(RecordBatchError) as info:
            log.append_as_leader(data, leader_epoch=0, now=BASE_TS)
        assert info.value.error_code == code
        assert log.log_end_offset == 2
        assert log_size(log) == size


def test_size_limits(make_log) -> None:
    batch = build_batch(2)
    log = make_log(max_message_bytes=len(batch), segment_bytes=3 * len(batch))
    log.append_as_leader(batch, leader_epoch=0, now=BASE_TS)  # exactly max.message.bytes
    with pytest.raises(RecordBatchError) as info:
        log.append_as_leader(build_batch(3), leader_epoch=0, now=BASE_TS)
    assert info.value.error_code == 10  # MESSAGE_TOO_LARGE
    with pytest.raises(RecordBatchError) as info:
        log.append_as_leader(batch * 4, leader_epoch=0, now=BASE_TS)
    assert info.value.error_code == 18  # RECORD_LIST_TOO_LARGE
    assert log.log_end_offset == 2
    log.append_as_leader(batch * 3, leader_epoch=0, now=BASE_TS)
    assert log.log_end_offset == 8


def test_follower_append_keeps_offsets_and_epochs(make_log) -> None:
    log = make_log()
    data = build_batch(2, base_offset=0, leader_epoch=3) + build_batch(1, base_offset=5,
                                                                       leader_epoch=4)
    info = log.append_as_follower(bytes(data))
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert log.log_end_offset == 6
    assert [(h.base_offset, h.partition_leader_epoch) for h in log_batches(log)] == [
        (0, 3), (5, 4)]
    assert log.read(3, 1).read_bytes()[:8] == (5).to_bytes(8, "big")  # in the gap
    size = log_size(log)
    with pytest.raises(RecordBatchError):
        log.append_as_follower(bytes(build_batch(1, base_offset=5)))
    assert (log.log_end_offset, log_size(log)) == (6, size)


def test_follower_append_rejects_offsets_out_of_order(make_log) -> None:
    log = make_log()
    data = build_batch(5, base_offset=0) + build_batch(1, base_offset=2)
    with pytest.raises(RecordBatchError):
        log.append_as_follower(bytes(data))
    assert log.log_end_offset == 0
    assert log_size(log) == 0


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_read_only_and_mutable_buffers_write_the_same_bytes(make_log, timestamp_type) -> None:
    """A produce request's bytes are written without a copy (header rewritten apart,
    body from the request buffer); a bytearray is rewritten in place. Same file either way,
    and the request buffer is left as it was."""
    batch = build_batch(3, BASE_TS, base_offset=55, leader_epoch=-1)
    request = memoryview(batch)
    ours = make_log(message_timestamp_type=timestamp_type)
    theirs = make_log(message_timestamp_type=timestamp_type)
    for _ in range(3):
        ours.append_as_leader(request, leader_epoch=7, now=BASE_TS + 10)
        theirs.append_as_leader(bytearray(batch), leader_epoch=7, now=BASE_TS + 10)
    assert bytes(request) == batch
    written = (ours.directory / seg_name(0)).read_bytes()
    assert written == (theirs.directory / seg_name(0)).read_bytes()
    headers = log_batches(ours)
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 7), (3, 7), (6, 7)]
    sent_max = parse_header(batch).max_timestamp
    expected_max = BASE_TS + 10 if timestamp_type == "LogAppendTime" else sent_max
    assert {h.max_timestamp for h in headers} == {expected_max}


def test_produce_appends_take_exactly_one_batch(make_log) -> None:
    """Produce v3+ carries one batch per partition; two are INVALID_RECORD, nothing written."""
    log = make_log()
    with pytest.raises(RecordBatchError) as raised:
        log.append_as_leader(build_batch(1) + build_batch(2), leader_epoch=0, now=BASE_TS,
                             one_batch=True)
    assert raised.value.error_code == 87
    assert log.log_end_offset == 0 and log_size(log) == 0
    info = log.append_as_leader(build_batch(2), leader_epoch=0, now=BASE_TS, one_batch=True)
    assert (info.first_offset, info.last_offset) == (0, 1)
