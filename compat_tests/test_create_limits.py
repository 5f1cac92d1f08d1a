"""CreateTopics and CreatePartitions at Kafka 4.x's limits, and the requests its controller
refuses outright.

Kafka's controller adds at most 10,000 partitions per request
(``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``):

- CreateTopics asking for more in all (counts, defaults, manual assignments; names given
  twice and ``__cluster_metadata`` left out) is refused as a whole, every topic getting
  POLICY_VIOLATION "Excessively large number of partitions per request.";
- within that, topics whose metadata records (one per topic, per config override and
  per partition) come to more than 10,000 are refused as a whole too, with
  "Unable to perform excessively large batch operation.";
- CreatePartitions: the topic that would take the request past 10,000 new partitions
  fails with UNKNOWN_SERVER_ERROR and no message (Kafka catches its bounded record list
  overflowing as an unexpected error).

And per topic: a name given twice is one INVALID_REQUEST "Duplicate topic name." (none
of its copies is created), ``__cluster_metadata`` is INVALID_REQUEST, a manual
assignment with a partition count or replication factor is INVALID_REQUEST, and a
partition assigned twice is INVALID_REPLICA_ASSIGNMENT.

Refusals are checked with validate_only wherever Kafka would otherwise create
something: Kafka 4.3 leaves a topic grown by what fitted of an overflowing
CreatePartitions, while answering the error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.protocol.admin import CreateTopicsRequest

from .conftest import Broker, unique_topic_name
from .rawkafka import RawConnection

UNKNOWN_SERVER_ERROR = -1
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_MANY_RECORDS = "Unable to perform excessively large batch operation."
LIMIT = 10_000
INT32_MAX = (1 << 31) - 1

Topic = CreateTopicsRequest.CreatableTopic
Assignment = Topic.CreatableReplicaAssignment


@pytest.fixture
def raw(broker: Broker) -> Iterator[RawConnection]:
    with RawConnection(broker.bootstrap, timeout=60, client_id="compat-create-limits") as conn:
        yield conn


@pytest.fixture
def broker_id(admin: KafkaAdminClient) -> int:
    return admin.describe_cluster()["brokers"][0]["broker_id"]


def create(admin: KafkaAdminClient, topics: dict[str, dict[str, Any]],
           validate_only: bool = True) -> list[tuple[str, int, str | None]]:
    """CreateTopics through kafka-python's admin: (name, error code, message) per result."""
    result = admin.create_topics(topics, timeout_ms=30_000, validate_only=validate_only,
                                 raise_errors=False)
    return [(t["name"], t["error_code"], t["error_message"]) for t in result["topics"]]


def raw_create(raw: RawConnection, topics: list[Any], validate_only: bool = False
               ) -> list[tuple[str, int, str | None]]:
    """CreateTopics as sent, repeated names and all (a stock admin client cannot)."""
    version = raw.pick_version(CreateTopicsRequest, 2, 7)
    response = raw.request(CreateTopicsRequest[version](
        topics=topics, timeout_ms=30_000, validate_only=validate_only), version)
    return [(t.name, t.error_code, t.error_message) for t in response.topics]


def topic(name: str, partitions: int = -1, rf: int = -1,
          assignments: list[tuple[int, list[int]]] = ()) -> Any:  # type: ignore[assignment]
    return Topic(name=name, num_partitions=partitions, replication_factor=rf,
                 assignments=[Assignment(partition_index=p, broker_ids=b) for p, b in assignments],
                 configs=[])


def absent(admin: KafkaAdminClient, *names: str) -> bool:
    """None of ``names`` exists: creating each (validate only) would succeed."""
    return all(code == 0 for _, code, _ in create(admin, {n: {"num_partitions": 1}
                                                          for n in names}))


# --- CreateTopics: how many partitions ------------------------------------------------------


def test_create_topics_beyond_the_limit(admin: KafkaAdminClient, topic_name: str) -> None:
    for count in (LIMIT + 1, INT32_MAX):
        for validate_only in (True, False):
            got = create(admin, {topic_name: {"num_partitions": count}}, validate_only)
            assert got == [(topic_name, POLICY_VIOLATION, TOO_MANY_PARTITIONS)]
    assert absent(admin, topic_name)


def test_confluent_create_topics_beyond_the_limit(broker: Broker, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for count in (LIMIT + 1, 100_000):  # librdkafka's own upper bound
        for validate_only in (True, False):
            [future] = admin.create_topics([NewTopic(topic_name, count, 1)],
                                           validate_only=validate_only,
                                           request_timeout=30).values()
            with pytest.raises(confluent_kafka.KafkaException) as info:
                future.result(timeout=30)
            error = info.value.args[0]
            assert error.code() == POLICY_VIOLATION == confluent_kafka.KafkaError.POLICY_VIOLATION
            assert TOO_MANY_PARTITIONS in error.str(), error.str()


def test_the_limit_is_for_the_whole_request(admin: KafkaAdminClient, topic_name: str) -> None:
    a, b, bad = topic_name + "-a", topic_name + "-b", "bad name!"
    # Every topic of the request gets the error, the invalid name too; none is created.
    got = create(admin, {a: {"num_partitions": 5_000}, bad: {"num_partitions": 1},
                         b: {"num_partitions": 5_001}}, validate_only=False)
    assert sorted(got) == sorted((n, POLICY_VIOLATION, TOO_MANY_PARTITIONS) for n in (a, bad, b))
    assert absent(admin, a, b)
    # Manual assignments count one partition each.
    got = create(admin, {a: {"num_partitions": LIMIT}, b: {"assignments": {0: [0]}}})
    assert sorted(got) == [(a, POLICY_VIOLATION, TOO_MANY_PARTITIONS),
                           (b, POLICY_VIOLATION, TOO_MANY_PARTITIONS)]
    # __cluster_metadata, refused by name, does not count.
    got = create(admin, {a: {"num_partitions": LIMIT - 1},
                         "__cluster_metadata": {"num_partitions": LIMIT}})
    assert sorted(got) == [("__cluster_metadata", INVALID_REQUEST,
                            "Creation of internal topic __cluster_metadata is prohibited."),
                           (a, 0, None)]


def test_the_limit_counts_metadata_records(admin: KafkaAdminClient, topic_name: str) -> None:
    """A topic is one record, each config override one, each partition one."""
    a, b = topic_name + "-a", topic_name + "-b"
    assert create(admin, {a: {"num_partitions": LIMIT - 1}}) == [(a, 0, None)]
    assert create(admin, {a: {"num_partitions": LIMIT}}) == [
        (a, POLICY_VIOLATION, TOO_MANY_RECORDS)]
    assert create(admin, {a: {"num_partitions": LIMIT - 2,
                              "configs": {"retention.ms": "1000"}}}) == [(a, 0, None)]
    assert create(admin, {a: {"num_partitions": LIMIT - 1,
                              "configs": {"retention.ms": "1000"}}}) == [
        (a, POLICY_VIOLATION, TOO_MANY_RECORDS)]
    got = create(admin, {a: {"num_partitions": 4_999}, b: {"num_partitions": 4_999}})
    assert sorted(got) == [(a, 0, None), (b, 0, None)]
    got = create(admin, {a: {"num_partitions": 5_000}, b: {"num_partitions": 4_999}},
                 validate_only=False)
    assert sorted(got) == [(a, POLICY_VIOLATION, TOO_MANY_RECORDS),
                           (b, POLICY_VIOLATION, TOO_MANY_RECORDS)]
    assert absent(admin, a, b)
    # Only the topics that could be created count.
    got = create(admin, {a: {"num_partitions": 5_000}, b: {"num_partitions": 4_999,
                                                           "configs": {"retention.ms": "x"}}})
    assert sorted(got)[0] == (a, 0, None) and sorted(got)[1][1] == 40  # INVALID_CONFIG


# --- CreateTopics: requests refused by name or shape ---------------------------------------


def test_duplicate_topic_names(raw: RawConnection, admin: KafkaAdminClient,
                               topic_name: str) -> None:
    dup, other = topic_name + "-dup", topic_name + "-other"
    got = raw_create(raw, [topic(dup, 1), topic(other, 1), topic(dup, 2), topic(dup, 1)])
    # One answer for the name, however often it came; the other topic is created.
    assert sorted(got) == [(dup, INVALID_REQUEST, "Duplicate topic name."), (other, 0, None)]
    assert absent(admin, dup)
    assert not absent(admin, other)
    # A name given twice does not count towards the limit either.
    got = raw_create(raw, [topic(dup, LIMIT + 1), topic(dup, LIMIT + 1)], validate_only=True)
    assert got == [(dup, INVALID_REQUEST, "Duplicate topic name.")]


def test_cluster_metadata_topic(admin: KafkaAdminClient) -> None:
    for validate_only in (True, False):
        assert create(admin, {"__cluster_metadata": {"num_partitions": 1}},
                      validate_only=validate_only) == [
            ("__cluster_metadata", INVALID_REQUEST,
             "Creation of internal topic __cluster_metadata is prohibited.")]


@pytest.mark.parametrize(("spec", "message"), [
    ({"replication_factor": 1}, "but replication factor was not set to -1."),
    ({"num_partitions": 1}, "but numPartitions was not set to -1."),
    ({"num_partitions": 1, "replication_factor": 1}, "but replication factor was not set to -1."),
])
def test_manual_assignment_with_counts(admin: KafkaAdminClient, topic_name: str,
                                       broker_id: int, spec: dict[str, int],
                                       message: str) -> None:
    got = create(admin, {topic_name: {"assignments": {0: [broker_id]}, **spec}},
                 validate_only=False)
    assert got == [(topic_name, INVALID_REQUEST,
                    f"A manual partition assignment was specified, {message}")]
    assert absent(admin, topic_name)


def test_partition_assigned_twice(raw: RawConnection, admin: KafkaAdminClient, topic_name: str,
                                  broker_id: int) -> None:
    twice = [(0, [broker_id]), (1, [broker_id]), (1, [broker_id])]
    assert raw_create(raw, [topic(topic_name, assignments=twice)]) == [
        (topic_name, INVALID_REPLICA_ASSIGNMENT,
         "Found multiple manual partition assignments for partition 1")]
    assert absent(admin, topic_name)
    # The assignments are checked in order: an error before the repeat wins.
    unknown = broker_id + 1000
    bad_first = [(0, [unknown]), (0, [broker_id])]
    assert raw_create(raw, [topic(topic_name, assignments=bad_first)]) == [
        (topic_name, INVALID_REPLICA_ASSIGNMENT,
         f"The manual partition assignment includes broker {unknown}, but no such broker "
         "is registered.")]
    # ... and whether the partitions are 0, 1, ... only at the end.
    gap_first = [(1, [broker_id]), (1, [broker_id])]
    assert raw_create(raw, [topic(topic_name, assignments=gap_first)]) == [
        (topic_name, INVALID_REPLICA_ASSIGNMENT,
         "Found multiple manual partition assignments for partition 1")]


# --- CreatePartitions ----------------------------------------------------------------------


def grow(admin: KafkaAdminClient, totals: dict[str, Any]) -> dict[str, tuple[int, str | None]]:
    response = admin.create_partitions(totals, timeout_ms=30_000, validate_only=True,
                                       raise_errors=False)
    return {r.name: (r.error_code, r.error_message) for r in response.results}


def test_create_partitions_beyond_the_limit(admin: KafkaAdminClient,
                                            make_topic: Callable[..., str],
                                            broker_id: int) -> None:
    a, b = make_topic(), make_topic()
    assert grow(admin, {a: 1 + LIMIT}) == {a: (0, None)}
    assert grow(admin, {a: 2 + LIMIT}) == {a: (UNKNOWN_SERVER_ERROR, None)}
    # The limit is for the request: one of the two goes past it (Kafka takes them in
    # hash order, so which one is not said).
    got = grow(admin, {a: 9_001, b: 2_001})
    assert sorted(got.values()) == [(UNKNOWN_SERVER_ERROR, None), (0, None)], got
    # The topic's own checks come first.
    unknown = broker_id + 1000
    got = grow(admin, {a: {"count": 2 + LIMIT, "assignments": [[unknown]] * (1 + LIMIT)}})
    assert got == {a: (INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                                  f"broker {unknown}, but no such broker is "
                                                  "registered.")}
    got = grow(admin, {a: {"count": 2 + LIMIT, "assignments": [[broker_id]] * (1 + LIMIT)}})
    assert got == {a: (UNKNOWN_SERVER_ERROR, None)}
    missing = unique_topic_name("compat-missing")
    assert grow(admin, {missing: 2 + LIMIT}) == {missing: (3, None)}  # UNKNOWN_TOPIC_OR_PARTITION
