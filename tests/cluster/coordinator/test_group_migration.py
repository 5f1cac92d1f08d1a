"""Online migration between the classic and the consumer protocol, in the coordinator's
groups without I/O: a classic group with members becomes a consumer group at the first
ConsumerGroupHeartbeat, its classic members go on through JoinGroup, SyncGroup, Heartbeat
and LeaveGroup, the records replay after a restart, and the group becomes classic again
when the last consumer-protocol member leaves."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from test_consumer_groups import TID, Harness, parts

from josefk.cluster.coordinator.group.api import (
    Error,
    GroupConfig,
    GroupError,
    JoinRequest,
    JoinResult,
    PartitionCommit,
    SyncRequest,
)
from josefk.cluster.coordinator.group.consumer import migration
from josefk.cluster.coordinator.group.consumer.api import HeartbeatRequest, Refused
from josefk.cluster.coordinator.group.consumer.decoding import decode_value
from josefk.cluster.coordinator.group.consumer.manager import ConsumerGroups
from josefk.cluster.coordinator.group.consumer.member import MemberState
from josefk.cluster.coordinator.group.consumer.records import (
    ClassicMetadata,
    ConsumerKey,
    MemberMetadataValue,
    encode_value,
)
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.records import GroupMetadataKey
from josefk.cluster.coordinator.group.state import GroupState

PARTITIONS = 4


def subscription(owned: list[int] | None = None) -> bytes:
    return bytes(ConsumerProtocolSubscription(
        version=1, topics=["t"], user_data=None,
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(
            topic="t", partitions=owned or [])]).encode())


def assignment(partitions: list[int]) -> bytes:
    return bytes(ConsumerProtocolAssignment(
        version=1, assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(
            topic="t", partitions=partitions)], user_data=None).encode())


def assigned(data: bytes) -> list[int]:
    return sorted(p for tp in ConsumerProtocolAssignment.decode(data).assigned_partitions
                  for p in tp.partitions)


class Mixed(Harness):
    """A harness whose groups start classic ones without an initial delay."""

    def _fresh(self) -> Groups:
        return Groups(GroupConfig(initial_rebalance_delay_ms=0), lambda: self.now,
                      ConsumerGroups(self.consumer_config, lambda: self.now, self.image))

    def classic_join(self, member_id: str = "", owned: list[int] | None = None,
                     session_timeout_ms: int = 10000) -> JoinResult | None:
        request = JoinRequest("g", member_id, None, "consumer",
                              (("range", subscription(owned)),), session_timeout_ms, 30000,
                              client_id="classic", api_version=3)
        consumer = self.groups.consumer.get("g")
        if consumer is not None and consumer.members:
            result = self.groups.consumer.classic.join(consumer, request)
            self.write(result.records)
            if result.on_success is not None:
                result.on_success()
            return result.response
        joined = self.groups.join(request)
        self.write(joined.records)
        return joined.response.value

    def classic_sync(self, member_id: str, generation: int,
                     assignments: tuple[tuple[str, bytes], ...] = ()):
        request = SyncRequest("g", generation, member_id, None, "consumer", "range",
                              assignments)
        consumer = self.groups.consumer.get("g")
        if consumer is not None:
            return self.groups.consumer.classic.sync(consumer, request)
        synced = self.groups.sync(request)
        self.write(synced.records)
        return synced.response.value

    def classic_heartbeat(self, member_id: str, generation: int) -> Error:
        consumer = self.groups.consumer.get("g")
        if consumer is not None:
            return self.groups.consumer.classic.heartbeat(consumer, member_id, None,
                                                          generation)
        return self.groups.heartbeat("g", member_id, None, generation)

    def classic_group(self) -> tuple[str, str]:
        """Two classic members sharing t's four partitions, two each: their ids."""
        self.classic_join()
        self.classic_join()
        self.tick(0)  # the initial delay (0), extended once for the second member,
        self.tick(0)  # ends the join phase
        group = self.groups.get("g")
        assert group is not None and group.is_in(GroupState.COMPLETING_REBALANCE)
        leader = group.leader_id
        other = next(m for m in group.members if m != leader)
        self.classic_sync(other, group.generation)
        self.classic_sync(leader, group.generation, ((leader, assignment([0, 1])),
                                                     (other, assignment([2, 3]))))
        assert group.is_in(GroupState.STABLE)
        return leader, other

    def upgrade(self, member: str = "new"):
        classic = self.groups.get("g")
        records = migration.upgrade(classic, 0, self.consumer_config, self.image)
        converted = migration.converted("g", records)
        result = self.groups.consumer.heartbeat(HeartbeatRequest(
            "g", member, 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",),
            owned=[]), converted)
        self.write(records + list(result.records))
        result.on_success()
        return result.response

    def owners(self) -> list[int]:
        """Every partition the consumer group's members own, with repeats."""
        group = self.groups.consumer.get("g")
        return sorted(p for m in group.members.values()
                      for ps in m.owned_partitions().values() for p in ps)


def test_classic_metadata_is_written_as_kafka_writes_its_tagged_struct() -> None:
    key = ConsumerKey(5, "g", "m")
    plain = MemberMetadataValue(None, None, "c", "/h", ("t",), None, 30000, None)
    assert encode_value(plain).endswith(b"\x01\x00\x01\x00")  # null: tag 0, one byte 0
    classic = MemberMetadataValue(None, None, "c", "/h", ("t",), None, 30000, None,
                                  ClassicMetadata(10000, (("range", b"\x00\x01"),)))
    data = encode_value(classic)
    # One tagged field: tag 0, its size, 1 (not null), session timeout, one protocol
    # (compact name and bytes, no tags), no tags.
    struct = b"\x01" + (10000).to_bytes(4, "big") + b"\x02\x06range\x03\x00\x01\x00\x00"
    assert data.endswith(b"\x01\x00" + bytes([len(struct)]) + struct)
    assert decode_value(key, data).classic == classic.classic
    assert decode_value(key, encode_value(plain)).classic is None


def test_a_classic_group_with_members_upgrades_and_shares_its_partitions() -> None:
    h = Mixed()
    leader, other = h.classic_group()
    generation = h.groups.get("g").generation
    new = h.upgrade()
    assert h.groups.get("g") is None
    group = h.groups.consumer.get("g")
    assert group is not None and set(group.members) == {leader, other, "new"}
    assert group.members[leader].classic == ClassicMetadata(
        10000, (("range", subscription()),))
    assert parts(new) == []  # every partition is still a classic member's
    assert h.owners() == [0, 1, 2, 3]
    # The classic members learn of the new epoch through Heartbeat and rejoin.
    assert h.classic_heartbeat(leader, generation) is Error.REBALANCE_IN_PROGRESS
    assert h.classic_heartbeat(other, generation + 5) is Error.ILLEGAL_GENERATION
    epoch = group.group_epoch
    # Uniform and sticky: one classic member keeps its two partitions, one gives one up.
    coop = next(m for m in (leader, other) if len(group.target[m][TID]) == 1)
    eager = other if coop == leader else leader
    had = sorted(group.members[coop].assigned[TID])
    keeps = sorted(group.target[coop][TID])
    freed = sorted(set(had) - set(keeps))
    # Cooperative, it rejoins owning both: it must give one up first, and stays at its
    # generation meanwhile.
    joined = h.classic_join(coop, owned=had)
    assert (joined.error, joined.generation_id, joined.protocol_type, joined.protocol_name,
            joined.leader) == (Error.NONE, generation, "consumer", "range", "")
    member = h.groups.consumer.get("g").members[coop]
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    assert assigned(h.classic_sync(coop, generation).assignment) == keeps
    assert h.classic_heartbeat(coop, generation) is Error.REBALANCE_IN_PROGRESS
    assert parts(h.beat("new", new.member_epoch, owned=[])) == []  # still coop's
    joined = h.classic_join(coop, owned=keeps)
    assert joined.generation_id == epoch
    assert assigned(h.classic_sync(coop, epoch).assignment) == keeps
    assert h.classic_heartbeat(coop, epoch) is Error.NONE
    assert parts(h.beat("new", new.member_epoch, owned=[])) == freed
    # Eager, the other one gave everything up before rejoining; it gets its two back.
    joined = h.classic_join(eager, owned=[])
    back = assigned(h.classic_sync(eager, joined.generation_id).assignment)
    assert back == sorted(group.target[eager][TID]) and len(back) == 2
    assert h.owners() == [0, 1, 2, 3]  # each partition owned once
    assert h.groups.consumer.describe("g").state == "Stable"


def test_classic_member_errors() -> None:
    h = Mixed()
    leader, _ = h.classic_group()
    h.upgrade()
    group = h.groups.consumer.get("g")
    epoch = group.members[leader].member_epoch
    join = h.groups.consumer.classic.join
    unsupported = join(group, JoinRequest("g", "", None, "consumer",
                                          (("roundrobin", subscription()),), 10000, 30000))
    assert unsupported.response.error is Error.INCONSISTENT_GROUP_PROTOCOL
    other_type = join(group, JoinRequest("g", "", None, "connect",
                                         (("range", subscription()),), 10000, 30000))
    assert other_type.response.error is Error.INCONSISTENT_GROUP_PROTOCOL
    fresh = join(group, JoinRequest("g", "", None, "consumer", (("range", subscription()),),
                                    10000, 30000, api_version=9))
    assert fresh.response.error is Error.MEMBER_ID_REQUIRED and fresh.response.member_id
    assert fresh.records == []  # a member only once it joins with its id
    sync = h.groups.consumer.classic.sync
    assert sync(group, SyncRequest("g", epoch, leader, None, "consumer", "roundrobin")
                ).error is Error.INCONSISTENT_GROUP_PROTOCOL
    assert sync(group, SyncRequest("g", epoch, leader)).error is Error.REBALANCE_IN_PROGRESS
    assert sync(group, SyncRequest("g", epoch, "nobody")).error is Error.UNKNOWN_MEMBER_ID
    assert sync(group, SyncRequest("g", epoch + 1, leader)).error is Error.ILLEGAL_GENERATION


def test_a_classic_member_that_does_not_rejoin_in_time_is_fenced() -> None:
    """Told to rejoin, a classic member must within its rebalance timeout (30 s), however
    it heartbeats meanwhile."""
    h = Mixed()
    leader, other = h.classic_group()
    h.upgrade()
    epoch = h.groups.consumer.get("g").members[leader].member_epoch
    assert h.classic_heartbeat(leader, epoch) is Error.REBALANCE_IN_PROGRESS  # at 0 s
    for _ in range(4):  # 8 s apart, within the 10 s sessions; the other from 8 s on
        h.tick(8000)
        h.tick(0)
        members = h.groups.consumer.get("g").members
        for member_id in (leader, other):
            if member_id in members:
                assert h.classic_heartbeat(member_id, epoch) is Error.REBALANCE_IN_PROGRESS
    members = h.groups.consumer.get("g").members
    assert leader not in members and other in members  # at 32 s: 30 s and 38 s


def test_classic_members_commit_at_their_generation() -> None:
    h = Mixed()
    leader, _ = h.classic_group()
    new = h.upgrade()
    epoch = h.groups.consumer.get("g").members[leader].member_epoch
    commit = [("t", [PartitionCommit(0, 5)])]
    result = h.groups.commit_offsets("g", leader, None, epoch, -1, commit, api_version=8)
    assert result.response == {("t", 0): Error.NONE}
    with pytest.raises(GroupError) as stale:
        h.groups.commit_offsets("g", leader, None, epoch + 1, -1, commit, api_version=8)
    assert stale.value.code is Error.ILLEGAL_GENERATION
    with pytest.raises(GroupError) as old:  # a consumer-protocol member needs v9
        h.groups.commit_offsets("g", "new", None, new.member_epoch, -1, commit, api_version=8)
    assert old.value.code is Error.UNSUPPORTED_VERSION


def test_a_restart_mid_migration_replays_the_mixed_group() -> None:
    h = Mixed()
    leader, _ = h.classic_group()
    h.upgrade()
    before = h.groups.consumer.get("g")
    h.restart()
    after = h.groups.consumer.get("g")
    assert h.groups.get("g") is None
    assert after.members == before.members and after.target == before.target
    assert after.members[leader].classic is not None
    assert after.members["new"].classic is None


def test_the_last_consumer_member_leaving_makes_the_group_classic_again() -> None:
    h = Mixed()
    leader, other = h.classic_group()
    new = h.upgrade()
    targets = dict(h.groups.consumer.get("g").target)
    left = h.beat("new", -1)
    assert left.error is Error.NONE
    assert h.groups.consumer.get("g") is None
    group = h.groups.get("g")
    assert group is not None and group.protocol_type == "consumer"
    assert set(group.members) == {leader, other}
    assert group.is_in(GroupState.PREPARING_REBALANCE)
    assert group.generation == new.member_epoch
    # Each classic member's assignment is its target one, in its protocol's version.
    for m in group.members.values():
        assert assigned(m.assignment) == sorted(targets[m.member_id][TID])
    assert h.classic_heartbeat(leader, group.generation) is Error.REBALANCE_IN_PROGRESS
    h.classic_join(leader)
    h.classic_join(other)
    assert group.is_in(GroupState.COMPLETING_REBALANCE)
    # And after a restart it is a classic group, the consumer one gone.
    h.restart()
    assert h.groups.consumer.get("g") is None and h.groups.get("g") is not None


def test_a_classic_member_leaving_a_consumer_group_bumps_its_epoch() -> None:
    h = Mixed()
    leader, other = h.classic_group()
    new = h.upgrade()
    group = h.groups.consumer.get("g")
    left = h.groups.consumer.classic.leave(group, [(other, None), ("nobody", None),
                                                   ("", "no-such-instance")])
    assert left.response == [Error.NONE, Error.UNKNOWN_MEMBER_ID, Error.UNKNOWN_MEMBER_ID]
    h.write(left.records)
    group = h.groups.consumer.get("g")
    assert set(group.members) == {leader, "new"}
    assert group.group_epoch == new.member_epoch + 1
    # A consumer-protocol member is not a classic one.
    assert h.groups.consumer.classic.heartbeat(group, "new", None, new.member_epoch) is \
        Error.UNKNOWN_MEMBER_ID


def test_a_static_classic_member_rejoining_without_its_id_replaces_the_old_one() -> None:
    """Kafka's getOrMaybeSubscribeStaticConsumerGroupMember: the instance joins under a new
    member id with the old one's assignment; the old id is fenced from then on."""
    h = Mixed()
    h.classic_group()
    h.upgrade()

    def join(member_id: str, instance_id: str) -> JoinResult:
        group = h.groups.consumer.get("g")
        result = h.groups.consumer.classic.join(group, JoinRequest(
            "g", member_id, instance_id, "consumer", (("range", subscription()),), 10000,
            30000, api_version=5))
        h.write(result.records)
        if result.on_success is not None:
            result.on_success()
        return result.response

    first = join("", "instance-1")
    assert first.error is Error.NONE
    second = join("", "instance-1")
    assert second.error is Error.NONE and second.member_id != first.member_id
    group = h.groups.consumer.get("g")
    assert first.member_id not in group.members
    replaced = group.members[second.member_id]
    assert replaced.instance_id == "instance-1" and replaced.member_epoch > 0
    assert replaced.classic is not None and replaced.subscribed_topic_names == ("t",)
    assert h.groups.consumer.classic.heartbeat(group, first.member_id, "instance-1",
                                               first.generation_id) is \
        Error.FENCED_INSTANCE_ID
    assert join(first.member_id, "instance-1").error is Error.FENCED_INSTANCE_ID
    assert join("someone", "instance-2").error is Error.UNKNOWN_MEMBER_ID
    assert join(second.member_id, "instance-1").error is Error.NONE


def test_classic_members_that_stop_heartbeating_are_fenced_after_their_session() -> None:
    h = Mixed()
    leader, other = h.classic_group()
    h.upgrade()
    h.tick(5000)
    h.beat("new", h.groups.consumer.get("g").members["new"].member_epoch, owned=[])
    h.tick(6000)  # past the classic members' 10 s session, not the new member's 45 s
    h.tick(0)  # one member at a time
    group = h.groups.consumer.get("g")
    assert group is not None and set(group.members) == {"new"}


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_policies_refuse_the_upgrade(policy: str) -> None:
    h = Mixed(migration_policy=policy)
    h.classic_group()
    with pytest.raises(Refused) as refused:
        h.upgrade()
    assert refused.value.code is Error.GROUP_ID_NOT_FOUND
    assert refused.value.message == "Cannot upgrade classic group g to consumer group " \
        "because the online upgrade is disabled."
    assert h.groups.get("g").is_in(GroupState.STABLE)


def test_upgrade_only_keeps_the_consumer_group_when_its_last_member_leaves() -> None:
    h = Mixed(migration_policy="upgrade")
    h.classic_group()
    h.upgrade()
    h.beat("new", -1)
    assert h.groups.get("g") is None and len(h.groups.consumer.get("g").members) == 2


def test_a_group_of_another_protocol_type_is_not_upgraded() -> None:
    h = Mixed()
    h.classic_group()
    h.groups.get("g").protocol_type = "connect"
    with pytest.raises(Refused) as refused:
        h.upgrade()
    assert "does not use the consumer embedded protocol" in refused.value.message


def test_the_records_of_an_upgrade_start_with_the_classic_tombstone() -> None:
    h = Mixed()
    leader, other = h.classic_group()
    records = migration.upgrade_records(h.groups.get("g"), h.image)
    keys = [(type(k).__name__, getattr(k, "type", None)) for k, _ in records]
    assert keys == [("GroupMetadataKey", None)] + [("ConsumerKey", 5)] * 2 + \
        [("ConsumerKey", 3)] + [("ConsumerKey", 7)] * 2 + [("ConsumerKey", 6)] + \
        [("ConsumerKey", 8)] * 2
    assert records[0] == (GroupMetadataKey("g"), None)
    targets = {k.member_id: v.partitions for k, v in records if getattr(k, "type", 0) == 7}
    assert targets == {leader: {TID: frozenset({0, 1})}, other: {TID: frozenset({2, 3})}}
