"""The record batch (magic v2) header codec.

A batch is kept as the bytes a producer sent. The broker only parses the
61-byte header, verifies its CRC-32C, and rewrites a few header fields in
place; the records themselves are never re-encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

HEADER_SIZE = 61
# baseOffset (8) + batchLength (4): the part of the header batchLength does not count.
LOG_OVERHEAD = 12
MAGIC_V2 = 2

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

BASE_OFFSET_AT = 0
LENGTH_AT = 8
LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
MAX_TIMESTAMP_AT = 35
CRC_COVERS_FROM = ATTRIBUTES_AT

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


class RecordBatchError(ValueError):
    """A batch that cannot be accepted; ``error_code`` is the Kafka error to return."""

    error_code = 87  # INVALID_RECORD


class CorruptRecordError(RecordBatchError):
    """The batch is truncated or its CRC does not match (Kafka's CORRUPT_MESSAGE)."""

    error_code = 2


class InvalidRecordError(RecordBatchError):
    """The batch is well-formed but breaks a rule Kafka enforces (INVALID_RECORD)."""

    error_code = 87


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log file."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def compression_name(self) -> str:
        codec = self.compression
        return COMPRESSION_NAMES[codec] if codec < len(COMPRESSION_NAMES) else f"unknown({codec})"

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at Int32.MAX_VALUE back to 0, as in Kafka.
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; raises CorruptRecordError if it is cut short."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError("record batch shorter than its 61-byte header")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def peek_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """The full size of the batch starting at ``pos``, or None if the length is not there."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return _INT32.unpack_from(buf, pos + LENGTH_AT)[0] + LOG_OVERHEAD


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    view = memoryview(buf)[pos + CRC_COVERS_FROM : pos + size]
    return crc32c.crc32c(view)


def check_batch(buf: bytes | bytearray | memoryview, pos: int = 0, from_client: bool = True
                ) -> BatchHeader:
    """Parse and fully validate the batch at ``pos``; raise a RecordBatchError if it is bad.

    A batch not ``from_client`` (replicated, or read back from a log) may have been
    compacted: fewer records than its offset range, or none at all (Kafka checks the
    count only for a client's batches).
    """
    header = parse_header(buf, pos)
    size = header.batch_length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise CorruptRecordError("record batch size is smaller than the batch header")
    if len(buf) - pos < size:
        raise CorruptRecordError(f"record batch is cut short: {len(buf) - pos} of {size} bytes")
    if header.magic != MAGIC_V2:
        raise InvalidRecordError(f"unsupported record batch magic {header.magic}")
    if compute_crc(buf, pos, size) != header.crc:
        raise CorruptRecordError("record batch CRC-32C does not match its contents")
    if not from_client:
        if header.last_offset_delta < 0 or not 0 <= header.record_count <= (
                header.last_offset_delta + 1):
            raise InvalidRecordError(
                f"record count {header.record_count} does not fit last offset delta "
                f"{header.last_offset_delta}")
        return header
    if header.record_count <= 0:
        raise InvalidRecordError("record batch has no records")
    if header.last_offset_delta + 1 != header.record_count:
        raise InvalidRecordError(
            f"record count {header.record_count} does not match last offset delta "
            f"{header.last_offset_delta}"
        )
    return header


def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch in ``buf[pos:end]``, unvalidated.

    Stops quietly at a trailing partial batch, as a fetch response may end in one.
    """
    end = len(buf) if end is None else end
    while True:
        size = peek_size(buf, pos)
        if size is None or size < HEADER_SIZE or pos + size > end:
            return
        yield pos, parse_header(buf, pos)
        pos += size


def validate_batches(buf: bytes | bytearray | memoryview, from_client: bool = True
                     ) -> list[tuple[int, BatchHeader]]:
    """Validate every batch of ``buf``, which must hold whole batches and nothing else."""
    batches: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < len(buf):
        header = check_batch(buf, pos, from_client)
        batches.append((pos, header))
        pos += header.size
    if not batches:
        raise InvalidRecordError("no record batches")
    return batches


def assign_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place; it is outside the CRC, so the CRC stays valid."""
    _BASE_OFFSET.pack_into(buf, pos + BASE_OFFSET_AT, base_offset)


def set_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place; also outside the CRC."""
    _INT32.pack_into(buf, pos + LEADER_EPOCH_AT, epoch)


def rewritten_header(buf: bytes | bytearray | memoryview, pos: int, size: int, base_offset: int,
                     epoch: int, append_time: int = -1) -> bytearray:
    """A copy of the batch's 61-byte header with baseOffset and partitionLeaderEpoch set
    (and, if ``append_time`` >= 0, LogAppendTime with its CRC), leaving ``buf`` untouched:
    the body can then be written from the request's own buffer."""
    header = bytearray(memoryview(buf)[pos : pos + HEADER_SIZE])
    assign_offset(header, 0, base_offset)
    set_leader_epoch(header, 0, epoch)
    if append_time >= 0:
        (attributes,) = _INT16.unpack_from(header, ATTRIBUTES_AT)
        _INT16.pack_into(header, ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_BIT)
        _INT64.pack_into(header, MAX_TIMESTAMP_AT, append_time)
        crc = crc32c.crc32c(memoryview(buf)[pos + HEADER_SIZE : pos + size],
                            crc32c.crc32c(memoryview(header)[CRC_COVERS_FROM:]))
        _UINT32.pack_into(header, CRC_AT, crc)
    return header


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Stamp the batch with LogAppendTime: maxTimestamp, the timestamp-type bit, a new CRC."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_AT)
    _INT16.pack_into(buf, pos + ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_AT, now_ms)
    _UINT32.pack_into(buf, pos + CRC_AT, compute_crc(buf, pos, size))
