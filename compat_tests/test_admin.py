"""Topic administration: create, describe, configs, partitions, delete, and the errors.

Error codes are Kafka's: TOPIC_ALREADY_EXISTS 36, INVALID_PARTITIONS 37,
INVALID_REPLICATION_FACTOR 38, INVALID_CONFIG 40, INVALID_TOPIC_EXCEPTION 17,
UNKNOWN_TOPIC_OR_PARTITION 3.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka.admin import AlterConfigOp
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType

from .clients import Rec, kafka_python_consume, produce
from .conftest import Broker, unique_topic_name

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40

# Topic-level defaults of a stock broker (Kafka 4.x), as DescribeConfigs reports them.
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.ms": "604800000",
    "index.interval.bytes": "4096",
}


def topic_configs(admin: KafkaAdminClient, topic: str) -> dict[str, dict]:
    """Every config of a topic: ``{name: {'value': ..., 'config_source': ...}}``."""
    resource = KpConfigResource(KpConfigResourceType.TOPIC, topic)
    return admin.describe_configs([resource], config_filter="all")["topic"][topic]


def create_error(admin: KafkaAdminClient, name: str, **spec: object) -> int:
    """The error code CreateTopics answers for one topic."""
    result = admin.create_topics({name: spec}, timeout_ms=15_000, raise_errors=False)
    [topic] = result["topics"]
    assert topic["name"] == name
    return topic["error_code"]


def wait_until(check: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def test_create_describe_delete(broker: Broker, admin: KafkaAdminClient, topic_name: str) -> None:
    configs = {"retention.ms": "123456789", "cleanup.policy": "compact", "segment.ms": "3600000"}
    result = admin.create_topics(
        {topic_name: {"num_partitions": 3, "replication_factor": 1, "configs": configs}},
        timeout_ms=15_000,
    )
    [created] = result["topics"]
    assert created["error_code"] == 0
    assert created["num_partitions"] == 3
    assert created["replication_factor"] == 1
    assert created["configs"]["retention.ms"]["value"] == "123456789"
    admin.wait_for_topics([topic_name], timeout_ms=15_000)

    [described] = admin.describe_topics([topic_name])
    assert described["error_code"] == 0
    assert described["is_internal"] is False
    node_ids = {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
    partitions = sorted(described["partitions"], key=lambda p: p["partition_index"])
    assert [p["partition_index"] for p in partitions] == [0, 1, 2]
    for p in partitions:
        assert p["error_code"] == 0
        assert p["leader_id"] in node_ids
        assert p["replica_nodes"] == [p["leader_id"]]
        assert p["isr_nodes"] == [p["leader_id"]]
    assert topic_name in admin.list_topics()

    got = topic_configs(admin, topic_name)
    for name, value in configs.items():
        assert got[name]["value"] == value, name
        assert got[name]["config_source"] == "DYNAMIC_TOPIC_CONFIG", name
    for name in ("segment.bytes", "max.message.bytes", "compression.type"):
        assert got[name]["value"] == KAFKA_TOPIC_DEFAULTS[name], name
        assert got[name]["config_source"] == "DEFAULT_CONFIG", name

    deleted = admin.delete_topics([topic_name], timeout_ms=15_000)
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(topic_name, 0)]

    def gone() -> bool:
        [t] = admin.describe_topics([topic_name])
        return (
            t["error_code"] == UNKNOWN_TOPIC_OR_PARTITION and topic_name not in admin.list_topics()
        )

    wait_until(gone, what=f"{topic_name} to leave the metadata")
    # Deleting it again: it is unknown now.
    again = admin.delete_topics([topic_name], timeout_ms=15_000, raise_errors=False)
    assert [t["error_code"] for t in again["topics"]] == [UNKNOWN_TOPIC_OR_PARTITION]


def test_describe_cluster(broker: Broker, admin: KafkaAdminClient) -> None:
    """One unfenced broker, which is also the controller, at the address clients use."""
    cluster = admin.describe_cluster()
    [node] = cluster["brokers"]
    assert node["is_fenced"] is False
    assert cluster["controller_id"] == node["broker_id"]
    assert cluster["cluster_id"]
    if broker.owned:
        assert f"{node['host']}:{node['port']}" == broker.bootstrap


def test_auto_create_on_produce(broker: Broker, admin: KafkaAdminClient, topic_name: str) -> None:
    """auto.create.topics.enable defaults to true: producing to a new topic creates it
    with num.partitions (1) partitions and default configs."""
    assert produce(broker.bootstrap, topic_name, [Rec(b"k", b"auto")]) == [0]
    [described] = admin.describe_topics([topic_name])
    assert described["error_code"] == 0
    assert [p["partition_index"] for p in described["partitions"]] == [0]
    assert topic_configs(admin, topic_name)["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    [got] = kafka_python_consume(broker.bootstrap, topic_name, 1)
    assert (got.offset, got.value) == (0, b"auto")


def test_auto_created_offsets_topic_is_the_internal_one(broker: Broker) -> None:
    """A Metadata request naming __consumer_offsets (auto-creation allowed, as a
    librdkafka client asks) creates it as the group coordinator would: with
    offsets.topic.num.partitions (50) partitions, compacted."""
    client = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    deadline = time.monotonic() + 30
    while True:
        topic = client.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
        if topic.error is None and topic.partitions or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert topic.error is None and len(topic.partitions) == 50
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = confluent_kafka.admin.ConfigResource("topic", "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"


def test_default_topic_configs(admin: KafkaAdminClient, make_topic: Callable[..., str]) -> None:
    """A topic created without configs reports the broker's (Kafka's) defaults."""
    topic = make_topic()
    got = topic_configs(admin, topic)
    assert {name: got[name]["value"] for name in KAFKA_TOPIC_DEFAULTS} == KAFKA_TOPIC_DEFAULTS
    assert got["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert got["retention.ms"]["read_only"] is False


def test_create_existing_topic(admin: KafkaAdminClient, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    assert create_error(admin, topic, num_partitions=1) == TOPIC_ALREADY_EXISTS


def test_create_partitions(
    broker: Broker, admin: KafkaAdminClient, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=1)
    admin.create_partitions({topic: 4}, timeout_ms=15_000)

    def four() -> bool:
        [t] = admin.describe_topics([topic])
        return sorted(p["partition_index"] for p in t["partitions"]) == [0, 1, 2, 3] and all(
            p["leader_id"] >= 0 for p in t["partitions"]
        )

    wait_until(four, what="4 partitions with leaders")
    # The new partition takes records.
    assert produce(broker.bootstrap, topic, [Rec(b"k", b"p3")], partition=3) == [0]
    [got] = kafka_python_consume(broker.bootstrap, topic, 1, partition=3)
    assert (got.offset, got.key, got.value) == (0, b"k", b"p3")

    # Fewer or as many partitions as now: INVALID_PARTITIONS.
    for count in (2, 4):
        response = admin.create_partitions({topic: count}, timeout_ms=15_000, raise_errors=False)
        [res] = response.results
        assert (res.name, res.error_code) == (topic, INVALID_PARTITIONS), count


def test_incremental_alter_configs(admin: KafkaAdminClient, make_topic: Callable[..., str]) -> None:
    topic = make_topic(configs={"segment.ms": "7200000"})
    resource = KpConfigResource(
        KpConfigResourceType.TOPIC,
        topic,
        configs={"retention.ms": "86400000", "max.message.bytes": "500000"},
    )
    assert admin.alter_configs([resource], incremental=True) == {"topic": {topic: "OK"}}
    got = topic_configs(admin, topic)
    assert got["retention.ms"]["value"] == "86400000"
    assert got["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert got["max.message.bytes"]["value"] == "500000"
    # Incremental: the config not named stays as it was.
    assert got["segment.ms"]["value"] == "7200000"

    reset = KpConfigResource(
        KpConfigResourceType.TOPIC, topic, configs={"retention.ms": (AlterConfigOp.DELETE, None)}
    )
    assert admin.alter_configs([reset], incremental=True) == {"topic": {topic: "OK"}}
    got = topic_configs(admin, topic)
    assert got["retention.ms"]["value"] == KAFKA_TOPIC_DEFAULTS["retention.ms"]
    assert got["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert got["max.message.bytes"]["value"] == "500000"
    assert got["segment.ms"]["value"] == "7200000"


@pytest.mark.parametrize(
    "configs",
    [
        {"retention.ms": "not-a-number"},
        {"cleanup.policy": "bogus"},
        {"max.message.bytes": "-5"},
        {"no.such.config": "1"},
        # Kafka 4.x: topic segment.bytes must be at least 1 MiB.
        {"segment.bytes": "1000"},
    ],
    ids=["not-a-number", "bad-enum", "below-minimum", "unknown-name", "segment-bytes-min"],
)
def test_create_invalid_config(
    admin: KafkaAdminClient, topic_name: str, configs: dict[str, str]
) -> None:
    assert create_error(admin, topic_name, num_partitions=1, configs=configs) == INVALID_CONFIG
    [t] = admin.describe_topics([topic_name])
    assert t["error_code"] == UNKNOWN_TOPIC_OR_PARTITION, "the topic must not have been created"


@pytest.mark.parametrize(
    "name",
    ["bad name!", "slash/in/name", ".", "..", "x" * 250, ""],
    ids=["space-bang", "slash", "dot", "dotdot", "too-long", "empty"],
)
def test_create_invalid_topic_name(admin: KafkaAdminClient, name: str) -> None:
    assert create_error(admin, name, num_partitions=1) == INVALID_TOPIC_EXCEPTION


def test_create_longest_topic_name(admin: KafkaAdminClient) -> None:
    name = unique_topic_name("l")
    name += "x" * (249 - len(name))
    assert create_error(admin, name, num_partitions=1) == 0


def test_create_invalid_counts(admin: KafkaAdminClient, topic_name: str) -> None:
    assert create_error(admin, topic_name, num_partitions=0) == INVALID_PARTITIONS
    assert create_error(admin, topic_name, num_partitions=1, replication_factor=3) == (
        INVALID_REPLICATION_FACTOR
    )


def confluent_code(future: object) -> int:
    """The error code a confluent admin future fails with (0: it succeeded)."""
    try:
        future.result(timeout=20)  # type: ignore[attr-defined]
    except confluent_kafka.KafkaException as exc:
        return exc.args[0].code()
    return 0


def test_confluent_admin(broker: Broker, topic_name: str) -> None:
    """The same operations through librdkafka's admin client."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = NewTopic(
        topic_name, num_partitions=2, replication_factor=1, config={"retention.ms": "1000000"}
    )
    [future] = admin.create_topics([new], operation_timeout=15, request_timeout=20).values()
    assert confluent_code(future) == 0

    bad = NewTopic(topic_name + "-bad", 1, 1, config={"retention.ms": "x"})
    [future] = admin.create_topics([bad], request_timeout=20).values()
    assert confluent_code(future) == confluent_kafka.KafkaError.INVALID_CONFIG == INVALID_CONFIG

    [future] = admin.create_topics([NewTopic("bad name!", 1, 1)], request_timeout=20).values()
    assert confluent_code(future) == confluent_kafka.KafkaError.TOPIC_EXCEPTION

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "2000000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [future] = admin.incremental_alter_configs([resource], request_timeout=20).values()
    assert confluent_code(future) == 0

    bad_alter = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [future] = admin.incremental_alter_configs([bad_alter], request_timeout=20).values()
    assert confluent_code(future) == INVALID_CONFIG

    [future] = admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, topic_name)], request_timeout=20
    ).values()
    entries = future.result(timeout=20)
    assert entries["retention.ms"].value == "2000000"
    assert (
        entries["retention.ms"].source
        == confluent_kafka.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    )
    assert entries["segment.bytes"].value == KAFKA_TOPIC_DEFAULTS["segment.bytes"]

    metadata = admin.list_topics(topic=topic_name, timeout=10)
    assert sorted(metadata.topics[topic_name].partitions) == [0, 1]

    [future] = admin.create_partitions(
        [confluent_kafka.admin.NewPartitions(topic_name, 5)], request_timeout=20
    ).values()
    assert confluent_code(future) == 0

    def five() -> bool:
        md = admin.list_topics(topic=topic_name, timeout=10)
        return sorted(md.topics[topic_name].partitions) == [0, 1, 2, 3, 4]

    wait_until(five, what="5 partitions")

    [future] = admin.delete_topics([topic_name], operation_timeout=15, request_timeout=20).values()
    assert confluent_code(future) == 0

    def gone() -> bool:
        return topic_name not in admin.list_topics(timeout=10).topics

    wait_until(gone, what=f"{topic_name} to leave the metadata")


def test_describe_producers(broker: Broker, make_topic: Callable[..., str],
                            admin: KafkaAdminClient) -> None:
    """DescribeProducers shows the idempotent producer that wrote a partition: its id,
    epoch 0 and its last sequence (kafka-transactions.sh describe-producers reads this)."""
    from kafka.structs import TopicPartition

    from .clients import kafka_python_produce

    topic = make_topic()
    recs = [Rec(f"k{i}".encode(), f"v{i}".encode()) for i in range(7)]
    # One batch per record, so the producer's last sequence is the last record's.
    assert kafka_python_produce(broker.bootstrap, topic, recs, linger_ms=0,
                                max_in_flight_requests_per_connection=1) == list(range(7))
    result = admin.describe_producers([TopicPartition(topic, 0)])
    [producer] = result[TopicPartition(topic, 0)].active_producers
    assert producer.producer_id >= 0
    assert producer.producer_epoch == 0
    assert producer.last_sequence == 6
    assert producer.current_transaction_start_offset == -1
