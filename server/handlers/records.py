"""Partition logs: DeleteRecords (move the log start offset), OffsetForLeaderEpoch (where
a leader epoch ends), DescribeLogDirs and AlterReplicaLogDirs (where logs live), with
Kafka 4.x's checks and errors."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from kafka.protocol.admin.cluster import AlterReplicaLogDirsResponse, DescribeLogDirsResponse
from kafka.protocol.admin.topics import DeleteRecordsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetForLeaderEpochResponse

from josefk.cluster.metadata.store import INTERNAL_TOPICS
from josefk.cluster.partition import Partition, PartitionError
from josefk.cluster.security.acls import AclOperation, ResourceType
from josefk.log.errors import StorageError
from josefk.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from josefk.log.log import OffsetOutOfRangeError
from josefk.protocol.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_TOPIC_EXCEPTION,
    KAFKA_STORAGE_ERROR,
    LOG_DIR_NOT_FOUND,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    POLICY_VIOLATION,
    REPLICA_NOT_AVAILABLE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response, partition_or_error
from josefk.server.security.checks import split_topics

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)

HIGH_WATERMARK = -1  # DeleteRecords: delete everything below the high watermark
INVALID_LOW_WATERMARK = -1
#: Kafka's ``Topic.isInternal``: DeleteRecords refuses them.

DeleteTopic = DeleteRecordsResponse.DeleteRecordsTopicResult
DeletePartition = DeleteTopic.DeleteRecordsPartitionResult
EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = EpochTopic.EpochEndOffset
LogDirResult = DescribeLogDirsResponse.DescribeLogDirsResult
LogDirTopic = LogDirResult.DescribeLogDirsTopic
LogDirPartition = LogDirTopic.DescribeLogDirsPartition
ReplicaDirTopic = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
ReplicaDirPartition = ReplicaDirTopic.AlterReplicaLogDirPartitionResult


# --- DeleteRecords -----------------------------------------------------------------------


async def handle_delete_records(broker: Broker, request: Request) -> Response:
    """DeleteRecords v0-2: advance each partition's log start offset (-1: to the high
    watermark); answers the new low watermark."""
    topics = []
    denied = broker.authorizer.denied_names(AclOperation.DELETE, ResourceType.TOPIC,
                                            (t.name for t in request.body.topics))
    for t in request.body.topics:
        partitions = []
        for p in t.partitions:
            low, code = ((INVALID_LOW_WATERMARK, TOPIC_AUTHORIZATION_FAILED) if t.name in denied
                         else delete_records(broker, t.name, p.partition_index, p.offset))
            partitions.append(DeletePartition(partition_index=p.partition_index,
                                              low_watermark=low, error_code=code))
        topics.append(DeleteTopic(name=t.name, partitions=partitions))
    return {"throttle_time_ms": 0, "topics": topics}


def delete_records(broker: Broker, topic: str, index: int, offset: int) -> tuple[int, int]:
    """(low watermark, error code) of DeleteRecords on one partition, as Kafka's
    ReplicaManager and Partition.deleteRecordsOnLeader answer it."""
    stored = broker.store.get(topic)
    if stored is None or index not in stored.partitions:
        return INVALID_LOW_WATERMARK, UNKNOWN_TOPIC_OR_PARTITION
    if topic in INTERNAL_TOPICS:
        return INVALID_LOW_WATERMARK, INVALID_TOPIC_EXCEPTION
    partition = partition_or_error(broker, topic, index)
    if isinstance(partition, int):
        return INVALID_LOW_WATERMARK, partition
    if not partition.is_leader:
        return INVALID_LOW_WATERMARK, NOT_LEADER_OR_FOLLOWER
    log = partition.log
    if not log.config.delete:
        return INVALID_LOW_WATERMARK, POLICY_VIOLATION
    target = partition.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        return INVALID_LOW_WATERMARK, OFFSET_OUT_OF_RANGE
    try:
        log.delete_records(target)
    except StorageError as e:  # its directory failed just now (logged where it happened)
        return INVALID_LOW_WATERMARK, e.error_code
    except OffsetOutOfRangeError as e:
        logger.info("DeleteRecords on %s-%d: %s", topic, index, e)
        return INVALID_LOW_WATERMARK, OFFSET_OUT_OF_RANGE
    broker.on_partition_data(partition)  # a new log start offset for fetch sessions to tell
    return log.log_start_offset, NONE


# --- OffsetForLeaderEpoch ----------------------------------------------------------------


async def handle_offset_for_leader_epoch(broker: Broker, request: Request) -> Response:
    """OffsetForLeaderEpoch v2-4: the end offset of a leader epoch on the leader.

    The ReplicaId of v3+ (-1 consumer, -2 debug, >= 0 follower) changes nothing:
    Kafka answers every caller from the leader's log, fencing stale epochs. Followers
    (CLUSTER_ACTION) may ask about any topic, consumers about those they may DESCRIBE;
    the others are answered last.
    """
    asked = request.body.topics
    refused = []
    authorizer = broker.authorizer
    if authorizer.enabled and not authorizer.cluster_allowed(AclOperation.CLUSTER_ACTION,
                                                              log_denial=False):
        asked, refused = split_topics(authorizer, AclOperation.DESCRIBE, asked,
                                      lambda t: t.topic)
    topics = []
    for t in asked:
        partitions = [EpochEndOffset(partition=p.partition, **epoch_end_offset(
            broker, t.topic, p.partition, p.current_leader_epoch, p.leader_epoch))
            for p in t.partitions]
        topics.append(EpochTopic(topic=t.topic, partitions=partitions))
    topics += [EpochTopic(topic=t.topic, partitions=[
        EpochEndOffset(partition=p.partition, **_epoch_error(TOPIC_AUTHORIZATION_FAILED))
        for p in t.partitions]) for t in refused]
    return {"throttle_time_ms": 0, "topics": topics}


def epoch_end_offset(broker: Broker, topic: str, index: int, current_leader_epoch: int,
                     leader_epoch: int) -> dict[str, Any]:
    """The fields of one partition's EpochEndOffset (Kafka's Partition.lastOffsetForLeaderEpoch)."""
    partition = partition_or_error(broker, topic, index)
    if isinstance(partition, int):
        return _epoch_error(partition)
    try:
        partition.check_leader_epoch(current_leader_epoch)
    except PartitionError as e:
        return _epoch_error(e.error_code)
    if not partition.is_leader:
        return _epoch_error(NOT_LEADER_OR_FOLLOWER)
    epoch, end = end_offset_for(partition, leader_epoch)
    if end == UNDEFINED_OFFSET:
        epoch = UNDEFINED_EPOCH
    return {"error_code": NONE, "leader_epoch": epoch, "end_offset": end}


def end_offset_for(partition: Partition, epoch: int) -> tuple[int, int]:
    """(epoch, end offset) from the log's leader epoch cache.

    A Kafka leader caches its own epoch at the log end offset when it takes
    leadership; josefk's cache only learns an epoch from appended batches, so a
    leader epoch newer than the cache is treated as if it were cached at the log end.
    """
    log = partition.log
    cache = log.leader_epochs
    current = partition.leader_epoch
    if epoch == UNDEFINED_EPOCH or current <= cache.latest_epoch:
        return cache.end_offset_for(epoch, log.log_end_offset)
    entries = [*cache.entries, (current, log.log_end_offset)]
    if epoch == current:
        return epoch, log.log_end_offset
    later = [(e, start) for e, start in entries if e > epoch]
    if not later:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    earlier = [e for e, _ in entries if e <= epoch]
    return (earlier[-1] if earlier else epoch), later[0][1]


def _epoch_error(code: int) -> dict[str, Any]:
    return {"error_code": code, "leader_epoch": UNDEFINED_EPOCH, "end_offset": UNDEFINED_OFFSET}


# --- DescribeLogDirs ---------------------------------------------------------------------


async def handle_describe_log_dirs(broker: Broker, request: Request) -> Response:
    """DescribeLogDirs v1-5: each log dir with the sizes of the requested partitions (v5:
    never cordoned, KIP-1066's cordoning being Kafka 4.3's alone)."""
    body = request.body
    if not broker.authorizer.cluster_allowed(AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "results": []}
    wanted = None if body.topics is None else {
        (t.topic, p) for t in body.topics for p in t.partitions}
    await broker.open_deferred_partitions(wanted)
    manager = broker.log_manager
    results = []
    for log_dir in manager.log_dirs:
        if manager.failures.is_offline(log_dir):
            # Kafka's answer for a failed directory: the error, nothing else.
            results.append(LogDirResult(error_code=KAFKA_STORAGE_ERROR,
                                        log_dir=str(log_dir.absolute()), topics=[]))
            continue
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
            total_bytes=usage.total, usable_bytes=usage.free, is_cordoned=False))
    return {"throttle_time_ms": 0, "error_code": NONE, "results": results}


# --- AlterReplicaLogDirs -----------------------------------------------------------------


async def handle_alter_replica_log_dirs(broker: Broker, request: Request) -> Response:
    """AlterReplicaLogDirs v1-2: move replicas hosted here to another of the log dirs."""
    dirs = {str(d.absolute()): d for d in broker.log_manager.log_dirs}
    allowed = broker.authorizer.cluster_allowed(AclOperation.ALTER)
    by_topic: dict[str, list[Any]] = {}
    for wanted in request.body.dirs:
        target = dirs.get(str(Path(wanted.path).absolute()))
        for t in wanted.topics:
            for index in t.partitions:
                by_topic.setdefault(t.name, []).append(ReplicaDirPartition(
                    partition_index=index, error_code=await _move_replica(
                        broker, t.name, index, target, wanted.path)
                    if allowed else CLUSTER_AUTHORIZATION_FAILED))
    return {"throttle_time_ms": 0, "results": [
        ReplicaDirTopic(topic_name=name, partitions=parts) for name, parts in by_topic.items()]}


async def _move_replica(broker: Broker, topic: str, index: int, target: Path | None,
                        path: str) -> int:
    if target is None:
        logger.info("AlterReplicaLogDirs: %s is not one of log.dirs", path)
        return LOG_DIR_NOT_FOUND
    partition = broker.partition(topic, index)
    if partition is None:
        return REPLICA_NOT_AVAILABLE
    manager = broker.log_manager
    try:
        if manager.needs_copy(topic, index, target):
            # Across file systems the bulk is copied off the event loop while the log
            # serves; the move itself then copies only what changed since the roll.
            partition.log.roll()
            await trio.to_thread.run_sync(manager.stage_move, topic, index, target)
            if broker.partition(topic, index) is not partition:
                return REPLICA_NOT_AVAILABLE
        partition.log = manager.move_log(topic, index, target)
    except OSError as e:
        logger.error("AlterReplicaLogDirs: moving %s-%d to %s failed: %s", topic, index,
                     target, e)
        return KAFKA_STORAGE_ERROR
    return NONE


HANDLERS = {
    ApiKey.AlterReplicaLogDirs: handle_alter_replica_log_dirs,
    ApiKey.DescribeLogDirs: handle_describe_log_dirs,
    ApiKey.DeleteRecords: handle_delete_records,
    ApiKey.OffsetForLeaderEpoch: handle_offset_for_leader_epoch,
}
