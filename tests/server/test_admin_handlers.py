"""Admin APIs against a broker running in-process: DeleteTopics, CreatePartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DeleteRecords, DescribeCluster,
DescribeTopicPartitions, OffsetForLeaderEpoch and DescribeLogDirs.

Raw requests (kafka-python's message classes) cover every version we serve and
the error codes; kafka-python's KafkaAdminClient (blocking, run in a thread) checks
that a stock client reads the answers.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetForLeaderEpochRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.protocol.versions import SUPPORTED_VERSIONS
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config
from josefk.server.config.keys import TOPIC_KEYS
from josefk.server.handlers.admin.config_changes import apply_incremental

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_PARTITIONS = 37
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
TOPIC_DELETION_DISABLED = 73
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_ID = 100
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115
# DescribeConfigs ConfigSource ids on the wire.
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
ZERO_UUID = uuid.UUID(int=0)


def versions(api_key: ApiKey) -> list[int]:
    """Every version of ``api_key`` the broker serves."""
    supported = SUPPORTED_VERSIONS[int(api_key)]
    return list(range(supported.min_version, supported.max_version + 1))


def batch(count: int) -> bytearray:
    """One v2 batch of ``count`` small records (kafka-python's builder)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=None, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    return bytearray(builder.build())


def overrides(settings: dict[str, str] | None = None, path: Path | None = None
              ) -> dict[str, str]:
    return {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(path),
            **(settings or {})}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def run_broker(data_dir: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start brokers on ``data_dir`` (with extra settings); all stop at the end."""
    async with trio.open_nursery() as nursery:
        async def start(**settings: str) -> Broker:
            config = load_config(None, overrides(settings, data_dir))
            return await nursery.start(Broker(config).serve)
        yield start
        nursery.cancel_scope.cancel()


@pytest.fixture
async def broker(run_broker: Callable[..., Any]) -> Broker:
    return await run_broker()


class Raw:
    """One connection sending kafka-python request objects at a chosen version."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.correlation_id = 0

    async def send(self, cls: Any, version: int, **fields: Any) -> Any:
        self.correlation_id += 1
        request = cls[version](**fields)
        request.with_header(correlation_id=self.correlation_id, client_id="admin-test")
        await self.stream.send_all(request.encode(header=True, framed=True))
        frame = await self._read_frame()
        response = request.header.get_response_class().decode(frame, version=version,
                                                               header=True)
        assert response.header.correlation_id == self.correlation_id
        return response

    async def _read_frame(self) -> bytes:
        buf = b""
        with trio.fail_after(10):
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                chunk = await self.stream.receive_some(1 << 20)
                assert chunk, "the broker closed the connection"
                buf += chunk
        return buf[4:]


@pytest.fixture
async def raw(broker: Broker) -> AsyncIterator[Raw]:
    stream = await trio.open_tcp_stream("127.0.0.1", broker.bound_ports[0])
    async with stream:
        yield Raw(stream)


async def admin_call(broker: Broker, call: Callable[[KafkaAdminClient], Any]) -> Any:
    """Run ``call`` with a stock KafkaAdminClient in a worker thread."""
    def run() -> Any:
        client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.bound_ports[0]}",
                                  request_timeout_ms=10_000)
        try:
            return call(client)
        finally:
            client.close()
    return await trio.to_thread.run_sync(run)


def produce(broker: Broker, topic: str, count: int, partition: int = 0) -> None:
    p = broker.partition(topic, partition)
    assert p is not None
    p.append_records(batch(count), -1)


# --- DeleteTopics ------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DeleteTopics))
async def test_delete_topics_by_name(broker: Broker, raw: Raw, version: int) -> None:
    topic = await broker.create_topic("doomed", 2)
    log_dir = broker.partition("doomed", 0).log.directory  # type: ignore[union-attr]
    if version >= 6:
        fields: dict[str, Any] = {"topics": [
            DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=ZERO_UUID)
            for n in ("doomed", "never")]}
    else:
        fields = {"topic_names": ["doomed", "never"]}
    response = await raw.send(DeleteTopicsRequest, version, timeout_ms=1000, **fields)
    got = {r.name: r for r in response.responses}
    assert got["doomed"].error_code == 0
    assert got["never"].error_code == UNKNOWN_TOPIC_OR_PARTITION
    if version >= 6:
        assert got["doomed"].topic_id == topic.topic_id
    assert broker.store.get("doomed") is None
    assert broker.partition("doomed", 0) is None and broker.partition("doomed", 1) is None
    assert not log_dir.exists()
    again = await broker.create_topic("doomed", 1)
    assert again.topic_id != topic.topic_id


async def test_delete_topics_by_id(broker: Broker, raw: Raw) -> None:
    topic = await broker.create_topic("by-id", 1)
    unknown = uuid.uuid4()
    state = DeleteTopicsRequest.DeleteTopicState
    response = await raw.send(DeleteTopicsRequest, 6, timeout_ms=1000, topics=[
        state(name=None, topic_id=topic.topic_id), state(name=None, topic_id=unknown),
        state(name=None, topic_id=ZERO_UUID), state(name="by-id", topic_id=topic.topic_id),
        state(name="dup", topic_id=ZERO_UUID), state(name="dup", topic_id=ZERO_UUID)])
    # kafka-python decodes the zero uuid as None.
    got = [(r.name, r.topic_id or ZERO_UUID, r.error_code, r.error_message)
           for r in response.responses]
    assert ("by-id", topic.topic_id, 0, None) in got  # the name is filled in
    assert (None, unknown, UNKNOWN_TOPIC_ID, "This server does not host this topic ID.") in got
    assert (None, ZERO_UUID, INVALID_REQUEST, "Neither topic name nor id were specified.") in got
    assert ("by-id", topic.topic_id, INVALID_REQUEST,
            "You may not specify both topic name and topic id.") in got
    assert ("dup", ZERO_UUID, INVALID_REQUEST, "Duplicate topic name.") in got
    assert len(got) == 5
    assert broker.store.get("by-id") is None


@pytest.mark.parametrize("version", versions(ApiKey.DeleteTopics))
async def test_delete_topics_disabled(run_broker: Callable[..., Any], version: int) -> None:
    broker = await run_broker(**{"delete.topic.enable": "false"})
    await broker.create_topic("kept", 1)
    async with await trio.open_tcp_stream("127.0.0.1", broker.bound_ports[0]) as stream:
        fields: dict[str, Any] = (
            {"topics": [DeleteTopicsRequest.DeleteTopicState(name="kept", topic_id=ZERO_UUID)]}
            if version >= 6 else {"topic_names": ["kept"]})
        response = await Raw(stream).send(DeleteTopicsRequest, version, timeout_ms=1000,
                                          **fields)
    [result] = response.responses
    assert result.error_code == (TOPIC_DELETION_DISABLED if version >= 3 else INVALID_REQUEST)
    assert broker.store.get("kept") is not None


# --- CreatePartitions --------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.CreatePartitions))
async def test_create_partitions(broker: Broker, raw: Raw, version: int) -> None:
    await broker.create_topic("grow", 1)
    await broker.create_topic("manual", 1)
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    assignment = topic.CreatePartitionsAssignment
    checked = await raw.send(CreatePartitionsRequest, version, timeout_ms=1000,
                             validate_only=True, topics=[topic(name="grow", count=3,
                                                               assignments=None)])
    assert [(r.name, r.error_code) for r in checked.results] == [("grow", 0)]
    assert broker.store.get("grow").num_partitions == 1  # type: ignore[union-attr]
    response = await raw.send(CreatePartitionsRequest, version, timeout_ms=1000,
                              validate_only=False, topics=[
        topic(name="grow", count=3, assignments=None),
        topic(name="manual", count=2, assignments=[assignment(broker_ids=[broker.node_id])]),
        topic(name="never", count=2, assignments=None),
        topic(name="dup", count=2, assignments=None),
        topic(name="dup", count=3, assignments=None)])
    got = {r.name: (r.error_code, r.error_message) for r in response.results}
    assert got["grow"] == (0, None) and got["manual"] == (0, None)
    assert got["never"] == (UNKNOWN_TOPIC_OR_PARTITION, None)
    assert got["dup"] == (INVALID_REQUEST, "Duplicate topic name.")
    assert [broker.partition("grow", i) is not None for i in range(3)] == [True] * 3
    assert broker.partition("manual", 1) is not None
    produce(broker, "grow", 2, partition=2)
    assert broker.partition("grow", 2).high_watermark == 2  # type: ignore[union-attr]

    for count in (3, 2):
        again = await raw.send(CreatePartitionsRequest, version, timeout_ms=1000,
                               validate_only=False,
                               topics=[topic(name="grow", count=count, assignments=None)])
        [result] = again.results
        assert result.error_code == INVALID_PARTITIONS, count
        assert result.error_message
    bad = await raw.send(CreatePartitionsRequest, version, timeout_ms=1000, validate_only=False,
                         topics=[topic(name="grow", count=5,
                                       assignments=[assignment(broker_ids=[broker.node_id])])])
    assert bad.results[0].error_code == INVALID_REPLICA_ASSIGNMENT


# --- DescribeConfigs ---------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DescribeConfigs))
async def test_describe_topic_configs(broker: Broker, raw: Raw, version: int) -> None:
    await broker.create_topic("conf", 1,
                              configs={"retention.ms": "1000", "cleanup.policy": "compact"})
    resource = DescribeConfigsRequest.DescribeConfigsResource
    response = await raw.send(DescribeConfigsRequest, version, include_synonyms=True,
                              include_documentation=True, resources=[
        resource(resource_type=TOPIC, resource_name="conf", configuration_keys=None),
        resource(resource_type=TOPIC, resource_name="conf",
                 configuration_keys=["retention.ms", "nope"]),
        resource(resource_type=TOPIC, resource_name="never", configuration_keys=None),
        resource(resource_type=TOPIC, resource_name="bad name!", configuration_keys=None)])
    full, filtered, unknown, invalid = response.results
    assert full.error_code == 0 and full.resource_name == "conf"
    entries = {e.name: e for e in full.configs}
    assert len(entries) > 30
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == (
        "1000", TOPIC_CONFIG, False)
    # As Kafka 4.3: the broker's synonyms start at log.retention.ms, unset here.
    assert [(s.name, s.source) for s in retention.synonyms] == [("retention.ms", TOPIC_CONFIG)]
    assert [(s.name, s.source) for s in entries["max.message.bytes"].synonyms] == [
        ("message.max.bytes", DEFAULT_CONFIG)]
    if version >= 3:
        assert retention.documentation == TOPIC_KEYS["retention.ms"].doc
    segment = entries["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1073741824", DEFAULT_CONFIG)
    if version >= 3:
        assert entries["cleanup.policy"].config_type == 7  # LIST
    assert [e.name for e in filtered.configs] == ["retention.ms"]
    assert (unknown.error_code, unknown.configs) == (UNKNOWN_TOPIC_OR_PARTITION, [])
    assert invalid.error_code == INVALID_TOPIC_EXCEPTION

    plain = await raw.send(DescribeConfigsRequest, version, include_synonyms=False,
                           include_documentation=False, resources=[
        resource(resource_type=TOPIC, resource_name="conf", configuration_keys=[])])
    [result] = plain.results
    assert all(e.synonyms == [] and not e.documentation for e in result.configs)
    assert len(result.configs) == len(full.configs)


@pytest.mark.parametrize("version", versions(ApiKey.DescribeConfigs))
async def test_describe_broker_configs(broker: Broker, raw: Raw, version: int) -> None:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    response = await raw.send(DescribeConfigsRequest, version, include_synonyms=True,
                              include_documentation=False, resources=[
        resource(resource_type=BROKER, resource_name=str(broker.node_id),
                 configuration_keys=None),
        resource(resource_type=BROKER, resource_name="", configuration_keys=None),
        resource(resource_type=BROKER, resource_name="7", configuration_keys=None),
        resource(resource_type=BROKER, resource_name="x", configuration_keys=None),
        resource(resource_type=99, resource_name="x", configuration_keys=None)])
    mine, default, other, junk, unknown_type = response.results
    entries = {e.name: e for e in mine.configs}
    assert entries["log.dirs"].config_source == STATIC_BROKER_CONFIG
    assert entries["log.dirs"].read_only is True
    assert entries["num.partitions"].config_source == DEFAULT_CONFIG
    assert entries["num.partitions"].value == "1"
    # Kafka lists only the dynamic cluster-wide defaults; there are none.
    assert (default.error_code, default.configs) == (0, [])
    assert other.error_code == INVALID_REQUEST and "Unexpected broker id" in other.error_message
    assert junk.error_code == INVALID_REQUEST
    assert unknown_type.error_code == INVALID_REQUEST


# --- AlterConfigs and IncrementalAlterConfigs --------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.AlterConfigs))
async def test_alter_configs_replaces(broker: Broker, raw: Raw, version: int) -> None:
    await broker.create_topic("alter", 1, configs={"retention.ms": "1000", "segment.ms": "60000"})
    resource = AlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig

    async def alter(name: str, configs: dict[str, str | None], validate_only: bool = False,
                    rtype: int = TOPIC) -> tuple[int, str | None]:
        response = await raw.send(AlterConfigsRequest, version, validate_only=validate_only,
                                  resources=[resource(resource_type=rtype, resource_name=name,
                                                      configs=[config(name=k, value=v)
                                                               for k, v in configs.items()])])
        [result] = response.responses
        assert (result.resource_type, result.resource_name) == (rtype, name)
        return result.error_code, result.error_message

    assert await alter("alter", {"retention.ms": "5000"}, validate_only=True) == (0, None)
    assert dict(broker.store.get("alter").configs)["retention.ms"] == "1000"  # type: ignore
    assert await alter("alter", {"retention.ms": "5000"}) == (0, None)
    assert dict(broker.store.get("alter").configs) == {"retention.ms": "5000"}  # type: ignore
    assert broker.partition("alter", 0).log.config.retention_ms == 5000  # type: ignore
    code, message = await alter("alter", {"retention.ms": "soon"})
    assert code == INVALID_CONFIG and "retention.ms" in (message or "")
    assert (await alter("alter", {"no.such": "1"}))[0] == INVALID_CONFIG
    assert (await alter("alter", {"retention.ms": None}))[0] == INVALID_REQUEST
    assert (await alter("never", {"retention.ms": "5"}))[0] == UNKNOWN_TOPIC_OR_PARTITION
    assert (await alter("", {"retention.ms": "5"}))[0] == INVALID_REQUEST
    assert (await alter("bad name!", {}))[0] == INVALID_TOPIC_EXCEPTION
    # Broker resources: a static-only key is refused as Kafka refuses it.
    code, message = await alter(str(broker.node_id), {"log.dirs": "/x"}, rtype=BROKER)
    assert (code, message) == (INVALID_REQUEST,
                               "Cannot update these configs dynamically: [log.dirs]")
    # A dynamic key is stored as the broker's dynamic config (AlterConfigs: all of them).
    assert await alter(str(broker.node_id), {"message.max.bytes": "5000"}, rtype=BROKER) \
        == (0, None)
    assert broker.entity_configs.get("brokers", str(broker.node_id)) == {
        "message.max.bytes": "5000"}
    assert await alter(str(broker.node_id), {}, rtype=BROKER) == (0, None)
    assert broker.entity_configs.get("brokers", str(broker.node_id)) == {}
    assert (await alter("9", {}, rtype=BROKER))[0] == INVALID_REQUEST
    assert await alter("", {}, rtype=BROKER) == (0, None)
    assert dict(broker.store.get("alter").configs) == {"retention.ms": "5000"}  # type: ignore


@pytest.mark.parametrize("version", versions(ApiKey.IncrementalAlterConfigs))
async def test_incremental_alter_configs(broker: Broker, raw: Raw, version: int) -> None:
    await broker.create_topic("inc", 1, configs={"segment.ms": "60000"})
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig

    async def alter(name: str, *ops: tuple[str, int, str | None], rtype: int = TOPIC,
                    validate_only: bool = False) -> tuple[int, str | None]:
        response = await raw.send(IncrementalAlterConfigsRequest, version,
                                  validate_only=validate_only, resources=[resource(
                                      resource_type=rtype, resource_name=name,
                                      configs=[config(name=k, config_operation=op, value=v)
                                               for k, op, v in ops])])
        [result] = response.responses
        return result.error_code, result.error_message

    def stored() -> dict[str, str]:
        return dict(broker.store.get("inc").configs)  # type: ignore[union-attr]

    assert await alter("inc", ("retention.ms", SET, "7000"), validate_only=True) == (0, None)
    assert stored() == {"segment.ms": "60000"}
    assert await alter("inc", ("retention.ms", SET, "7000"), ("segment.ms", DELETE, None)) \
        == (0, None)
    assert stored() == {"retention.ms": "7000"}
    log = broker.partition("inc", 0).log  # type: ignore[union-attr]
    assert log.config.retention_ms == 7000 and log.config.segment_ms == 604800000
    assert await alter("inc", ("cleanup.policy", APPEND, "compact")) == (0, None)
    assert stored()["cleanup.policy"] == "delete,compact"
    assert log.config.compact and log.config.delete
    assert await alter("inc", ("cleanup.policy", SUBTRACT, "delete")) == (0, None)
    assert stored()["cleanup.policy"] == "compact" and not log.config.delete
    assert await alter("inc", ("retention.ms", APPEND, "1")) == (
        INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    assert await alter("inc", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None)) == (
        INVALID_REQUEST, "Error due to duplicate config keys")
    assert (await alter("inc", ("retention.ms", SET, None)))[0] == INVALID_REQUEST
    assert (await alter("inc", ("retention.ms", SET, "x")))[0] == INVALID_CONFIG
    assert (await alter("inc", ("max.message.bytes", SET, "-5")))[0] == INVALID_CONFIG
    assert (await alter("inc", ("retention.ms", 9, "1")))[0] == INVALID_REQUEST
    assert (await alter("never", ("retention.ms", SET, "1")))[0] == UNKNOWN_TOPIC_OR_PARTITION
    assert stored() == {"retention.ms": "7000", "cleanup.policy": "compact"}
    node = str(broker.node_id)
    assert await alter(node, ("log.retention.ms", DELETE, None), rtype=BROKER) == (0, None)
    assert await alter(node, ("log.dirs", SET, "/x"), rtype=BROKER) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs]")
    assert await alter(node, ("log.retention.ms", APPEND, "1"), rtype=BROKER) == (
        INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
    assert await alter(node, ("no.such", APPEND, "1"), rtype=BROKER) == (
        INVALID_CONFIG, "Unknown config name: no.such")


def test_apply_incremental() -> None:
    assert apply_incremental({}, [("cleanup.policy", APPEND, "compact,delete")]) == {
        "cleanup.policy": "delete,compact"}
    assert apply_incremental({"cleanup.policy": "compact"},
                             [("cleanup.policy", SUBTRACT, "compact")]) == {"cleanup.policy": ""}
    assert apply_incremental({"a": "1"}, [("a", DELETE, None), ("b", SET, "2")]) == {"b": "2"}


# --- DeleteRecords -----------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DeleteRecords))
async def test_delete_records(broker: Broker, raw: Raw, version: int) -> None:
    await broker.create_topic("trim", 2)
    await broker.create_topic("compacted", 1, configs={"cleanup.policy": "compact"})
    produce(broker, "trim", 10)
    produce(broker, "trim", 3, partition=1)
    produce(broker, "compacted", 3)
    rtopic = DeleteRecordsRequest.DeleteRecordsTopic
    rpart = rtopic.DeleteRecordsPartition

    async def delete(topic: str, partition: int, offset: int) -> tuple[int, int]:
        response = await raw.send(DeleteRecordsRequest, version, timeout_ms=1000, topics=[
            rtopic(name=topic, partitions=[rpart(partition_index=partition, offset=offset)])])
        [t] = response.topics
        [p] = t.partitions
        return p.low_watermark, p.error_code

    assert await delete("trim", 0, 4) == (4, 0)
    assert broker.partition("trim", 0).log.log_start_offset == 4  # type: ignore[union-attr]
    assert await delete("trim", 0, 2) == (4, 0)  # below the log start: nothing to do
    assert await delete("trim", 0, 11) == (-1, OFFSET_OUT_OF_RANGE)
    assert await delete("trim", 0, -5) == (-1, OFFSET_OUT_OF_RANGE)
    assert await delete("trim", 1, -1) == (3, 0)  # -1: the high watermark
    assert await delete("trim", 0, 10) == (10, 0)
    assert await delete("trim", 7, 1) == (-1, UNKNOWN_TOPIC_OR_PARTITION)
    assert await delete("never", 0, 1) == (-1, UNKNOWN_TOPIC_OR_PARTITION)
    assert await delete("compacted", 0, 1) == (-1, POLICY_VIOLATION)


async def test_delete_records_survives_restart(data_dir: Path) -> None:
    config = load_config(None, overrides(path=data_dir))
    async with trio.open_nursery() as nursery:
        broker: Broker = await nursery.start(Broker(config).serve)
        await broker.create_topic("durable", 1)
        produce(broker, "durable", 10)
        tp = TopicPartition("durable", 0)
        result = await admin_call(broker, lambda a: a.delete_records({tp: 6}))
        assert result[tp]["low_watermark"] == 6
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        broker = await nursery.start(Broker(config).serve)
        log = broker.partition("durable", 0).log  # type: ignore[union-attr]
        assert (log.log_start_offset, log.high_watermark) == (6, 10)
        nursery.cancel_scope.cancel()


# --- DescribeCluster ---------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DescribeCluster))
async def test_describe_cluster(broker: Broker, raw: Raw, version: int) -> None:
    response = await raw.send(DescribeClusterRequest, version,
                              include_cluster_authorized_operations=False,
                              include_fenced_brokers=False, endpoint_type=1)
    assert (response.error_code, response.cluster_id, response.controller_id) == (
        0, broker.cluster_id, broker.node_id)
    [node] = response.brokers
    assert (node.broker_id, node.host, node.port, node.rack) == (
        broker.node_id, "127.0.0.1", broker.bound_ports[0], None)
    assert response.authorized_operations is None
    with_ops = await raw.send(DescribeClusterRequest, version,
                              include_cluster_authorized_operations=True,
                              include_fenced_brokers=False, endpoint_type=1)
    assert with_ops.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
    if version >= 1:
        for endpoint, code in ((2, MISMATCHED_ENDPOINT_TYPE), (9, UNSUPPORTED_ENDPOINT_TYPE)):
            wrong = await raw.send(DescribeClusterRequest, version,
                                   include_cluster_authorized_operations=False,
                                   include_fenced_brokers=False, endpoint_type=endpoint)
            assert (wrong.error_code, wrong.brokers) == (code, [])


# --- DescribeTopicPartitions -------------------------------------------------------------


async def test_describe_topic_partitions(broker: Broker, raw: Raw) -> None:
    for name, count in (("dtp-a", 3), ("dtp-b", 2), ("dtp-c", 1)):
        await broker.create_topic(name, count)
    req = DescribeTopicPartitionsRequest
    topic, cursor = req.TopicRequest, req.Cursor

    async def describe(names: list[str], limit: int = 2000, at: Any = None) -> Any:
        return await raw.send(req, 0, topics=[topic(name=n) for n in names],
                              response_partition_limit=limit, cursor=at)

    everything = await describe([])
    assert [t.name for t in everything.topics] == ["dtp-a", "dtp-b", "dtp-c"]
    assert everything.next_cursor is None
    a = everything.topics[0]
    assert (a.error_code, a.topic_id, a.is_internal) == (
        0, broker.store.get("dtp-a").topic_id, False)  # type: ignore[union-attr]
    p0 = a.partitions[0]
    assert (p0.partition_index, p0.leader_id, p0.leader_epoch, p0.replica_nodes, p0.isr_nodes,
            p0.eligible_leader_replicas, p0.last_known_elr, p0.offline_replicas) == (
        0, broker.node_id, 0, [broker.node_id], [broker.node_id], [], [], [])
    assert a.topic_authorized_operations == 3576

    names = ["dtp-c", "dtp-a", "dtp-b", "nope", "bad name!"]
    page = await describe(names, limit=4)  # sorted by name
    assert [(t.name, t.error_code, [p.partition_index for p in t.partitions])
            for t in page.topics] == [
        ("bad name!", INVALID_TOPIC_EXCEPTION, []), ("dtp-a", 0, [0, 1, 2]), ("dtp-b", 0, [0])]
    assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == ("dtp-b", 1)
    # The next page: the named topics from the cursor on.
    rest = await describe(names, limit=4, at=cursor(topic_name="dtp-b", partition_index=1))
    assert [(t.name, t.error_code, [p.partition_index for p in t.partitions])
            for t in rest.topics] == [
        ("dtp-b", 0, [1]), ("dtp-c", 0, [0]), ("nope", UNKNOWN_TOPIC_OR_PARTITION, [])]
    assert rest.next_cursor is None
    exact = await describe(["dtp-a", "dtp-b"], limit=3)
    assert [t.name for t in exact.topics] == ["dtp-a"]
    assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == ("dtp-b", 0)
    refused = await describe(["dtp-a"], at=cursor(topic_name="dtp-b", partition_index=0))
    assert [(t.name, t.error_code) for t in refused.topics] == [("dtp-a", INVALID_REQUEST)]


# --- OffsetForLeaderEpoch ----------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.OffsetForLeaderEpoch))
async def test_offset_for_leader_epoch(broker: Broker, raw: Raw, version: int) -> None:
    await broker.create_topic("epochs", 2)
    produce(broker, "epochs", 5)
    req = OffsetForLeaderEpochRequest
    ptopic = req.OffsetForLeaderTopic
    part = ptopic.OffsetForLeaderPartition

    async def ask(topic: str, partition: int, epoch: int, current: int = -1
                  ) -> tuple[int, int, int]:
        response = await raw.send(req, version, replica_id=-1, topics=[ptopic(
            topic=topic, partitions=[part(partition=partition, current_leader_epoch=current,
                                          leader_epoch=epoch)])])
        [t] = response.topics
        [p] = t.partitions
        assert p.partition == partition
        return p.error_code, p.leader_epoch, p.end_offset

    assert await ask("epochs", 0, 0) == (0, 0, 5)
    assert await ask("epochs", 0, 0, current=0) == (0, 0, 5)
    assert await ask("epochs", 0, 1) == (0, -1, -1)
    assert await ask("epochs", 0, -1) == (0, -1, -1)
    assert await ask("epochs", 0, 0, current=1) == (UNKNOWN_LEADER_EPOCH, -1, -1)
    # An empty partition: its leader's epoch starts at the log end.
    assert await ask("epochs", 1, 0) == (0, 0, 0)
    assert await ask("epochs", 5, 0) == (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
    assert await ask("never", 0, 0) == (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)


# --- DescribeLogDirs ---------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.DescribeLogDirs))
async def test_describe_log_dirs(broker: Broker, raw: Raw, data_dir: Path, version: int
                                 ) -> None:
    await broker.create_topic("dirs", 2)
    await broker.create_topic("other", 1)
    produce(broker, "dirs", 4)
    size = broker.partition("dirs", 0).log.size_in_bytes()  # type: ignore[union-attr]
    assert size > 0
    req = DescribeLogDirsRequest
    everything = await raw.send(req, version, topics=None)
    [result] = everything.results
    assert (result.error_code, result.log_dir) == (0, str(data_dir.absolute()))
    parts = {(t.name, p.partition_index): p for t in result.topics for p in t.partitions}
    assert set(parts) == {("dirs", 0), ("dirs", 1), ("other", 0)}
    assert (parts[("dirs", 0)].partition_size, parts[("dirs", 0)].offset_lag) == (size, 0)
    assert parts[("dirs", 1)].partition_size == 0
    if version >= 4:
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
    if version >= 3:
        assert everything.error_code == 0
    some = await raw.send(req, version, topics=[req.DescribableLogDirTopic(
        topic="dirs", partitions=[1, 7])])
    [result] = some.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
        ("dirs", [1])]


# --- a stock client ----------------------------------------------------------------------


async def test_kafka_python_admin(broker: Broker) -> None:
    await broker.create_topic("stock", 1, configs={"retention.ms": "1000"})
    produce(broker, "stock", 5)
    tp = TopicPartition("stock", 0)

    def work(admin: KafkaAdminClient) -> dict[str, Any]:
        out: dict[str, Any] = {"cluster": admin.describe_cluster()}
        admin.create_partitions({"stock": 3})
        resource = ConfigResource(ConfigResourceType.TOPIC, "stock")
        out["altered"] = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "stock", configs={"segment.ms": "9000"})],
            incremental=True)
        out["configs"] = admin.describe_configs([resource], config_filter="modified")
        out["deleted"] = admin.delete_records({tp: 3})
        out["dirs"] = admin.describe_log_dirs()
        out["topics"] = admin.delete_topics(["stock"])
        return out

    out = await admin_call(broker, work)
    assert out["cluster"]["controller_id"] == broker.node_id
    assert out["altered"] == {"topic": {"stock": "OK"}}
    modified = out["configs"]["topic"]["stock"]
    assert {k: v["value"] for k, v in modified.items()} == {
        "retention.ms": "1000", "segment.ms": "9000"}
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert out["deleted"][tp]["low_watermark"] == 3
    [dirs] = out["dirs"]
    assert {t["name"] for d in dirs["log_dirs"] for t in d["topics"]} == {"stock"}
    assert [t["error_code"] for t in out["topics"]["topics"]] == [0]
    assert broker.store.get("stock") is None


async def test_describe_log_dirs_opens_deferred_logs_without_holding_the_loop(
        broker: Broker) -> None:
    """A topic's partitions are created lazily; DescribeLogDirs opens only those it is
    asked about, a slice at a time, so thousands of them do not stall other clients."""
    await broker.create_topic("asked", 2)
    # (The broker's own opener runs only when every task waits: not before this call.)
    await broker.open_deferred_partitions({("asked", 0)})
    assert ("asked", 0) not in broker._unopened and ("asked", 1) in broker._unopened
    await broker.create_topic("many", 300)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        await broker.open_deferred_partitions()
        nursery.cancel_scope.cancel()
    assert not broker._unopened
    assert ticks > 1, "other tasks ran between slices"
