"""Cluster and topic administration: DeleteTopics, CreatePartitions, DescribeCluster and
DescribeTopicPartitions, answered as a Kafka 4.x broker (and its controller) would, with
its authorization checks (without an authorizer the "authorized operations" bit fields
list everything Kafka supports for the resource).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.cluster import (
    AlterReplicaLogDirsResponse,
    DescribeClusterResponse,
    DescribeLogDirsResponse,
)
from kafka.protocol.admin.topics import (
    CreatePartitionsResponse,
    DeleteTopicsResponse,
    DescribeTopicPartitionsResponse,
)
from kafka.protocol.api_key import ApiKey

from josefk.cluster.metadata.errors import (
    MAX_PARTITIONS_PER_BATCH,
    ClusterError,
    InvalidTopicError,
    PartitionBatchOverflowError,
    UnknownTopicError,
)
from josefk.cluster.metadata.store import INTERNAL_TOPICS, Topic, validate_topic_name
from josefk.cluster.security.acls import AclOperation, ResourceType
from josefk.log.partition_metadata import kafka_uuid_str
from josefk.protocol.error_codes import (
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    MISMATCHED_ENDPOINT_TYPE,
    NONE,
    THROTTLING_QUOTA_EXCEEDED,
    TOPIC_AUTHORIZATION_FAILED,
    TOPIC_DELETION_DISABLED,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_ENDPOINT_TYPE,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.handlers.admin.mutations import mutation_quota, throttled
from josefk.server.quotas.mutation import MutationQuota, ThrottlingQuotaExceeded
from josefk.server.security.checks import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ERROR_MESSAGES,
    TopicGate,
    cluster_operations,
    topic_operations,
)

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)


ZERO_UUID = uuid.UUID(int=0)
DENIED = (TOPIC_AUTHORIZATION_FAILED, ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED])
#: ``max.request.partition.size.limit``'s default: DescribeTopicPartitions' upper bound.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
BROKER_ENDPOINT = 1  # DescribeCluster EndpointType: UNKNOWN 0, BROKER 1, CONTROLLER 2
ENDPOINT_TYPES = {1: "BROKER", 2: "CONTROLLER"}

DeleteResult = DeleteTopicsResponse.DeletableTopicResult
PartitionsResult = CreatePartitionsResponse.CreatePartitionsTopicResult
ClusterBroker = DescribeClusterResponse.DescribeClusterBroker
DtpTopic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
DtpPartition = DtpTopic.DescribeTopicPartitionsResponsePartition
DtpCursor = DescribeTopicPartitionsResponse.Cursor
LogDirResult = DescribeLogDirsResponse.DescribeLogDirsResult
LogDirTopic = LogDirResult.DescribeLogDirsTopic
LogDirPartition = LogDirTopic.DescribeLogDirsPartition
ReplicaDirTopic = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
ReplicaDirPartition = ReplicaDirTopic.AlterReplicaLogDirPartitionResult


# --- DeleteTopics ------------------------------------------------------------------------


async def handle_delete_topics(broker: Broker, request: Request) -> Response:
    """DeleteTopics v1-6: by name, or (v6) by name or topic id, as ControllerApis does."""
    body = request.body
    version = request.api_version
    if version >= 6:
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in body.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in body.topic_names]
    if not broker.config.delete_topic_enable:
        # Kafka throws for the whole request: every topic gets the error.
        code, message = ((TOPIC_DELETION_DISABLED, None) if version >= 3
                         else (INVALID_REQUEST, "Topic deletion is disabled."))
        return {"throttle_time_ms": 0,
                "responses": [_delete_result(name, topic_id, code, message)
                              for name, topic_id in wanted]}
    quota = mutation_quota(broker, request)
    return throttled(quota, {"throttle_time_ms": 0, "responses": await _delete_topics(
        broker, wanted, TopicGate(broker.authorizer), quota)})


async def _delete_topics(broker: Broker, wanted: list[tuple[str | None, uuid.UUID]],
                         gate: TopicGate, quota: MutationQuota) -> list[Any]:
    names = Counter(name for name, topic_id in wanted if name is not None and topic_id == ZERO_UUID)
    ids = Counter(topic_id for name, topic_id in wanted if name is None and topic_id != ZERO_UUID)
    results: list[Any] = []
    reported: set[object] = set()
    by_id: dict[uuid.UUID, str] = {}  # id -> name of the topics to delete
    by_name: dict[str, uuid.UUID] = {}
    for name, topic_id in wanted:
        if name is None and topic_id == ZERO_UUID:
            results.append(_delete_result(None, ZERO_UUID, INVALID_REQUEST,
                                          "Neither topic name nor id were specified."))
        elif name is not None and topic_id != ZERO_UUID:
            results.append(_delete_result(name, topic_id, INVALID_REQUEST,
                                          "You may not specify both topic name and topic id."))
        elif name is not None:
            if names[name] > 1:
                if name not in reported:
                    reported.add(name)
                    results.append(_delete_result(name, ZERO_UUID, INVALID_REQUEST,
                                                  "Duplicate topic name."))
                continue
            topic = broker.store.get(name)
            if not gate.describable(name) or (topic is not None and not gate.deletable(name)):
                results.append(_delete_result(name, ZERO_UUID, *DENIED))
            elif topic is None:
                results.append(_delete_result(name, ZERO_UUID, UNKNOWN_TOPIC_OR_PARTITION,
                                              "This server does not host this topic-partition."))
            else:
                by_name[name] = topic.topic_id
        else:
            if ids[topic_id] > 1:
                if topic_id not in reported:
                    reported.add(topic_id)
                    results.append(_delete_result(None, topic_id, INVALID_REQUEST,
                                                  "Duplicate topic id."))
                continue
            topic = broker.store.get_by_id(topic_id)
            if topic is None:
                results.append(_delete_result(None, topic_id, UNKNOWN_TOPIC_ID,
                                              "This server does not host this topic ID."))
            elif not gate.deletable(topic.name):  # the name only to who may see it
                results.append(_delete_result(
                    topic.name if gate.describable(topic.name) else None, topic_id, *DENIED))
            else:
                by_id[topic_id] = topic.name
    for name, topic_id in by_name.items():
        if topic_id in by_id:
            # Named and given by id: Kafka refuses the name and drops the id silently.
            del by_id[topic_id]
            results.append(_delete_result(name, topic_id, INVALID_REQUEST,
                                          "The provided topic name maps to an ID that was "
                                          "already supplied."))
        else:
            by_id[topic_id] = name
    for topic_id, name in by_id.items():
        topic = broker.store.get(name)
        permits = topic.num_partitions if topic is not None else 0
        try:
            quota.record(permits)
        except ThrottlingQuotaExceeded as e:
            results.append(_delete_result(name, topic_id, THROTTLING_QUOTA_EXCEEDED, str(e)))
            continue
        try:
            await broker.delete_topic(name)
        except ClusterError as e:
            quota.refund(permits)
            results.append(_delete_result(name, topic_id, e.error_code, str(e)))
            continue
        logger.info("deleted topic %s (id %s)", name, kafka_uuid_str(topic_id))
        results.append(_delete_result(name, topic_id, NONE, None))
    return results


def _delete_result(name: str | None, topic_id: uuid.UUID, code: int, message: str | None
                   ) -> Any:
    return DeleteResult(name=name, topic_id=topic_id, error_code=code, error_message=message)


# --- CreatePartitions --------------------------------------------------------------------


async def handle_create_partitions(broker: Broker, request: Request) -> Response:
    """CreatePartitions v0-3: grow topics, with optional manual assignments.

    As Kafka's controller, which puts a record per new partition in one list bounded
    by MAX_PARTITIONS_PER_BATCH for the whole request: the topic that would overflow
    it, and every later one adding partitions, fail with UNKNOWN_SERVER_ERROR (after
    their other checks, and before any of their replicas is placed). Kafka takes the
    topics in hash order; josefk in the request's.
    """
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results = [PartitionsResult(name=name, error_code=INVALID_REQUEST,
                                error_message="Duplicate topic name.")
               for name, n in counts.items() if n > 1]
    room = MAX_PARTITIONS_PER_BATCH
    quota = mutation_quota(broker, request)
    denied = broker.authorizer.denied_names(AclOperation.ALTER, ResourceType.TOPIC, counts)
    for t in body.topics:
        if counts[t.name] > 1:
            continue
        if t.name in denied:
            results.append(PartitionsResult(name=t.name, error_code=TOPIC_AUTHORIZATION_FAILED,
                                            error_message=None))
            continue
        assignment = (None if t.assignments is None
                      else [list(a.broker_ids) for a in t.assignments])
        current = broker.store.get(t.name)
        added = t.count - current.num_partitions if current is not None else 0
        permits = 0 if body.validate_only else max(added, 0)
        try:
            if added > room:
                # Its own checks first (the store refuses beyond the whole batch itself).
                await broker.create_partitions(t.name, t.count, assignment, validate_only=True)
                raise PartitionBatchOverflowError(added, room)
            try:
                quota.record(permits)
            except ThrottlingQuotaExceeded as e:
                results.append(PartitionsResult(name=t.name,
                                                error_code=THROTTLING_QUOTA_EXCEEDED,
                                                error_message=str(e)))
                continue
            try:
                await broker.create_partitions(t.name, t.count, assignment,
                                               validate_only=body.validate_only)
            except ClusterError:
                quota.refund(permits)
                raise
        except ClusterError as e:
            logger.info("create partitions for %r failed: %s", t.name, e)
            if isinstance(e, PartitionBatchOverflowError):
                room = 0  # Kafka's list is full from here on
            # Kafka gives no message for an unknown topic, nor for the overflow.
            message = (None if isinstance(e, (UnknownTopicError, PartitionBatchOverflowError))
                       else str(e) or None)
            results.append(PartitionsResult(name=t.name, error_code=e.error_code,
                                            error_message=message))
            continue
        room -= max(added, 0)
        results.append(PartitionsResult(name=t.name, error_code=NONE, error_message=None))
    return throttled(quota, {"throttle_time_ms": 0, "results": results})


# --- DescribeCluster ---------------------------------------------------------------------


async def handle_describe_cluster(broker: Broker, request: Request) -> Response:
    """DescribeCluster v0-2: the live brokers and the controller."""
    body = request.body
    version = request.api_version
    endpoint_type = body.endpoint_type if version >= 1 else BROKER_ENDPOINT
    if endpoint_type not in ENDPOINT_TYPES:
        return _cluster_error(INVALID_REQUEST if version == 0 else UNSUPPORTED_ENDPOINT_TYPE,
                              f"Unsupported endpoint type {endpoint_type}")
    if endpoint_type != BROKER_ENDPOINT:
        return _cluster_error(INVALID_REQUEST if version == 0 else MISMATCHED_ENDPOINT_TYPE,
                              "The request was sent to an endpoint of type BROKER, but we wanted "
                              f"an endpoint of type {ENDPOINT_TYPES[endpoint_type]}")
    brokers = [ClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack,
                             is_fenced=False)
               for b in sorted(broker.live_brokers(), key=lambda b: b.node_id)]
    controller_id = (broker.controller_id
                     if any(b.broker_id == broker.controller_id for b in brokers) else -1)
    return {
        "throttle_time_ms": 0, "error_code": NONE, "error_message": None,
        "endpoint_type": BROKER_ENDPOINT, "cluster_id": broker.cluster_id,
        "controller_id": controller_id, "brokers": brokers,
        "authorized_operations": (cluster_operations(broker.authorizer)
                                  if body.include_cluster_authorized_operations else None),
    }


def _cluster_error(code: int, message: str) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
            "endpoint_type": BROKER_ENDPOINT, "cluster_id": "", "controller_id": -1,
            "brokers": [], "authorized_operations": None}


# --- DescribeTopicPartitions -------------------------------------------------------------


async def handle_describe_topic_partitions(broker: Broker, request: Request) -> Response:
    """DescribeTopicPartitions v0: named topics (or all), sorted, paged by a cursor."""
    body = request.body
    requested = [t.name for t in body.topics]
    fetch_all = not requested
    cursor = body.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    if fetch_all:
        names = {t.name for t in broker.store.topics() if t.name >= cursor_topic}
    else:
        names = {name for name in requested if name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return _dtp_error(requested, "DescribeTopicPartitionsRequest topic list should "
                                         f"contain the cursor topic: {cursor.topic_name}")
    if cursor is not None and cursor.partition_index < 0:
        return _dtp_error(requested, "DescribeTopicPartitionsRequest cursor partition must be "
                                     f"valid: {cursor}")
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, body.response_partition_limit), 1)
    hidden = broker.authorizer.denied_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    names -= hidden
    topics: list[Any] = []
    next_cursor = None
    for name in sorted(names):
        if remaining <= 0:
            # The next page starts at this topic (which may not even exist).
            next_cursor = DtpCursor(topic_name=name, partition_index=0)
            break
        topic = broker.store.get(name)
        if topic is None:
            if not fetch_all:
                topics.append(_dtp_missing(name, topic_operations(broker.authorizer, name)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        end = min(topic.num_partitions, start + remaining)
        topics.append(DtpTopic(
            error_code=NONE, name=name, topic_id=topic.topic_id,
            is_internal=name in INTERNAL_TOPICS,
            partitions=[_dtp_partition(broker, topic, index) for index in range(start, end)],
            topic_authorized_operations=topic_operations(broker.authorizer, name)))
        if end < topic.num_partitions:
            next_cursor = DtpCursor(topic_name=name, partition_index=end)
            break
        remaining -= max(0, end - start)
    if not fetch_all:
        topics += [DtpTopic(error_code=TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                            is_internal=False, partitions=[],
                            topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
                   for name in sorted(hidden)]
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


def _dtp_partition(broker: Broker, topic: Topic, index: int) -> Any:
    view = broker.partition_view(topic.name, index)
    return DtpPartition(
        error_code=NONE, partition_index=index,
        leader_id=view.leader if view else -1,
        leader_epoch=view.leader_epoch if view else -1,
        replica_nodes=list(topic.partitions[index]),
        isr_nodes=list(view.isr) if view else [],
        eligible_leader_replicas=[], last_known_elr=[],
        offline_replicas=list(view.offline) if view else [])


def _dtp_missing(name: str, operations: int) -> Any:
    try:
        validate_topic_name(name)
        code = UNKNOWN_TOPIC_OR_PARTITION
    except InvalidTopicError:
        code = INVALID_TOPIC_EXCEPTION
    return DtpTopic(error_code=code, name=name, topic_id=ZERO_UUID,
                    is_internal=name in INTERNAL_TOPICS, partitions=[],
                    topic_authorized_operations=operations)


def _dtp_error(requested: list[str], message: str) -> dict[str, Any]:
    """Kafka's answer to a request it throws on: INVALID_REQUEST for every named topic."""
    logger.info("DescribeTopicPartitions refused: %s", message)
    topics = [DtpTopic(error_code=INVALID_REQUEST, name=name, topic_id=ZERO_UUID,
                       is_internal=False, partitions=[],
                       topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
              for name in requested]
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": None}


HANDLERS = {
    ApiKey.DeleteTopics: handle_delete_topics,
    ApiKey.CreatePartitions: handle_create_partitions,
    ApiKey.DescribeCluster: handle_describe_cluster,
    ApiKey.DescribeTopicPartitions: handle_describe_topic_partitions,
}
