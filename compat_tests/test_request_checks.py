"""Requests Kafka 4.x refuses field by field, and how it answers them.

- Produce to an internal topic (``__consumer_offsets``, ``__transaction_state``):
  INVALID_TOPIC_EXCEPTION (17) unless the client id is ``__admin_client``
  (KafkaApis.handleProduceRequest, ReplicaManager.appendToLocalLog).
- InitProducerId without a transactional id: a producer id without an epoch or the
  reverse is INVALID_REQUEST (42); otherwise a new producer id at epoch 0, whatever id
  and epoch were sent, so nobody can bump (fence) another producer's epoch
  (TransactionCoordinator.handleInitProducerId).
- ListOffsets: a partition asked for twice is answered once, INVALID_REQUEST; a
  negative timestamp that is no special one, or one the request version predates
  (-3 v7, -4 v8, -5 v9, -6 v11), is UNSUPPORTED_VERSION (35)
  (ReplicaManager.fetchOffset, isListOffsetsTimestampUnsupported).
- ApiVersions v3+: a client software name or version not matching
  ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` is INVALID_REQUEST with no api keys,
  and the connection stays usable (ApiVersionsRequest.isValid, getErrorResponse).
- Configs: integers of thousands of digits are INVALID_CONFIG (40) for topic configs
  and INVALID_REQUEST for a broker resource name; APPEND and SUBTRACT keep Kafka's
  list semantics (ConfigurationControlManager.incrementalAlterConfigResource).
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka
import pytest
from kafka import TopicPartition
from kafka.protocol.admin import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import InitProducerIdRequest
from kafka.structs import OffsetAndMetadata

from .clients import Rec, confluent_produce, kafka_python_consumer, now_ms, produce
from .conftest import Broker
from .rawkafka import RawConnection
from .test_idempotence import idempotent_batch, init_producer_id, produce_raw

INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
INVALID_CONFIG = 40
INVALID_REQUEST = 42
TOPIC, BROKER = 2, 4
SET, APPEND, SUBTRACT = 0, 2, 3
HUGE = "9" * 5000  # past Python's 4,300-digit limit for int()

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"


def str16(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


@pytest.fixture(scope="module")
def internal_topics(broker: Broker) -> None:
    """Make the broker create both internal topics: a consumer group's offset commit
    and a transactional producer's InitProducerId."""
    topic = f"compat-internal-{uuid.uuid4().hex[:12]}"
    produce(broker.bootstrap, topic, [Rec(b"k", b"v")])
    consumer = kafka_python_consumer(broker.bootstrap, group_id=f"compat-{uuid.uuid4().hex}",
                                     enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    finally:
        consumer.close()
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                         "transactional.id": f"compat-{uuid.uuid4().hex}"})
    producer.init_transactions(60)


def harmless_record(topic: str) -> Rec:
    """A record its coordinator reads as a tombstone for a group or transactional id
    nobody uses, so that even a broker that wrongly takes it keeps working."""
    name = f"compat-nobody-{uuid.uuid4().hex}"
    if topic == OFFSETS_TOPIC:  # OffsetCommitKey v1: group, topic, partition
        key = struct.pack(">h", 1) + str16(name) + str16("compat-none") + struct.pack(">i", 0)
    else:  # TransactionLogKey v0: transactional id
        key = struct.pack(">h", 0) + str16(name)
    return Rec(key, None)


@pytest.mark.parametrize("topic", [OFFSETS_TOPIC, TXN_TOPIC])
def test_produce_to_an_internal_topic_is_refused(
        broker: Broker, internal_topics: None, topic: str) -> None:
    # confluent-kafka: kafka-python will not even send to an internal topic.
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        confluent_produce(broker.bootstrap, topic, [harmless_record(topic)])
    assert raised.value.args[0].code() == INVALID_TOPIC_EXCEPTION  # librdkafka's TOPIC_EXCEPTION


def test_the_admin_client_id_may_produce_to_an_internal_topic(
        broker: Broker, internal_topics: None) -> None:
    # __transaction_state, not __consumer_offsets: Kafka's group coordinator runtime takes
    # every write to its partitions for its own (SnapshottableCoordinator checks the
    # committed offset against the last one it wrote), which a shared broker must not test.
    [offset] = confluent_produce(broker.bootstrap, TXN_TOPIC, [harmless_record(TXN_TOPIC)],
                                 **{"client.id": "__admin_client"})
    assert offset >= 0


# --- InitProducerId ----------------------------------------------------------------------


def init_pid(conn: RawConnection, producer_id: int, epoch: int) -> Any:
    version = conn.pick_version(InitProducerIdRequest, 3, 5)
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                    producer_id=producer_id, producer_epoch=epoch)
    return conn.request(request, version)


@pytest.mark.parametrize(("producer_id", "epoch"), [(-1, 5), (-1, 0), (7, -1), (0, -1)])
def test_init_producer_id_with_half_a_producer_is_invalid(
        broker: Broker, producer_id: int, epoch: int) -> None:
    with RawConnection(broker.bootstrap) as conn:
        response = init_pid(conn, producer_id, epoch)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        INVALID_REQUEST, -1, -1)


def test_init_producer_id_cannot_fence_another_idempotent_producer(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    with RawConnection(broker.bootstrap) as owner, RawConnection(broker.bootstrap) as other:
        pid, epoch = init_producer_id(owner)
        assert epoch == 0
        response = init_pid(other, pid, epoch)
        assert response.error_code == 0
        assert response.producer_id != pid and response.producer_epoch == 0
        # The owner's producer id and epoch still write.
        ack = produce_raw(owner, topic, idempotent_batch(pid, epoch, 0, [b"a"], now_ms()))
        assert (ack.error_code, ack.base_offset) == (0, 0)


# --- ListOffsets -------------------------------------------------------------------------


def list_offsets(conn: RawConnection, version: int,
                 topics: list[tuple[str, list[tuple[int, int]]]]) -> list[tuple[Any, ...]]:
    """(topic, partition, error, timestamp, offset) of each answer, sorted."""
    Topic = ListOffsetsRequest.ListOffsetsTopic
    Partition = Topic.ListOffsetsPartition
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=0, topics=[
        Topic(name=name, partitions=[
            Partition(partition_index=p, current_leader_epoch=-1, timestamp=ts)
            for p, ts in partitions])
        for name, partitions in topics])
    response = conn.request(request, version)
    return sorted((t.name, p.partition_index, p.error_code, p.timestamp, p.offset)
                  for t in response.topics for p in t.partitions)


@pytest.fixture
def two_partitions(broker: Broker, make_topic: Callable[..., str]) -> str:
    topic = make_topic(partitions=2)
    for partition in (0, 1):
        produce(broker.bootstrap, topic, [Rec(b"k", b"v")], partition=partition)
    return topic


def test_list_offsets_answers_a_duplicated_partition_once_with_invalid_request(
        broker: Broker, two_partitions: str) -> None:
    topic = two_partitions
    with RawConnection(broker.bootstrap) as conn:
        for version in (1, 5, 10):
            assert list_offsets(conn, version, [(topic, [(0, -1), (0, -2), (1, -1)])]) == [
                (topic, 0, INVALID_REQUEST, -1, -1), (topic, 1, 0, -1, 1)], version
            # The same partition under the topic named twice.
            assert list_offsets(conn, version, [(topic, [(1, -1)]), (topic, [(0, -1)]),
                                                (topic, [(1, -2)])]) == [
                (topic, 0, 0, -1, 1), (topic, 1, INVALID_REQUEST, -1, -1)], version


UNSUPPORTED = [(6, -3), (1, -3), (7, -4), (8, -5), (10, -6), (1, -100), (10, -100),
               (10, -(1 << 63))]
SUPPORTED = [(1, -1), (1, -2), (7, -3), (8, -4), (9, -5)]


def test_list_offsets_refuses_timestamps_the_version_does_not_know(
        broker: Broker, two_partitions: str) -> None:
    topic = two_partitions
    with RawConnection(broker.bootstrap) as conn:
        for version, timestamp in UNSUPPORTED:
            assert list_offsets(conn, version, [(topic, [(0, timestamp)])]) == [
                (topic, 0, UNSUPPORTED_VERSION, -1, -1)], (version, timestamp)
        for version, timestamp in SUPPORTED:
            [(_, _, error, _, _)] = list_offsets(conn, version, [(topic, [(0, timestamp)])])
            assert error == 0, (version, timestamp)


# --- ApiVersions -------------------------------------------------------------------------


def api_versions(conn: RawConnection, version: int, name: str, software_version: str) -> Any:
    """The response decoded at ``version``: kafka-python's ApiVersionsResponse reads any
    error as v0, but only UNSUPPORTED_VERSION is answered so."""
    request = ApiVersionsRequest(client_software_name=name,
                                 client_software_version=software_version)
    correlation_id = conn._next_id()
    request.with_header(correlation_id=correlation_id, client_id=conn.client_id)
    conn.sock.sendall(request.encode(version=version, header=True, framed=True))
    frame = conn._read_frame()
    assert struct.unpack_from(">i", frame)[0] == correlation_id
    # The body after the (always v0) response header, by ApiMessage's own decoder.
    return ApiMessage.decode.__func__(ApiVersionsResponse, frame[4:], version=version)


@pytest.mark.parametrize(("name", "software_version"), [
    ("", "1.0"), ("compat", ""), ("-compat", "1.0"), ("compat-", "1.0"), ("compat", "1.0."),
    ("com pat", "1.0"), ("com_pat", "1.0"), ("compat", "1.0+x"), ("comp\u00e4t", "1.0"),
    ("compat\n", "1.0"),
])
def test_api_versions_refuses_a_bad_client_software_name_or_version(
        broker: Broker, name: str, software_version: str) -> None:
    with RawConnection(broker.bootstrap) as conn:
        for version in (3, 4):
            response = api_versions(conn, version, name, software_version)
            assert (response.error_code, list(response.api_keys)) == (INVALID_REQUEST, [])
            assert response.throttle_time_ms == 0
        # The connection is still open and served.
        response = api_versions(conn, 3, "compat-python", "1.2.3-rc.1")
        assert response.error_code == 0 and response.api_keys


def test_api_versions_takes_good_client_software_names(broker: Broker) -> None:
    with RawConnection(broker.bootstrap) as conn:
        for name in ("a", "A9", "apache-kafka-java", "x.y-z", "1.0"):
            response = api_versions(conn, 3, name, name)
            assert response.error_code == 0 and response.api_keys, name
        # Before v3 there is no software name to check.
        assert api_versions(conn, 2, "", "").error_code == 0


# --- Configs -----------------------------------------------------------------------------


@pytest.fixture
def config_conn(broker: Broker) -> Iterator[RawConnection]:
    with RawConnection(broker.bootstrap) as conn:
        yield conn


def alter(conn: RawConnection, rtype: int, name: str, configs: dict[str, str]) -> Any:
    Resource = AlterConfigsRequest.AlterConfigsResource
    Config = Resource.AlterableConfig
    request = AlterConfigsRequest(validate_only=False, resources=[Resource(
        resource_type=rtype, resource_name=name,
        configs=[Config(name=k, value=v) for k, v in configs.items()])])
    [result] = conn.request(request, 1).responses
    return result


def alter_incremental(conn: RawConnection, rtype: int, name: str,
                      changes: list[tuple[str, int, str]]) -> Any:
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    Config = Resource.AlterableConfig
    request = IncrementalAlterConfigsRequest(validate_only=False, resources=[Resource(
        resource_type=rtype, resource_name=name,
        configs=[Config(name=k, config_operation=op, value=v) for k, op, v in changes])])
    [result] = conn.request(request, 1).responses
    return result


def describe(conn: RawConnection, rtype: int, name: str, keys: list[str] | None) -> Any:
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(include_synonyms=False, include_documentation=False,
                                     resources=[Resource(resource_type=rtype, resource_name=name,
                                                         configuration_keys=keys)])
    [result] = conn.request(request, 3).results
    return result


def described_value(conn: RawConnection, topic: str, key: str, want: str) -> str | None:
    """The topic config's described value once it is ``want`` (Kafka's brokers apply an
    altered config a moment after the controller answered), else the last one seen."""
    deadline = time.monotonic() + 10
    while True:
        [entry] = describe(conn, TOPIC, topic, [key]).configs
        if entry.value == want or time.monotonic() > deadline:
            return entry.value
        time.sleep(0.1)


@pytest.mark.parametrize(("key", "value"), [
    ("retention.ms", HUGE), ("retention.ms", "-" + HUGE), ("segment.bytes", HUGE),
    ("retention.ms", "0" * 5000 + "1x"),
])
def test_a_topic_config_of_thousands_of_digits_is_invalid_config(
        config_conn: RawConnection, make_topic: Callable[..., str], key: str, value: str) -> None:
    topic = make_topic()
    assert alter(config_conn, TOPIC, topic, {key: value}).error_code == INVALID_CONFIG
    result = alter_incremental(config_conn, TOPIC, topic, [(key, SET, value)])
    assert result.error_code == INVALID_CONFIG
    # Leading zeros are no reason to refuse (Java's Long.parseLong reads them).
    assert alter_incremental(config_conn, TOPIC, topic,
                             [("retention.ms", SET, "0" * 5000 + "1234")]).error_code == 0
    assert described_value(config_conn, topic, "retention.ms", "1234") == "1234"


@pytest.mark.parametrize("name", [HUGE, "-" + HUGE, "99999999999"])
def test_a_broker_resource_name_of_too_many_digits_is_invalid_request(
        config_conn: RawConnection, name: str) -> None:
    assert describe(config_conn, BROKER, name, None).error_code == INVALID_REQUEST
    assert alter(config_conn, BROKER, name, {"log.cleaner.threads": "2"}).error_code == \
        INVALID_REQUEST
    result = alter_incremental(config_conn, BROKER, name, [("log.cleaner.threads", SET, "2")])
    assert result.error_code == INVALID_REQUEST


THROTTLED = "leader.replication.throttled.replicas"


@pytest.mark.parametrize(("start", "op", "value", "want"), [
    ("0:1,1:1,0:1", APPEND, "2:1,2:1,1:1,3:1", "0:1,1:1,0:1,2:1,3:1"),
    ("0:1,1:1,0:1", SUBTRACT, "0:1", "1:1,0:1"),
    ("0:1,1:1,0:1,2:1", SUBTRACT, "0:1,0:1,0:1,2:1,5:1", "1:1"),
    (None, APPEND, "0:1", "0:1"),
])
def test_append_and_subtract_keep_kafkas_order(
        config_conn: RawConnection, make_topic: Callable[..., str],
        start: str | None, op: int, value: str, want: str) -> None:
    topic = make_topic(configs={THROTTLED: start} if start is not None else None)
    result = alter_incremental(config_conn, TOPIC, topic, [(THROTTLED, op, value)])
    assert result.error_code == 0, result
    assert described_value(config_conn, topic, THROTTLED, want) == want
