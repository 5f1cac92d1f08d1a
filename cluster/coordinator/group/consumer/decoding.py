"""Reading the KIP-848 records of ``__consumer_offsets`` back (any value version, later
fields ignored), including the forms written before Kafka 4.3's tagged fields (see
:mod:`~josefk.cluster.coordinator.group.consumer.records`)."""

from __future__ import annotations

import struct
import uuid

from josefk.cluster.coordinator.group.consumer.records import (
    MEMBER_TYPES,
    REGULAR_EXPRESSION,
    Assignment,
    AssignmentEpochValue,
    ClassicMetadata,
    ConsumerKey,
    ConsumerValue,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    ResolvedRegexValue,
    TargetMemberValue,
    TopicMetadata,
)
from josefk.cluster.coordinator.records import RecordFormatError, RecordReader


def decode_key(version: int, r: RecordReader) -> ConsumerKey:
    """The rest of a key whose int16 type ``version`` (3-8, 16) was read from ``r``."""
    group = r.str_()
    if version == REGULAR_EXPRESSION:
        return ConsumerKey(version, group, regex=r.str_())
    return ConsumerKey(version, group, r.str_() if version in MEMBER_TYPES else None)


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
            epoch = r.i32()
            hashed = _tags(r).get(0)
            return GroupEpochValue(epoch, struct.unpack(">q", hashed)[0]
                                   if hashed is not None and len(hashed) == 8 else 0)
        case 4:
            return PartitionMetadataValue(tuple(_topic_metadata(r)
                                                for _ in range(r.array_length())))
        case 5:
            return MemberMetadataValue(
                r.string(nullable=True), r.string(nullable=True), r.str_(), r.str_(),
                tuple(r.str_() for _ in range(r.array_length())), r.string(nullable=True),
                r.i32(), r.string(nullable=True), _classic(r))
        case 6:
            epoch = r.i32()
            stamp = _tags(r).get(0)
            return AssignmentEpochValue(epoch, struct.unpack(">q", stamp)[0]
                                        if stamp is not None and len(stamp) == 8 else -1)
        case 7:
            return TargetMemberValue(_assignment(r))
        case 16:
            return ResolvedRegexValue(tuple(r.str_() for _ in range(r.array_length())),
                                      r.i64(), r.i64())
        case _:
            epoch, previous, state = r.i32(), r.i32(), struct.unpack(">b", r.take(1))[0]
            epochs: dict[tuple[uuid.UUID, int], int] = {}
            assigned = _assignment(r, epochs, max(epoch, 0))
            pending = _assignment(r, epochs, max(epoch, 0))
            return CurrentAssignmentValue(epoch, previous, state, assigned, pending, epochs)


def _tags(r: RecordReader) -> dict[int, bytes]:
    """A struct's tagged fields by tag (none when the value ends before its tag buffer)."""
    tags: dict[int, bytes] = {}
    if r.pos >= len(r.data):
        return tags
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        tags[tag] = bytes(r.take(size))
    return tags


def _classic(r: RecordReader) -> ClassicMetadata | None:
    """The tagged ClassicMemberMetadata (tag 0) of a member's metadata, if any."""
    data = _tags(r).get(0)
    if data is None:
        return None
    t = RecordReader(data, flexible=True)
    if t.uvarint() <= 0:
        return None
    timeout = t.i32()
    protocols = []
    for _ in range(t.array_length()):
        protocols.append((t.str_(), t.bytes_()))
        t.tagged_fields()
    return ClassicMetadata(timeout, tuple(protocols))


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


def _assignment(r: RecordReader, epochs: dict[tuple[uuid.UUID, int], int] | None = None,
                default_epoch: int = 0) -> Assignment:
    """Topics and partitions; into ``epochs`` each partition's tagged assignment epoch
    (``default_epoch`` where there is none, or not one per partition, as Kafka reads it)."""
    result: Assignment = {}
    for _ in range(r.array_length()):
        topic_id = _uuid(r)
        parts = [r.i32() for _ in range(r.array_length())]
        result[topic_id] = frozenset(parts)
        if epochs is None:
            r.tagged_fields()
            continue
        given = _int32s(_tags(r).get(0))
        if len(given) != len(parts):
            given = [default_epoch] * len(parts)
        epochs.update(((topic_id, p), e) for p, e in zip(parts, given, strict=True))
    return result


def _int32s(data: bytes | None) -> list[int]:
    """A tagged nullable compact array of int32 (null or absent: empty)."""
    if data is None:
        return []
    t = RecordReader(data, flexible=True)
    n = t.uvarint() - 1
    return [t.i32() for _ in range(max(n, 0))]
