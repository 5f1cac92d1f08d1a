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
        live = {b.node_id for b in broker.live_brokers()}
        topics = [_describe(broker, t, live) for t in sorted(broker.store.topics(),
                                                               key=lambda t: t.name)]
    else:
        topics = [await _requested(broker, t.name, getattr(t, "topic_id", None), allow_create)
                  for t in body.topics]
    return {
        "throttle_time_ms": 0,
        "brokers": [BrokerResp(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                    for b in broker.live_brokers()],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.controller_id,
        "topics": topics,
        "error_code": 0,
    }


async def _requested(broker: Broker, name: str | None, topic_id: uuid.UUID | None,
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
        return _describe(broker, await broker.create_topic(name or ""))
    except ClusterError as e:
        return _error(e.error_code, name)


def _describe(broker: Broker, topic: Topic, live: set[int] | None = None) -> Any:
    live = live if live is not None else {b.node_id for b in broker.live_brokers()}
    partitions = []
    for index, replicas in sorted(topic.partitions.items()):
        view = broker.partition_view(topic.name, index)
        # As Kafka's metadata cache: a leader that is not a live broker (it just died and
        # the controller has not moved its partitions yet) is reported as none, with
        # LEADER_NOT_AVAILABLE, so clients wait instead of looking for a broker they
        # were not told about.
        leader = view.leader if view and view.leader in live else -1
        partitions.append(PartitionResp(
            error_code=0 if view and leader >= 0 else LEADER_NOT_AVAILABLE,
            partition_index=index, leader_id=leader,
            leader_epoch=view.leader_epoch if view else -1, replica_nodes=list(replicas),
            isr_nodes=list(view.isr) if view else [],
            offline_replicas=list(view.offline) if view else []))
    return TopicResp(error_code=0, name=topic.name, topic_id=topic.topic_id,
                     is_internal=topic.name in INTERNAL_TOPICS, partitions=partitions)


def _error(code: int, name: str | None, topic_id: uuid.UUID | None = None) -> Any:
    return TopicResp(error_code=code, name=name, topic_id=topic_id or ZERO_UUID,
                     is_internal=False, partitions=[])


HANDLERS = {ApiKey.Metadata: handle}
