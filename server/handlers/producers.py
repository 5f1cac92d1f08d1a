"""DescribeProducers: the active idempotent producers of partitions this broker leads
(what ``kafka-transactions.sh describe-producers`` shows)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.transactions import DescribeProducersResponse
from kafka.protocol.api_key import ApiKey

from josefk.cluster.security.acls import AclOperation, ResourceType
from josefk.protocol.error_codes import (
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    TOPIC_AUTHORIZATION_FAILED,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response, partition_or_error
from josefk.server.security.checks import ERROR_MESSAGES

if TYPE_CHECKING:
    from josefk.server.broker import Broker

TopicResp = DescribeProducersResponse.TopicResponse
PartitionResp = TopicResp.PartitionResponse
ProducerResp = PartitionResp.ProducerState


async def handle(broker: Broker, request: Request) -> Response:
    topics = request.body.topics
    denied = broker.authorizer.denied_names(AclOperation.READ, ResourceType.TOPIC,
                                            (t.name for t in topics))
    return {"throttle_time_ms": 0, "topics": [
        TopicResp(name=t.name, partitions=[
            _refused(p) if t.name in denied else _partition(broker, t.name, p)
            for p in t.partition_indexes])
        for t in topics]}


def _refused(index: int) -> Any:
    return PartitionResp(partition_index=index, error_code=TOPIC_AUTHORIZATION_FAILED,
                         error_message=ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
                         active_producers=[])


def _partition(broker: Broker, topic: str, index: int) -> Any:
    partition = partition_or_error(broker, topic, index)
    if isinstance(partition, int):
        return PartitionResp(partition_index=index, error_code=partition, error_message=None,
                             active_producers=[])
    if not partition.is_leader:
        return PartitionResp(partition_index=index, error_code=NOT_LEADER_OR_FOLLOWER,
                             error_message=None, active_producers=[])
    producers = partition.log.producer_state.producers
    return PartitionResp(partition_index=index, error_code=NONE, error_message=None,
                         active_producers=[
        ProducerResp(producer_id=e.producer_id, producer_epoch=e.epoch,
                     last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                     coordinator_epoch=e.coordinator_epoch,
                     current_txn_start_offset=e.current_txn_first_offset)
        for e in sorted(producers.values(), key=lambda e: e.producer_id)])


HANDLERS = {ApiKey.DescribeProducers: handle}
