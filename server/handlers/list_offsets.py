"""ListOffsets: earliest, latest, max timestamp, or the first offset at a timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsResponse

from josefk.cluster.partition import Partition, PartitionError
from josefk.protocol.error_codes import (
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response

if TYPE_CHECKING:
    from josefk.server.broker import Broker

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1

TopicResp = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResp = TopicResp.ListOffsetsPartitionResponse


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    read_committed = request.api_version >= 2 and body.isolation_level == READ_COMMITTED
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            epoch = p.current_leader_epoch if request.api_version >= 4 else -1
            fields = _lookup(broker, topic.name, p.partition_index, p.timestamp, epoch,
                             read_committed)
            partitions.append(PartitionResp(partition_index=p.partition_index, **fields))
        topics.append(TopicResp(name=topic.name, partitions=partitions))
    return {"throttle_time_ms": 0, "topics": topics}


def _lookup(broker: Broker, topic: str, index: int, timestamp: int, epoch: int,
            read_committed: bool) -> dict[str, Any]:
    partition = broker.partition(topic, index)
    if partition is None:
        return _error(UNKNOWN_TOPIC_OR_PARTITION)
    if not partition.is_leader:
        return _error(NOT_LEADER_OR_FOLLOWER)
    try:
        partition.check_leader_epoch(epoch)
    except PartitionError as e:
        return _error(e.error_code)
    found = offset_for(partition, timestamp, read_committed)
    if found is None:
        # No record at or after the timestamp: offset -1 and no error (Spark relies on it).
        return {"error_code": 0, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    ts, offset = found
    return {"error_code": 0, "timestamp": ts, "offset": offset,
            "leader_epoch": partition.log.leader_epochs.epoch_for(offset)}


def offset_for(partition: Partition, timestamp: int, read_committed: bool
               ) -> tuple[int, int] | None:
    """(timestamp, offset) for a ListOffsets query, or None when nothing matches."""
    log = partition.log
    fetchable = partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == LATEST:
        return -1, fetchable
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset
    if timestamp == LATEST_TIERED:
        return -1, -1
    found = log.max_timestamp_offset() if timestamp == MAX_TIMESTAMP else \
        log.offset_for_timestamp(timestamp)
    if found is None or found.timestamp < 0 or found.offset >= fetchable:
        return None
    return found.timestamp, found.offset


def _error(code: int) -> dict[str, Any]:
    return {"error_code": code, "timestamp": -1, "offset": -1, "leader_epoch": -1}


HANDLERS = {ApiKey.ListOffsets: handle}
