"""End-transaction markers: the COMMIT / ABORT control batches Kafka writes to a partition.

A marker is a v2 batch with the control and transactional attributes, the
producer's id and epoch, base sequence -1, and one record whose key is
``version int16 (0), type int16 (0 ABORT, 1 COMMIT)`` and whose value is
``version int16 (0), coordinatorEpoch int32`` (Kafka's EndTransactionMarker and
ControlRecordType). Newer key or value versions may append fields: only the
leading ones are read.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from josefk.protocol.record_batch import (
    ATTRIBUTES_AT,
    CONTROL_BIT,
    CRC_AT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_SEQUENCE,
    TRANSACTIONAL_BIT,
    BatchHeader,
    CorruptRecordError,
)
from josefk.protocol.varint import read_varint

ABORT = 0
COMMIT = 1
CONTROL_TYPE_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT"}
_HEADER = struct.Struct(">qiibIhiqqqhii")
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
# The record: length, attributes, timestampDelta, offsetDelta (all 0 but the length),
# key length 4 (zigzag 8), key, value length 6 (zigzag 12), value, no headers.
_RECORD = struct.Struct(">bbbbb4sb6sb")
_RECORD_BODY = _RECORD.size - 1


class EndTxnMarker(NamedTuple):
    """What a marker says: commit or abort, and the epoch of the coordinator that wrote it."""

    commit: bool
    coordinator_epoch: int

    @property
    def control_type(self) -> int:
        return COMMIT if self.commit else ABORT


def encode_marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        commit: bool, timestamp: int, base_offset: int = 0,
                        leader_epoch: int = -1) -> bytearray:
    """One uncompressed control batch (CreateTime ``timestamp``) holding one marker."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    record = _RECORD.pack(_RECORD_BODY * 2, 0, 0, 0, len(key) * 2, key, len(value) * 2, value, 0)
    buf = bytearray(HEADER_SIZE)
    _HEADER.pack_into(buf, 0, base_offset, HEADER_SIZE + len(record) - LOG_OVERHEAD,
                      leader_epoch, MAGIC_V2, 0, CONTROL_BIT | TRANSACTIONAL_BIT, 0, timestamp,
                      timestamp, producer_id, producer_epoch, NO_SEQUENCE, 1)
    buf += record
    struct.pack_into(">I", buf, CRC_AT, crc32c.crc32c(memoryview(buf)[ATTRIBUTES_AT:]))
    return buf


def decode_marker(batch: bytes | bytearray | memoryview, header: BatchHeader
                  ) -> EndTxnMarker | None:
    """The marker of a control batch; None if it has no record (a cleaner emptied it) or
    its control type is not COMMIT/ABORT. CorruptRecordError if it cannot be read."""
    if header.record_count == 0:
        return None
    data = memoryview(batch)[HEADER_SIZE:header.size]
    try:
        pos = _skip_varint(data, 0)  # record length
        pos += 1  # attributes
        pos = _skip_varint(data, pos)  # timestamp delta
        pos = _skip_varint(data, pos)  # offset delta
        key_len, pos = read_varint(data, pos)
        if key_len < _KEY.size:
            raise CorruptRecordError(f"control record key of {key_len} bytes")
        _, control_type = _KEY.unpack_from(data, pos)
        pos += key_len
        value_len, pos = read_varint(data, pos)
        if control_type not in CONTROL_TYPE_NAMES:
            return None
        if value_len < _VALUE.size:
            raise CorruptRecordError(f"end transaction marker value of {value_len} bytes")
        _, coordinator_epoch = _VALUE.unpack_from(data, pos)
    except (IndexError, struct.error) as e:
        raise CorruptRecordError(f"control record cut short: {e}") from e
    return EndTxnMarker(control_type == COMMIT, coordinator_epoch)


def _skip_varint(buf: memoryview, pos: int) -> int:
    return read_varint(buf, pos)[1]
