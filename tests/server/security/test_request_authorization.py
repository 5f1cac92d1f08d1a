"""Kafka's authorization checks of each API, against an in-process broker with an
authorizer: requests are encoded with kafka-python, decoded and dispatched as the
connection does, in the session of a chosen principal."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest,
    DescribeUserScramCredentialsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    JoinGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.cluster.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from josefk.protocol.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    NONE,
    SECURITY_DISABLED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.messages import decode_request
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config
from josefk.server.network.connection import CloseConnection
from josefk.server.security.session import Session, current_session

ALICE, ADMIN = "User:alice", "User:admin"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
Op, Rt = AclOperation, ResourceType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
OMITTED = -(1 << 31)


async def start(tmp_path: Path, nursery: trio.Nursery, **settings: str) -> Broker:
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                "log.dirs": str(tmp_path / "data"), **settings})
    return await nursery.start(Broker(config).serve)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A broker with Kafka 4's authorizer, ``User:admin`` its super user."""
    async with trio.open_nursery() as nursery:
        yield await start(tmp_path, nursery, **{"authorizer.class.name": STANDARD,
                                                "super.users": ADMIN})
        nursery.cancel_scope.cancel()


@pytest.fixture
async def open_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A broker without an authorizer."""
    async with trio.open_nursery() as nursery:
        yield await start(tmp_path, nursery)
        nursery.cancel_scope.cancel()


async def call(broker: Broker, cls: Any, version: int, principal: str = ALICE,
               **fields: Any) -> Any:
    """Send one request as ``principal`` through the broker's dispatch; the response."""
    request = cls[version](**fields)
    request.with_header(correlation_id=7, client_id="authz-test")
    decoded = decode_request(request.encode(header=True, framed=True)[4:])
    token = current_session.set(Session(principal, "127.0.0.1", "PLAINTEXT", "PLAINTEXT"))
    try:
        parts = await broker.dispatch(decoded)
    finally:
        current_session.reset(token)
    assert parts is not None
    frame = b"".join(bytes(p) for p in parts)  # type: ignore[arg-type]
    return request.header.get_response_class().decode(frame[4:], version=version, header=True)


async def allow(broker: Broker, rt: ResourceType, name: str, *ops: AclOperation,
                principal: str = ALICE, permission: AclPermissionType = ALLOW,
                pattern: PatternType = PatternType.LITERAL) -> None:
    await broker.security_store.create_acls([
        AclBinding(ResourcePattern(rt, name, pattern),
                   AccessControlEntry(principal, "*", op, permission)) for op in ops])


def batch(transactional: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional,
        producer_id=7 if transactional else -1, producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
    return bytes(builder.build())


def produce_fields(*topics: str, transactional_id: str | None = None,
                   transactional: bool = False) -> dict[str, Any]:
    data = ProduceRequest.TopicProduceData
    return {"transactional_id": transactional_id, "acks": 1, "timeout_ms": 5000,
            "topic_data": [data(name=t, partition_data=[data.PartitionProduceData(
                index=0, records=batch(transactional))]) for t in topics]}


def fetch_fields(*topics: str, replica_id: int = -1) -> dict[str, Any]:
    topic = FetchRequest.FetchTopic
    return {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "topics": [topic(topic=t, partitions=[topic.FetchPartition(
                partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20)])
                for t in topics]}


def fetched(response: Any) -> dict[str, int]:
    return {t.topic: p.error_code for t in response.responses for p in t.partitions}


# --- ACL APIs -----------------------------------------------------------------------------


def creation(name: str, op: int = 3, principal: str = ALICE, resource_type: int = 2,
             pattern: int = 3) -> Any:
    return CreateAclsRequest.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
        principal=principal, host="*", operation=op, permission_type=3)


def acl_filter(name: str | None = None, resource_type: int = 1, pattern: int = 1) -> Any:
    return DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=resource_type, resource_name_filter=name,
        pattern_type_filter=pattern, principal_filter=None, host_filter=None, operation=1,
        permission_type=1)


async def test_acl_apis_without_an_authorizer_are_security_disabled(open_broker: Broker) -> None:
    created = await call(open_broker, CreateAclsRequest, 3, creations=[creation("t")])
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (SECURITY_DISABLED, "No Authorizer is configured.")]
    described = await call(open_broker, DescribeAclsRequest, 3, resource_type_filter=1,
                           resource_name_filter=None, pattern_type_filter=1,
                           principal_filter=None, host_filter=None, operation=1,
                           permission_type=1)
    assert (described.error_code, described.error_message) == (
        SECURITY_DISABLED, "No Authorizer is configured on the broker")
    deleted = await call(open_broker, DeleteAclsRequest, 3, filters=[acl_filter()])
    assert [r.error_code for r in deleted.filter_results] == [SECURITY_DISABLED]


async def test_acls_are_created_described_and_deleted_by_who_may(broker: Broker) -> None:
    refused = await call(broker, CreateAclsRequest, 3, creations=[creation("t")])
    assert [r.error_code for r in refused.results] == [CLUSTER_AUTHORIZATION_FAILED]
    created = await call(broker, CreateAclsRequest, 3, ADMIN, creations=[
        creation("t"), creation("pre-", op=4, pattern=4), creation("oops", resource_type=4)])
    assert [r.error_code for r in created.results] == [NONE, NONE, 42]
    assert len(broker.security_store.acls) == 2
    described = await call(broker, DescribeAclsRequest, 3, ADMIN, resource_type_filter=2,
                           resource_name_filter="pre-fix", pattern_type_filter=2,
                           principal_filter=None, host_filter=None, operation=1,
                           permission_type=1)
    assert [(r.resource_name, r.pattern_type, [a.operation for a in r.acls])
            for r in described.resources] == [("pre-", 4, [4])]
    denied = await call(broker, DescribeAclsRequest, 3, resource_type_filter=1,
                        resource_name_filter=None, pattern_type_filter=1,
                        principal_filter=None, host_filter=None, operation=1, permission_type=1)
    assert (denied.error_code, denied.resources) == (CLUSTER_AUTHORIZATION_FAILED, [])
    deleted = await call(broker, DeleteAclsRequest, 3, ADMIN,
                         filters=[acl_filter("t", 2, 3), acl_filter("nothing", 2, 3)])
    assert [[(m.resource_name, m.operation) for m in r.matching_acls]
            for r in deleted.filter_results] == [[("t", 3)], []]
    assert len(broker.security_store.acls) == 1


async def test_a_malformed_acl_filter_closes_the_connection(broker: Broker) -> None:
    with pytest.raises(CloseConnection):
        await call(broker, DeleteAclsRequest, 3, ADMIN, filters=[acl_filter(resource_type=0)])
    with pytest.raises(CloseConnection):
        await call(broker, CreateAclsRequest, 3, ADMIN, creations=[creation("t", op=99)])
    # A filter-only value parses, and fails every creation of the request.
    response = await call(broker, CreateAclsRequest, 3, ADMIN,
                          creations=[creation("t", op=1), creation("u")])
    assert [r.error_code for r in response.results] == [-1, -1]


# --- produce and fetch --------------------------------------------------------------------


async def test_produce_needs_write_on_the_topic(broker: Broker) -> None:
    await broker.create_topic("mine", 1)
    await broker.create_topic("theirs", 1)
    await allow(broker, Rt.TOPIC, "mine", Op.WRITE)
    response = await call(broker, ProduceRequest, 9, **produce_fields("mine", "theirs"))
    assert {t.name: t.partition_responses[0].error_code for t in response.responses} == {
        "mine": NONE, "theirs": TOPIC_AUTHORIZATION_FAILED}
    assert broker.partition("theirs", 0).log.log_end_offset == 0  # type: ignore[union-attr]


async def test_transactional_produce_needs_write_on_the_transactional_id(
        broker: Broker) -> None:
    await broker.create_topic("mine", 1)
    await allow(broker, Rt.TOPIC, "mine", Op.WRITE)
    response = await call(broker, ProduceRequest, 9, **produce_fields(
        "mine", transactional_id="txn", transactional=True))
    assert response.responses[0].partition_responses[0].error_code == \
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_a_consumer_fetch_needs_read_on_the_topic(broker: Broker) -> None:
    await broker.create_topic("mine", 1)
    await broker.create_topic("theirs", 1)
    await allow(broker, Rt.TOPIC, "mine", Op.READ)
    response = await call(broker, FetchRequest, 12, **fetch_fields("mine", "theirs"))
    assert fetched(response) == {"mine": NONE, "theirs": TOPIC_AUTHORIZATION_FAILED}


async def test_a_replica_fetch_needs_cluster_action(broker: Broker) -> None:
    await broker.create_topic("mine", 1)
    await allow(broker, Rt.TOPIC, "mine", Op.ALL)
    response = await call(broker, FetchRequest, 12, **fetch_fields("mine", replica_id=0))
    assert fetched(response) == {"mine": TOPIC_AUTHORIZATION_FAILED}
    await allow(broker, Rt.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)
    response = await call(broker, FetchRequest, 12, **fetch_fields("mine", replica_id=0))
    assert fetched(response) == {"mine": NONE}


# --- metadata -----------------------------------------------------------------------------


def metadata_fields(topics: list[str] | None, create: bool = False, ops: bool = False
                    ) -> dict[str, Any]:
    return {"topics": None if topics is None else [
        MetadataRequest.MetadataRequestTopic(name=t, topic_id=None) for t in topics],
        "allow_auto_topic_creation": create, "include_cluster_authorized_operations": ops,
        "include_topic_authorized_operations": ops}


async def test_metadata_hides_topics_the_client_may_not_describe(broker: Broker) -> None:
    await broker.create_topic("seen", 1)
    await broker.create_topic("hidden", 1)
    await allow(broker, Rt.TOPIC, "seen", Op.READ)  # READ implies DESCRIBE
    everything = await call(broker, MetadataRequest, 10, **metadata_fields(None, ops=True))
    assert [(t.name, t.authorized_operations) for t in everything.topics] == [
        ("seen", {3, 8})]
    assert not everything.authorized_operations  # no DESCRIBE on the cluster: no bits
    named = await call(broker, MetadataRequest, 12, **metadata_fields(["seen", "hidden"]))
    assert [(t.name, t.error_code, t.authorized_operations) for t in named.topics] == [
        ("seen", NONE, None), ("hidden", TOPIC_AUTHORIZATION_FAILED, None)]


async def test_metadata_auto_creation_needs_create(broker: Broker) -> None:
    await allow(broker, Rt.TOPIC, "new-", Op.DESCRIBE, pattern=PatternType.PREFIXED)
    refused = await call(broker, MetadataRequest, 12, **metadata_fields(["new-a"], create=True))
    assert refused.topics[0].error_code == TOPIC_AUTHORIZATION_FAILED
    assert broker.store.get("new-a") is None
    await allow(broker, Rt.TOPIC, "new-", Op.CREATE, pattern=PatternType.PREFIXED)
    created = await call(broker, MetadataRequest, 12, **metadata_fields(["new-a"], create=True))
    assert created.topics[0].error_code == NONE and broker.store.get("new-a") is not None


async def test_without_an_authorizer_every_operation_is_authorized(open_broker: Broker) -> None:
    await open_broker.create_topic("t", 1)
    response = await call(open_broker, MetadataRequest, 10, **metadata_fields(["t"], ops=True))
    assert response.topics[0].authorized_operations == {3, 4, 5, 6, 7, 8, 10, 11}
    assert response.authorized_operations == {5, 7, 8, 9, 10, 11, 12}


async def test_describe_topic_partitions_and_describe_cluster(broker: Broker) -> None:
    await broker.create_topic("seen", 1)
    await broker.create_topic("hidden", 1)
    await allow(broker, Rt.TOPIC, "seen", Op.DESCRIBE)
    topic = DescribeTopicPartitionsRequest.TopicRequest
    response = await call(broker, DescribeTopicPartitionsRequest, 0, topics=[
        topic(name="seen"), topic(name="hidden")], response_partition_limit=100, cursor=None)
    assert [(t.name, t.error_code, t.topic_authorized_operations) for t in response.topics] == [
        ("seen", NONE, 1 << 8), ("hidden", TOPIC_AUTHORIZATION_FAILED, OMITTED)]
    cluster = await call(broker, DescribeClusterRequest, 1,
                         include_cluster_authorized_operations=True, endpoint_type=1)
    assert not cluster.authorized_operations
    await allow(broker, Rt.CLUSTER, "kafka-cluster", Op.DESCRIBE)
    cluster = await call(broker, DescribeClusterRequest, 1,
                         include_cluster_authorized_operations=True, endpoint_type=1)
    assert cluster.authorized_operations == {8}


async def test_list_offsets_and_offset_for_leader_epoch_need_describe(broker: Broker) -> None:
    await broker.create_topic("seen", 1)
    await broker.create_topic("hidden", 1)
    await allow(broker, Rt.TOPIC, "seen", Op.DESCRIBE)
    topic = ListOffsetsRequest.ListOffsetsTopic
    response = await call(broker, ListOffsetsRequest, 7, replica_id=-1, isolation_level=0,
                          topics=[topic(name=n, partitions=[topic.ListOffsetsPartition(
                              partition_index=0, current_leader_epoch=-1, timestamp=-1)])
                              for n in ("hidden", "seen")])
    assert [(t.name, t.partitions[0].error_code) for t in response.topics] == [
        ("seen", NONE), ("hidden", TOPIC_AUTHORIZATION_FAILED)]
    epoch = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    response = await call(broker, OffsetForLeaderEpochRequest, 4, replica_id=-1, topics=[
        epoch(topic=n, partitions=[epoch.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=-1, leader_epoch=0)]) for n in ("hidden", "seen")])
    assert [(t.topic, t.partitions[0].error_code) for t in response.topics] == [
        ("seen", NONE), ("hidden", TOPIC_AUTHORIZATION_FAILED)]


# --- topics, records, configs, log dirs ------------------------------------------------------


async def test_create_topics_needs_create_and_describe_configs_to_see_them(
        broker: Broker) -> None:
    await allow(broker, Rt.TOPIC, "ok", Op.CREATE)
    topic = CreateTopicsRequest.CreatableTopic
    response = await call(broker, CreateTopicsRequest, 7, timeout_ms=5000, validate_only=False,
                          topics=[topic(name=n, num_partitions=2, replication_factor=1,
                                        assignments=[], configs=[]) for n in ("ok", "no")])
    got = {t.name: t for t in response.topics}
    assert (got["no"].error_code, got["no"].error_message) == (
        TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    assert (got["ok"].error_code, got["ok"].topic_config_error_code,
            got["ok"].num_partitions, got["ok"].configs) == (NONE, TOPIC_AUTHORIZATION_FAILED,
                                                            -1, [])
    assert broker.store.get("ok") is not None and broker.store.get("no") is None


async def test_delete_topics_tells_only_what_the_client_may_see(broker: Broker) -> None:
    for name in ("seen", "hidden", "mine"):
        await broker.create_topic(name, 1)
    await allow(broker, Rt.TOPIC, "seen", Op.DESCRIBE)
    await allow(broker, Rt.TOPIC, "mine", Op.DELETE)
    state = DeleteTopicsRequest.DeleteTopicState
    hidden_id = broker.store.get("hidden").topic_id  # type: ignore[union-attr]
    response = await call(broker, DeleteTopicsRequest, 6, timeout_ms=5000, topics=[
        state(name="seen", topic_id=uuid.UUID(int=0)), state(name="absent", topic_id=None),
        state(name=None, topic_id=hidden_id), state(name="mine", topic_id=None)])
    got = {(r.name, r.error_code) for r in response.responses}
    assert got == {("seen", TOPIC_AUTHORIZATION_FAILED), ("absent", TOPIC_AUTHORIZATION_FAILED),
                   (None, TOPIC_AUTHORIZATION_FAILED), ("mine", NONE)}
    assert broker.store.get("mine") is None and broker.store.get("seen") is not None


async def test_create_partitions_and_delete_records_need_alter_and_delete(
        broker: Broker) -> None:
    await broker.create_topic("t", 1)
    grow = CreatePartitionsRequest.CreatePartitionsTopic
    response = await call(broker, CreatePartitionsRequest, 3, timeout_ms=5000,
                          validate_only=False, topics=[grow(name="t", count=2, assignments=None)])
    assert response.results[0].error_code == TOPIC_AUTHORIZATION_FAILED
    topic = DeleteRecordsRequest.DeleteRecordsTopic
    response = await call(broker, DeleteRecordsRequest, 2, timeout_ms=5000, topics=[
        topic(name="t", partitions=[topic.DeleteRecordsPartition(partition_index=0, offset=0)])])
    assert response.topics[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED


async def test_configs_need_describe_configs_and_alter_configs(broker: Broker) -> None:
    await broker.create_topic("t", 1)
    await allow(broker, Rt.TOPIC, "t", Op.DESCRIBE_CONFIGS)
    resource = DescribeConfigsRequest.DescribeConfigsResource
    response = await call(broker, DescribeConfigsRequest, 4, include_synonyms=False,
                          include_documentation=False, resources=[
                              resource(resource_type=4, resource_name="0",
                                       configuration_keys=None),
                              resource(resource_type=2, resource_name="t",
                                       configuration_keys=None)])
    assert [(r.resource_type, r.error_code) for r in response.results] == [
        (2, NONE), (4, CLUSTER_AUTHORIZATION_FAILED)]
    alter = IncrementalAlterConfigsRequest.AlterConfigsResource
    response = await call(broker, IncrementalAlterConfigsRequest, 1, validate_only=False,
                          resources=[alter(resource_type=2, resource_name="t", configs=[
                              alter.AlterableConfig(name="retention.ms", config_operation=0,
                                                    value="1000")])])
    assert (response.responses[0].error_code, response.responses[0].error_message) == (
        TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")


async def test_log_dirs_and_scram_credentials_need_the_cluster(broker: Broker) -> None:
    response = await call(broker, DescribeLogDirsRequest, 4, topics=None)
    assert (response.error_code, response.results) == (CLUSTER_AUTHORIZATION_FAILED, [])
    response = await call(broker, DescribeUserScramCredentialsRequest, 0, users=None)
    assert response.error_code == CLUSTER_AUTHORIZATION_FAILED
    admin = await call(broker, DescribeUserScramCredentialsRequest, 0, ADMIN, users=None)
    assert admin.error_code == NONE


# --- groups and offsets ---------------------------------------------------------------------


async def test_group_apis_need_their_group_acls(broker: Broker) -> None:
    found = await call(broker, FindCoordinatorRequest, 4, key_type=0, coordinator_keys=["g"])
    assert found.coordinators[0].error_code == GROUP_AUTHORIZATION_FAILED
    joined = await call(broker, JoinGroupRequest, 7, group_id="g", session_timeout_ms=10000,
                        rebalance_timeout_ms=10000, member_id="", group_instance_id=None,
                        protocol_type="consumer", protocols=[
                            JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                     metadata=b"")])
    assert (joined.error_code, joined.protocol_name) == (GROUP_AUTHORIZATION_FAILED, None)
    described = await call(broker, DescribeGroupsRequest, 5, groups=["g"],
                           include_authorized_operations=True)
    assert described.groups[0].error_code == GROUP_AUTHORIZATION_FAILED
    deleted = await call(broker, DeleteGroupsRequest, 2, groups_names=["g"])
    assert deleted.results[0].error_code == GROUP_AUTHORIZATION_FAILED
    await allow(broker, Rt.GROUP, "g", Op.READ)
    found = await call(broker, FindCoordinatorRequest, 4, key_type=0, coordinator_keys=["g"])
    assert found.coordinators[0].error_code == NONE


async def test_list_groups_shows_the_groups_the_client_may_describe(broker: Broker) -> None:
    for group in ("mine", "theirs"):
        await broker.group_coordinator.ensure_topic()
        await call(broker, JoinGroupRequest, 7, ADMIN, group_id=group, session_timeout_ms=10000,
                   rebalance_timeout_ms=10000, member_id="", group_instance_id=None,
                   protocol_type="consumer", protocols=[])
    await allow(broker, Rt.GROUP, "mine", Op.DESCRIBE)
    listed = await call(broker, ListGroupsRequest, 4, states_filter=[])
    admin = await call(broker, ListGroupsRequest, 4, ADMIN, states_filter=[])
    assert [g.group_id for g in listed.groups] == ["mine"]
    assert len(admin.groups) == 2


async def test_offsets_need_the_group_and_the_topics(broker: Broker) -> None:
    await broker.create_topic("seen", 1)
    await broker.create_topic("hidden", 1)
    await broker.group_coordinator.ensure_topic()
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    commit = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
              "group_instance_id": None, "topics": [topic(name=n, partitions=[
                  topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                     committed_leader_epoch=-1,
                                                     committed_metadata="")])
                  for n in ("seen", "hidden")]}
    response = await call(broker, OffsetCommitRequest, 8, **commit)
    assert {t.name: t.partitions[0].error_code for t in response.topics} == {
        "seen": GROUP_AUTHORIZATION_FAILED, "hidden": GROUP_AUTHORIZATION_FAILED}
    await allow(broker, Rt.GROUP, "g", Op.READ)
    await allow(broker, Rt.TOPIC, "seen", Op.READ)
    response = await call(broker, OffsetCommitRequest, 8, **commit)
    assert {t.name: t.partitions[0].error_code for t in response.topics} == {
        "seen": NONE, "hidden": TOPIC_AUTHORIZATION_FAILED}
    group = OffsetFetchRequest.OffsetFetchRequestGroup
    response = await call(broker, OffsetFetchRequest, 8, require_stable=False, groups=[
        group(group_id="g", topics=[group.OffsetFetchRequestTopics(
            name=n, partition_indexes=[0]) for n in ("hidden", "seen")]),
        group(group_id="g", topics=None)])
    named, every = response.groups
    assert [(t.name, t.partitions[0].error_code, t.partitions[0].committed_offset)
            for t in named.topics] == [("seen", NONE, 1), ("hidden", TOPIC_AUTHORIZATION_FAILED,
                                                          -1)]
    assert [t.name for t in every.topics] == ["seen"]


# --- producer ids and transactions ------------------------------------------------------------


async def test_init_producer_id_needs_write(broker: Broker) -> None:
    fields = {"transaction_timeout_ms": 10000, "producer_id": -1, "producer_epoch": -1}
    idempotent = await call(broker, InitProducerIdRequest, 4, transactional_id=None, **fields)
    assert idempotent.error_code == CLUSTER_AUTHORIZATION_FAILED
    transactional = await call(broker, InitProducerIdRequest, 4, transactional_id="txn",
                               **fields)
    assert transactional.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await allow(broker, Rt.TOPIC, "any-", Op.WRITE, pattern=PatternType.PREFIXED)
    idempotent = await call(broker, InitProducerIdRequest, 4, transactional_id=None, **fields)
    assert idempotent.error_code == NONE and idempotent.producer_id >= 0


async def test_transaction_apis_need_write_on_the_transactional_id(broker: Broker) -> None:
    ended = await call(broker, EndTxnRequest, 3, transactional_id="txn", producer_id=1,
                       producer_epoch=0, committed=True)
    assert (ended.error_code, ended.producer_id) == (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
    await allow(broker, Rt.TRANSACTIONAL_ID, "txn", Op.WRITE)
    added = await call(broker, AddOffsetsToTxnRequest, 3, transactional_id="txn", producer_id=1,
                       producer_epoch=0, group_id="g")
    assert added.error_code == GROUP_AUTHORIZATION_FAILED


async def test_deny_wins_over_allow(broker: Broker) -> None:
    await broker.create_topic("t", 1)
    await allow(broker, Rt.TOPIC, "*", Op.ALL)
    await allow(broker, Rt.TOPIC, "t", Op.WRITE, permission=DENY)
    response = await call(broker, ProduceRequest, 9, **produce_fields("t"))
    assert response.responses[0].partition_responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
    fetch = await call(broker, FetchRequest, 12, **fetch_fields("t", "gone"))
    assert fetched(fetch) == {"t": NONE, "gone": UNKNOWN_TOPIC_OR_PARTITION}
