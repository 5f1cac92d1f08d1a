"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments: answered by
the active controller in a cluster (NOT_CONTROLLER on any other broker, as in Kafka 3.9),
and by a single broker itself, as a one-node Kafka 4 (KRaft's ReplicationControlManager)
answers them: every partition is led by its only, preferred replica, so no election is
needed, the only reassignment is to that same replica, and none is ever in progress."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka.errors import InvalidReplicationFactorError
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsResponse,
    ElectLeadersResponse,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.api_key import ApiKey

from josefk.cluster.security.acls import AclOperation
from josefk.protocol.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    ELECTION_NOT_NEEDED,
    INVALID_REPLICA_ASSIGNMENT,
    NO_REASSIGNMENT_IN_PROGRESS,
    NONE,
    NOT_CONTROLLER,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.server.handlers import Response
from josefk.server.handlers.controller_apis import on_controller, refused
from josefk.server.security.checks import ERROR_MESSAGES

if TYPE_CHECKING:
    from josefk.cluster.controller.controller import Controller
    from josefk.cluster.metadata.store import MetadataStore
    from josefk.protocol.messages import Request
    from josefk.server.broker import Broker

TP = tuple[str, int]
_ElectResult = ElectLeadersResponse.ReplicaElectionResult
_ReassignTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment

ELECTION_TYPES = {0: "preferred", 1: "unclean"}
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
# Kafka's Errors messages (ApiError(Errors) carries the error's default message).
_DEFAULT_MESSAGES = {
    ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
}


# --- the single broker's answers (pure) -------------------------------------------------------


def elect_one_broker(store: MetadataStore, wanted: list[TP] | None
                     ) -> dict[str, list[tuple[int, int, str | None]]]:
    """Topic -> [(partition, error, message)]: KRaft's electLeaders where the one broker
    leads everything. Asked for every partition (None), each topic is listed without the
    partitions that need no election, which is all of them."""
    if wanted is None:
        return {topic.name: [] for topic in store.topics()}
    results: dict[str, list[tuple[int, int, str | None]]] = {}
    for name, p in wanted:
        topic = store.get(name)
        if topic is None:
            answer = (p, UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
        elif p not in topic.partitions:
            answer = (p, UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{p}")
        else:
            answer = (p, ELECTION_NOT_NEEDED, _DEFAULT_MESSAGES[ELECTION_NOT_NEEDED])
        results.setdefault(name, []).append(answer)
    return results


def reassign_one_broker(store: MetadataStore, node_id: int,
                        targets: Mapping[TP, tuple[int, ...] | None]
                        ) -> dict[TP, tuple[int, str | None]]:
    """Partition -> (error, message): KRaft's alterPartitionReassignment on one node. A
    target of the current replica changes nothing; none can be cancelled."""
    results: dict[TP, tuple[int, str | None]] = {}
    for (name, p), target in targets.items():
        topic = store.get(name)
        if topic is None:
            results[(name, p)] = (UNKNOWN_TOPIC_OR_PARTITION,
                                  f"Unable to find a topic named {name}.")
        elif p not in topic.partitions:
            results[(name, p)] = (UNKNOWN_TOPIC_OR_PARTITION,
                                  f"Unable to find partition {name}:{p}.")
        elif target is None:
            results[(name, p)] = (NO_REASSIGNMENT_IN_PROGRESS,
                                  _DEFAULT_MESSAGES[NO_REASSIGNMENT_IN_PROGRESS])
        else:
            error = _invalid_assignment(target, {node_id})
            results[(name, p)] = (NONE, None) if error is None else (
                INVALID_REPLICA_ASSIGNMENT, error)
    return results


def _invalid_assignment(replicas: Iterable[int], registered: set[int]) -> str | None:
    """KRaft's validateManualPartitionAssignment: why ``replicas`` cannot be, or None."""
    ids = sorted(replicas)
    if not ids:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in ids:
        if broker_id not in registered:
            return (f"The manual partition assignment includes broker {broker_id}, but no "
                    "such broker is registered.")
        if broker_id == previous:
            return (f"The manual partition assignment includes the broker {broker_id} more "
                    "than once.")
        previous = broker_id
    return None


# --- handlers -----------------------------------------------------------------------------------


async def handle_elect_leaders(broker: Broker, request: Request) -> Response:
    body = request.body
    kind = ELECTION_TYPES.get(body.election_type if request.api_version >= 1 else 0,
                              "preferred")
    wanted = None if body.topic_partitions is None else [
        (t.topic, p) for t in body.topic_partitions for p in t.partitions]
    top = NONE
    by_topic: dict[str, list[tuple[int, int, str | None]]]
    if refused(broker, AclOperation.ALTER):
        top = CLUSTER_AUTHORIZATION_FAILED
        by_topic = _grouped(dict.fromkeys(wanted or [], top))
    elif broker.cluster is None:
        by_topic = elect_one_broker(broker.store, wanted)
    else:
        results = await on_controller(broker, lambda c: c.elect_leaders(wanted, kind))
        if results is None:
            top = NOT_CONTROLLER
            results = dict.fromkeys(wanted or [], top)
        by_topic = _grouped(results)
    return {"throttle_time_ms": 0, "error_code": top if request.api_version >= 1 else NONE,
            "replica_election_results": [
                _ElectResult(topic=t, partition_result=[
                    _ElectResult.PartitionResult(partition_id=p, error_code=e, error_message=m)
                    for p, e, m in results])
                for t, results in by_topic.items()]}


def _grouped(results: Mapping[TP, int]) -> dict[str, list[tuple[int, int, str | None]]]:
    by_topic: dict[str, list[tuple[int, int, str | None]]] = {}
    for (topic, p), error in sorted(results.items()):
        by_topic.setdefault(topic, []).append((p, error, ERROR_MESSAGES.get(error)))
    return by_topic


async def handle_alter_partition_reassignments(broker: Broker, request: Request) -> Response:
    body = request.body
    # v1 (KIP-860): a request may forbid changing a partition's replication factor.
    allow_rf_change = body.allow_replication_factor_change if request.api_version >= 1 else True
    targets = {(t.name, p.partition_index): (tuple(p.replicas) if p.replicas is not None
                                              else None)
               for t in body.topics for p in t.partitions}
    if refused(broker, AclOperation.ALTER):
        return _reassign_answer(CLUSTER_AUTHORIZATION_FAILED, {
            tp: (CLUSTER_AUTHORIZATION_FAILED, ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED])
            for tp in targets}, allow_rf_change)
    if broker.cluster is None:
        return _reassign_answer(NONE, reassign_one_broker(broker.store, broker.node_id,
                                                          targets), allow_rf_change)
    changing = {} if allow_rf_change else rf_changes(broker.store, targets)
    wanted = {tp: target for tp, target in targets.items() if tp not in changing}
    results = await on_controller(broker, lambda c: c.reassign(wanted))
    if results is None:
        return {"throttle_time_ms": 0, "error_code": NOT_CONTROLLER,
                "error_message": NOT_CONTROLLER_MESSAGE, "responses": []}
    answers = {tp: (e, ERROR_MESSAGES.get(e)) for tp, e in results.items()} | changing
    return _reassign_answer(NONE, {tp: answers[tp] for tp in targets}, allow_rf_change)


def rf_changes(store: MetadataStore, targets: Mapping[TP, tuple[int, ...] | None]
               ) -> dict[TP, tuple[int, str | None]]:
    """The targets that would change their partition's replication factor, refused with
    INVALID_REPLICATION_FACTOR (AlterPartitionReassignments v1 without
    allow_replication_factor_change)."""
    refused: dict[TP, tuple[int, str | None]] = {}
    for (name, p), target in targets.items():
        topic = store.get(name)
        current = topic.partitions.get(p) if topic is not None else None
        if target is not None and current is not None and len(target) != len(current):
            refused[(name, p)] = (InvalidReplicationFactorError.errno,
                                  f"The replication factor is changed from {len(current)} "
                                  f"to {len(target)}")
    return refused


def _reassign_answer(top: int, results: Mapping[TP, tuple[int, str | None]],
                     allow_rf_change: bool = True) -> Response:
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), (error, message) in results.items():
        by_topic.setdefault(topic, []).append(_ReassignTopic.ReassignablePartitionResponse(
            partition_index=p, error_code=error, error_message=message))
    return {"throttle_time_ms": 0, "error_code": top, "error_message": ERROR_MESSAGES.get(top),
            "allow_replication_factor_change": allow_rf_change,
            "responses": [_ReassignTopic(name=t, partitions=ps) for t, ps in by_topic.items()]}


async def handle_list_partition_reassignments(broker: Broker, request: Request) -> Response:
    body = request.body
    wanted = None if body.topics is None else [
        (t.name, p) for t in body.topics for p in t.partition_indexes]

    async def work(c: Controller) -> Any:
        return c.list_reassignments(wanted)

    if refused(broker, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_AUTHORIZATION_FAILED,
                "error_message": ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED], "topics": []}
    # A single broker never has a reassignment in progress.
    ongoing = {} if broker.cluster is None else await on_controller(broker, work)
    if ongoing is None:
        return {"throttle_time_ms": 0, "error_code": NOT_CONTROLLER,
                "error_message": NOT_CONTROLLER_MESSAGE, "topics": []}
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append(_ListTopic.OngoingPartitionReassignment(
            partition_index=p, replicas=list(replicas), adding_replicas=list(adding),
            removing_replicas=list(removing)))
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
            "topics": [_ListTopic(name=t, partitions=ps) for t, ps in by_topic.items()]}


HANDLERS = {
    ApiKey.ElectLeaders: handle_elect_leaders,
    ApiKey.AlterPartitionReassignments: handle_alter_partition_reassignments,
    ApiKey.ListPartitionReassignments: handle_list_partition_reassignments,
}
