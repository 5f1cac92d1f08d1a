"""ListOffsets to each partition's leader: log end (latest), log start (earliest) and
offsets by time, read_uncommitted as Kafka's admin tools ask."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest

from josefk.server.admin.brokers import Brokers, check

LIST_OFFSETS_VERSION = 7
LATEST = -1
EARLIEST = -2

_Topic = ListOffsetsRequest.ListOffsetsTopic
_Partition = _Topic.ListOffsetsPartition

TopicPartition = tuple[str, int]


async def list_offsets(brokers: Brokers, partitions: list[TopicPartition],
                       timestamp: int) -> dict[TopicPartition, int]:
    """The offset for ``timestamp`` (LATEST, EARLIEST or milliseconds) of each partition
    with a leader, retried over leader changes; -1 where no record is that recent."""
    if not partitions:
        return {}
    return await brokers.retrying(lambda: _attempt(brokers, partitions, timestamp))


async def _attempt(brokers: Brokers, partitions: list[TopicPartition],
                   timestamp: int) -> dict[TopicPartition, int]:
    wanted = set(partitions)
    metadata = await brokers.metadata(sorted({t for t, _ in partitions}))
    by_leader: dict[int, list[TopicPartition]] = {}
    for topic in metadata.topics:
        for p in topic.partitions:
            if (topic.name, p.partition_index) in wanted and p.leader_id >= 0:
                by_leader.setdefault(p.leader_id, []).append((topic.name, p.partition_index))
    found: dict[TopicPartition, int] = {}
    for leader, tps in by_leader.items():
        found.update(await _ask_leader(brokers, leader, tps, timestamp))
    return found


async def _ask_leader(brokers: Brokers, leader: int, partitions: list[TopicPartition],
                      timestamp: int) -> dict[TopicPartition, int]:
    topics: dict[str, list[Any]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(_Partition(partition_index=index,
                                                       timestamp=timestamp))
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0,
                                 topics=[_Topic(name=t, partitions=ps)
                                         for t, ps in topics.items()])
    response = await brokers.send(leader, request, LIST_OFFSETS_VERSION)
    found = {}
    for topic in response.topics:
        for p in topic.partitions:
            check(p.error_code, f"list offsets of {topic.name}-{p.partition_index}")
            found[(topic.name, p.partition_index)] = p.offset
    return found
