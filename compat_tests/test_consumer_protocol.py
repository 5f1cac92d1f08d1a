"""KIP-848's consumer group protocol on the wire: ConsumerGroupHeartbeat and
ConsumerGroupDescribe as a Kafka 4.3 broker answers them (also green with ``--kafka``).

Raw requests (kafka-python's classes for the apis it has, Kafka's JSON specs for the two
it lacks) show what no stock client exposes: member and group epochs, the target
assignment, and revocation before assignment. The stock clients' tests are in
``test_consumer_groups_848.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from josefk.protocol.schemas.consumer_groups import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)

from .conftest import Broker
from .rawkafka import RawConnection

NONE, UNKNOWN_MEMBER_ID, INVALID_REQUEST = 0, 25, 42
GROUP_ID_NOT_FOUND, FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR = 69, 110, 112
UNSUPPORTED_VERSION, STALE_MEMBER_EPOCH, INVALID_REGULAR_EXPRESSION = 35, 113, 128
ASSIGNMENT_INTERVAL_S = 1.1  # group.consumer.assignment.interval.ms, 1000 by default
RETRIABLE = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
TopicPartitions = ConsumerGroupHeartbeatRequest.TopicPartitions


@pytest.fixture
def conn(broker: Broker) -> Iterator[RawConnection]:
    with RawConnection(broker.bootstrap, timeout=30.0) as c:
        yield c


def _find_coordinator(conn: RawConnection, group: str) -> None:
    """Make sure the group's coordinator is up (Kafka creates __consumer_offsets lazily)."""
    for _ in range(150):
        r = conn.request(FindCoordinatorRequest[3](key=group, key_type=0), 3)
        if r.error_code == NONE:
            return
        time.sleep(0.2)
    raise AssertionError(f"no coordinator for {group}: {r}")


def beat(conn: RawConnection, group: str, member: str, epoch: int, *,
         topics: list[str] | None = None, owned: dict[uuid.UUID, list[int]] | None = None,
         assignor: str | None = None, rebalance_timeout_ms: int = -1, version: int = 1,
         regex: str | None = None) -> object:
    request = ConsumerGroupHeartbeatRequest[version](
        group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=topics,
        subscribed_topic_regex=regex, server_assignor=assignor,
        topic_partitions=None if owned is None else [
            TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned.items()])
    deadline = time.monotonic() + 30
    while True:
        response = conn.request(request, version)
        # The coordinator may still be loading its partition (Kafka loads it lazily).
        if response.error_code not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def join(conn: RawConnection, group: str, topic: str, member: str | None = None,
         assignor: str | None = None) -> object:
    return beat(conn, group, member or str(uuid.uuid4()), 0, topics=[topic], owned={},
                rebalance_timeout_ms=30000, assignor=assignor)


def assigned(response: object) -> dict[uuid.UUID, list[int]] | None:
    if response.assignment is None:
        return None
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


def topic_id(admin: KafkaAdminClient, topic: str) -> uuid.UUID:
    [described] = admin.describe_topics([topic])
    return uuid.UUID(str(described["topic_id"]))


def wait_until_assignable(conn: RawConnection, topic: str) -> None:
    """Until a throwaway group gets the topic's partitions: Kafka's group coordinator may
    learn of a new topic a little after the topic's creation is answered."""
    deadline = time.monotonic() + 30
    while True:
        group = f"warm-{uuid.uuid4()}"
        _find_coordinator(conn, group)
        r = join(conn, group, topic)
        beat(conn, group, r.member_id, -1)
        if assigned(r):
            return
        assert time.monotonic() < deadline, f"{topic} never became assignable"
        time.sleep(0.5)


def test_join_heartbeat_leave(conn: RawConnection, make_topic: Callable[..., str],
                              admin: KafkaAdminClient) -> None:
    topic = make_topic(partitions=4)
    tid = topic_id(admin, topic)
    wait_until_assignable(conn, topic)
    group = f"g-{uuid.uuid4()}"
    _find_coordinator(conn, group)
    a = join(conn, group, topic)
    assert a.error_code == NONE, a
    # Kafka 4.3 starts a new group at epoch 2.
    assert a.member_epoch == 2 and a.heartbeat_interval_ms == 5000
    assert assigned(a) == {tid: [0, 1, 2, 3]}
    again = beat(conn, group, a.member_id, 2)
    assert (again.error_code, again.member_epoch, again.assignment) == (NONE, 2, None)
    # Joining again (epoch 0) with its member id: it goes on as it was.
    rejoined = join(conn, group, topic, member=a.member_id)
    assert (rejoined.error_code, rejoined.member_epoch, assigned(rejoined)) == \
        (NONE, 2, {tid: [0, 1, 2, 3]})

    # A second member: its partitions are all the first member's until it revokes them.
    time.sleep(ASSIGNMENT_INTERVAL_S)
    b = join(conn, group, topic)
    assert (b.error_code, b.member_epoch) == (NONE, 3)
    assert assigned(b) == {}
    a2 = beat(conn, group, a.member_id, 2, owned={tid: [0, 1, 2, 3]})
    assert a2.member_epoch == 2  # revoking first: the epoch moves once it has
    kept = assigned(a2)[tid]
    assert len(kept) == 2
    b2 = beat(conn, group, b.member_id, 3, owned={})
    assert (b2.member_epoch, b2.assignment) == (3, None)  # nothing free yet
    a3 = beat(conn, group, a.member_id, 2, owned={tid: kept})
    assert (a3.error_code, a3.member_epoch) == (NONE, 3)
    b3 = beat(conn, group, b.member_id, 3, owned={})
    assert assigned(b3) == {tid: sorted({0, 1, 2, 3} - set(kept))}

    described = conn.request(ConsumerGroupDescribeRequest[0](
        group_ids=[group], include_authorized_operations=False), 0).groups[0]
    assert (described.error_code, described.group_state, described.group_epoch,
            described.assignment_epoch, described.assignor_name) == (NONE, "Stable", 3, 3,
                                                                     "uniform")
    members = {m.member_id: m for m in described.members}
    assert set(members) == {a.member_id, b.member_id}
    [with_operations] = conn.request(ConsumerGroupDescribeRequest[1](
        group_ids=[group], include_authorized_operations=True), 1).groups
    # No authorizer: every operation on a group (READ 3, DELETE 6, DESCRIBE 8,
    # DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11).
    assert with_operations.authorized_operations == sum(1 << op for op in (3, 6, 8, 10, 11))
    assert {m.member_type for m in with_operations.members} == {1}  # consumer members
    assert [tp.topic_name for tp in members[a.member_id].assignment.topic_partitions] == [topic]

    time.sleep(ASSIGNMENT_INTERVAL_S)
    left = beat(conn, group, a.member_id, -1)
    assert (left.error_code, left.member_epoch) == (NONE, -1)
    b4 = beat(conn, group, b.member_id, 3, owned={tid: sorted({0, 1, 2, 3} - set(kept))})
    assert (b4.member_epoch, assigned(b4)) == (4, {tid: [0, 1, 2, 3]})


def test_consumer_groups_in_list_and_describe_groups(
        conn: RawConnection, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=1)
    group = f"g-{uuid.uuid4()}"
    _find_coordinator(conn, group)
    a = join(conn, group, topic)
    try:
        listed = conn.request(ListGroupsRequest[5](states_filter=[], types_filter=["consumer"]),
                              5).groups
        assert [(g.protocol_type, g.group_state, g.group_type) for g in listed
                if g.group_id == group] == [("consumer", "Stable", "consumer")]
        classic = conn.request(ListGroupsRequest[5](states_filter=[], types_filter=["classic"]),
                               5).groups
        assert group not in [g.group_id for g in classic]
        # DescribeGroups is for classic groups: Kafka says so from v6, a Dead group before.
        for version, error, message in ((5, NONE, None), (
                6, GROUP_ID_NOT_FOUND, f"Group {group} is not a classic group.")):
            [described] = conn.request(DescribeGroupsRequest[version](
                groups=[group], include_authorized_operations=False), version).groups
            assert (described.error_code, described.group_state, described.members) == \
                (error, "Dead", [])
            assert getattr(described, "error_message", None) == message
        [missing] = conn.request(DescribeGroupsRequest[6](
            groups=["missing-" + group], include_authorized_operations=False), 6).groups
        assert (missing.error_code, missing.error_message) == (
            GROUP_ID_NOT_FOUND, f"Group missing-{group} not found.")
    finally:
        beat(conn, group, a.member_id, -1)


def test_errors(conn: RawConnection, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=1)
    group = f"g-{uuid.uuid4()}"
    _find_coordinator(conn, group)
    missing = beat(conn, group, str(uuid.uuid4()), 1)
    assert (missing.error_code, missing.error_message) == (
        GROUP_ID_NOT_FOUND, f"Consumer group {group} not found.")
    a = join(conn, group, topic)
    assert beat(conn, group, str(uuid.uuid4()), 1).error_code == UNKNOWN_MEMBER_ID
    assert beat(conn, group, a.member_id, 5).error_code == FENCED_MEMBER_EPOCH
    assert beat(conn, group, a.member_id, 0, topics=[topic], owned={}).error_code == \
        INVALID_REQUEST  # no rebalance timeout in a join
    assert join(conn, group, topic, assignor="nope").error_code == UNSUPPORTED_ASSIGNOR
    assert beat(conn, group, a.member_id, -3).error_code == INVALID_REQUEST
    bad = beat(conn, group, str(uuid.uuid4()), 0, owned={}, rebalance_timeout_ms=30000,
               regex="(a)\\1")
    assert (bad.error_code, bad.error_message) == (INVALID_REGULAR_EXPRESSION, (
        "SubscribedTopicRegex `(a)\\1` is not a valid regular expression: invalid escape "
        "sequence."))
    described = conn.request(ConsumerGroupDescribeRequest[0](
        group_ids=[f"none-{uuid.uuid4()}"], include_authorized_operations=False), 0).groups[0]
    assert (described.error_code, described.error_message) == (
        GROUP_ID_NOT_FOUND, f"Group {described.group_id} not found.")


def test_range_assignor_by_choice(conn: RawConnection, make_topic: Callable[..., str],
                                  admin: KafkaAdminClient) -> None:
    topic = make_topic(partitions=3)
    tid = topic_id(admin, topic)
    wait_until_assignable(conn, topic)
    group = f"g-{uuid.uuid4()}"
    _find_coordinator(conn, group)
    a = join(conn, group, topic, member="a" * 22, assignor="range")
    time.sleep(ASSIGNMENT_INTERVAL_S)
    b = join(conn, group, topic, member="b" * 22, assignor="range")
    a2 = beat(conn, group, a.member_id, 2, owned={tid: [0, 1, 2]})
    assert assigned(a2) == {tid: [0, 1]}  # the first range: a sorts before b
    described = conn.request(ConsumerGroupDescribeRequest[0](
        group_ids=[group], include_authorized_operations=False), 0).groups[0]
    assert described.assignor_name == "range"
    assert b.member_epoch == 3


def test_offsets_at_the_member_epoch(conn: RawConnection, make_topic: Callable[..., str]
                                     ) -> None:
    topic = make_topic(partitions=1)
    commit_topic = OffsetCommitRequest[9].OffsetCommitRequestTopic
    fetch_group = OffsetFetchRequest[9].OffsetFetchRequestGroup

    def commit(member: str, epoch: int, version: int = 9) -> int:
        r = conn.request(OffsetCommitRequest[version](
            group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
            group_instance_id=None, topics=[commit_topic(name=topic, partitions=[
                commit_topic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                    committed_metadata="")])]), version)
        return r.topics[0].partitions[0].error_code

    def fetch(member: str | None, epoch: int) -> tuple[int, list[tuple[int, int]]]:
        r = conn.request(OffsetFetchRequest[9](groups=[fetch_group(
            group_id=group, member_id=member, member_epoch=epoch,
            topics=[fetch_group.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])],
            require_stable=False), 9).groups[0]
        return r.error_code, [(p.committed_offset, p.error_code) for t in r.topics
                              for p in t.partitions]

    group = f"g-{uuid.uuid4()}"
    _find_coordinator(conn, group)
    a = join(conn, group, topic)
    epoch = a.member_epoch
    assert commit(a.member_id, epoch) == NONE
    assert commit(a.member_id, epoch - 1) == STALE_MEMBER_EPOCH
    assert commit(a.member_id, epoch + 1) == STALE_MEMBER_EPOCH
    assert commit("stranger", epoch) == UNKNOWN_MEMBER_ID
    assert commit("", -1) == UNKNOWN_MEMBER_ID  # not while the group has members
    assert commit(a.member_id, epoch, version=8) == UNSUPPORTED_VERSION
    assert fetch(a.member_id, epoch) == (NONE, [(5, NONE)])
    assert fetch(a.member_id, epoch - 1) == (STALE_MEMBER_EPOCH, [])
    assert fetch("stranger", epoch) == (UNKNOWN_MEMBER_ID, [])
    assert fetch(None, -1) == (NONE, [(5, NONE)])
    beat(conn, group, a.member_id, -1)
    assert commit("", -1) == NONE  # an empty group takes anyone's commits
