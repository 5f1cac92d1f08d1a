"""Metadata: brokers, controller, topics and their partitions' leaders."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import MetadataResponse

from josefk.cluster.metadata import ClusterError, Topic
from josefk.protocol.error_codes import (
    LEADER_NOT_AVAILABLE,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response

if TYPE_CHECKING:
    from josefk.server.broker import Broker

ZERO_UUID = uuid.UUID(int=0)
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")

BrokerResp = MetadataResponse.MetadataResponseBroker
TopicResp = MetadataResponse.MetadataResponseTopic
PartitionResp = TopicResp.MetadataResponsePartition


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    allow_create = body.allow_auto_topic_creation if version >= 4 else True
    if body.topics is None:
        topics = [_describe(broker, t) for t in sorted(broker.store.topics(),
                                                         key=lambda t: t.name)]
    else:
        topics = [_requested(broker, t.name, getattr(t, "topic_id", None), allow_create)
                  for t in body.topics]
    me = broker.store.broker
    return {
        "throttle_time_ms": 0,
        "brokers": [BrokerResp(node_id=me.node_id, host=me.host, port=me.port, rack=me.rack)],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
        "error_code": 0,
    }


def _requested(broker: Broker, name: str | None, topic_id: uuid.UUID | None,
               allow_create: bool) -> Any:
    if not name and topic_id is not None and topic_id != ZERO_UUID:
        topic = broker.store.get_by_id(topic_id)
        if topic is None:
            return _error(UNKNOWN_TOPIC_ID, None, topic_id)
        return _describe(broker, topic)
    topic = broker.store.get(name or "")
    if topic is not None:
        return _describe(broker, topic)
    if not (allow_create and broker.config.auto_create_topics_enable):
        return _error(UNKNOWN_TOPIC_OR_PARTITION, name)
    try:
        return _describe(broker, broker.create_topic(name or ""))
    except ClusterError as e:
        return _error(e.error_code, name)


def _describe(broker: Broker, topic: Topic) -> Any:
    partitions = []
    for index, replicas in sorted(topic.partitions.items()):
        partition = broker.partition(topic.name, index)
        leader = partition.leader_id if partition else -1
        isr = list(partition.isr) if partition else []
        partitions.append(PartitionResp(
            error_code=0 if partition else LEADER_NOT_AVAILABLE, partition_index=index,
            leader_id=leader, leader_epoch=partition.leader_epoch if partition else -1,
            replica_nodes=list(replicas), isr_nodes=isr, offline_replicas=[]))
    return TopicResp(error_code=0, name=topic.name, topic_id=topic.topic_id,
                     is_internal=topic.name in INTERNAL_TOPICS, partitions=partitions)


def _error(code: int, name: str | None, topic_id: uuid.UUID | None = None) -> Any:
    return TopicResp(error_code=code, name=name, topic_id=topic_id or ZERO_UUID,
                     is_internal=False, partitions=[])


HANDLERS = {ApiKey.Metadata: handle}
