"""Cluster-mode APIs: what the controller sends brokers (LeaderAndIsr, UpdateMetadata,
StopReplica) and what brokers ask the controller (ControlledShutdown, AlterPartition,
AllocateProducerIds). Served only with ``zookeeper.connect`` set; the requests for the
controller get NOT_CONTROLLER on any other broker, as in Kafka. The admin requests the
controller answers (ElectLeaders, reassignments) are `elections`: a single broker serves
them too."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafka.protocol.api_key import ApiKey

from josefk.cluster.security.acls import AclOperation
from josefk.protocol.controller_messages import (
    AlterPartitionResponse,
    ControlledShutdownResponse,
    LeaderAndIsrResponse,
    StopReplicaResponse,
)
from josefk.protocol.error_codes import CLUSTER_AUTHORIZATION_FAILED, NONE, NOT_CONTROLLER
from josefk.server.handlers import Response

# The controller's code and the wire of its requests are imported by the handlers: a single
# broker (no zookeeper.connect) serves none of these APIs and never imports them.
if TYPE_CHECKING:
    from josefk.cluster.controller.controller import Controller
    from josefk.cluster.metadata.requests import ControllerResponse
    from josefk.protocol.messages import Request
    from josefk.server.broker import Broker

ZK_ONLY_API_KEYS = frozenset({ApiKey.LeaderAndIsr, ApiKey.StopReplica, ApiKey.UpdateMetadata,
                              ApiKey.ControlledShutdown, ApiKey.AlterPartition})

_LIsrTopicError = LeaderAndIsrResponse.LeaderAndIsrTopicError


def refused(broker: Broker, operation: AclOperation = AclOperation.CLUSTER_ACTION) -> bool:
    """The check of these APIs (AuthHelper.authorizeClusterOperation): the operation on the
    cluster, else CLUSTER_AUTHORIZATION_FAILED."""
    return not broker.authorizer.cluster_allowed(operation)


def _all_refused(partitions: Iterable[tuple[str, int]]) -> ControllerResponse:
    """The request's error response: the error at the top and for every partition."""
    from josefk.cluster.metadata.requests import ControllerResponse

    return ControllerResponse(CLUSTER_AUTHORIZATION_FAILED,
                              dict.fromkeys(partitions, CLUSTER_AUTHORIZATION_FAILED))


async def handle_leader_and_isr(broker: Broker, request: Request) -> Response:
    assert broker.cluster is not None
    from josefk.server.control.wire import decode_leader_and_isr

    req = decode_leader_and_isr(request.body)
    result = (_all_refused((p.topic, p.partition) for p in req.partitions) if refused(broker)
              else await broker.cluster.leader_and_isr(req))
    if request.api_version < 5:
        return {"error_code": result.error_code, "partition_errors": [
            LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                topic_name=t, partition_index=p, error_code=e)
            for (t, p), e in result.partition_errors.items()]}
    by_topic: dict[str, list[Any]] = {}
    for (t, p), e in result.partition_errors.items():
        by_topic.setdefault(t, []).append(_LIsrTopicError.LeaderAndIsrPartitionError(
            partition_index=p, error_code=e))
    return {"error_code": result.error_code, "topics": [
        _LIsrTopicError(topic_id=req.topic_ids[t], partition_errors=errors)
        for t, errors in by_topic.items() if t in req.topic_ids]}


async def handle_update_metadata(broker: Broker, request: Request) -> Response:
    assert broker.cluster is not None
    if refused(broker):
        return {"error_code": CLUSTER_AUTHORIZATION_FAILED}
    from josefk.server.control.wire import decode_update_metadata

    result = await broker.cluster.update_metadata(decode_update_metadata(request.body))
    return {"error_code": result.error_code}


async def handle_stop_replica(broker: Broker, request: Request) -> Response:
    assert broker.cluster is not None
    from josefk.server.control.wire import decode_stop_replica

    req = decode_stop_replica(request.body)
    result = (_all_refused((p.topic, p.partition) for p in req.partitions) if refused(broker)
              else await broker.cluster.stop_replica(req))
    return {"error_code": result.error_code, "partition_errors": [
        StopReplicaResponse.StopReplicaPartitionError(topic_name=t, partition_index=p,
                                                      error_code=e)
        for (t, p), e in result.partition_errors.items()]}


async def on_controller(broker: Broker, work: Callable[[Controller], Awaitable[Any]]) -> Any:
    """Run ``work`` as a controller event; None when this broker is not the controller."""
    controller = broker.cluster.controller if broker.cluster is not None else None
    if controller is None:
        return None
    from josefk.cluster.controller.controller import ControllerMovedError

    try:
        return await controller.call(lambda: work(controller))
    except ControllerMovedError:
        return None


async def handle_controlled_shutdown(broker: Broker, request: Request) -> Response:
    body = request.body
    if refused(broker):
        return {"error_code": CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    epoch = body.broker_epoch if request.api_version >= 2 else -1
    result = await on_controller(
        broker, lambda c: c.controlled_shutdown(body.broker_id, epoch))
    if result is None:
        return {"error_code": NOT_CONTROLLER, "remaining_partitions": []}
    error, remaining = result
    return {"error_code": error, "remaining_partitions": [
        ControlledShutdownResponse.RemainingPartition(topic_name=t, partition_index=p)
        for t, p in remaining]}


async def handle_alter_partition(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version

    async def work(c: Controller) -> list[Any]:
        from josefk.cluster.controller.isr import AlterIsr

        names = {topic_id: name for name, topic_id in c.ctx.topic_ids.items()}
        topic_names = [t.topic_name if version < 2 else names.get(t.topic_id, "")
                       for t in body.topics]
        changes = [AlterIsr(
            (name, p.partition_index), p.leader_epoch,
            tuple(b.broker_id for b in p.new_isr_with_epochs) if version >= 3
            else tuple(p.new_isr), p.partition_epoch,
            getattr(p, "leader_recovery_state", 0) or 0)
            for name, t in zip(topic_names, body.topics, strict=True) for p in t.partitions]
        answers = await c.alter_partitions(body.broker_id, body.broker_epoch, changes)
        topics = []
        for name, t in zip(topic_names, body.topics, strict=True):
            partitions = []
            for p in t.partitions:
                error, state = answers[(name, p.partition_index)]
                partitions.append(AlterPartitionResponse.TopicData.PartitionData(
                    partition_index=p.partition_index, error_code=error,
                    leader_id=state.leader if state else -1,
                    leader_epoch=state.leader_epoch if state else -1,
                    isr=list(state.isr) if state else [],
                    leader_recovery_state=state.leader_recovery_state if state else 0,
                    partition_epoch=state.zk_version if state else -1))
            topics.append(AlterPartitionResponse.TopicData(
                topic_name=name, topic_id=t.topic_id if version >= 2 else None,
                partitions=partitions))
        return topics

    if refused(broker):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "topics": []}
    topics = await on_controller(broker, work)
    if topics is None:
        return {"throttle_time_ms": 0, "error_code": NOT_CONTROLLER, "topics": []}
    return {"throttle_time_ms": 0, "error_code": NONE, "topics": topics}


async def handle_allocate_producer_ids(broker: Broker, request: Request) -> Response:
    body = request.body
    if refused(broker):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED,
                "producer_id_start": 0, "producer_id_len": 0}
    result = await on_controller(
        broker, lambda c: c.allocate_producer_ids(body.broker_id, body.broker_epoch))
    error, start, length = result if result is not None else (NOT_CONTROLLER, -1, -1)
    return {"throttle_time_ms": 0, "error_code": error, "producer_id_start": start,
            "producer_id_len": length}


HANDLERS = {
    ApiKey.LeaderAndIsr: handle_leader_and_isr,
    ApiKey.UpdateMetadata: handle_update_metadata,
    ApiKey.StopReplica: handle_stop_replica,
    ApiKey.ControlledShutdown: handle_controlled_shutdown,
    ApiKey.AlterPartition: handle_alter_partition,
    ApiKey.AllocateProducerIds: handle_allocate_producer_ids,
}
