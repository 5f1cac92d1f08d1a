"""The records of ``__consumer_offsets``, byte for byte as Apache Kafka writes them.

Each record's key starts with an int16 version that names the record type
(0 and 1: OffsetCommitKey, 2: GroupMetadataKey; 3 and up are KIP-848 types,
which a classic coordinator skips), its value with the value schema's version.
A null value is a tombstone. Schemas (Kafka's ``group-coordinator`` JSON):

- OffsetCommitKey v0-1: group, topic (strings), partition (int32).
- OffsetCommitValue v0-4: offset (int64), leaderEpoch (int32, v3+), metadata
  (string), commitTimestamp (int64), expireTimestamp (int64, v1 only). Kafka
  writes v1 when the commit carried a retention time, v3 otherwise.
- GroupMetadataKey v2: group.
- GroupMetadataValue v0-4: protocolType, generation, protocol (nullable),
  leader (nullable), currentStateTimestamp (int64, v2+), members: memberId,
  groupInstanceId (nullable, v3+), clientId, clientHost, rebalanceTimeout
  (int32, v1+), sessionTimeout, subscription and assignment (bytes). Kafka
  writes v3.

Versions 4 of the values are "flexible": compact lengths and tagged fields.
Strings are int16-length UTF-8, bytes int32-length, all big-endian.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.protocol.record_batch import BatchHeader, iter_batches

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not follow its schema."""


# --- the group -> partition mapping ---------------------------------------------------------


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


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


# --- keys and values ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only v1 carries it


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


Key = OffsetCommitKey | GroupMetadataKey
Value = OffsetCommitValue | GroupMetadataValue
Record = tuple[Key, Value | None]
"""A key and its value; a None value is a tombstone."""


# --- writing -------------------------------------------------------------------------------


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


def encode_key(key: Key) -> bytes:
    w = RecordWriter()
    if isinstance(key, OffsetCommitKey):
        w.i16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.i32(key.partition)
    else:
        w.i16(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    return bytes(w.buf)


def encode_value(value: Value) -> bytes:
    """A value as Kafka writes it: OffsetCommitValue v1 or v3, GroupMetadataValue v3."""
    w = RecordWriter()
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp >= 0:
            w.i16(OFFSET_VALUE_VERSION_WITH_EXPIRY)
            w.i64(value.offset)
            w.string(value.metadata)
            w.i64(value.commit_timestamp)
            w.i64(value.expire_timestamp)
        else:
            w.i16(OFFSET_VALUE_VERSION)
            w.i64(value.offset)
            w.i32(value.leader_epoch)
            w.string(value.metadata)
            w.i64(value.commit_timestamp)
        return bytes(w.buf)
    w.i16(GROUP_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.buf)


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    key, value = record
    return encode_key(key), None if value is None else encode_value(value)


def build_batch(entries: Iterable[tuple[bytes, bytes | None]], timestamp: int) -> bytearray:
    """One uncompressed v2 batch (no producer id) of encoded (key, value) pairs."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 31)
    for i, (key, value) in enumerate(entries):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return builder.build()


# --- reading -------------------------------------------------------------------------------


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


def decode_key(data: bytes) -> Key | None:
    """The key of a record, or None for record types a classic coordinator ignores."""
    r = RecordReader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.str_(), r.str_(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.str_())
    return None


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value for ``key`` (any schema version), or None for a tombstone."""
    if data is None:
        return None
    r = RecordReader(data)
    version = r.i16()
    if version < 0 or version > 4:
        raise RecordFormatError(f"unknown value version {version}")
    r.flexible = version >= 4
    if isinstance(key, OffsetCommitKey):
        offset = r.i64()
        epoch = r.i32() if version >= 3 else -1
        metadata = r.str_()
        commit_ts = r.i64()
        expire_ts = r.i64() if version == 1 else -1
        r.tagged_fields()
        return OffsetCommitValue(offset, metadata, commit_ts, epoch, expire_ts)
    protocol_type = r.str_()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.str_()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.str_()
        client_host = r.str_()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        members.append(MemberMetadata(member_id, instance_id, client_id, client_host,
                                      rebalance_timeout, session_timeout, subscription,
                                      assignment))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts,
                              tuple(members))


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


def control_is_commit(key: bytes | None) -> bool | None:
    """For a control record's key (version, type): True commit, False abort, None other."""
    if key is None or len(key) < 4:
        return None
    kind = _I16.unpack_from(key, 2)[0]
    return {0: False, 1: True}.get(kind)
