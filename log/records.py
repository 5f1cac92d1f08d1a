"""The records inside a v2 batch: read (decompressed) and written back.

Only the cleaner and the compacted-topic key check look inside a batch. A record
is ``length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
key (varint length, -1 for null), value (the same), headers``; its timestamp and
offset are deltas from the batch's base timestamp and base offset. A rewritten
batch keeps each record's bytes from the key on, so only the two deltas and the
length are encoded again.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c
import kafka.codec as codec

from josefk.log.inflate import inflate
from josefk.protocol.record_batch import (
    ATTRIBUTES_AT,
    COMPRESSION_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchError,
)
from josefk.protocol.varint import read_varint, write_varint

NO_TIMESTAMP = -1
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_CRC_AT = 17
_ENCODERS = {1: codec.gzip_encode, 2: codec.snappy_encode, 3: codec.lz4_encode,
             4: codec.zstd_encode}


class Record(NamedTuple):
    """One record: absolute offset and timestamp, key, whether the value is null, and its
    bytes from the key on (key, value, headers), as stored."""

    offset: int
    timestamp: int
    key: bytes | None
    has_value: bool
    tail: bytes


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """The delete horizon a cleaner stamped on the batch (KIP-534), or None."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def records_payload(batch: bytes | memoryview, header: BatchHeader
                    ) -> bytes | bytearray | memoryview:
    """The record bytes of a batch, decompressed (see `josefk.log.inflate`)."""
    body = memoryview(batch)[HEADER_SIZE:header.size]
    codec_id = header.attributes & COMPRESSION_MASK
    if codec_id == 0:
        return body
    return inflate(codec_id, bytes(body))


class RecordFields(NamedTuple):
    """Where one record's fields are in the batch's (decompressed) record bytes."""

    timestamp_delta: int
    offset_delta: int
    tail: int  # the key's length varint: the record's bytes from the key on
    key_start: int
    key_len: int  # -1 for a null key
    has_value: bool
    end: int


def _scan(data: bytes | bytearray | memoryview, count: int) -> Iterator[RecordFields]:
    """Each record's fields, in order; the batch's count and its bytes must agree.

    Varints of one byte, which most record fields are, are read in line: this loop runs
    for every record the cleaner reads, twice.
    """
    pos = 0
    size = len(data)
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif (c := data[pos + 1]) < 0x80:  # records of 64 bytes to 8 KiB
            z = (b & 0x7F) | (c << 7)
            length, pos = (z >> 1) ^ -(z & 1), pos + 2
        else:
            length, pos = read_varint(data, pos)
        end = pos + length
        if end > size:
            raise CorruptRecordError("record runs past the end of its batch")
        b = data[pos + 1]  # after the attributes byte, unused in v2
        if b < 0x80:
            ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
        else:
            ts_delta, pos = read_varint(data, pos + 1)
        b = data[pos]
        if b < 0x80:
            offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif (c := data[pos + 1]) < 0x80:  # the 65th to the 8,192nd record of a batch
            z = (b & 0x7F) | (c << 7)
            offset_delta, pos = (z >> 1) ^ -(z & 1), pos + 2
        else:
            offset_delta, pos = read_varint(data, pos)
        tail = pos
        b = data[pos]
        if b < 0x80:
            key_len, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            key_len, pos = read_varint(data, pos)
        value_at = pos + key_len if key_len > 0 else pos
        # A null value's length is -1: the varint 0x01 (or a padded form starting 0x81).
        b = data[value_at]
        has_value = b != 1 and (b != 0x81 or read_varint(data, value_at)[0] >= 0)
        yield RecordFields(ts_delta, offset_delta, tail, pos, key_len, has_value, end)
        pos = end
    if pos != size:
        # Kafka's record iterator: the batch's count and its bytes must agree.
        raise InvalidRecordError("Incorrect declared batch size, records still remaining")


def scan_records(batch: bytes | memoryview, header: BatchHeader
                 ) -> tuple[bytes | bytearray | memoryview, Iterator[RecordFields]]:
    """The batch's record bytes (decompressed if need be) and where each record's fields
    are in them: for readers that turn only some records into `Record`s."""
    data = records_payload(batch, header)
    return data, _scan(data, header.record_count)


def record_at(data: bytes | bytearray | memoryview, header: BatchHeader, f: RecordFields,
              key: bytes | None) -> Record:
    """The record whose fields `scan_records` found at ``f`` (``key`` read already)."""
    timestamp = (header.max_timestamp if header.is_log_append_time
                 else header.base_timestamp + f.timestamp_delta)
    return Record(header.base_offset + f.offset_delta, timestamp, key, f.has_value,
                  bytes(data[f.tail:f.end]))


def record_key(data: bytes | bytearray | memoryview, f: RecordFields) -> bytes | None:
    return bytes(data[f.key_start:f.key_start + f.key_len]) if f.key_len >= 0 else None


def iter_records(batch: bytes | memoryview, header: BatchHeader) -> Iterator[Record]:
    """The batch's records in order (decompressing if needed)."""
    data, fields = scan_records(batch, header)
    for f in fields:
        yield record_at(data, header, f, record_key(data, f))


def iter_keys(batch: bytes | memoryview, header: BatchHeader) -> Iterator[tuple[int, bytes]]:
    """(offset, key) of each record with a key, in order: what the offset map needs."""
    data, fields = scan_records(batch, header)
    base_offset = header.base_offset
    for f in fields:
        if f.key_len >= 0:
            yield base_offset + f.offset_delta, bytes(data[f.key_start:f.key_start + f.key_len])


def keyless_record_indexes(batch: bytes | memoryview, header: BatchHeader) -> list[int]:
    """Indexes (in the batch) of the records without a key."""
    try:
        data = records_payload(batch, header)
        return [i for i, f in enumerate(_scan(data, header.record_count)) if f.key_len < 0]
    except RecordBatchError:
        raise
    except Exception as e:  # a codec's or a truncated buffer's own error
        raise CorruptRecordError(f"cannot read the batch's records: {e}") from e


def build_batch(header: BatchHeader, records: list[Record], delete_horizon: int | None
                ) -> bytes:
    """A batch like ``header``'s holding only ``records``: same base offset, last offset,
    producer fields, leader epoch, codec and timestamp type (Kafka's cleaner keeps the
    last offset so the producer's last sequence survives). With ``delete_horizon`` the
    base timestamp holds it and the delete-horizon attribute is set."""
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(r.timestamp for r in records)
    base_timestamp = delete_horizon if delete_horizon is not None else records[0].timestamp
    body = bytearray()
    for r in records:
        inner = bytearray(b"\x00")
        write_varint(0 if header.is_log_append_time else r.timestamp - base_timestamp, inner)
        write_varint(r.offset - header.base_offset, inner)
        inner += r.tail
        write_varint(len(inner), body)
        body += inner
    codec_id = header.attributes & COMPRESSION_MASK
    payload: bytes | bytearray = body
    if codec_id:
        payload = _ENCODERS[codec_id](bytes(body))
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_BIT
    return _with_header(header, attributes, base_timestamp, max_timestamp, len(records),
                        payload)


def empty_batch(header: BatchHeader) -> bytes:
    """Kafka's empty batch header: no records, kept only for the producer's last
    sequence and epoch; uncompressed, no base timestamp, the old max timestamp."""
    attributes = header.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    return _with_header(header, attributes, NO_TIMESTAMP, header.max_timestamp, 0, b"")


def _with_header(header: BatchHeader, attributes: int, base_timestamp: int,
                 max_timestamp: int, count: int, payload: bytes | bytearray) -> bytes:
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(out, 0, header.base_offset, HEADER_SIZE + len(payload) - LOG_OVERHEAD,
                      header.partition_leader_epoch, header.magic, 0, attributes,
                      header.last_offset_delta, base_timestamp, max_timestamp,
                      header.producer_id, header.producer_epoch, header.base_sequence, count)
    out += payload
    _CRC.pack_into(out, _CRC_AT, crc32c.crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return bytes(out)
