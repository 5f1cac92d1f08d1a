"""ElectLeaders and partition reassignments on a single broker, as a one-node Kafka 4
answers them (kafka-python's admin client): every partition is led by its only, preferred
replica, so no election is needed; the only reassignment is to that replica, which is
accepted and changes nothing; none is ever in progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kafka.errors as Errors
from kafka import KafkaAdminClient, TopicPartition
from kafka.protocol.admin.topics import ElectLeadersRequest

from .conftest import Broker, unique_topic_name
from .rawkafka import RawConnection

PREFERRED, UNCLEAN = 0, 1


def election_results(response: Any) -> dict[tuple[str, int], int]:
    return {(r.topic, p.partition_id): p.error_code
            for r in response.replica_election_results for p in r.partition_result}


def only_broker(admin: KafkaAdminClient) -> int:
    [broker] = admin.describe_cluster()["brokers"]
    return broker["broker_id"]


def test_elect_leaders_is_never_needed(
    broker: Broker, admin: KafkaAdminClient, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=3)
    missing = unique_topic_name("compat-missing")
    for kind in (PREFERRED, UNCLEAN):
        response = admin.elect_leaders(kind, {topic: [0, 1, 2, 7], missing: [0]},
                                       raise_errors=False)
        assert response.error_code == 0
        assert election_results(response) == {
            (topic, 0): Errors.ElectionNotNeededError.errno,
            (topic, 1): Errors.ElectionNotNeededError.errno,
            (topic, 2): Errors.ElectionNotNeededError.errno,
            (topic, 7): Errors.UnknownTopicOrPartitionError.errno,
            (missing, 0): Errors.UnknownTopicOrPartitionError.errno,
        }
    # Asked for every partition (null, which kafka-python's admin never sends): those that
    # need no election are left out, so nothing.
    with RawConnection(broker.bootstrap) as conn:
        everything = conn.request(ElectLeadersRequest(
            election_type=PREFERRED, topic_partitions=None, timeout_ms=10_000), version=2)
    assert everything.error_code == 0
    assert topic in {r.topic for r in everything.replica_election_results}
    assert election_results(everything) == {}


def test_reassignment_to_the_only_replica(
    admin: KafkaAdminClient, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=3)
    broker = only_broker(admin)
    tp0, tp1, tp2 = (TopicPartition(topic, p) for p in range(3))
    missing = TopicPartition(unique_topic_name("compat-missing"), 0)
    assert admin.alter_partition_reassignments({tp0: [broker]}) == {tp0: None}
    assert admin.alter_partition_reassignments({
        tp1: [broker + 100], tp2: [broker, broker], missing: [broker],
        TopicPartition(topic, 9): [broker],
    }) == {
        tp1: Errors.InvalidReplicationAssignmentError,
        tp2: Errors.InvalidReplicationAssignmentError,
        missing: Errors.UnknownTopicOrPartitionError,
        TopicPartition(topic, 9): Errors.UnknownTopicOrPartitionError,
    }
    # Nothing to cancel.
    assert admin.alter_partition_reassignments({tp0: None}) == {
        tp0: Errors.NoReassignmentInProgressError}
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments([tp0, tp1, missing]) == {}
    [described] = admin.describe_topics([topic])
    assert [p["replica_nodes"] for p in sorted(described["partitions"],
                                          key=lambda p: p["partition_index"])] == [
        [broker]] * 3
