"""The v2 record batch header codec: parsing, CRC-32C validation, in-place rewrites."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from josefk.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchError,
    assign_offset,
    check_batch,
    compute_crc,
    iter_batches,
    parse_header,
    peek_size,
    set_leader_epoch,
    set_log_append_time,
    validate_batches,
)

from .conftest import BASE_TS, GZIP, LZ4, NONE, SNAPPY, ZSTD, build_batch

HEADER = struct.Struct(">qiibIhiqqqhii")
FIELDS = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
          "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
          "producer_epoch", "base_sequence", "record_count")
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
ATTRIBUTES_AT, LAST_OFFSET_DELTA_AT, MAX_TIMESTAMP_AT, RECORD_COUNT_AT = 21, 23, 35, 57


def refresh_crc(buf: bytearray) -> None:
    """Recompute the CRC of the batch at position 0 after editing a CRC-covered field."""
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))


def flip(buf: bytes | bytearray, bit: int) -> bytearray:
    """A copy of ``buf`` with bit ``bit`` (counted from the first byte's MSB) inverted."""
    out = bytearray(buf)
    out[bit // 8] ^= 0x80 >> (bit % 8)
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_header_fields_match_kafka_python(codec: int) -> None:
    timestamps = [BASE_TS + 5, BASE_TS + 90, BASE_TS + 2]
    buf = build_batch(timestamp=timestamps, compression=codec, base_offset=1234, leader_epoch=7,
                      producer_id=99, producer_epoch=3, base_sequence=40)
    header = parse_header(buf)
    kb = DefaultRecordBatch(bytes(buf))
    assert header.base_offset == 1234 == kb.base_offset
    assert header.batch_length == len(buf) - LOG_OVERHEAD
    assert header.size == len(buf)
    assert header.partition_leader_epoch == 7
    assert header.magic == 2
    assert header.crc == kb.crc
    assert header.compression == codec == kb.compression_type
    assert header.attributes == kb.attributes
    assert header.last_offset_delta == 2
    assert header.record_count == 3
    assert header.base_timestamp == BASE_TS + 5 == kb.first_timestamp
    assert header.max_timestamp == BASE_TS + 90 == kb.max_timestamp
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 3, 40)
    assert header.last_offset == 1236
    assert header.next_offset == 1237
    assert header.last_sequence == 42
    assert not header.is_log_append_time and not header.is_transactional
    assert not header.is_control
    assert header.compression_name == ("none", "gzip", "snappy", "lz4", "zstd")[codec]
    # Round trip: the parsed fields pack back into the exact 61 header bytes.
    assert HEADER.pack(*(getattr(header, f) for f in FIELDS)) == bytes(buf[:HEADER_SIZE])
    assert check_batch(buf) == header


def test_last_sequence_wraps_at_int32_max() -> None:
    header = parse_header(build_batch(3, producer_id=1, producer_epoch=0,
                                      base_sequence=(1 << 31) - 2))
    assert header.last_sequence == 0
    assert parse_header(build_batch(3)).last_sequence == -1


@given(codec=st.sampled_from(CODECS), count=st.integers(1, 20),
       base_offset=st.integers(0, (1 << 62)), epoch=st.integers(-1, (1 << 31) - 1))
@settings(max_examples=60, deadline=None)
def test_crc_matches_and_offset_epoch_rewrites_keep_it_valid(
    codec: int, count: int, base_offset: int, epoch: int
) -> None:
    buf = build_batch(count, compression=codec)
    crc = parse_header(buf).crc
    assert compute_crc(buf, 0, len(buf)) == crc
    assign_offset(buf, 0, base_offset)
    set_leader_epoch(buf, 0, epoch)
    header = check_batch(buf)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (
        base_offset, epoch, crc)
    kb = DefaultRecordBatch(bytes(buf))
    assert kb.validate_crc()
    assert [r.offset for r in kb] == list(range(base_offset, base_offset + count))


@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_every_flipped_bit_in_crc_region_is_corrupt(codec: int) -> None:
    buf = build_batch(2, compression=codec)
    check_batch(buf)
    for bit in range(ATTRIBUTES_AT * 8, len(buf) * 8):
        with pytest.raises(CorruptRecordError) as info:
            check_batch(flip(buf, bit))
        assert info.value.error_code == 2, bit


def test_flipped_bits_in_crc_and_length_fields_are_corrupt() -> None:
    buf = build_batch(2)
    for bit in list(range(17 * 8, 21 * 8)) + list(range(8 * 8, 12 * 8)):
        with pytest.raises(CorruptRecordError):
            check_batch(flip(buf, bit) + bytes(64))  # room for a grown length


def test_fields_outside_the_crc_do_not_invalidate_it() -> None:
    buf = build_batch(2)
    for bit in list(range(0, 64)) + list(range(96, 128)):
        header = check_batch(flip(buf, bit))
        assert header.crc == parse_header(buf).crc


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_magic_other_than_2_is_rejected(magic: int) -> None:
    buf = build_batch(2)
    buf[16] = magic
    with pytest.raises(RecordBatchError) as info:
        check_batch(buf)
    assert info.value.error_code in (2, 87)
    with pytest.raises(RecordBatchError):
        validate_batches(buf)


@pytest.mark.parametrize("last_offset_delta", [0, 1, 3, 100, -1])
def test_record_count_not_matching_last_offset_delta_is_invalid_record(
    last_offset_delta: int,
) -> None:
    buf = build_batch(3)
    struct.pack_into(">i", buf, LAST_OFFSET_DELTA_AT, last_offset_delta)
    refresh_crc(buf)
    with pytest.raises(InvalidRecordError) as info:
        check_batch(buf)
    assert info.value.error_code == 87
    assert not isinstance(info.value, CorruptRecordError)


def test_zero_records_is_invalid_record() -> None:
    buf = build_batch(1)
    struct.pack_into(">i", buf, RECORD_COUNT_AT, 0)
    struct.pack_into(">i", buf, LAST_OFFSET_DELTA_AT, -1)
    refresh_crc(buf)
    with pytest.raises(InvalidRecordError) as info:
        check_batch(buf)
    assert info.value.error_code == 87


def test_cut_short_batch_is_corrupt_at_every_length() -> None:
    buf = build_batch(2)
    for cut in range(len(buf)):
        with pytest.raises(CorruptRecordError) as info:
            check_batch(buf[:cut])
        assert info.value.error_code == 2


def test_peek_size_and_iter_batches_stop_at_a_partial_batch() -> None:
    first, second = build_batch(1), build_batch(3, base_offset=1)
    data = bytes(first + second)
    assert peek_size(data) == len(first)
    assert peek_size(data[:LOG_OVERHEAD - 1]) is None
    assert peek_size(data, len(first)) == len(second)
    assert [(p, h.base_offset) for p, h in iter_batches(data)] == [(0, 0), (len(first), 1)]
    assert [p for p, _ in iter_batches(data[:-1])] == [0]
    assert [p for p, _ in iter_batches(data, end=len(first) + HEADER_SIZE)] == [0]
    assert list(iter_batches(data[:HEADER_SIZE - 1])) == []


def test_validate_batches_positions_and_trailing_garbage() -> None:
    first, second = build_batch(1), build_batch(3, base_offset=1)
    batches = validate_batches(first + second)
    assert [(p, h.record_count) for p, h in batches] == [(0, 1), (len(first), 3)]
    with pytest.raises(CorruptRecordError):
        validate_batches(first + second[:-3])
    with pytest.raises(InvalidRecordError) as info:
        validate_batches(b"")
    assert info.value.error_code == 87


@pytest.mark.parametrize("codec", CODECS)
def test_set_log_append_time(codec: int) -> None:
    buf = build_batch(timestamp=[BASE_TS, BASE_TS + 10, BASE_TS + 3], compression=codec,
                      base_offset=50, leader_epoch=2)
    before = parse_header(buf)
    now = BASE_TS + 99_999
    set_log_append_time(buf, 0, len(buf), now)
    header = check_batch(buf)
    assert header.attributes == before.attributes | 0x08
    assert header.is_log_append_time
    assert header.compression == codec
    assert header.max_timestamp == now
    assert header.base_timestamp == before.base_timestamp
    assert header.crc == compute_crc(buf, 0, len(buf)) != before.crc
    # Only the attributes, maxTimestamp and CRC bytes change.
    changed = [i for i, (a, b) in enumerate(zip(buf, build_batch(
        timestamp=[BASE_TS, BASE_TS + 10, BASE_TS + 3], compression=codec, base_offset=50,
        leader_epoch=2), strict=True)) if a != b]
    assert set(changed) <= set(range(17, 23)) | set(range(MAX_TIMESTAMP_AT, MAX_TIMESTAMP_AT + 8))
    kb = DefaultRecordBatch(bytes(buf))
    assert kb.validate_crc()
    assert kb.timestamp_type == 1
    assert [(r.offset, r.timestamp) for r in kb] == [(50, now), (51, now), (52, now)]


def test_set_log_append_time_in_the_middle_of_a_buffer() -> None:
    first, second = build_batch(1), build_batch(2, base_offset=1)
    buf = first + second
    set_log_append_time(buf, len(first), len(second), BASE_TS + 1)
    batches = validate_batches(buf)
    assert [h.is_log_append_time for _, h in batches] == [False, True]
    assert batches[1][1].max_timestamp == BASE_TS + 1
    assert bytes(buf[:len(first)]) == bytes(first)
