"""Kafka's controller messages <-> the controller's values (`controller_requests`).

The controller sends LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4, what a
Kafka 3.9 controller sends with ``inter.broker.protocol.version=3.9``; the broker side
reads every version Kafka 3.9 may send.
"""

from __future__ import annotations

import uuid
from typing import Any

from josefk.cluster.metadata.requests import (
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsr,
    PartitionInfo,
    StopReplica,
    StopReplicaPartition,
    UpdateMetadata,
)
from josefk.cluster.zk.znodes import BrokerRegistration, Endpoint
from josefk.protocol.controller_messages import (
    ControlRequestType,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
ZERO_UUID = uuid.UUID(int=0)

SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOLS.items()}

_LIsr = LeaderAndIsrRequest
_LIsrTopic = _LIsr.LeaderAndIsrTopicState
_UM = UpdateMetadataRequest
_UMTopic = _UM.UpdateMetadataTopicState
_UMBroker = _UM.UpdateMetadataBroker
_SR = StopReplicaRequest
_SRTopic = _SR.StopReplicaTopicState


def _grouped(infos: tuple[PartitionInfo, ...]) -> dict[str, list[PartitionInfo]]:
    topics: dict[str, list[PartitionInfo]] = {}
    for info in infos:
        topics.setdefault(info.topic, []).append(info)
    return topics


def encode_request(request: ControllerRequest) -> tuple[Any, int]:
    """The wire message for a controller request and the version to send it at."""
    match request:
        case LeaderAndIsr():
            return _leader_and_isr(request), LEADER_AND_ISR_VERSION
        case UpdateMetadata():
            return _update_metadata(request), UPDATE_METADATA_VERSION
        case StopReplica():
            return _stop_replica(request), STOP_REPLICA_VERSION
    raise TypeError(f"not a controller request: {request!r}")


def _leader_and_isr(r: LeaderAndIsr) -> Any:
    topics = [_LIsrTopic(
        topic_name=topic, topic_id=r.topic_ids.get(topic, ZERO_UUID),
        partition_states=[_LIsrTopic.LeaderAndIsrPartitionState(
            partition_index=i.partition, controller_epoch=i.controller_epoch, leader=i.leader,
            leader_epoch=i.leader_epoch, isr=list(i.isr), partition_epoch=i.partition_epoch,
            replicas=list(i.replicas), adding_replicas=list(i.adding),
            removing_replicas=list(i.removing), is_new=i.is_new,
            leader_recovery_state=i.leader_recovery_state) for i in infos])
        for topic, infos in _grouped(r.partitions).items()]
    leaders = []
    for broker in r.live_leaders:
        endpoint = broker.endpoint()
        if endpoint is not None:
            leaders.append(_LIsr.LeaderAndIsrLiveLeader(
                broker_id=broker.broker_id, host_name=endpoint.host, port=endpoint.port))
    return _LIsr(controller_id=r.controller_id, is_kraft_controller=False,
                 controller_epoch=r.controller_epoch, broker_epoch=r.broker_epoch,
                 type=int(ControlRequestType.FULL if r.full else ControlRequestType.INCREMENTAL),
                 ungrouped_partition_states=[], topic_states=topics, live_leaders=leaders)


def _update_metadata(r: UpdateMetadata) -> Any:
    topics = [_UMTopic(
        topic_name=topic, topic_id=r.topic_ids.get(topic, ZERO_UUID),
        partition_states=[_UMTopic.UpdateMetadataPartitionState(
            partition_index=i.partition, controller_epoch=i.controller_epoch, leader=i.leader,
            leader_epoch=i.leader_epoch, isr=list(i.isr), zk_version=i.partition_epoch,
            replicas=list(i.replicas), offline_replicas=list(i.offline)) for i in infos])
        for topic, infos in _grouped(r.partitions).items()]
    brokers = [_UMBroker(
        id=b.broker_id, v0_host="", v0_port=0, rack=b.rack,
        endpoints=[_UMBroker.UpdateMetadataEndpoint(
            port=e.port, host=e.host, listener=e.listener,
            security_protocol=SECURITY_PROTOCOLS.get(e.security_protocol, 0))
            for e in b.endpoints]) for b in r.live_brokers]
    return _UM(controller_id=r.controller_id, is_kraft_controller=False,
               type=int(ControlRequestType.UNKNOWN), controller_epoch=r.controller_epoch,
               broker_epoch=r.broker_epoch, ungrouped_partition_states=[], topic_states=topics,
               live_brokers=brokers)


def _stop_replica(r: StopReplica) -> Any:
    topics: dict[str, list[StopReplicaPartition]] = {}
    for p in r.partitions:
        topics.setdefault(p.topic, []).append(p)
    return _SR(controller_id=r.controller_id, is_kraft_controller=False,
               controller_epoch=r.controller_epoch, broker_epoch=r.broker_epoch,
               delete_partitions=False, ungrouped_partitions=[], topics=[],
               topic_states=[_SRTopic(topic_name=topic, partition_states=[
                   _SRTopic.StopReplicaPartitionState(
                       partition_index=p.partition, leader_epoch=p.leader_epoch,
                       delete_partition=p.delete) for p in parts])
                   for topic, parts in topics.items()])


def decode_response(request: ControllerRequest, response: Any) -> ControllerResponse:
    """A broker's answer as per-partition errors (by topic name)."""
    errors: dict[tuple[str, int], int] = {}
    if isinstance(request, LeaderAndIsr):
        names = {topic_id: topic for topic, topic_id in request.topic_ids.items()}
        for topic in getattr(response, "topics", None) or []:
            name = names.get(topic.topic_id)
            for p in topic.partition_errors:
                if name is not None:
                    errors[(name, p.partition_index)] = p.error_code
        for p in getattr(response, "partition_errors", None) or []:
            errors[(p.topic_name, p.partition_index)] = p.error_code
    elif isinstance(request, StopReplica):
        for p in response.partition_errors or []:
            errors[(p.topic_name, p.partition_index)] = p.error_code
    return ControllerResponse(response.error_code, errors)


# --- the broker side: what a controller sent --------------------------------------------


def _infos_from(body: Any, grouped_field: str, ungrouped_field: str, epoch_field: str
                ) -> tuple[list[PartitionInfo], dict[str, uuid.UUID]]:
    infos, topic_ids = [], {}
    pairs: list[tuple[str, Any]] = []
    for topic in getattr(body, grouped_field, None) or []:
        topic_id = getattr(topic, "topic_id", None)
        if topic_id is not None and topic_id != ZERO_UUID:
            topic_ids[topic.topic_name] = topic_id
        pairs.extend((topic.topic_name, p) for p in topic.partition_states)
    pairs.extend((p.topic_name, p) for p in getattr(body, ungrouped_field, None) or [])
    for topic, p in pairs:
        infos.append(PartitionInfo(
            topic=topic, partition=p.partition_index, controller_epoch=p.controller_epoch,
            leader=p.leader, leader_epoch=p.leader_epoch, isr=tuple(p.isr),
            partition_epoch=getattr(p, epoch_field), replicas=tuple(p.replicas),
            adding=tuple(getattr(p, "adding_replicas", None) or ()),
            removing=tuple(getattr(p, "removing_replicas", None) or ()),
            offline=tuple(getattr(p, "offline_replicas", None) or ()),
            is_new=bool(getattr(p, "is_new", False)),
            leader_recovery_state=getattr(p, "leader_recovery_state", 0) or 0))
    return infos, topic_ids


def _broker_epoch(body: Any) -> int:
    epoch = getattr(body, "broker_epoch", None)
    return -1 if epoch is None else epoch


def decode_leader_and_isr(body: Any) -> LeaderAndIsr:
    infos, topic_ids = _infos_from(body, "topic_states", "ungrouped_partition_states",
                                   "partition_epoch")
    leaders = tuple(BrokerRegistration(b.broker_id, (Endpoint("PLAINTEXT", b.host_name, b.port),))
                    for b in body.live_leaders or [])
    return LeaderAndIsr(body.controller_id, body.controller_epoch, _broker_epoch(body),
                        tuple(infos), topic_ids, leaders,
                        full=getattr(body, "type", 0) == ControlRequestType.FULL)


def decode_update_metadata(body: Any) -> UpdateMetadata:
    infos, topic_ids = _infos_from(body, "topic_states", "ungrouped_partition_states",
                                   "zk_version")
    brokers = []
    for b in body.live_brokers or []:
        endpoints = tuple(Endpoint(e.listener or SECURITY_PROTOCOL_NAMES.get(e.security_protocol,
                                                                              "PLAINTEXT"),
                                   e.host, e.port,
                                   SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"))
                          for e in getattr(b, "endpoints", None) or [])
        if not endpoints and getattr(b, "v0_host", None):
            endpoints = (Endpoint("PLAINTEXT", b.v0_host, b.v0_port),)
        brokers.append(BrokerRegistration(b.id, endpoints, getattr(b, "rack", None)))
    return UpdateMetadata(body.controller_id, body.controller_epoch, _broker_epoch(body),
                          tuple(infos), topic_ids, tuple(brokers))


def decode_stop_replica(body: Any) -> StopReplica:
    parts = []
    for topic in getattr(body, "topic_states", None) or []:
        parts.extend(StopReplicaPartition(topic.topic_name, p.partition_index, p.leader_epoch,
                                          p.delete_partition) for p in topic.partition_states)
    delete = bool(getattr(body, "delete_partitions", False))
    for topic in getattr(body, "topics", None) or []:
        parts.extend(StopReplicaPartition(topic.name, p, -1, delete)
                     for p in topic.partition_indexes)
    for p in getattr(body, "ungrouped_partitions", None) or []:
        parts.append(StopReplicaPartition(p.topic_name, p.partition_index, -1, delete))
    return StopReplica(body.controller_id, body.controller_epoch, _broker_epoch(body),
                       tuple(parts))
