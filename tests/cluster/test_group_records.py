"""The ``__consumer_offsets`` record codec: Kafka's key and value schemas, byte for byte."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.cluster.coordinator.group.consumer.records import ConsumerKey
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from josefk.cluster.coordinator.records import (
    RecordFormatError,
    build_batch,
    control_is_commit,
    java_string_hash,
    kafka_abs,
    partition_for,
    read_batches,
)
from josefk.protocol.record_batch import check_batch


def s16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(s.encode())) + s.encode()


def compact(s: str | None) -> bytes:
    """A compact (flexible-version) string: uvarint length + 1 (0 is null)."""
    if s is None:
        return b"\x00"
    data = s.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def test_java_string_hash_matches_java() -> None:
    # What Java 17 prints for "...".hashCode().
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("console-consumer-12345") == 158455506
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    # Outside the BMP: two UTF-16 code units, as Java counts them.
    assert java_string_hash("\U0001F600") == 1772899


def test_partition_for_uses_kafka_abs() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("console-consumer-12345", 50) == 158455506 % 50


def test_offset_commit_key_bytes() -> None:
    key = OffsetCommitKey("grp", "topic", 7)
    expected = b"\x00\x01" + s16("grp") + s16("topic") + struct.pack(">i", 7)
    assert encode_key(key) == expected
    assert decode_key(expected) == key
    # Version 0 keys (older brokers) read the same.
    assert decode_key(b"\x00\x00" + expected[2:]) == key


def test_group_metadata_key_bytes() -> None:
    assert encode_key(GroupMetadataKey("grp")) == b"\x00\x02" + s16("grp")
    assert decode_key(b"\x00\x02" + s16("grp")) == GroupMetadataKey("grp")


def test_unknown_record_types_are_skipped() -> None:
    # 3 to 8 are KIP-848 consumer group types (tests/cluster/coordinator); 9 and up are
    # share and streams groups', which the coordinator skips.
    assert decode_key(b"\x00\x03" + s16("grp")) == ConsumerKey(3, "grp")
    assert decode_key(b"\x00\x0b" + s16("grp")) is None


def test_offset_commit_value_v3_and_v1() -> None:
    v3 = OffsetCommitValue(42, "meta", 1000, leader_epoch=5)
    expected = (b"\x00\x03" + struct.pack(">qi", 42, 5) + s16("meta") + struct.pack(">q", 1000))
    assert encode_value(v3) == expected
    # A commit with a retention time is written as v1, with the expiry and no epoch.
    v1 = OffsetCommitValue(42, "meta", 1000, expire_timestamp=2000)
    expected_v1 = (b"\x00\x01" + struct.pack(">q", 42) + s16("meta")
                   + struct.pack(">qq", 1000, 2000))
    assert encode_value(v1) == expected_v1
    key = OffsetCommitKey("g", "t", 0)
    assert decode_value(key, expected) == v3
    assert decode_value(key, expected_v1) == v1


def test_offset_commit_value_old_and_flexible_versions() -> None:
    key = OffsetCommitKey("g", "t", 0)
    v0 = b"\x00\x00" + struct.pack(">q", 9) + s16("m") + struct.pack(">q", 77)
    assert decode_value(key, v0) == OffsetCommitValue(9, "m", 77)
    v2 = b"\x00\x02" + struct.pack(">q", 9) + s16("m") + struct.pack(">q", 77)
    assert decode_value(key, v2) == OffsetCommitValue(9, "m", 77)
    # v4: compact string, then tagged fields (one unknown tag, skipped).
    v4 = (b"\x00\x04" + struct.pack(">qi", 9, 3) + compact("m") + struct.pack(">q", 77)
          + b"\x01" + b"\x05\x02ab")
    assert decode_value(key, v4) == OffsetCommitValue(9, "m", 77, leader_epoch=3)


MEMBER = MemberMetadata("m-1", "instance", "client", "/10.0.0.1", 30000, 10000, b"sub", b"asg")
GROUP_VALUE = GroupMetadataValue("consumer", 3, "range", "m-1", 123456, (MEMBER,))


def test_group_metadata_value_v3_bytes() -> None:
    expected = (b"\x00\x03" + s16("consumer") + struct.pack(">i", 3) + s16("range") + s16("m-1")
                + struct.pack(">q", 123456) + struct.pack(">i", 1)
                + s16("m-1") + s16("instance") + s16("client") + s16("/10.0.0.1")
                + struct.pack(">ii", 30000, 10000) + struct.pack(">i", 3) + b"sub"
                + struct.pack(">i", 3) + b"asg")
    assert encode_value(GROUP_VALUE) == expected
    assert decode_value(GroupMetadataKey("g"), expected) == GROUP_VALUE


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("", 0, None, None, 5, ())
    data = encode_value(value)
    assert data == (b"\x00\x03" + s16("") + struct.pack(">i", 0) + s16(None) + s16(None)
                    + struct.pack(">qi", 5, 0))
    assert decode_value(GroupMetadataKey("g"), data) == value


def test_group_metadata_value_old_versions() -> None:
    member_v0 = (s16("m-1") + s16("client") + s16("/h") + struct.pack(">i", 10000)
                 + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"a")
    v0 = (b"\x00\x00" + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m-1")
          + struct.pack(">i", 1) + member_v0)
    assert decode_value(GroupMetadataKey("g"), v0) == GroupMetadataValue(
        "consumer", 1, "range", "m-1", -1,
        (MemberMetadata("m-1", None, "client", "/h", -1, 10000, b"s", b"a"),))
    member_v1 = (s16("m-1") + s16("client") + s16("/h") + struct.pack(">ii", 20000, 10000)
                 + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"a")
    v2 = (b"\x00\x02" + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m-1")
          + struct.pack(">qi", 99, 1) + member_v1)
    assert decode_value(GroupMetadataKey("g"), v2) == GroupMetadataValue(
        "consumer", 1, "range", "m-1", 99,
        (MemberMetadata("m-1", None, "client", "/h", 20000, 10000, b"s", b"a"),))


def test_group_metadata_value_v4_flexible() -> None:
    member = (compact("m-1") + compact(None) + compact("client") + compact("/h")
              + struct.pack(">ii", 20000, 10000) + b"\x02s" + b"\x02a" + b"\x00")
    v4 = (b"\x00\x04" + compact("consumer") + struct.pack(">i", 1) + compact("range")
          + compact("m-1") + struct.pack(">q", 99) + b"\x02" + member + b"\x00")
    assert decode_value(GroupMetadataKey("g"), v4) == GroupMetadataValue(
        "consumer", 1, "range", "m-1", 99,
        (MemberMetadata("m-1", None, "client", "/h", 20000, 10000, b"s", b"a"),))


def test_tombstones_and_bad_values() -> None:
    assert decode_value(GroupMetadataKey("g"), None) is None
    assert decode_value(OffsetCommitKey("g", "t", 0), None) is None
    assert encode_record((GroupMetadataKey("g"), None)) == (b"\x00\x02" + s16("g"), None)
    with pytest.raises(RecordFormatError):
        decode_value(OffsetCommitKey("g", "t", 0), b"\x00\x03\x00")
    with pytest.raises(RecordFormatError):
        decode_value(OffsetCommitKey("g", "t", 0), b"\x00\x09" + bytes(20))


def test_batch_round_trip() -> None:
    records = [(OffsetCommitKey("g", "t", 1), OffsetCommitValue(5, "m", 10)),
               (GroupMetadataKey("g"), GROUP_VALUE),
               (OffsetCommitKey("g", "t", 2), None)]
    batch = build_batch([encode_record(r) for r in records], timestamp=1234)
    header = check_batch(batch)
    assert (header.record_count, header.producer_id, header.max_timestamp) == (3, -1, 1234)
    [(got_header, got)] = list(read_batches(bytes(batch)))
    assert got_header == header
    decoded = []
    for rec in got:
        key = decode_key(rec.key)
        assert key is not None
        decoded.append((key, decode_value(key, rec.value)))
    assert decoded == records


def test_control_record_kind() -> None:
    assert control_is_commit(struct.pack(">hh", 0, 1)) is True
    assert control_is_commit(struct.pack(">hh", 0, 0)) is False
    assert control_is_commit(struct.pack(">hh", 0, 5)) is None
    assert control_is_commit(None) is None


names = st.text(max_size=40)
members = st.builds(MemberMetadata, names, st.none() | names, names, names,
                    st.integers(-1, 2**31 - 1), st.integers(0, 2**31 - 1), st.binary(max_size=50),
                    st.binary(max_size=50))


@given(st.builds(GroupMetadataValue, names, st.integers(0, 2**31 - 1), st.none() | names,
                 st.none() | names, st.integers(-1, 2**62),
                 st.lists(members, max_size=4).map(tuple)))
def test_group_value_round_trip(value: GroupMetadataValue) -> None:
    assert decode_value(GroupMetadataKey("g"), encode_value(value)) == value


@given(st.integers(0, 2**62), names, st.integers(0, 2**62), st.integers(-1, 2**31 - 1),
       st.integers(-1, 2**62))
def test_offset_value_round_trip(offset: int, metadata: str, ts: int, epoch: int,
                                 expire: int) -> None:
    value = OffsetCommitValue(offset, metadata, ts, epoch if expire < 0 else -1, expire)
    assert decode_value(OffsetCommitKey("g", "t", 0), encode_value(value)) == value
