"""The records of ``__consumer_offsets``, byte for byte as Apache Kafka writes them.

Each record's key starts with an int16 version that names the record type
(0 and 1: OffsetCommitKey, 2: GroupMetadataKey; 3 to 8 the KIP-848 consumer
group types of :mod:`josefk.cluster.coordinator.group.consumer.records`; others are
skipped), its value with the value schema's version.
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

from dataclasses import dataclass, field

from josefk.cluster.coordinator.group.consumer import decoding
from josefk.cluster.coordinator.group.consumer import records as consumer
from josefk.cluster.coordinator.group.consumer.records import ConsumerKey, ConsumerValue
from josefk.cluster.coordinator.records import RecordFormatError, RecordReader, RecordWriter

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


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


Key = OffsetCommitKey | GroupMetadataKey | ConsumerKey
Value = OffsetCommitValue | GroupMetadataValue | ConsumerValue
Record = tuple[Key, Value | None]
"""A key and its value; a None value is a tombstone."""


# --- writing -------------------------------------------------------------------------------


def encode_key(key: Key) -> bytes:
    if isinstance(key, ConsumerKey):
        return consumer.encode_key(key)
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
    """A value as Kafka writes it: OffsetCommitValue v1 or v3, GroupMetadataValue v3,
    the consumer group values v0."""
    if not isinstance(value, OffsetCommitValue | GroupMetadataValue):
        return consumer.encode_value(value)
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


# --- reading -------------------------------------------------------------------------------


def decode_key(data: bytes) -> Key | None:
    """The key of a record, or None for record types the coordinator ignores (share
    and streams groups, regular expressions)."""
    r = RecordReader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.str_(), r.str_(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.str_())
    if version in consumer.KEY_TYPES:
        return decoding.decode_key(version, r)
    return None


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value for ``key`` (any schema version), or None for a tombstone."""
    if data is None:
        return None
    if isinstance(key, ConsumerKey):
        return decoding.decode_value(key, data)
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


