"""ListOffsets: earliest, latest, max timestamp, or the first offset at a timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsResponse

from josefk.cluster.partition import Partition, PartitionError
from josefk.cluster.security.acls import AclOperation
from josefk.log.errors import StorageError
from josefk.protocol.error_codes import (
    INVALID_REQUEST,
    NOT_LEADER_OR_FOLLOWER,
    TOPIC_AUTHORIZATION_FAILED,
    UNSUPPORTED_VERSION,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response, partition_or_error
from josefk.server.security.checks import split_topics

if TYPE_CHECKING:
    from josefk.server.broker import Broker

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1
#: The lowest ListOffsets version of each special timestamp (Kafka's
#: ``ReplicaManager.timestampMinSupportedVersion``); any other negative one is refused.
TIMESTAMP_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8,
                         LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}

TopicResp = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResp = TopicResp.ListOffsetsPartitionResponse


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    read_committed = version >= 2 and body.isolation_level == READ_COMMITTED
    # A follower (a broker's replica id) asks for the leader's log end, not what
    # consumers may read (Kafka: no isolation level for a follower).
    follower = body.replica_id >= 0
    # As Kafka's ReplicaManager.fetchOffset: one answer per partition, a partition
    # asked for more than once is INVALID_REQUEST, topics grouped by name.
    topics, refused = split_topics(broker.authorizer, AclOperation.DESCRIBE, body.topics)
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()
    for topic in topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            (duplicates if key in seen else seen).add(key)
    answers: dict[str, dict[int, Any]] = {}
    for topic in topics:
        partitions = answers.setdefault(topic.name, {})
        for p in topic.partitions:
            if p.partition_index in partitions:
                continue
            if (topic.name, p.partition_index) in duplicates:
                fields = _error(INVALID_REQUEST)
            elif _timestamp_unsupported(p.timestamp, version):
                fields = _error(UNSUPPORTED_VERSION)
            else:
                epoch = p.current_leader_epoch if version >= 4 else -1
                fields = _lookup(broker, topic.name, p.partition_index, p.timestamp, epoch,
                                 read_committed, follower)
            partitions[p.partition_index] = PartitionResp(partition_index=p.partition_index,
                                                          **fields)
    # Kafka answers the topics the client may not describe last.
    answered = [TopicResp(name=name, partitions=list(partitions.values()))
                for name, partitions in answers.items()]
    answered += [TopicResp(name=t.name, partitions=[
        PartitionResp(partition_index=p.partition_index, **_error(TOPIC_AUTHORIZATION_FAILED))
        for p in t.partitions]) for t in refused]
    return {"throttle_time_ms": 0, "topics": answered}


def _timestamp_unsupported(timestamp: int, version: int) -> bool:
    """Kafka's ``isListOffsetsTimestampUnsupported``: a negative timestamp that is no
    special one, or one this request version predates."""
    return timestamp < 0 and version < TIMESTAMP_MIN_VERSION.get(timestamp, version + 1)


def _lookup(broker: Broker, topic: str, index: int, timestamp: int, epoch: int,
            read_committed: bool, follower: bool = False) -> dict[str, Any]:
    # Kafka's getPartitionOrException: a partition in a failed log directory answers
    # KAFKA_STORAGE_ERROR whatever is asked, before leadership or epochs are looked at.
    partition = partition_or_error(broker, topic, index)
    if isinstance(partition, int):
        return _error(partition)
    if not partition.is_leader:
        return _error(NOT_LEADER_OR_FOLLOWER)
    try:
        partition.check_leader_epoch(epoch)
    except PartitionError as e:
        return _error(e.error_code)
    try:
        found = offset_for(partition, timestamp, read_committed, follower)
    except StorageError as e:  # its directory failed just now (logged where it happened)
        return _error(e.error_code)
    if found is None:
        # No record at or after the timestamp: offset -1 and no error (Spark relies on it).
        return {"error_code": 0, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    ts, offset = found
    return {"error_code": 0, "timestamp": ts, "offset": offset,
            "leader_epoch": partition.log.leader_epochs.epoch_for(offset)}


def offset_for(partition: Partition, timestamp: int, read_committed: bool,
               follower: bool = False) -> tuple[int, int] | None:
    """(timestamp, offset) for a ListOffsets query, or None when nothing matches."""
    log = partition.log
    if follower:
        fetchable = log.log_end_offset
    else:
        fetchable = partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == LATEST:
        return -1, fetchable
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == EARLIEST_PENDING_UPLOAD:
        return None  # no tiered storage, nothing pending upload: Kafka answers offset -1
    found = log.max_timestamp_offset() if timestamp == MAX_TIMESTAMP else \
        log.offset_for_timestamp(timestamp)
    if found is None or found.timestamp < 0 or found.offset >= fetchable:
        return None
    return found.timestamp, found.offset


def _error(code: int) -> dict[str, Any]:
    return {"error_code": code, "timestamp": -1, "offset": -1, "leader_epoch": -1}


HANDLERS = {ApiKey.ListOffsets: handle}
