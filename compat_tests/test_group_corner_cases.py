"""Classic group corner cases, request by request, that no stock client can be steered
into on purpose (the timing, members and generations are the client's): they must be
answered as Apache Kafka answers them."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import Broker
from .rawkafka import RawConnection
from .test_groups import (
    COORDINATOR_NOT_READY,
    MEMBER_ID_REQUIRED,
    NONE,
    UNKNOWN_MEMBER_ID,
    GroupClient,
    unique_group,
)


def _client(bootstrap: str, group: str) -> GroupClient:
    """A GroupClient once the group's coordinator has loaded it (a loading Kafka answers
    the Heartbeat that GroupClient probes with NONE)."""
    from kafka.protocol.admin import DescribeGroupsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    deadline = time.monotonic() + 60
    while True:
        with RawConnection(bootstrap) as conn:
            [found] = conn.request(FindCoordinatorRequest(
                key_type=0, coordinator_keys=[group]), 4).coordinators
        if found.error_code == NONE:
            with RawConnection(f"{found.host}:{found.port}") as conn:
                [described] = conn.request(DescribeGroupsRequest(
                    groups=[group], include_authorized_operations=False), 5).groups
            if described.error_code not in COORDINATOR_NOT_READY:
                return GroupClient(bootstrap, group)
        assert time.monotonic() < deadline, (found, group)
        time.sleep(0.2)


def _state(client: GroupClient) -> str:
    from kafka.protocol.admin import DescribeGroupsRequest

    [group] = client.conn.request(DescribeGroupsRequest(
        groups=[client.group], include_authorized_operations=False), 5).groups
    return str(group.group_state)


@pytest.mark.timeout(120)
def test_a_pending_member_joins_a_group_every_member_left(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    """A member that got its id (MEMBER_ID_REQUIRED) joins while the group rebalances
    with no members left (the last one left during the join phase): Kafka takes it, as
    no member is left to disagree on the protocol (INCONSISTENT_GROUP_PROTOCOL would be
    fatal to the Java consumer)."""
    from kafka.protocol.consumer import LeaveGroupRequest

    topic = make_topic(partitions=1)
    group = unique_group("rejoin")
    a_conn = _client(broker.bootstrap, group)
    try:
        first = a_conn.join(topic)
        assert first.error_code == MEMBER_ID_REQUIRED
        a = a_conn.join(topic, member_id=first.member_id)
        assert a.error_code == NONE
        assert a_conn.sync(a.member_id, a.generation_id, {a.member_id: b"a"}).error_code == NONE
        other = GroupClient(broker.bootstrap, group)
        pending = other.join(topic)  # b learns its member id
        assert pending.error_code == MEMBER_ID_REQUIRED

        # The leader rejoins: a rebalance that waits (the rebalance timeout) for b.
        rejoined: list[Any] = []
        waiting = threading.Thread(target=lambda: rejoined.append(
            a_conn.join(topic, member_id=a.member_id)))
        waiting.start()
        deadline = time.monotonic() + 30
        while _state(other) != "PreparingRebalance" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(other) == "PreparingRebalance"
        identity = LeaveGroupRequest.MemberIdentity
        left = other.conn.request(LeaveGroupRequest(group_id=group, members=[
            identity(member_id=a.member_id, group_instance_id=None, reason=None)]), 5)
        assert (left.error_code, [m.error_code for m in left.members]) == (NONE, [NONE])
        waiting.join(30)
        assert [r.error_code for r in rejoined] == [UNKNOWN_MEMBER_ID]
        assert _state(other) == "PreparingRebalance"  # with no members

        b = other.join(topic, member_id=pending.member_id)
        assert (b.error_code, b.generation_id, b.leader) == \
            (NONE, a.generation_id + 1, pending.member_id)
        assert [m.member_id for m in b.members] == [pending.member_id]
        other.close()
    finally:
        a_conn.close()


ILLEGAL_GENERATION, UNKNOWN_TOPIC_OR_PARTITION = 22, 3


@pytest.mark.timeout(120)
def test_txn_offset_commit_checks_the_group_as_kafka_does(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    """TxnOffsetCommit (v3, with member and generation) against a missing, an Empty and a
    Stable group: Kafka's validateTransactionalOffsetCommit."""
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
    from kafka.protocol.producer import TxnOffsetCommitRequest

    from .test_transactions import _add_offsets, _end_txn, _init_txn, _until_settled

    topic = make_topic(partitions=1)
    stable, empty, missing = (unique_group(p) for p in ("txn-stable", "txn-empty",
                                                         "txn-missing"))
    client = _client(broker.bootstrap, stable)
    try:
        first = client.join(topic)
        joined = client.join(topic, member_id=first.member_id)
        member, generation = joined.member_id, joined.generation_id
        assert client.sync(member, generation, {member: b"a"}).error_code == NONE
        # A "simple" group: offsets committed without group management.
        assert client.commit("", -1, topic, 1, 8, group=empty) == \
            (NONE, UNKNOWN_TOPIC_OR_PARTITION)

        topic_entry = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        partition = topic_entry.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1,
            committed_metadata="")
        txn_id = f"txn-checks-{uuid.uuid4().hex[:10]}"
        with RawConnection(broker.bootstrap, timeout=20.0) as conn:
            _until_settled(lambda: conn.request(FindCoordinatorRequest(
                key=txn_id, key_type=1), conn.pick_version(FindCoordinatorRequest, 1, 3)),
                "FindCoordinator")
            init = _init_txn(conn, txn_id)
            assert init.error_code == NONE, init
            pid, epoch = init.producer_id, init.producer_epoch
            for group in (stable, empty, missing):
                assert _add_offsets(conn, txn_id, pid, epoch, group) == NONE

            def commit(group: str, member_id: str, generation_id: int) -> int:
                [t] = conn.request(TxnOffsetCommitRequest(
                    transactional_id=txn_id, group_id=group, producer_id=pid,
                    producer_epoch=epoch, generation_id=generation_id, member_id=member_id,
                    group_instance_id=None, topics=[topic_entry(name=topic,
                                                                partitions=[partition])]),
                    3).topics
                [p] = t.partitions
                return int(p.error_code)

            assert [commit(missing, "m", 5), commit(missing, "", -1)] == \
                [ILLEGAL_GENERATION, NONE]
            assert [commit(empty, "m", -1), commit(empty, "m", 1)] == [NONE, UNKNOWN_MEMBER_ID]
            assert [commit(stable, member, -1), commit(stable, member, generation + 1),
                    commit(stable, "nobody", generation), commit(stable, "", -1),
                    commit(stable, member, generation)] == \
                [ILLEGAL_GENERATION, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, NONE, NONE]
            assert _end_txn(conn, txn_id, pid, epoch, False) == NONE
    finally:
        client.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("version", [5, 9])
def test_join_group_with_a_client_id_near_32_kib_is_answered(broker: Broker,
                                                             version: int) -> None:
    """The member id is the client id plus a UUID: one past a STRING's 32767 bytes is
    refused with UNKNOWN_SERVER_ERROR, as Kafka answers, and the connection goes on
    (it used to close: the answer could not be encoded before v6)."""
    from kafka.protocol.consumer import JoinGroupRequest

    group = unique_group("long-client-id")
    client = _client(broker.bootstrap, group)
    host, port = client.conn.sock.getpeername()[:2]
    coordinator = f"{host}:{port}"
    client.close()
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")
    answers = {}
    for length in (32_700, 32_767):
        with RawConnection(coordinator, client_id="c" * length) as conn:
            answers[length] = conn.request(JoinGroupRequest(
                group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                member_id="", group_instance_id=None, protocol_type="consumer",
                protocols=[protocol], reason=None), version)
            assert conn.api_versions(), "the connection stays open"
    fits, too_long = answers[32_700], answers[32_767]
    assert fits.error_code == MEMBER_ID_REQUIRED and len(fits.member_id) == 32_737, fits
    assert too_long.error_code == -1 and not too_long.member_id, too_long
