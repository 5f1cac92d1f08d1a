"""The offset map's batch reader against kafka-python's decoder: every keyed record's offset
and key, whatever the widths of its varints, and the batch's count and bytes agreeing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.log.cleaner.keys import keyed_records
from josefk.protocol.record_batch import HEADER_SIZE, CorruptRecordError, InvalidRecordError

records_st = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=300)),    # key: null, short, long
              st.one_of(st.none(), st.binary(max_size=9000)),   # value: tombstone .. 2-byte lengths
              st.integers(min_value=0, max_value=10**9)),       # timestamp delta
    min_size=1, max_size=200)  # past 64 records the offset delta takes two bytes


def batch(records: list[tuple[bytes | None, bytes | None, int]], base: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 24)
    for delta, (key, value, ts) in enumerate(records):
        builder.append(delta, timestamp=1_700_000_000_000 + ts, key=key, value=value, headers=[])
    data = bytearray(builder.build())
    data[0:8] = base.to_bytes(8, "big")
    return bytes(data)


@settings(max_examples=60, deadline=None)
@given(records_st, st.integers(min_value=0, max_value=1 << 40))
def test_keys_and_offsets_as_kafka_python_reads_them(records, base):
    raw = batch(records, base)
    expected = [(r.offset, r.key) for r in DefaultRecordBatch(raw) if r.key is not None]
    offsets, keys = keyed_records(raw[HEADER_SIZE:], len(records), base)
    assert list(zip(offsets, keys, strict=True)) == expected
    assert all(type(k) is bytes for k in keys)


@settings(max_examples=60, deadline=None)
@given(records_st, st.integers(min_value=0, max_value=1 << 40))
def test_values_as_kafka_python_reads_them(records, base):
    """The group coordinator's load reads each keyed record's value too."""
    raw = batch(records, base)
    expected = [(r.offset, r.key, r.value) for r in DefaultRecordBatch(raw) if r.key is not None]
    values: list[bytes | None] = []
    offsets, keys = keyed_records(raw[HEADER_SIZE:], len(records), base, values)
    assert list(zip(offsets, keys, values, strict=True)) == expected


def test_count_and_bytes_must_agree():
    raw = batch([(b"k", b"v", 0), (b"k2", None, 1)], 0)
    with pytest.raises(InvalidRecordError):
        keyed_records(raw[HEADER_SIZE:], 1, 0)  # bytes left over
    with pytest.raises(CorruptRecordError):
        keyed_records(raw[HEADER_SIZE:-1], 2, 0)  # the last record runs past the end
