"""The fields Kafka 4.3 adds to the consumer group records: the group epoch's metadata
hash (KIP-1101), which starts a new target assignment when the subscribed topics change,
and each owned partition's assignment epoch; and records written without them load."""

from __future__ import annotations

import struct
import uuid

from test_consumer_groups import TID, Harness, Image, parts

from josefk.cluster.coordinator.group.consumer.records import (
    CURRENT_ASSIGNMENT,
    METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    ConsumerKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    PartitionMetadataValue,
    TopicMetadata,
)
from josefk.cluster.coordinator.group.consumer.subscriptions import group_hash, topic_hash
from josefk.cluster.coordinator.group.records import decode_key, decode_value, encode_record
from josefk.cluster.metadata.store import Topic


def _values(h: Harness, key_type: int, member: str | None = None) -> list:
    found = []
    for raw_key, raw_value in h.log:
        key = decode_key(raw_key)
        if isinstance(key, ConsumerKey) and key.type == key_type and \
                (member is None or key.member_id == member):
            found.append(decode_value(key, raw_value))
    return found


def test_hashes_as_javas_hash4j_computes_them() -> None:
    """Values computed with hash4j 0.22 (Kafka 4.3's) from the same topics."""
    orders = TopicMetadata(uuid.UUID(int=42), "orders", 3)
    other = TopicMetadata(uuid.UUID(int=0x0123456789ABCDEFFEDCBA9876543210), "a-topic", 1)
    assert topic_hash(orders) == -8367871871290477433
    assert topic_hash(orders, [["r2", "r1"], [], ["r1"]]) == -3039914562083496580
    assert topic_hash(other) == 9182617519490262467
    assert group_hash([orders, other]) == group_hash([other, orders]) == 5188138182466180295
    assert group_hash([]) == 0


def test_the_group_epoch_carries_the_hash_of_its_topics() -> None:
    h = Harness(image=Image(t=4, u=2))
    h.join("a")
    h.now += 1000
    assert h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])]).member_epoch == 2  # no change
    t = h.image.by_name["t"]
    expected = group_hash([TopicMetadata(t.topic_id, "t", 4)])
    assert _values(h, METADATA) == [GroupEpochValue(2, expected)]
    assert h.groups.consumer.get("g").metadata_hash == expected


def _assigned(h: Harness, member: str) -> dict[str, int]:
    """Topic name -> number of partitions the member is assigned."""
    names = {t.topic_id: t.name for t in h.image.topics()}
    return {names[t]: len(ps) for t, ps in
            h.groups.consumer.get("g").members[member].assigned.items()}


def test_regex_records_follow_the_topics() -> None:
    h = Harness(image=Image(orders=2, other=1))
    h.join("a", subscribed_topic_names=None, subscribed_topic_regex="orders.*")
    assert _values(h, REGULAR_EXPRESSION) == []  # resolved in the background, not here
    h.tick(1000)
    [resolved] = _values(h, REGULAR_EXPRESSION)
    assert (resolved.topics, resolved.timestamp) == (("orders",), h.now)
    assert h.beat("a", 2, owned=[]).member_epoch == 3
    assert _assigned(h, "a") == {"orders": 2}
    # A topic comes: the next heartbeat 10 s after the last resolution asks for another.
    h.image.by_name["orders-eu"] = Topic.of("orders-eu", uuid.UUID(int=7), [[0]] * 3)
    h.now += 5000
    h.beat("a", 3, owned=[(TID, [0, 1])])
    h.tick(0)
    assert len(_values(h, REGULAR_EXPRESSION)) == 1  # too soon
    h.now += 6000
    h.beat("a", 3, owned=[(TID, [0, 1])])
    h.tick(0)
    assert _values(h, REGULAR_EXPRESSION)[-1].topics == ("orders", "orders-eu")
    assert _values(h, METADATA)[-1] == GroupEpochValue(4, group_hash(
        TopicMetadata(t.topic_id, t.name, len(t.partitions)) for t in h.image.topics()
        if t.name != "other"))
    h.now += 1000
    h.beat("a", 3, owned=[(TID, [0, 1])])
    assert _assigned(h, "a") == {"orders": 2, "orders-eu": 3}
    h.restart()
    assert set(h.groups.consumer.get("g").regexes) == {"orders.*"}
    # A topic goes: its hash changes at once, no resolution needed.
    del h.image.by_name["orders-eu"]
    h.now += 1000
    assert h.beat("a", 4, owned=[(TID, [0, 1])]).member_epoch == 5
    assert _assigned(h, "a") == {"orders": 2}


def test_a_regex_no_member_uses_is_deleted() -> None:
    h = Harness(image=Image(orders=2, payments=1))
    h.join("a", subscribed_topic_names=None, subscribed_topic_regex="orders.*")
    h.tick(1000)
    h.now += 11_000
    h.beat("a", 2, owned=[], subscribed_topic_regex="pay.*")
    assert _values(h, REGULAR_EXPRESSION)[-1] is None
    h.tick(0)
    assert set(h.groups.consumer.get("g").regexes) == {"pay.*"}
    h.beat("a", -1)
    assert _values(h, REGULAR_EXPRESSION)[-1] is None
    assert h.groups.consumer.get("g").regexes == {}


def test_partitions_keep_the_epoch_they_were_assigned_at() -> None:
    h = Harness()
    h.join("a")  # epoch 2: all four partitions
    h.now += 1000
    h.join("b")  # epoch 3
    a = h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])])
    revoking = _values(h, CURRENT_ASSIGNMENT, "a")[-1]
    assert revoking.pending_revocation and revoking.epochs == {(TID, p): 2 for p in range(4)}
    h.beat("a", 2, owned=[(TID, parts(a))])
    b = h.beat("b", 3, owned=[])
    kept = _values(h, CURRENT_ASSIGNMENT, "a")[-1]
    taken = _values(h, CURRENT_ASSIGNMENT, "b")[-1]
    assert kept.member_epoch == 3 and kept.epochs == {(TID, p): 2 for p in parts(a)}
    assert taken.epochs == {(TID, p): 3 for p in parts(b)}
    h.restart()
    assert h.groups.consumer.get("g").members["a"].owned_epochs() == kept.epochs


def _without_tags(value: CurrentAssignmentValue) -> bytes:
    """A current assignment as Kafka 4.0 and josefk before wrote it: no assignment epochs."""
    def topics(assignment: dict) -> bytes:
        out = bytes([len(assignment) + 1])
        for topic_id, ps in sorted(assignment.items()):
            out += topic_id.bytes + bytes([len(ps) + 1])
            out += b"".join(struct.pack(">i", p) for p in sorted(ps)) + b"\x00"
        return out
    return struct.pack(">hiib", 0, value.member_epoch, value.previous_member_epoch,
                       value.state) + topics(value.assigned) + \
        topics(value.pending_revocation) + b"\x00"


def test_records_without_the_new_fields_load() -> None:
    """A log of the older forms (no hash, no assignment epochs, the topics' metadata in
    a type 4 record) loads; the first heartbeat computes the hash, starts one new target
    assignment, and removes the type 4 record, as Kafka 4.3 does."""
    h = Harness()
    h.join("a")
    old_log = []
    for raw_key, raw_value in h.log:
        key = decode_key(raw_key)
        value = decode_value(key, raw_value)
        if isinstance(value, GroupEpochValue):
            old_log.append(encode_record((key, GroupEpochValue(value.epoch))))
            old_log.append(encode_record((ConsumerKey(PARTITION_METADATA, "g"),
                                          PartitionMetadataValue((TopicMetadata(TID, "t", 4),))
                                          )))
        elif isinstance(value, CurrentAssignmentValue):
            old_log.append((raw_key, _without_tags(value)))
        else:
            old_log.append((raw_key, raw_value))
    h.log = old_log
    h.restart()
    group = h.groups.consumer.get("g")
    assert (group.group_epoch, group.metadata_hash, group.partition_metadata_record) == \
        (2, 0, True)
    assert group.members["a"].owned_epochs() == {(TID, p): 2 for p in range(4)}
    h.now += 1000
    assert h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])]).member_epoch == 3
    assert h.groups.consumer.get("g").members["a"].assigned == {TID: frozenset(range(4))}
    assert _values(h, PARTITION_METADATA)[-1] is None
    assert _values(h, CURRENT_ASSIGNMENT, "a")[-1].epochs == {(TID, p): 2 for p in range(4)}
    assert h.groups.consumer.get("g").partition_metadata_record is False
