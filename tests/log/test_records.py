"""Reading the records inside a batch (`josefk.log.records`) against kafka-python's
reader: every field of every record, whatever the sizes of its varints."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.log.records import (
    _scan,
    build_batch,
    iter_keys,
    iter_records,
    keyless_record_indexes,
)
from josefk.protocol.record_batch import parse_header

BASE_TS = 1_700_000_000_000
blobs = st.none() | st.binary(max_size=300)
records = st.lists(st.tuples(
    st.integers(-(10**6), 10**9),  # timestamp delta: one byte to five
    blobs, blobs,
    st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=20)), max_size=2)),
    min_size=1, max_size=150)  # offset deltas past 63 take two bytes


def batch_of(items: list, compression: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                        is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for i, (ts, key, value, headers) in enumerate(items):
        builder.append(i, timestamp=BASE_TS + ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


@settings(max_examples=80, deadline=None)
@given(items=records, compression=st.sampled_from([0, 1, 4]))
def test_records_read_as_kafka_python_reads_them(items: list, compression: int) -> None:
    batch = batch_of(items, compression)
    header = parse_header(batch, 0)
    expected = [(r.offset, r.timestamp, r.key, r.value is not None)
                for r in DefaultRecordBatch(batch)]
    got = list(iter_records(batch, header))
    assert [(r.offset, r.timestamp, r.key, r.has_value) for r in got] == expected
    assert list(iter_keys(batch, header)) == [(o, k) for o, _, k, _ in expected
                                              if k is not None]
    assert keyless_record_indexes(batch, header) == [
        i for i, (_, _, k, _) in enumerate(expected) if k is None]
    if compression == 0:  # each record's bytes from the key on, as they were
        assert build_batch(header, got, None) == batch


def test_long_batches_and_records_of_every_length_varint_size() -> None:
    items = [(i * 1000, None if i % 7 == 0 else b"k%d" % i, None if i % 5 == 0 else b"v" * i,
              []) for i in range(300)]  # lengths and offset deltas of one and two bytes
    test_records_read_as_kafka_python_reads_them.hypothesis.inner_test(items, 0)
    test_records_read_as_kafka_python_reads_them.hypothesis.inner_test(items, 1)


def test_a_null_value_length_written_in_two_bytes_is_still_null() -> None:
    # length 7, attributes, timestamp delta 0, offset delta 0, null key (0x01), value
    # length -1 padded to two bytes (0x81 0x00: a legal varint no client writes), no headers
    record = bytes([0x0E, 0, 0, 0, 0x01, 0x81, 0x00, 0x00])
    (fields,) = _scan(record, 1)
    assert (fields.key_len, fields.has_value, fields.end) == (-1, False, 8)
