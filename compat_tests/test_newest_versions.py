"""The newest request versions, against Apache Kafka 4.3.1's.

``KAFKA_4_3_1`` is what a one-node Kafka 4.3.1 answers in ApiVersions (checked here
against the live broker with ``--kafka``); against josefk every api whose range differs
must be in ``DIFFERENCES``, with the reason. Then the newest versions josefk serves,
request by request, answered as Kafka answers them: Produce v13 (topics by id),
ListOffsets v11 (earliest pending upload), ListTransactions v2 (a transactional id
pattern), AlterPartitionReassignments v1 (allow_replication_factor_change).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from kafka import KafkaAdminClient
from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest
from kafka.protocol.admin.transactions import ListTransactionsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from .conftest import Broker
from .rawkafka import RawConnection

# ApiVersions of Apache Kafka 4.3.1, one KRaft node (tools/kafka/start-kraft.sh).
KAFKA_4_3_1 = {
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6),
    11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1),
    18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5),
    25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3),
    32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5), 36: (0, 2), 37: (0, 3), 38: (1, 3),
    39: (1, 2), 40: (1, 2), 41: (1, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 1),
    46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 55: (0, 2),
    57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1),
    69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
    80: (0, 1), 81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1),
    88: (0, 0), 89: (0, 0), 90: (0, 1), 91: (0, 0), 92: (0, 0),
}
_DELEGATION = "delegation tokens are not implemented"
_SHARE = "share groups (KIP-932, queues) are not implemented"
_STREAMS = "streams groups (KIP-1071) are not implemented"
_KRAFT = "KRaft's own api: josefk runs alone or on ZooKeeper"
# Api key -> why josefk's range differs from Kafka 4.3.1's (or the api is missing).
DIFFERENCES = {
    ApiKey.WriteTxnMarkers: "v2 (KIP-1228) is sent by Kafka 4 coordinators to KRaft brokers; "
                            "josefk's coordinator writes its own markers, or sends v1 in a "
                            "ZooKeeper cluster, where Kafka 3.9 brokers know only v1",
    ApiKey.CreateDelegationToken: _DELEGATION, ApiKey.RenewDelegationToken: _DELEGATION,
    ApiKey.ExpireDelegationToken: _DELEGATION, ApiKey.DescribeDelegationToken: _DELEGATION,
    ApiKey.DescribeQuorum: _KRAFT, ApiKey.UnregisterBroker: _KRAFT, 80: _KRAFT, 81: _KRAFT,
    ApiKey.UpdateFeatures: "features are fixed: transaction.version 2 on a single broker",
    74: "ListConfigResources (KIP-1142) is not implemented",
    76: _SHARE, 77: _SHARE, 78: _SHARE, 79: _SHARE, 83: _SHARE, 84: _SHARE, 85: _SHARE,
    86: _SHARE, 87: _SHARE, 90: _SHARE, 91: _SHARE, 92: _SHARE, 88: _STREAMS, 89: _STREAMS,
}
INVALID_REPLICA_ASSIGNMENT = 39
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR = 14, 16
UNKNOWN_TOPIC_ID = 100
INVALID_REGULAR_EXPRESSION = 128


def test_api_versions_against_kafka_4_3_1(broker: Broker) -> None:
    with RawConnection(broker.bootstrap) as conn:
        ours = conn.api_versions()
    if broker.kind == "kafka":
        assert ours == KAFKA_4_3_1
        return
    differing = {k for k in ours.keys() | KAFKA_4_3_1.keys()
                 if ours.get(k) != KAFKA_4_3_1.get(k)}
    unexplained = {k: (ours.get(k), KAFKA_4_3_1.get(k)) for k in differing - DIFFERENCES.keys()}
    assert unexplained == {}, "api key: (josefk, Kafka 4.3.1)"
    # An explanation of a difference that is gone would hide the next one: none stale.
    assert DIFFERENCES.keys() <= differing, DIFFERENCES.keys() - differing
    # Where josefk serves an api, never a version Kafka does not know.
    for key, (_low, high) in ours.items():
        assert key in KAFKA_4_3_1 and high <= KAFKA_4_3_1[key][1], key


def batch(value: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def test_produce_v13_names_topics_by_id(
    broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient
) -> None:
    topic = make_topic()
    [described] = admin.describe_topics([topic])
    topic_id = uuid.UUID(str(described["topic_id"]))
    missing = uuid.uuid4()
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=15_000, topic_data=[
        T(topic_id=topic_id, partition_data=[T.PartitionProduceData(index=0, records=batch(b"a"))]),
        T(topic_id=missing, partition_data=[T.PartitionProduceData(index=0, records=batch(b"b"))]),
    ])
    with RawConnection(broker.bootstrap) as conn:
        answer = conn.request(request, 13)
        assert {(r.topic_id, p.index, p.error_code, p.base_offset)
                for r in answer.responses for p in r.partition_responses} == {
            (topic_id, 0, 0, 0), (missing, 0, UNKNOWN_TOPIC_ID, -1)}
        # The record is there, under the topic's name.
        [fetched] = [conn.fetch(topic, 0, 0)]
        assert fetched.error_code == 0 and fetched.high_watermark == 1


def test_offset_commit_and_fetch_v10_name_topics_by_id(
    broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient
) -> None:
    """v10 of OffsetCommit and OffsetFetch (Kafka 4.1+): topics by id, an unknown id
    answered UNKNOWN_TOPIC_ID, the commit readable by name through older versions."""
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

    topic = make_topic(partitions=2)
    [described] = admin.describe_topics([topic])
    topic_id, missing = uuid.UUID(str(described["topic_id"])), uuid.uuid4()
    group = f"v10-{uuid.uuid4().hex[:8]}"
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    commit = OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[C(topic_id=t, partitions=[C.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=7 + p, committed_leader_epoch=-1,
            committed_metadata="m") for p in (0, 1)]) for t in (topic_id, missing)])
    F = OffsetFetchRequest.OffsetFetchRequestGroup
    with RawConnection(broker.bootstrap, timeout=30) as conn:
        _coordinator_ready(conn, group)
        deadline = time.monotonic() + 60
        while True:  # the coordinator's partition may still be loading
            answer = conn.request(commit, 10)
            codes = {p.error_code for t in answer.topics for p in t.partitions}
            if not codes & {NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS}:
                break
            assert time.monotonic() < deadline, codes
            time.sleep(0.5)
        assert {(t.topic_id, p.partition_index, p.error_code)
                for t in answer.topics for p in t.partitions} == {
            (topic_id, 0, 0), (topic_id, 1, 0),
            (missing, 0, UNKNOWN_TOPIC_ID), (missing, 1, UNKNOWN_TOPIC_ID)}
        named = conn.request(OffsetFetchRequest(groups=[F(
            group_id=group, member_id=None, member_epoch=-1, topics=[F.OffsetFetchRequestTopics(
                topic_id=t, partition_indexes=[0, 1]) for t in (topic_id, missing)])],
            require_stable=False), 10)
        [fetched] = named.groups
        assert fetched.error_code == 0
        assert {(t.topic_id, p.partition_index, p.committed_offset, p.error_code)
                for t in fetched.topics for p in t.partitions} == {
            (topic_id, 0, 7, 0), (topic_id, 1, 8, 0),
            (missing, 0, -1, UNKNOWN_TOPIC_ID), (missing, 1, -1, UNKNOWN_TOPIC_ID)}
        every = conn.request(OffsetFetchRequest(groups=[F(
            group_id=group, member_id=None, member_epoch=-1, topics=None)],
            require_stable=False), 10).groups[0]
        assert [(t.topic_id, sorted(p.committed_offset for p in t.partitions))
                for t in every.topics] == [(topic_id, [7, 8])]
    assert {tp.partition: om.offset
            for tp, om in admin.list_group_offsets({group: None})[group].items()} == {0: 7, 1: 8}


def _coordinator_ready(conn: RawConnection, group: str) -> None:
    """FindCoordinator until the (only) broker answers it: ``__consumer_offsets`` exists."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    deadline = time.monotonic() + 60
    while conn.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code:
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.5)


def test_list_offsets_v11_earliest_pending_upload(
    broker: Broker, make_topic: Callable[..., str]
) -> None:
    topic = make_topic()
    T = ListOffsetsRequest.ListOffsetsTopic

    def ask(timestamp: int, version: int) -> tuple[int, int, int]:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=10_000,
                                     topics=[T(name=topic, partitions=[T.ListOffsetsPartition(
                                         partition_index=0, current_leader_epoch=-1,
                                         timestamp=timestamp)])])
        [p] = conn.request(request, version).topics[0].partitions
        return p.error_code, p.offset, p.timestamp

    with RawConnection(broker.bootstrap) as conn:
        conn.request(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=15_000,
                                    topic_data=[ProduceRequest.TopicProduceData(
                                        name=topic, partition_data=[
                                            ProduceRequest.TopicProduceData
                                            .PartitionProduceData(index=0,
                                                                  records=batch(b"x"))])]), 9)
        # Without tiered storage nothing is pending upload: offset -1, no error.
        assert ask(-6, 11) == (0, -1, -1)
        # Before v11 it is not a timestamp the version knows; -7 is none at all.
        assert ask(-6, 10)[0] == 35
        assert ask(-7, 11)[0] == 35
        assert ask(-2, 11) == (0, 0, -1)


def test_list_transactions_v2_pattern(broker: Broker) -> None:
    import confluent_kafka

    prefix = f"compat-pattern-{uuid.uuid4().hex[:8]}"
    producers = []
    for suffix in ("a1", "a2", "b1"):
        p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                      "transactional.id": f"{prefix}-{suffix}"})
        p.init_transactions(60)
        producers.append(p)

    def listed(pattern: str | None) -> tuple[int, set[str]]:
        answer = conn.request(ListTransactionsRequest(
            state_filters=[], producer_id_filters=[], duration_filter=-1,
            transactional_id_pattern=pattern), 2)
        return answer.error_code, {t.transactional_id for t in answer.transaction_states
                                   if t.transactional_id.startswith(prefix)}

    with RawConnection(broker.bootstrap) as conn:
        assert listed(f"{prefix}-a.") == (0, {f"{prefix}-a1", f"{prefix}-a2"})
        # The whole id must match, as Java's Matcher.matches().
        assert listed("a1") == (0, set())
        assert listed(None) == listed("") == (0, {f"{prefix}-{s}" for s in ("a1", "a2", "b1")})
        assert listed("(") == (INVALID_REGULAR_EXPRESSION, set())


def test_alter_partition_reassignments_v1(
    broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient
) -> None:
    topic = make_topic()
    [node] = admin.describe_cluster()["brokers"]
    T = AlterPartitionReassignmentsRequest.ReassignableTopic

    def reassign(replicas: list[int], allow: bool) -> tuple[int, bool, int, str | None]:
        answer = conn.request(AlterPartitionReassignmentsRequest(
            timeout_ms=10_000, allow_replication_factor_change=allow,
            topics=[T(name=topic, partitions=[T.ReassignablePartition(
                partition_index=0, replicas=replicas)])]), 1)
        [[p]] = [r.partitions for r in answer.responses]
        return (answer.error_code, answer.allow_replication_factor_change, p.error_code,
                p.error_message)

    me = node["broker_id"]
    with RawConnection(broker.bootstrap) as conn:
        assert reassign([me], False) == (0, False, 0, None)
        assert reassign([me], True) == (0, True, 0, None)
        # On one node a change of replication factor names a broker that is not there, or
        # this one twice: the assignment is checked first, as Kafka's controller does.
        assert reassign([me, me + 100], False) == (0, False, INVALID_REPLICA_ASSIGNMENT, (
            f"The manual partition assignment includes broker {me + 100}, but no such broker "
            "is registered."))
        assert reassign([me, me], False) == (0, False, INVALID_REPLICA_ASSIGNMENT, (
            f"The manual partition assignment includes the broker {me} more than once."))
