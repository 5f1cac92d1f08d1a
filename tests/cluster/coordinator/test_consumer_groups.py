"""Consumer groups (KIP-848) in the coordinator's groups, without I/O: heartbeats write
records, records are the state (replayed after writing, or from the log after a restart),
timers fence members, offsets are committed at the member's epoch."""

from __future__ import annotations

import uuid

from josefk.cluster.coordinator.group.api import Error, GroupConfig, GroupError, PartitionCommit
from josefk.cluster.coordinator.group.consumer.api import ConsumerGroupConfig, HeartbeatRequest
from josefk.cluster.coordinator.group.consumer.manager import ConsumerGroups
from josefk.cluster.coordinator.group.consumer.member import MemberState
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.records import (
    decode_key,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from josefk.cluster.metadata.store import Topic

TID = uuid.UUID(int=42)


class Image:
    """A TopicImage of a few topics."""

    def __init__(self, **partitions: int) -> None:
        self.by_name = {name: Topic.of(name, uuid.UUID(int=42 + i), [[0]] * n)
                        for i, (name, n) in enumerate(partitions.items())}

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return next((t for t in self.by_name.values() if t.topic_id == topic_id), None)

    def topics(self) -> list[Topic]:
        return list(self.by_name.values())


class Harness:
    """Groups whose records go through their encoding and back, as the coordinator's."""

    def __init__(self, image: Image | None = None, **config: object) -> None:
        self.now = 1_000_000
        self.image = image or Image(t=4)
        self.consumer_config = ConsumerGroupConfig(**config)  # type: ignore[arg-type]
        self.groups = self._fresh()
        self.log: list[tuple[bytes, bytes | None]] = []

    def _fresh(self) -> Groups:
        return Groups(GroupConfig(), lambda: self.now,
                      ConsumerGroups(self.consumer_config, lambda: self.now, self.image))

    def write(self, records: list) -> None:
        for record in records:
            key, value = encode_record(record)
            self.log.append((key, value))
            decoded = decode_key(key)
            self.groups.replay((decoded, decode_value(decoded, value)))

    def beat(self, member: str, epoch: int, **fields: object):
        fields.setdefault("owned", None)
        result = self.groups.consumer.heartbeat(HeartbeatRequest("g", member, epoch, **fields))
        self.write(result.records)
        if result.on_success is not None:
            result.on_success()
        return result.response

    def join(self, member: str, **fields: object):
        fields.setdefault("subscribed_topic_names", ("t",))
        return self.beat(member, 0, rebalance_timeout_ms=30000, owned=[], **fields)

    def restart(self) -> None:
        """A new coordinator replaying the log."""
        self.groups = self._fresh()
        for key, value in self.log:
            decoded = decode_key(key)
            self.groups.replay((decoded, decode_value(decoded, value)))

    def tick(self, ms: int) -> None:
        self.now += ms
        self.groups.next_deadline("g")
        self.write(self.groups.on_timer("g"))


def parts(r) -> list[int]:
    return sorted(p for ps in (r.assignment or {}).values() for p in ps)


def test_members_share_and_revoke_before_assign() -> None:
    h = Harness()
    a = h.join("a")
    assert (a.error, a.member_epoch, parts(a)) == (Error.NONE, 2, [0, 1, 2, 3])
    h.now += 1000
    b = h.join("b")
    assert (b.member_epoch, parts(b)) == (3, [])
    a2 = h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])])
    assert a2.member_epoch == 2 and len(parts(a2)) == 2
    assert h.groups.consumer.get("g").members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert h.beat("b", 3, owned=[]).assignment is None  # still a's
    a3 = h.beat("a", 2, owned=[(TID, parts(a2))])
    assert a3.member_epoch == 3
    b2 = h.beat("b", 3, owned=[])
    assert sorted(parts(a2) + parts(b2)) == [0, 1, 2, 3]
    assert h.groups.consumer.describe("g").state == "Stable"


def test_leave_and_the_survivor_takes_everything() -> None:
    h = Harness()
    h.join("a")
    h.now += 1000
    h.join("b")
    left = h.beat("a", -1)
    assert (left.error, left.member_epoch) == (Error.NONE, -1)
    h.now += 1000
    b = h.beat("b", 3, owned=[])
    assert (b.member_epoch, parts(b)) == (4, [0, 1, 2, 3])


def test_errors() -> None:
    h = Harness(max_size=2)
    assert h.beat("x", 1).error is Error.GROUP_ID_NOT_FOUND
    h.join("a")
    assert h.beat("nobody", 2).error is Error.UNKNOWN_MEMBER_ID
    h.join("b")
    assert h.join("c").error is Error.GROUP_MAX_SIZE_REACHED
    assert h.beat("a", 7).error is Error.FENCED_MEMBER_EPOCH
    assert h.join("a", server_assignor="sticky").error is Error.UNSUPPORTED_ASSIGNOR
    assert h.beat("a", 0, subscribed_topic_names=("t",), owned=[]).error is \
        Error.INVALID_REQUEST
    assert h.join("c", subscribed_topic_regex="(a)\\1").error is \
        Error.INVALID_REGULAR_EXPRESSION


def test_a_lost_response_is_forgiven_one_epoch_back() -> None:
    h = Harness()
    h.join("a")
    h.now += 1000
    h.join("b")
    h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])])
    a = h.groups.consumer.get("g").members["a"]
    h.beat("a", 2, owned=[(TID, sorted(a.assigned[TID]))])  # now epoch 3
    # The answer was lost: the member comes back with epoch 2 and what it kept.
    again = h.beat("a", 2, owned=[(TID, sorted(a.assigned[TID]))])
    assert (again.error, again.member_epoch) == (Error.NONE, 3)
    assert h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])]).error is Error.FENCED_MEMBER_EPOCH


def test_session_timeout_fences_a_silent_member() -> None:
    h = Harness(session_timeout_ms=45000)
    h.join("a")
    h.now += 1000
    h.join("b")
    h.tick(30000)
    h.beat("b", 3, owned=[])
    h.tick(20000)  # a is silent for 51 s, b for 20 s
    assert set(h.groups.consumer.get("g").members) == {"b"}
    assert h.groups.consumer.get("g").group_epoch == 4


def test_revocation_has_the_rebalance_timeout() -> None:
    h = Harness()
    h.join("a")
    h.now += 1000
    h.join("b")
    h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])], rebalance_timeout_ms=5000)
    h.tick(6000)  # a never confirmed the revocation
    assert set(h.groups.consumer.get("g").members) == {"b"}


def test_static_member_leaves_for_a_while_and_comes_back() -> None:
    h = Harness()
    a = h.join("a", instance_id="i1")
    assert h.join("a2", instance_id="i1").error is Error.UNRELEASED_INSTANCE_ID
    away = h.beat("a", -2, instance_id="i1")
    assert away.member_epoch == -2
    back = h.join("a2", instance_id="i1")
    assert (back.error, parts(back)) == (Error.NONE, parts(a))
    assert set(h.groups.consumer.get("g").members) == {"a2"}


def test_regex_subscription_follows_topics() -> None:
    """The group's timer resolves the expression (not the heartbeat), as Kafka's."""
    h = Harness(image=Image(orders=2, payments=1, other=1))
    r = h.join("a", subscribed_topic_names=None, subscribed_topic_regex="orders|pay.*")
    assert (r.member_epoch, parts(r)) == (2, [])
    h.tick(1000)
    r = h.beat("a", 2, owned=[])
    assert r.member_epoch == 3 and sum(len(ps) for ps in r.assignment.values()) == 3


def test_the_log_brings_the_group_back() -> None:
    h = Harness()
    h.join("a")
    h.now += 1000
    h.join("b")
    a = h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])])
    before = h.groups.consumer.get("g")
    h.restart()
    after = h.groups.consumer.get("g")
    assert (after.group_epoch, after.assignment_epoch, after.members, after.target) == \
        (before.group_epoch, before.assignment_epoch, before.members, before.target)
    # Members go on with their epochs.
    assert h.beat("a", 2, owned=[(TID, parts(a))]).member_epoch == 3


def test_offsets_are_committed_at_the_member_epoch() -> None:
    h = Harness()
    h.join("a")
    commit = [("t", [PartitionCommit(0, 10)])]
    result = h.groups.commit_offsets("g", "a", None, 2, -1, commit, 9)
    assert result.response == {("t", 0): Error.NONE}
    h.write(result.records)
    for member, epoch, error in (("a", 1, Error.STALE_MEMBER_EPOCH),
                                 ("zz", 2, Error.UNKNOWN_MEMBER_ID)):
        try:
            h.groups.commit_offsets("g", member, None, epoch, -1, commit, 9)
        except GroupError as e:
            assert e.code is error
        else:
            raise AssertionError("accepted")
    assert h.groups.fetch_offsets("g", [("t", [0])])[0][1][0].offset == 10
    assert h.groups.consumer.validate_offset_fetch("g", "a", 1) is Error.STALE_MEMBER_EPOCH
    assert h.groups.consumer.validate_offset_fetch("g", None, -1) is Error.NONE


def test_listing_deleting_and_classic_groups_side_by_side() -> None:
    h = Harness()
    h.join("a")
    assert h.groups.list_all(types=["consumer"]) == [("g", "consumer", "Stable", "consumer")]
    assert h.groups.list_all(types=["classic"]) == []
    assert h.groups.delete_groups(["g"]).response == {"g": Error.NON_EMPTY_GROUP}
    h.beat("a", -1)
    result = h.groups.delete_groups(["g"])
    assert result.response == {"g": Error.NONE}
    h.write(result.records)
    assert h.groups.consumer.get("g") is None


# Records Apache Kafka 4.3.1 wrote for a member joining a group subscribed to a topic that
# does not exist, and leaving (key hex, value hex), read from its __consumer_offsets.
KAFKA_RECORDS = [
    ("0005000e70726f62652d6436346534363935002435383030383633612d323732322d346339302d393766632d"
     "353635613832613161353365", "000000000b636f6d7061742d7261770b2f3132372e302e302e31020d6e6f"
     "73756368746f7069633201000075300001000100"),
    ("0003000e70726f62652d6436346534363935", "00000000000200"),
    ("0007000e70726f62652d6436346534363935002435383030383633612d323732322d346339302d393766632d"
     "353635613832613161353365", "00000100"),
    ("0006000e70726f62652d6436346534363935", "000000000002010008000001a2209b8d6a"),
    ("0008000e70726f62652d6436346534363935002435383030383633612d323732322d346339302d393766632d"
     "353635613832613161353365", "0000000000020000000000010100"),
    ("0008000e70726f62652d6436346534363935002435383030383633612d323732322d346339302d393766632d"
     "353635613832613161353365", None),
]


def test_records_as_kafka_writes_them() -> None:
    groups = Groups(GroupConfig(), lambda: 0)
    for key_hex, value_hex in KAFKA_RECORDS:
        key, value = bytes.fromhex(key_hex), value_hex and bytes.fromhex(value_hex)
        decoded = decode_key(key)
        decoded_value = decode_value(decoded, value)
        assert encode_key(decoded) == key
        if value is not None:
            assert encode_value(decoded_value) == value
        groups.replay((decoded, decoded_value))
    group = groups.consumer.get("probe-d64e4695")
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    [member] = group.members.values()
    assert (member.member_epoch, member.client_id, member.subscribed_topic_names) == \
        (0, "compat-raw", ("nosuchtopic2",))


def test_one_target_assignment_per_assignment_interval() -> None:
    h = Harness(assignment_interval_ms=1000)
    h.join("a")
    b = h.join("b")  # at the same moment: the new target waits
    assert (b.member_epoch, parts(b)) == (2, [])
    group = h.groups.consumer.get("g")
    assert (group.state.value, group.group_epoch, group.assignment_epoch) == ("Assigning", 3, 2)
    h.now += 1000
    assert h.beat("b", 2, owned=[]).member_epoch == 3
    assert len(parts(h.beat("a", 2, owned=[(TID, [0, 1, 2, 3])]))) == 2


def test_expiry_deletes_an_empty_group_and_its_old_offsets() -> None:
    h = Harness()
    h.join("a")
    result = h.groups.commit_offsets("g", "a", None, 2, -1, [("t", [PartitionCommit(0, 5)])], 9)
    h.write(result.records)
    h.now += 8 * 24 * 3600 * 1000
    assert h.groups.expire_offsets() == []  # a member subscribes to t
    h.beat("a", -1)
    h.write(h.groups.expire_offsets())
    assert h.groups.consumer.get("g") is None
    assert h.groups.fetch_offsets("g", [("t", [0])])[0][1][0].offset == -1


def test_a_known_member_joining_again_goes_on_as_it_is() -> None:
    h = Harness()
    h.join("a")
    again = h.join("a")  # Kafka 4.3 neither fences nor resets it
    assert (again.error, again.member_epoch, parts(again)) == (Error.NONE, 2, [0, 1, 2, 3])


def test_partitions_added_while_the_coordinator_was_away() -> None:
    h = Harness(image=Image(t=2))
    h.join("a")
    h.restart()
    h.now += 1000
    same = h.beat("a", 2, owned=[(TID, [0, 1])])
    assert (same.member_epoch, same.assignment) == (2, None)  # nothing changed: no rebalance
    h.image.by_name["t"] = Topic.of("t", TID, [[0]] * 3)
    h.restart()
    h.now += 1000
    grown = h.beat("a", 2, owned=[(TID, [0, 1])])
    assert (grown.member_epoch, parts(grown)) == (3, [0, 1, 2])
