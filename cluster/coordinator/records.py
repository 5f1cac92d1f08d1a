"""The framing the coordinators' internal topics share (``__consumer_offsets`` and
``__transaction_state``): Kafka's generated record schemas' primitives, the batches they are
written in and read back from, and the Java string hash that maps a key to its partition.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.log.cleaner.keys import keyed_records
from josefk.log.records import records_payload
from josefk.protocol.record_batch import BatchHeader, iter_batches

if TYPE_CHECKING:
    from josefk.log.log import Log

OFFSETS_TOPIC = "__consumer_offsets"
# A coordinator partition whose log is under this many bytes loads at once; a larger
# one in the background while the broker serves (its ids answer
# COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's do).
BACKGROUND_LOAD_BYTES = 1 << 20

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")




class RecordFormatError(ValueError):
    """A key or value that does not follow its schema."""


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``31*h + c`` over UTF-16 code units, in int32."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: 0 for Integer.MIN_VALUE (Java's abs would stay negative)."""
    return 0 if n == -(1 << 31) else abs(n)


class RecordWriter:
    """Big-endian primitives of Kafka's generated record schemas, appended to ``buf``."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def string(self, s: str | None) -> None:
        if s is None:
            self.i16(-1)
            return
        data = s.encode()
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes is too long")
        self.i16(len(data))
        self.buf += data

    def bytes_(self, b: bytes | None) -> None:
        if b is None:
            self.i32(-1)
            return
        self.i32(len(b))
        self.buf += b


def build_batch(entries: Iterable[tuple[bytes, bytes | None]], timestamp: int) -> bytearray:
    """One uncompressed v2 batch (no producer id) of encoded (key, value) pairs."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 31)
    for i, (key, value) in enumerate(entries):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return builder.build()


class RecordReader:
    """Reads what :class:`RecordWriter` writes (``flexible``: compact forms, tagged fields)."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record is cut short")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes (RecordFormatError past the end)."""
        return self._take(n)

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint too long")

    def _length(self, width: int) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i16() if width == 2 else self.i32()

    def string(self, nullable: bool = False) -> str | None:
        n = self._length(2)
        if n < 0:
            if not nullable:
                raise RecordFormatError("null in a non-nullable string")
            return None
        return self._take(n).decode()

    def str_(self) -> str:
        s = self.string()
        assert s is not None
        return s

    def bytes_(self) -> bytes:
        n = self._length(4)
        if n < 0:
            raise RecordFormatError("null in a non-nullable bytes field")
        return bytes(self._take(n))

    def array_length(self) -> int:
        n = self._length(4)
        if n < 0:
            raise RecordFormatError("null array")
        return n

    def tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self._take(self.uvarint())


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A record read back from the log."""

    offset: int
    key: bytes | None
    value: bytes | None


def read_batches(buf: bytes | bytearray) -> Iterator[tuple[BatchHeader, list[LogRecord]]]:
    """The whole batches in ``buf``: each header and its records, decoded by kafka-python."""
    for pos, header in iter_batches(buf):
        batch = DefaultRecordBatch(buf[pos:pos + header.size])
        yield header, [LogRecord(r.offset, r.key, r.value) for r in batch]


def log_batches(log: Log, buffer: int, start: int | None = None
                ) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Each whole batch of ``log`` from ``start`` (its start) to its end as it is now, read
    ``buffer`` bytes at a time (a coordinator loading its partition); it stops at a batch
    it cannot read whole."""
    offset = log.log_start_offset if start is None else start
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, buffer, max_offset=end).read_bytes()
        before = offset
        view = memoryview(data)
        for pos, header in iter_batches(data):
            yield header, view[pos:pos + header.size]
            offset = header.next_offset
        if offset == before:
            return


def keys_and_values(batch: bytes | memoryview, header: BatchHeader
                    ) -> tuple[list[int], list[bytes], list[bytes | None]]:
    """(offsets, keys, values) of a batch's keyed records, with no record object (the log
    cleaner's scan); a None value is a tombstone."""
    data = records_payload(batch, header)
    values: list[bytes | None] = []
    offsets, keys = keyed_records(data if isinstance(data, bytes) else bytes(data),
                                  header.record_count, header.base_offset, values)
    return offsets, keys, values


def control_is_commit(key: bytes | None) -> bool | None:
    """For a control record's key (version, type): True commit, False abort, None other."""
    if key is None or len(key) < 4:
        return None
    kind = _I16.unpack_from(key, 2)[0]
    return {0: False, 1: True}.get(kind)


def partition_for(key: str, num_partitions: int) -> int:
    """The internal topic's partition whose leader coordinates ``key`` (a group id in
    ``__consumer_offsets``, a transactional id in ``__transaction_state``)."""
    return kafka_abs(java_string_hash(key)) % num_partitions
