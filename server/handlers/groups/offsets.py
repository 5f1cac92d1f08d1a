"""Committed offsets: OffsetCommit, OffsetFetch and OffsetDelete, answered by the group
coordinator. Partitions of topics the cluster does not know are refused here, as in Kafka's
request layer, before the coordinator sees the request.

From v10 OffsetCommit and OffsetFetch name topics by id (Kafka 4.1+): ids are turned into
names here, an unknown one answered UNKNOWN_TOPIC_ID for all its partitions, and the
answers name their topics by id again."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

from josefk.cluster.coordinator.group.api import Error, FetchedOffset, PartitionCommit
from josefk.cluster.security.acls import AclOperation as Op
from josefk.cluster.security.acls import ResourceType as Rt
from josefk.protocol.error_codes import (
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response

if TYPE_CHECKING:
    from josefk.server.broker import Broker

CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
CommitPartition = CommitTopic.OffsetCommitResponsePartition
FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic  # v1-7
FetchPartition = FetchTopic.OffsetFetchResponsePartition
FetchGroup = OffsetFetchResponse.OffsetFetchResponseGroup  # v8+
FetchGroupTopic = FetchGroup.OffsetFetchResponseTopics
FetchGroupPartition = FetchGroupTopic.OffsetFetchResponsePartitions
DeleteTopic = OffsetDeleteResponse.OffsetDeleteResponseTopic
DeletePartition = DeleteTopic.OffsetDeleteResponsePartition


TOPIC_IDS_SINCE = 10
ZERO_UUID = uuid.UUID(int=0)
# The stand-in name of a topic given by an id nobody knows (no topic name starts so).
_UNKNOWN_ID = "\0"


def _name_of(broker: Broker, topic_id: uuid.UUID | None) -> str:
    topic_id = topic_id or ZERO_UUID
    topic = broker.store.get_by_id(topic_id) if topic_id != ZERO_UUID else None
    return topic.name if topic is not None else f"{_UNKNOWN_ID}{topic_id}"


def _id_of(broker: Broker, name: str) -> uuid.UUID:
    if name.startswith(_UNKNOWN_ID):
        return uuid.UUID(name[1:])
    topic = broker.store.get(name)
    return topic.topic_id if topic is not None else ZERO_UUID


def _known_partitions(broker: Broker, topic: str, partitions: Sequence[int]
                      ) -> tuple[list[int], list[int]]:
    """(partitions that exist, those that do not)."""
    known = broker.store.get(topic)
    if known is None:
        return [], list(partitions)
    return ([p for p in partitions if p in known.partitions],
            [p for p in partitions if p not in known.partitions])


def _response_order(refused: dict[str, list[int]], valid: Sequence[tuple[str, Sequence[Any]]]
                    ) -> dict[str, list[int]]:
    """Topic -> partitions in Kafka's response order: what the request layer refused
    first (topics in request order), then what the coordinator answered."""
    order = {topic: list(partitions) for topic, partitions in refused.items() if partitions}
    for topic, partitions in valid:
        order.setdefault(topic, []).extend(
            p if isinstance(p, int) else p.partition for p in partitions)
    return order


# --- OffsetCommit ------------------------------------------------------------------------------


async def handle_offset_commit(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    by_id = version >= TOPIC_IDS_SINCE
    if by_id:
        for t in body.topics:
            t.name = _name_of(broker, t.topic_id)
    if not broker.authorizer.allowed(Op.READ, Rt.GROUP, body.group_id):
        return {"throttle_time_ms": 0, "topics": [  # OffsetCommitRequest.getErrorResponse
            _commit_topic(broker, t.name, by_id, [
                CommitPartition(partition_index=p.partition_index,
                                error_code=GROUP_AUTHORIZATION_FAILED) for p in t.partitions])
            for t in body.topics]}
    denied = broker.authorizer.denied_names(
        Op.READ, Rt.TOPIC, (t.name for t in body.topics if not t.name.startswith(_UNKNOWN_ID)))
    errors: dict[tuple[str, int], int] = {}
    refused: dict[str, list[int]] = {}
    valid: list[tuple[str, list[PartitionCommit]]] = []
    for topic in body.topics:
        by_index = {p.partition_index: p for p in topic.partitions}
        if topic.name.startswith(_UNKNOWN_ID):
            refused.setdefault(topic.name, []).extend(by_index)
            errors.update(((topic.name, p), UNKNOWN_TOPIC_ID) for p in by_index)
            continue
        if topic.name in denied:
            refused.setdefault(topic.name, []).extend(by_index)
            errors.update(((topic.name, p), TOPIC_AUTHORIZATION_FAILED) for p in by_index)
            continue
        known, unknown = _known_partitions(broker, topic.name, list(by_index))
        refused.setdefault(topic.name, []).extend(unknown)
        errors.update(((topic.name, p), Error.UNKNOWN_TOPIC_OR_PARTITION) for p in unknown)
        if known:
            valid.append((topic.name, [PartitionCommit(
                p, by_index[p].committed_offset,
                by_index[p].committed_leader_epoch if version >= 6 else -1,
                by_index[p].committed_metadata) for p in known]))
    if valid:
        committed = broker.group_coordinator.commit_offsets(
            body.group_id, body.member_id,
            body.group_instance_id if version >= 7 else None,
            body.generation_id_or_member_epoch,
            body.retention_time_ms if 2 <= version <= 4 else -1, valid, version)
        if (any(e == Error.NONE for e in committed.values())
                and not await broker.group_write_replicated(body.group_id)):
            # Not replicated in time: Kafka answers REQUEST_TIMED_OUT this way.
            committed = {k: Error.COORDINATOR_NOT_AVAILABLE if e == Error.NONE else e
                         for k, e in committed.items()}
        errors.update(committed)
    return {"throttle_time_ms": 0, "topics": [
        _commit_topic(broker, name, by_id, [
            CommitPartition(partition_index=p, error_code=errors[(name, p)]) for p in partitions])
        for name, partitions in _response_order(refused, valid).items()]}


def _commit_topic(broker: Broker, name: str, by_id: bool, partitions: list[Any]) -> Any:
    if by_id:
        return CommitTopic(name="", topic_id=_id_of(broker, name), partitions=partitions)
    return CommitTopic(name=name, partitions=partitions)


# --- OffsetFetch -------------------------------------------------------------------------------


async def handle_offset_fetch(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    stable = version >= 7 and body.require_stable
    if version >= 8:
        groups = []
        by_id = version >= TOPIC_IDS_SINCE
        for group in body.groups:
            topics = None if group.topics is None else [
                (_name_of(broker, t.topic_id) if by_id else t.name, list(t.partition_indexes))
                for t in group.topics]
            unknown = [(n, ps) for n, ps in topics or () if n.startswith(_UNKNOWN_ID)]
            if unknown:
                topics = [(n, ps) for n, ps in topics or () if not n.startswith(_UNKNOWN_ID)]
            error, fetched = await _visible_offsets(broker, group.group_id, topics, stable)
            if error == 0 and unknown:
                fetched = list(fetched) + [
                    (n, [FetchedOffset(p, error=cast(Error, UNKNOWN_TOPIC_ID)) for p in ps])
                    for n, ps in unknown]
            if error == 0 and version >= 9:
                # A consumer group's member fetches at its epoch (KIP-848).
                error = broker.group_coordinator.validate_offset_fetch(
                    group.group_id, group.member_id, group.member_epoch)
                fetched = fetched if error == 0 else []
            groups.append(FetchGroup(group_id=group.group_id, error_code=error, topics=[
                _fetch_topic(broker, name, by_id, offsets) for name, offsets in fetched
                if not by_id or _id_of(broker, name) != ZERO_UUID]))
        return {"throttle_time_ms": 0, "groups": groups}
    topics = None if body.topics is None else \
        [(t.name, list(t.partition_indexes)) for t in body.topics]
    error, fetched = await _visible_offsets(broker, body.group_id, topics, stable)
    return {"throttle_time_ms": 0, "error_code": error, "topics": [
        FetchTopic(name=name, partitions=[FetchPartition(**_partition(o)) for o in offsets])
        for name, offsets in fetched]}


def _fetch_topic(broker: Broker, name: str, by_id: bool, offsets: list[FetchedOffset]) -> Any:
    partitions = [FetchGroupPartition(**_partition(o)) for o in offsets]
    if by_id:
        return FetchGroupTopic(name="", topic_id=_id_of(broker, name), partitions=partitions)
    return FetchGroupTopic(name=name, partitions=partitions)


async def _visible_offsets(broker: Broker, group_id: str,
                           topics: list[tuple[str, list[int]]] | None, stable: bool
                           ) -> tuple[int, list[tuple[str, list[FetchedOffset]]]]:
    """The group's offsets once its last writes are replicated: a commit is shown only
    when it is committed, as Kafka shows it only after its append succeeded (a commit
    answered with an error must not be read back, then lost with its leader)."""
    error, fetched = _fetch_offsets(broker, group_id, topics, stable)
    if error == 0 and not await broker.group_write_replicated(group_id):
        return Error.COORDINATOR_NOT_AVAILABLE, []
    if error == 0:
        error, fetched = _fetch_offsets(broker, group_id, topics, stable)  # as of now
    return error, fetched


def _fetch_offsets(broker: Broker, group_id: str, topics: list[tuple[str, list[int]]] | None,
                   stable: bool) -> tuple[int, list[tuple[str, list[FetchedOffset]]]]:
    """A group's committed offsets as the client may see them: DESCRIBE on the group, and
    only topics it may DESCRIBE (those it named get TOPIC_AUTHORIZATION_FAILED, last)."""
    authorizer = broker.authorizer
    if not authorizer.allowed(Op.DESCRIBE, Rt.GROUP, group_id):
        return GROUP_AUTHORIZATION_FAILED, []
    if not authorizer.enabled:
        return broker.group_coordinator.fetch_offsets(group_id, topics, stable)
    if topics is None:
        error, fetched = broker.group_coordinator.fetch_offsets(group_id, None, stable)
        denied = authorizer.denied_names(Op.DESCRIBE, Rt.TOPIC, (n for n, _ in fetched))
        return error, [(n, offsets) for n, offsets in fetched if n not in denied]
    denied = authorizer.denied_names(Op.DESCRIBE, Rt.TOPIC, (n for n, _ in topics))
    error, fetched = broker.group_coordinator.fetch_offsets(
        group_id, [(n, ps) for n, ps in topics if n not in denied], stable)
    if error:
        return error, fetched
    refused = cast(Error, TOPIC_AUTHORIZATION_FAILED)  # a code the coordinator never answers
    return error, list(fetched) + [(n, [FetchedOffset(p, error=refused) for p in ps])
                                   for n, ps in topics if n in denied]


def _partition(o: FetchedOffset) -> dict[str, Any]:
    return {"partition_index": o.partition, "committed_offset": o.offset,
            "committed_leader_epoch": o.leader_epoch, "metadata": o.metadata,
            "error_code": o.error}


# --- OffsetDelete ------------------------------------------------------------------------------


async def handle_offset_delete(broker: Broker, request: Request) -> Response:
    body = request.body
    if not broker.authorizer.allowed(Op.DELETE, Rt.GROUP, body.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_AUTHORIZATION_FAILED, "topics": []}
    denied = broker.authorizer.denied_names(Op.READ, Rt.TOPIC, (t.name for t in body.topics))
    errors: dict[tuple[str, int], int] = {}
    refused: dict[str, list[int]] = {}
    valid: list[tuple[str, list[int]]] = []
    for topic in body.topics:
        indexes = list(dict.fromkeys(p.partition_index for p in topic.partitions))
        if topic.name in denied:
            refused.setdefault(topic.name, []).extend(indexes)
            errors.update(((topic.name, p), TOPIC_AUTHORIZATION_FAILED) for p in indexes)
            continue
        known, unknown = _known_partitions(broker, topic.name, indexes)
        refused.setdefault(topic.name, []).extend(unknown)
        errors.update(((topic.name, p), Error.UNKNOWN_TOPIC_OR_PARTITION) for p in unknown)
        if known:
            valid.append((topic.name, known))
    if valid:
        error, results = broker.group_coordinator.delete_offsets(body.group_id, valid)
        if error is not Error.NONE:
            return {"throttle_time_ms": 0, "error_code": error, "topics": []}
        for name, partitions in results:
            errors.update(((name, p), e) for p, e in partitions)
    return {"throttle_time_ms": 0, "error_code": 0, "topics": [
        DeleteTopic(name=name, partitions=[
            DeletePartition(partition_index=p, error_code=errors[(name, p)]) for p in partitions])
        for name, partitions in _response_order(refused, valid).items()]}


HANDLERS = {
    ApiKey.OffsetCommit: handle_offset_commit,
    ApiKey.OffsetFetch: handle_offset_fetch,
    ApiKey.OffsetDelete: handle_offset_delete,
}
