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
from dataclasses import dataclass

import crc32c
from kafka import codec

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


@dataclass(frozen=True, slots=True)
class Record:
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


def iter_records(batch: bytes | memoryview, header: BatchHeader) -> Iterator[Record]:
    """The batch's records in order (decompressing if needed)."""
    data = records_payload(batch, header)
    append_time = header.max_timestamp if header.is_log_append_time else None
    pos = 0
    for _ in range(header.record_count):
        length, pos = read_varint(data, pos)
        end = pos + length
        pos += 1  # attributes: unused in v2
        ts_delta, pos = read_varint(data, pos)
        offset_delta, pos = read_varint(data, pos)
        tail_start = pos
        key_len, pos = read_varint(data, pos)
        key = bytes(data[pos:pos + key_len]) if key_len >= 0 else None
        pos += max(key_len, 0)
        value_len, _ = read_varint(data, pos)
        if end > len(data):
            raise CorruptRecordError("record runs past the end of its batch")
        timestamp = append_time if append_time is not None else header.base_timestamp + ts_delta
        yield Record(header.base_offset + offset_delta, timestamp, key, value_len >= 0,
                     bytes(data[tail_start:end]))
        pos = end
    if pos != len(data):
        # Kafka's record iterator: the batch's count and its bytes must agree.
        raise InvalidRecordError("Incorrect declared batch size, records still remaining")


def keyless_record_indexes(batch: bytes | memoryview, header: BatchHeader) -> list[int]:
    """Indexes (in the batch) of the records without a key."""
    try:
        return [i for i, record in enumerate(iter_records(batch, header)) if record.key is None]
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
