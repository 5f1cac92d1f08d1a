"""Cluster and topic administration: DeleteTopics, CreatePartitions, DescribeCluster,
DescribeTopicPartitions, DescribeLogDirs and AlterReplicaLogDirs, answered as a Kafka
4.x broker (and its controller) would. There is no authorizer, so every operation is allowed and the
"authorized operations" bit fields list everything Kafka supports for the resource.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import (
    AlterReplicaLogDirsResponse,
    CreatePartitionsResponse,
    DeleteTopicsResponse,
    DescribeClusterResponse,
    DescribeLogDirsResponse,
    DescribeTopicPartitionsResponse,
)
from kafka.protocol.api_key import ApiKey

from josefk.cluster.metadata import INTERNAL_TOPICS, Topic, validate_topic_name
from josefk.cluster.metadata_errors import (
    MAX_PARTITIONS_PER_BATCH,
    ClusterError,
    InvalidTopicError,
    PartitionBatchOverflowError,
    UnknownTopicError,
)
from josefk.log.partition_metadata import kafka_uuid_str
from josefk.protocol.error_codes import (
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    KAFKA_STORAGE_ERROR,
    LOG_DIR_NOT_FOUND,
    MISMATCHED_ENDPOINT_TYPE,
    NONE,
    REPLICA_NOT_AVAILABLE,
    TOPIC_DELETION_DISABLED,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_ENDPOINT_TYPE,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)


ZERO_UUID = uuid.UUID(int=0)
#: Kafka's ``Topic.isInternal``.
#: The schema default of the authorized-operations fields: "not requested".
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)
# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
# Without an authorizer Kafka grants all of AclEntry.supportedOperations(resource type).
# kafka-python models DescribeCluster's bit field as the set of bits (None: omitted).
CLUSTER_OPERATIONS = frozenset({5, 7, 8, 9, 10, 11, 12})
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
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
    return {"throttle_time_ms": 0, "responses": await _delete_topics(broker, wanted)}


async def _delete_topics(broker: Broker, wanted: list[tuple[str | None, uuid.UUID]]) -> list[Any]:
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
            if topic is None:
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
        try:
            await broker.delete_topic(name)
        except ClusterError as e:
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
    for t in body.topics:
        if counts[t.name] > 1:
            continue
        assignment = (None if t.assignments is None
                      else [list(a.broker_ids) for a in t.assignments])
        current = broker.store.get(t.name)
        added = t.count - current.num_partitions if current is not None else 0
        try:
            if added > room:
                # Its own checks first (the store refuses beyond the whole batch itself).
                await broker.create_partitions(t.name, t.count, assignment, validate_only=True)
                raise PartitionBatchOverflowError(added, room)
            await broker.create_partitions(t.name, t.count, assignment,
                                     validate_only=body.validate_only)
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
    return {"throttle_time_ms": 0, "results": results}


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
        "authorized_operations": (set(CLUSTER_OPERATIONS)
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
                topics.append(_dtp_missing(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        end = min(topic.num_partitions, start + remaining)
        topics.append(DtpTopic(
            error_code=NONE, name=name, topic_id=topic.topic_id,
            is_internal=name in INTERNAL_TOPICS,
            partitions=[_dtp_partition(broker, topic, index) for index in range(start, end)],
            topic_authorized_operations=TOPIC_OPERATIONS))
        if end < topic.num_partitions:
            next_cursor = DtpCursor(topic_name=name, partition_index=end)
            break
        remaining -= max(0, end - start)
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


def _dtp_missing(name: str) -> Any:
    try:
        validate_topic_name(name)
        code = UNKNOWN_TOPIC_OR_PARTITION
    except InvalidTopicError:
        code = INVALID_TOPIC_EXCEPTION
    return DtpTopic(error_code=code, name=name, topic_id=ZERO_UUID,
                    is_internal=name in INTERNAL_TOPICS, partitions=[],
                    topic_authorized_operations=TOPIC_OPERATIONS)


def _dtp_error(requested: list[str], message: str) -> dict[str, Any]:
    """Kafka's answer to a request it throws on: INVALID_REQUEST for every named topic."""
    logger.info("DescribeTopicPartitions refused: %s", message)
    topics = [DtpTopic(error_code=INVALID_REQUEST, name=name, topic_id=ZERO_UUID,
                       is_internal=False, partitions=[],
                       topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
              for name in requested]
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": None}


# --- DescribeLogDirs ---------------------------------------------------------------------


async def handle_describe_log_dirs(broker: Broker, request: Request) -> Response:
    """DescribeLogDirs v1-4: each log dir with the sizes of the requested partitions."""
    body = request.body
    wanted = None if body.topics is None else {
        (t.topic, p) for t in body.topics for p in t.partitions}
    broker.open_deferred_partitions()
    manager = broker.log_manager
    results = []
    for log_dir in manager.log_dirs:
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), log in sorted(manager.logs.items()):
            if manager.dir_of(topic, index) != log_dir:
                continue
            if wanted is not None and (topic, index) not in wanted:
                continue
            by_topic.setdefault(topic, []).append(LogDirPartition(
                partition_index=index, partition_size=log.size_in_bytes(),
                offset_lag=max(log.high_watermark - log.log_end_offset, 0),
                is_future_key=False))
        try:
            usage = shutil.disk_usage(log_dir)
        except OSError as e:
            logger.warning("DescribeLogDirs: cannot stat %s: %s", log_dir, e)
            results.append(LogDirResult(error_code=KAFKA_STORAGE_ERROR,
                                        log_dir=str(log_dir.absolute()), topics=[]))
            continue
        results.append(LogDirResult(
            error_code=NONE, log_dir=str(log_dir.absolute()),
            topics=[LogDirTopic(name=name, partitions=partitions)
                    for name, partitions in by_topic.items()],
            total_bytes=usage.total, usable_bytes=usage.free))
    return {"throttle_time_ms": 0, "error_code": NONE, "results": results}


# --- AlterReplicaLogDirs -----------------------------------------------------------------


async def handle_alter_replica_log_dirs(broker: Broker, request: Request) -> Response:
    """AlterReplicaLogDirs v1-2: move replicas hosted here to another of the log dirs."""
    dirs = {str(d.absolute()): d for d in broker.log_manager.log_dirs}
    by_topic: dict[str, list[Any]] = {}
    for wanted in request.body.dirs:
        target = dirs.get(str(Path(wanted.path).absolute()))
        for t in wanted.topics:
            for index in t.partitions:
                by_topic.setdefault(t.name, []).append(ReplicaDirPartition(
                    partition_index=index,
                    error_code=_move_replica(broker, t.name, index, target, wanted.path)))
    return {"throttle_time_ms": 0, "results": [
        ReplicaDirTopic(topic_name=name, partitions=parts) for name, parts in by_topic.items()]}


def _move_replica(broker: Broker, topic: str, index: int, target: Path | None, path: str
                  ) -> int:
    if target is None:
        logger.info("AlterReplicaLogDirs: %s is not one of log.dirs", path)
        return LOG_DIR_NOT_FOUND
    partition = broker.partition(topic, index)
    if partition is None:
        return REPLICA_NOT_AVAILABLE
    try:
        partition.log = broker.log_manager.move_log(topic, index, target)
    except OSError as e:
        logger.error("AlterReplicaLogDirs: moving %s-%d to %s failed: %s", topic, index,
                     target, e)
        return KAFKA_STORAGE_ERROR
    return NONE


HANDLERS = {
    ApiKey.AlterReplicaLogDirs: handle_alter_replica_log_dirs,
    ApiKey.DeleteTopics: handle_delete_topics,
    ApiKey.CreatePartitions: handle_create_partitions,
    ApiKey.DescribeCluster: handle_describe_cluster,
    ApiKey.DescribeTopicPartitions: handle_describe_topic_partitions,
    ApiKey.DescribeLogDirs: handle_describe_log_dirs,
}
