"""TxnOffsetCommit: a transactional producer's consumed offsets, committed with its
transaction (``send_offsets_to_transaction``). The group coordinator keeps them pending
until the transaction's marker reaches the group's ``__consumer_offsets`` partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import TxnOffsetCommitResponse

from josefk.cluster.coordinator.group.api import Error
from josefk.cluster.coordinator.records import OFFSETS_TOPIC
from josefk.cluster.security.acls import AclOperation as Op
from josefk.cluster.security.acls import ResourceType as Rt
from josefk.protocol import error_codes as ec
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.transactions.verification import (
    ADD_TXN_OFFSET_COMMIT_VERSION,
    txn_offset_commit_error,
)

if TYPE_CHECKING:
    from josefk.server.broker import Broker

TopicResp = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResp = TopicResp.TxnOffsetCommitResponsePartition


async def _verify(broker: Broker, body: Any, version: int) -> int:
    """KIP-890 part 1, as Kafka's group coordinator does it: the group's
    ``__consumer_offsets`` partition must be in the producer's transaction (AddOffsetsToTxn)
    unless the producer already has a transaction open there."""
    if not body.group_id or not body.transactional_id:
        return ec.NONE  # txn_commit_offsets answers
    partition = broker.partition(OFFSETS_TOPIC,
                                 broker.group_coordinator.partition_for(body.group_id))
    if partition is None or not partition.is_leader:
        return ec.NONE  # txn_commit_offsets answers NOT_COORDINATOR
    verifier = broker.txn_verifier
    code, guard = await verifier.verify_one(body.transactional_id, body.producer_id,
                                            body.producer_epoch, partition,
                                            add=version >= ADD_TXN_OFFSET_COMMIT_VERSION)
    if guard is not None:
        holds = verifier.holds(partition, body.producer_id, guard)
        verifier.release(partition, body.producer_id, guard)
        if not holds:
            code = ec.INVALID_TXN_STATE  # a marker ended the transaction meanwhile
    return txn_offset_commit_error(code, version)


def _refusal(broker: Broker, body: Any) -> int | None:
    """WRITE on the transactional id, then READ on the group."""
    authorizer = broker.authorizer
    if not authorizer.allowed(Op.WRITE, Rt.TRANSACTIONAL_ID, body.transactional_id):
        return ec.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not authorizer.allowed(Op.READ, Rt.GROUP, body.group_id):
        return ec.GROUP_AUTHORIZATION_FAILED
    return None


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    refusal = _refusal(broker, body)
    if refusal is not None:  # TxnOffsetCommitRequest.getErrorResponse
        return {"throttle_time_ms": 0, "topics": [
            TopicResp(name=t.name, partitions=[
                PartitionResp(partition_index=p.partition_index, error_code=refusal)
                for p in t.partitions]) for t in body.topics]}
    denied = broker.authorizer.denied_names(Op.READ, Rt.TOPIC, (t.name for t in body.topics))
    errors: dict[tuple[str, int], int] = {}
    valid: list[tuple[str, list[tuple[int, int, int, str | None]]]] = []
    for topic in body.topics:
        known = broker.store.get(topic.name)
        commits = []
        for p in topic.partitions:
            if topic.name in denied:
                errors[(topic.name, p.partition_index)] = ec.TOPIC_AUTHORIZATION_FAILED
            elif known is None or p.partition_index not in known.partitions:
                errors[(topic.name, p.partition_index)] = Error.UNKNOWN_TOPIC_OR_PARTITION
            else:
                commits.append((p.partition_index, p.committed_offset,
                                p.committed_leader_epoch if version >= 2 else -1,
                                p.committed_metadata))
        if commits:
            valid.append((topic.name, commits))
    if valid:
        coordinator = broker.group_coordinator
        error = await _verify(broker, body, version)
        if error == ec.NONE:
            error = coordinator.txn_commit_offsets(
                body.group_id, body.producer_id, body.producer_epoch,
                body.member_id if version >= 3 else "",
                body.group_instance_id if version >= 3 else None,
                body.generation_id if version >= 3 else -1, valid)
        if error == Error.NONE and not await broker.group_write_replicated(body.group_id):
            error = Error.COORDINATOR_NOT_AVAILABLE
        oversized = coordinator.oversized_metadata(valid) if error == Error.NONE else set()
        for name, commits in valid:
            errors.update(((name, p), Error.OFFSET_METADATA_TOO_LARGE if (name, p) in oversized
                           else error) for p, _, _, _ in commits)
    by_topic: dict[str, list[PartitionResp]] = {}
    for (name, p), error in errors.items():
        by_topic.setdefault(name, []).append(PartitionResp(partition_index=p, error_code=error))
    return {"throttle_time_ms": 0, "topics": [
        TopicResp(name=name, partitions=parts) for name, parts in by_topic.items()]}


HANDLERS = {ApiKey.TxnOffsetCommit: handle}
