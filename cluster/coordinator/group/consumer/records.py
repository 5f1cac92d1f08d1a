"""The KIP-848 records of ``__consumer_offsets``, byte for byte as Kafka 4 writes them.

Keys (not flexible): an int16 record type, then the group id (and member id), int16-length
strings. Values: an int16 version (0), then flexible fields (compact lengths, tagged
fields at the end of every struct). A null value is a tombstone. Kafka 4.3 no longer
writes type 4 (the metadata hash of KIP-1101 replaced it); it is read, not written.

====  =======================================  ==========================================
type  key                                      value v0
====  =======================================  ==========================================
3     ConsumerGroupMetadataKey                 Epoch
4     ConsumerGroupPartitionMetadataKey        Topics [TopicId, TopicName, NumPartitions,
                                               PartitionMetadata [Partition, Racks]]
5     ConsumerGroupMemberMetadataKey (+member) InstanceId, RackId, ClientId, ClientHost,
                                               SubscribedTopicNames, SubscribedTopicRegex,
                                               RebalanceTimeoutMs, ServerAssignor
6     ConsumerGroupTargetAssignmentMetadataKey AssignmentEpoch
7     ConsumerGroupTargetAssignmentMemberKey   TopicPartitions [TopicId, Partitions]
8     ConsumerGroupCurrentMemberAssignmentKey  MemberEpoch, PreviousMemberEpoch, State,
                                               AssignedPartitions, PartitionsPendingRevocation
====  =======================================  ==========================================
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from josefk.cluster.coordinator.records import RecordFormatError, RecordReader, RecordWriter

# Partitions by topic id: what assignments are made of.
Assignment = dict[uuid.UUID, frozenset[int]]

METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
KEY_TYPES = frozenset(range(METADATA, CURRENT_ASSIGNMENT + 1))
VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """Any KIP-848 key: its record type, group, and member (types 5, 7, 8)."""

    type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """A member that speaks the classic protocol: its session timeout and the (name,
    metadata) protocols of its JoinGroup (the value's tagged ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMetadata | None = None


@dataclass(frozen=True, slots=True)
class AssignmentEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = -1  # tagged field 0 (Kafka 4.3), when it was computed


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    partitions: Assignment


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


ConsumerValue = (GroupEpochValue | PartitionMetadataValue | MemberMetadataValue
                 | AssignmentEpochValue | TargetMemberValue | CurrentAssignmentValue)
_VALUE_TYPES: dict[type, int] = {
    GroupEpochValue: METADATA, PartitionMetadataValue: PARTITION_METADATA,
    MemberMetadataValue: MEMBER_METADATA, AssignmentEpochValue: TARGET_METADATA,
    TargetMemberValue: TARGET_MEMBER, CurrentAssignmentValue: CURRENT_ASSIGNMENT}
_MEMBER_TYPES = frozenset((MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT))


# --- writing -------------------------------------------------------------------------------


class _CompactWriter(RecordWriter):
    """The flexible forms: unsigned varint lengths + 1, uuids, empty tagged fields."""

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def compact_string(self, s: str | None) -> None:
        if s is None:
            self.uvarint(0)
            return
        data = s.encode()
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes is too long")
        self.uvarint(len(data) + 1)
        self.buf += data

    def uuid(self, u: uuid.UUID) -> None:
        self.buf += u.bytes

    def i8(self, v: int) -> None:
        self.buf += struct.pack(">b", v)

    def tags(self) -> None:
        self.uvarint(0)

    def compact_bytes(self, data: bytes) -> None:
        self.uvarint(len(data) + 1)
        self.buf += data

    def assignment(self, partitions: Assignment) -> None:
        self.uvarint(len(partitions) + 1)
        for topic_id, parts in sorted(partitions.items()):
            self.uuid(topic_id)
            self.uvarint(len(parts) + 1)
            for p in sorted(parts):
                self.i32(p)
            self.tags()


def encode_key(key: ConsumerKey) -> bytes:
    w = RecordWriter()
    w.i16(key.type)
    w.string(key.group)
    if key.type in _MEMBER_TYPES:
        w.string(key.member_id)
    return bytes(w.buf)


def encode_value(value: ConsumerValue) -> bytes:
    w = _CompactWriter()
    w.i16(VALUE_VERSION)
    match value:
        case GroupEpochValue(epoch):
            w.i32(epoch)
        case PartitionMetadataValue(topics):
            w.uvarint(len(topics) + 1)
            for t in topics:
                w.uuid(t.topic_id)
                w.compact_string(t.name)
                w.i32(t.num_partitions)
                w.uvarint(1)  # no per-partition racks
                w.tags()
        case MemberMetadataValue():
            w.compact_string(value.instance_id)
            w.compact_string(value.rack_id)
            w.compact_string(value.client_id)
            w.compact_string(value.client_host)
            w.uvarint(len(value.subscribed_topic_names) + 1)
            for name in value.subscribed_topic_names:
                w.compact_string(name)
            w.compact_string(value.subscribed_topic_regex or "")  # Kafka writes "" for none
            w.i32(value.rebalance_timeout_ms)
            w.compact_string(value.server_assignor)
            _classic_tag(w, value.classic)
            return bytes(w.buf)
        case AssignmentEpochValue(epoch, timestamp):
            w.i32(epoch)
            if timestamp >= 0:
                w.uvarint(1)  # one tagged field: 0, the assignment's timestamp
                w.uvarint(0)
                w.uvarint(8)
                w.i64(timestamp)
                return bytes(w.buf)
        case TargetMemberValue(partitions):
            w.assignment(partitions)
        case CurrentAssignmentValue():
            w.i32(value.member_epoch)
            w.i32(value.previous_member_epoch)
            w.i8(value.state)
            w.assignment(value.assigned)
            w.assignment(value.pending_revocation)
    w.tags()
    return bytes(w.buf)


def _classic_tag(w: _CompactWriter, classic: ClassicMetadata | None) -> None:
    """The tagged ClassicMemberMetadata (tag 0), which Kafka writes even when null: a
    nullable tagged struct is 0 (null), or 1 and the struct."""
    body = _CompactWriter()
    if classic is None:
        body.uvarint(0)
    else:
        body.uvarint(1)
        body.i32(classic.session_timeout_ms)
        body.uvarint(len(classic.protocols) + 1)
        for name, metadata in classic.protocols:
            body.compact_string(name)
            body.compact_bytes(metadata)
            body.tags()
        body.tags()
    w.uvarint(1)  # one tagged field
    w.uvarint(0)
    w.uvarint(len(body.buf))
    w.buf += body.buf


def key_type_of(value: ConsumerValue) -> int:
    return _VALUE_TYPES[type(value)]


# --- reading -------------------------------------------------------------------------------


def decode_key(version: int, r: RecordReader) -> ConsumerKey:
    """The rest of a key whose int16 type ``version`` (3-8) was read from ``r``."""
    group = r.str_()
    return ConsumerKey(version, group, r.str_() if version in _MEMBER_TYPES else None)


def decode_value(key: ConsumerKey, data: bytes | None) -> ConsumerValue | None:
    """The value of ``key`` (any version, later fields ignored), or None for a tombstone."""
    if data is None:
        return None
    r = RecordReader(data, flexible=True)
    version = r.i16()
    if version < 0:
        raise RecordFormatError(f"unknown value version {version}")
    match key.type:
        case 3:
            return GroupEpochValue(r.i32())
        case 4:
            return PartitionMetadataValue(tuple(_topic_metadata(r)
                                                for _ in range(r.array_length())))
        case 5:
            return MemberMetadataValue(
                r.string(nullable=True), r.string(nullable=True), r.str_(), r.str_(),
                tuple(r.str_() for _ in range(r.array_length())), r.string(nullable=True),
                r.i32(), r.string(nullable=True), _classic(r))
        case 6:
            return AssignmentEpochValue(r.i32(), _timestamp_tag(r))
        case 7:
            return TargetMemberValue(_assignment(r))
        case _:
            epoch, previous, state = r.i32(), r.i32(), struct.unpack(">b", r.take(1))[0]
            return CurrentAssignmentValue(epoch, previous, state, _assignment(r), _assignment(r))


def _classic(r: RecordReader) -> ClassicMetadata | None:
    """The tagged ClassicMemberMetadata (tag 0) of a member's metadata, if any."""
    classic = None
    if r.pos >= len(r.data):
        return classic
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = r.take(size)
        if tag != 0:
            continue
        t = RecordReader(data, flexible=True)
        if t.uvarint() <= 0:
            continue
        timeout = t.i32()
        protocols = []
        for _ in range(t.array_length()):
            protocols.append((t.str_(), t.bytes_()))
            t.tagged_fields()
        classic = ClassicMetadata(timeout, tuple(protocols))
    return classic


def _timestamp_tag(r: RecordReader) -> int:
    """The assignment timestamp in the tagged fields (tag 0), -1 without it."""
    timestamp = -1
    if r.pos >= len(r.data):
        return timestamp
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = r.take(size)
        if tag == 0 and size == 8:
            timestamp = struct.unpack(">q", data)[0]
    return timestamp


def _uuid(r: RecordReader) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(r.take(16)))


def _topic_metadata(r: RecordReader) -> TopicMetadata:
    topic_id, name, count = _uuid(r), r.str_(), r.i32()
    for _ in range(r.array_length()):  # per-partition racks: not used
        r.i32()
        for _ in range(r.array_length()):
            r.str_()
        r.tagged_fields()
    r.tagged_fields()
    return TopicMetadata(topic_id, name, count)


def _assignment(r: RecordReader) -> Assignment:
    result: Assignment = {}
    for _ in range(r.array_length()):
        topic_id = _uuid(r)
        result[topic_id] = frozenset(r.i32() for _ in range(r.array_length()))
        r.tagged_fields()
    return result
