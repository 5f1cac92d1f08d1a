"""The KIP-848 records of ``__consumer_offsets``, byte for byte as Kafka 4 writes them.

Keys (not flexible): an int16 record type, then the group id (and member id), int16-length
strings. Values: an int16 version (0), then flexible fields (compact lengths, tagged
fields at the end of every struct). A null value is a tombstone. Kafka 4.3 no longer
writes type 4 (the metadata hash of KIP-1101 replaced it); it is read, not written.

====  =======================================  ==========================================
type  key                                      value v0
====  =======================================  ==========================================
3     ConsumerGroupMetadataKey                 Epoch, tagged MetadataHash (Kafka 4.1+)
4     ConsumerGroupPartitionMetadataKey        Topics [TopicId, TopicName, NumPartitions,
                                               PartitionMetadata [Partition, Racks]]
5     ConsumerGroupMemberMetadataKey (+member) InstanceId, RackId, ClientId, ClientHost,
                                               SubscribedTopicNames, SubscribedTopicRegex,
                                               RebalanceTimeoutMs, ServerAssignor
6     ConsumerGroupTargetAssignmentMetadataKey AssignmentEpoch
7     ConsumerGroupTargetAssignmentMemberKey   TopicPartitions [TopicId, Partitions]
8     ConsumerGroupCurrentMemberAssignmentKey  MemberEpoch, PreviousMemberEpoch, State,
                                               AssignedPartitions, PartitionsPendingRevocation
                                               (each topic with tagged AssignmentEpochs,
                                               Kafka 4.3)
16    ConsumerGroupRegularExpressionKey        Topics, Version, Timestamp: what a regex
      (+regular expression)                    matched when it was last resolved
====  =======================================  ==========================================

Records written before the tagged fields load: no hash is 0, and a partition without an
assignment epoch was assigned at the member's epoch (Kafka's default for them).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from josefk.cluster.coordinator.records import RecordFormatError, RecordWriter

# Partitions by topic id: what assignments are made of.
Assignment = dict[uuid.UUID, frozenset[int]]
# (topic id, partition) -> the member epoch it was assigned at (fences zombie commits).
AssignmentEpochs = Mapping[tuple[uuid.UUID, int], int]

METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
REGULAR_EXPRESSION = 16
KEY_TYPES = frozenset((*range(METADATA, CURRENT_ASSIGNMENT + 1), REGULAR_EXPRESSION))
VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """Any KIP-848 key: its record type, group, and member (types 5, 7, 8) or regular
    expression (type 16)."""

    type: int
    group: str
    member_id: str | None = None
    regex: str | None = None


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int
    metadata_hash: int = 0  # tagged field 0 (KIP-1101): the subscribed topics' hash


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
    epochs: AssignmentEpochs = field(default_factory=dict)

    def epoch_of(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch a partition was assigned at; the member's for one not recorded."""
        return self.epochs.get((topic_id, partition), max(self.member_epoch, 0))


@dataclass(frozen=True, slots=True)
class ResolvedRegexValue:
    """The topics a regular expression matched (sorted), the metadata version it was
    resolved against and when."""

    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerValue = (GroupEpochValue | PartitionMetadataValue | MemberMetadataValue
                 | AssignmentEpochValue | TargetMemberValue | CurrentAssignmentValue
                 | ResolvedRegexValue)
_VALUE_TYPES: dict[type, int] = {
    GroupEpochValue: METADATA, PartitionMetadataValue: PARTITION_METADATA,
    MemberMetadataValue: MEMBER_METADATA, AssignmentEpochValue: TARGET_METADATA,
    TargetMemberValue: TARGET_MEMBER, CurrentAssignmentValue: CURRENT_ASSIGNMENT,
    ResolvedRegexValue: REGULAR_EXPRESSION}
MEMBER_TYPES = frozenset((MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT))


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

    def assignment(self, partitions: Assignment,
                   epoch_of: Callable[[uuid.UUID, int], int] | None = None) -> None:
        """Topics and partitions; with ``epoch_of``, each topic's tagged AssignmentEpochs."""
        self.uvarint(len(partitions) + 1)
        for topic_id, parts in sorted(partitions.items()):
            self.uuid(topic_id)
            self.uvarint(len(parts) + 1)
            for p in sorted(parts):
                self.i32(p)
            if epoch_of is None:
                self.tags()
                continue
            body = _CompactWriter()
            body.uvarint(len(parts) + 1)
            for p in sorted(parts):
                body.i32(epoch_of(topic_id, p))
            self.tagged(0, body.buf)

    def tagged(self, tag: int, data: bytes | bytearray) -> None:
        """A tag buffer holding one field."""
        self.uvarint(1)
        self.uvarint(tag)
        self.uvarint(len(data))
        self.buf += data


def encode_key(key: ConsumerKey) -> bytes:
    w = RecordWriter()
    w.i16(key.type)
    w.string(key.group)
    if key.type in MEMBER_TYPES:
        w.string(key.member_id)
    elif key.type == REGULAR_EXPRESSION:
        w.string(key.regex)
    return bytes(w.buf)


def encode_value(value: ConsumerValue) -> bytes:
    w = _CompactWriter()
    w.i16(VALUE_VERSION)
    match value:
        case GroupEpochValue(epoch, metadata_hash):
            w.i32(epoch)
            if metadata_hash:  # Kafka leaves out a tagged field at its default
                w.tagged(0, struct.pack(">q", metadata_hash))
                return bytes(w.buf)
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
                w.tagged(0, struct.pack(">q", timestamp))
                return bytes(w.buf)
        case TargetMemberValue(partitions):
            w.assignment(partitions)
        case CurrentAssignmentValue():
            w.i32(value.member_epoch)
            w.i32(value.previous_member_epoch)
            w.i8(value.state)
            w.assignment(value.assigned, value.epoch_of)
            w.assignment(value.pending_revocation, value.epoch_of)
        case ResolvedRegexValue(topics, version, timestamp):
            w.uvarint(len(topics) + 1)
            for topic in topics:
                w.compact_string(topic)
            w.i64(version)
            w.i64(timestamp)
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
    w.tagged(0, body.buf)


def key_type_of(value: ConsumerValue) -> int:
    return _VALUE_TYPES[type(value)]
