"""Cluster-mode APIs: what the controller sends brokers (LeaderAndIsr, UpdateMetadata,
StopReplica), what brokers ask the controller (ControlledShutdown, AlterPartition), and
the admin requests the controller answers (ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments). Served only with ``zookeeper.connect`` set; the requests
for the controller get NOT_CONTROLLER on any other broker, as in Kafka."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsResponse,
    ElectLeadersResponse,
    ListPartitionReassignmentsResponse,
)
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
from josefk.server.security.checks import ERROR_MESSAGES

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
_ElectResult = ElectLeadersResponse.ReplicaElectionResult
_ReassignTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment


def _refused(broker: Broker, operation: AclOperation = AclOperation.CLUSTER_ACTION) -> bool:
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
    result = (_all_refused((p.topic, p.partition) for p in req.partitions) if _refused(broker)
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
    if _refused(broker):
        return {"error_code": CLUSTER_AUTHORIZATION_FAILED}
    from josefk.server.control.wire import decode_update_metadata

    result = await broker.cluster.update_metadata(decode_update_metadata(request.body))
    return {"error_code": result.error_code}


async def handle_stop_replica(broker: Broker, request: Request) -> Response:
    assert broker.cluster is not None
    from josefk.server.control.wire import decode_stop_replica

    req = decode_stop_replica(request.body)
    result = (_all_refused((p.topic, p.partition) for p in req.partitions) if _refused(broker)
              else await broker.cluster.stop_replica(req))
    return {"error_code": result.error_code, "partition_errors": [
        StopReplicaResponse.StopReplicaPartitionError(topic_name=t, partition_index=p,
                                                      error_code=e)
        for (t, p), e in result.partition_errors.items()]}


async def _on_controller(broker: Broker, work: Callable[[Controller], Awaitable[Any]]) -> Any:
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
    if _refused(broker):
        return {"error_code": CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    epoch = body.broker_epoch if request.api_version >= 2 else -1
    result = await _on_controller(
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

    if _refused(broker):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED, "topics": []}
    topics = await _on_controller(broker, work)
    if topics is None:
        return {"throttle_time_ms": 0, "error_code": NOT_CONTROLLER, "topics": []}
    return {"throttle_time_ms": 0, "error_code": NONE, "topics": topics}


async def handle_allocate_producer_ids(broker: Broker, request: Request) -> Response:
    body = request.body
    if _refused(broker):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED,
                "producer_id_start": 0, "producer_id_len": 0}
    result = await _on_controller(
        broker, lambda c: c.allocate_producer_ids(body.broker_id, body.broker_epoch))
    error, start, length = result if result is not None else (NOT_CONTROLLER, -1, -1)
    return {"throttle_time_ms": 0, "error_code": error, "producer_id_start": start,
            "producer_id_len": length}


ELECTION_TYPES = {0: "preferred", 1: "unclean"}


async def handle_elect_leaders(broker: Broker, request: Request) -> Response:
    body = request.body
    kind = ELECTION_TYPES.get(body.election_type if request.api_version >= 1 else 0,
                              "preferred")
    wanted = None if body.topic_partitions is None else [
        (t.topic, p) for t in body.topic_partitions for p in t.partitions]
    refused = _refused(broker, AclOperation.ALTER)
    results = (None if refused
               else await _on_controller(broker, lambda c: c.elect_leaders(wanted, kind)))
    if results is None:
        top = CLUSTER_AUTHORIZATION_FAILED if refused else NOT_CONTROLLER
        results = {tp: top for tp in wanted or []}
    else:
        top = NONE
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), error in sorted(results.items()):
        by_topic.setdefault(topic, []).append(_ElectResult.PartitionResult(
            partition_id=p, error_code=error, error_message=ERROR_MESSAGES.get(error)))
    return {"throttle_time_ms": 0, "error_code": top if request.api_version >= 1 else NONE,
            "replica_election_results": [
                _ElectResult(topic=t, partition_result=r) for t, r in by_topic.items()]}


async def handle_alter_partition_reassignments(broker: Broker, request: Request) -> Response:
    body = request.body
    targets = {(t.name, p.partition_index): (tuple(p.replicas) if p.replicas is not None
                                              else None)
               for t in body.topics for p in t.partitions}
    if _refused(broker, AclOperation.ALTER):
        return _reassign_answer(CLUSTER_AUTHORIZATION_FAILED,
                                dict.fromkeys(targets, CLUSTER_AUTHORIZATION_FAILED))
    results = await _on_controller(broker, lambda c: c.reassign(targets))
    if results is None:
        return {"throttle_time_ms": 0, "error_code": NOT_CONTROLLER,
                "error_message": "This is not the correct controller for this cluster.",
                "responses": []}
    return _reassign_answer(NONE, results)


def _reassign_answer(top: int, results: dict[tuple[str, int], int]) -> Response:
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), error in results.items():
        by_topic.setdefault(topic, []).append(_ReassignTopic.ReassignablePartitionResponse(
            partition_index=p, error_code=error, error_message=ERROR_MESSAGES.get(error)))
    return {"throttle_time_ms": 0, "error_code": top, "error_message": ERROR_MESSAGES.get(top),
            "responses": [_ReassignTopic(name=t, partitions=ps) for t, ps in by_topic.items()]}


async def handle_list_partition_reassignments(broker: Broker, request: Request) -> Response:
    body = request.body
    wanted = None if body.topics is None else [
        (t.name, p) for t in body.topics for p in t.partition_indexes]

    async def work(c: Controller) -> Any:
        return c.list_reassignments(wanted)

    if _refused(broker, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED,
                "error_message": ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED], "topics": []}
    ongoing = await _on_controller(broker, work)
    if ongoing is None:
        return {"throttle_time_ms": 0, "error_code": NOT_CONTROLLER,
                "error_message": "This is not the correct controller for this cluster.",
                "topics": []}
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append(_ListTopic.OngoingPartitionReassignment(
            partition_index=p, replicas=list(replicas), adding_replicas=list(adding),
            removing_replicas=list(removing)))
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
            "topics": [_ListTopic(name=t, partitions=ps) for t, ps in by_topic.items()]}


HANDLERS = {
    ApiKey.LeaderAndIsr: handle_leader_and_isr,
    ApiKey.UpdateMetadata: handle_update_metadata,
    ApiKey.StopReplica: handle_stop_replica,
    ApiKey.ControlledShutdown: handle_controlled_shutdown,
    ApiKey.AlterPartition: handle_alter_partition,
    ApiKey.AllocateProducerIds: handle_allocate_producer_ids,
    ApiKey.ElectLeaders: handle_elect_leaders,
    ApiKey.AlterPartitionReassignments: handle_alter_partition_reassignments,
    ApiKey.ListPartitionReassignments: handle_list_partition_reassignments,
}
