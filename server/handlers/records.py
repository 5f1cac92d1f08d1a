"""The records of partition logs: DeleteRecords (move the log start offset) and
OffsetForLeaderEpoch (where a leader epoch ends), with Kafka 4.x's checks and errors."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DeleteRecordsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetForLeaderEpochResponse

from josefk.cluster.metadata import INTERNAL_TOPICS
from josefk.cluster.partition import Partition, PartitionError
from josefk.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from josefk.log.log import OffsetOutOfRangeError
from josefk.protocol.error_codes import (
    INVALID_TOPIC_EXCEPTION,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    POLICY_VIOLATION,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response

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


# --- DeleteRecords -----------------------------------------------------------------------


async def handle_delete_records(broker: Broker, request: Request) -> Response:
    """DeleteRecords v0-2: advance each partition's log start offset (-1: to the high
    watermark); answers the new low watermark."""
    topics = []
    for t in request.body.topics:
        partitions = []
        for p in t.partitions:
            low, code = delete_records(broker, t.name, p.partition_index, p.offset)
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
    partition = broker.partition(topic, index)
    if partition is None or not partition.is_leader:
        return INVALID_LOW_WATERMARK, NOT_LEADER_OR_FOLLOWER
    log = partition.log
    if not log.config.delete:
        return INVALID_LOW_WATERMARK, POLICY_VIOLATION
    target = partition.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        return INVALID_LOW_WATERMARK, OFFSET_OUT_OF_RANGE
    try:
        log.delete_records(target)
    except OffsetOutOfRangeError as e:
        logger.info("DeleteRecords on %s-%d: %s", topic, index, e)
        return INVALID_LOW_WATERMARK, OFFSET_OUT_OF_RANGE
    broker.on_partition_data(partition)  # a new log start offset for fetch sessions to tell
    return log.log_start_offset, NONE


# --- OffsetForLeaderEpoch ----------------------------------------------------------------


async def handle_offset_for_leader_epoch(broker: Broker, request: Request) -> Response:
    """OffsetForLeaderEpoch v2-4: the end offset of a leader epoch on the leader.

    The ReplicaId of v3+ (-1 consumer, -2 debug, >= 0 follower) changes nothing:
    Kafka answers every caller from the leader's log, fencing stale epochs.
    """
    topics = []
    for t in request.body.topics:
        partitions = [EpochEndOffset(partition=p.partition, **epoch_end_offset(
            broker, t.topic, p.partition, p.current_leader_epoch, p.leader_epoch))
            for p in t.partitions]
        topics.append(EpochTopic(topic=t.topic, partitions=partitions))
    return {"throttle_time_ms": 0, "topics": topics}


def epoch_end_offset(broker: Broker, topic: str, index: int, current_leader_epoch: int,
                     leader_epoch: int) -> dict[str, Any]:
    """The fields of one partition's EpochEndOffset (Kafka's Partition.lastOffsetForLeaderEpoch)."""
    partition = _hosted(broker, topic, index)
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


def _hosted(broker: Broker, topic: str, index: int) -> Partition | int:
    """The partition, or the error code for one this broker does not host."""
    partition = broker.partition(topic, index)
    if partition is not None:
        return partition
    stored = broker.store.get(topic)
    known = stored is not None and index in stored.partitions
    return NOT_LEADER_OR_FOLLOWER if known else UNKNOWN_TOPIC_OR_PARTITION


HANDLERS = {
    ApiKey.DeleteRecords: handle_delete_records,
    ApiKey.OffsetForLeaderEpoch: handle_offset_for_leader_epoch,
}
