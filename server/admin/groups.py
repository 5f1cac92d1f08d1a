"""Consumer groups through their coordinator: ListGroups, DescribeGroups (classic groups)
or ConsumerGroupDescribe (KIP-848 groups), OffsetFetch and OffsetCommit, with lag against
ListOffsets, as ``kafka-consumer-groups.sh`` does."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest

from josefk.protocol.schemas.consumer_groups import ConsumerGroupDescribeRequest
from josefk.server.admin.brokers import Brokers, check
from josefk.server.admin.errors import AdminError
from josefk.server.admin.offsets import EARLIEST, LATEST, TopicPartition, list_offsets
from josefk.server.admin.views import GroupListing, GroupView, MemberView, PartitionLag

FIND_COORDINATOR_VERSION = 3
LIST_GROUPS_VERSION = 4
DESCRIBE_GROUPS_VERSION = 5
OFFSET_FETCH_VERSION = 7
OFFSET_COMMIT_VERSION = 8
API_VERSIONS_VERSION = 3
CONSUMER_GROUP_DESCRIBE = 69
INACTIVE_STATES = ("Empty", "Dead")
GROUP_ID_NOT_FOUND = 69

_CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_CommitPartition = _CommitTopic.OffsetCommitRequestPartition

ResetTarget = str | int | datetime.datetime


async def list_groups(brokers: Brokers) -> list[GroupListing]:
    """ListGroups on every broker: each lists the groups it coordinates."""
    await brokers.metadata([])
    found: dict[str, GroupListing] = {}
    for broker_id in sorted(brokers.endpoints):
        response = await brokers.retrying(lambda b=broker_id: _list_groups_of(brokers, b))
        for g in response.groups:
            found[g.group_id] = GroupListing(g.group_id, g.protocol_type, g.group_state)
    return [found[k] for k in sorted(found)]


async def _list_groups_of(brokers: Brokers, broker_id: int) -> Any:
    response = await brokers.send(broker_id, ListGroupsRequest(states_filter=[]),
                                  LIST_GROUPS_VERSION)
    check(response.error_code, f"list groups on broker {broker_id}")
    return response


async def describe_group(brokers: Brokers, group_id: str) -> GroupView:
    """State, members and per-partition lag; GROUP_ID_NOT_FOUND for no such group.

    DescribeGroups knows classic groups only: for a KIP-848 group it answers Dead (below
    v6), so the coordinator is then asked with ConsumerGroupDescribe where it serves it.
    """
    coordinator, described = await _described(brokers, group_id)
    if described.group_state != "Dead":
        members = [_member_view(m, described.protocol_type) for m in described.members]
        state, protocol_type, protocol = (described.group_state, described.protocol_type,
                                          described.protocol_data)
    else:
        consumer_group = await _consumer_group(brokers, coordinator, group_id)
        if consumer_group is None:
            raise AdminError("GROUP_ID_NOT_FOUND",
                             f"consumer group {group_id!r} does not exist")
        members = [_consumer_member_view(m) for m in consumer_group.members]
        state, protocol_type, protocol = (consumer_group.group_state, "consumer",
                                          consumer_group.assignor_name)
    committed = await _committed(brokers, group_id)
    owner = {tp: m.member_id for m in members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owner))
    log_end = await list_offsets(brokers, partitions, LATEST)
    offsets = [_lag(tp, committed.get(tp), log_end.get(tp), owner.get(tp)) for tp in partitions]
    return GroupView(group_id, state, protocol_type, protocol, coordinator, members, offsets)


async def _consumer_group(brokers: Brokers, coordinator: int, group_id: str) -> Any | None:
    """The group's ConsumerGroupDescribe entry; None when it is no consumer group or the
    coordinator does not serve the api (a ZooKeeper-mode Kafka closes the connection on
    an api it does not list, so ApiVersions is asked first)."""
    versions = await brokers.send(coordinator, ApiVersionsRequest(
        client_software_name="josefk", client_software_version="1"), API_VERSIONS_VERSION)
    if not any(a.api_key == CONSUMER_GROUP_DESCRIBE for a in versions.api_keys):
        return None
    request = ConsumerGroupDescribeRequest[0](group_ids=[group_id],
                                              include_authorized_operations=False)

    def errors(response: Any) -> None:
        group = response.groups[0]
        if group.error_code != GROUP_ID_NOT_FOUND:
            check(group.error_code, f"describe group {group_id!r}", group.error_message)

    group = (await _to_coordinator(brokers, group_id, request, 0, errors)).groups[0]
    return None if group.error_code == GROUP_ID_NOT_FOUND else group


async def reset_offsets(brokers: Brokers, group_id: str, topic: str, to: ResetTarget,
                        execute: bool) -> list[PartitionLag]:
    """Kafka's ``--reset-offsets`` for one topic: only while the group has no members."""
    _, described = await _described(brokers, group_id)
    if described.group_state not in INACTIVE_STATES:
        raise AdminError("NON_EMPTY_GROUP",
                         f"offsets can only be reset while group {group_id!r} is inactive, "
                         f"but it is {described.group_state}")
    partitions = await _partitions_of(brokers, topic)
    latest = await list_offsets(brokers, partitions, LATEST)
    targets = await _targets(brokers, partitions, to, latest)
    if execute:
        await _commit(brokers, group_id, topic, targets)
    return [_lag(tp, targets[tp], latest.get(tp), None) for tp in partitions]


async def _targets(brokers: Brokers, partitions: list[TopicPartition], to: ResetTarget,
                   latest: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    missing = [tp for tp in partitions if tp not in latest]
    if missing:
        raise AdminError("LEADER_NOT_AVAILABLE", f"no leader for {_names(missing)}")
    if to == "latest":
        return dict(latest)
    earliest = await list_offsets(brokers, partitions, EARLIEST)
    if to == "earliest":
        return earliest
    if isinstance(to, bool) or not isinstance(to, int | datetime.datetime):
        raise AdminError("INVALID_REQUEST", f"cannot reset offsets to {to!r}")
    if isinstance(to, int):
        # Kafka's tool keeps an offset outside the log within it.
        return {tp: min(max(to, earliest[tp]), latest[tp]) for tp in partitions}
    at = await list_offsets(brokers, partitions, _millis(to))
    return {tp: at[tp] if at.get(tp, -1) >= 0 else latest[tp] for tp in partitions}


def _millis(when: datetime.datetime) -> int:
    if when.tzinfo is None:
        when = when.astimezone()  # a naive time is local, as Kafka's tool reads it
    return int(when.timestamp() * 1000)


async def _commit(brokers: Brokers, group_id: str, topic: str,
                  targets: dict[TopicPartition, int]) -> None:
    request = OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None,
        topics=[_CommitTopic(name=topic, partitions=[
            _CommitPartition(partition_index=p, committed_offset=o, committed_metadata="")
            for (_, p), o in sorted(targets.items())])])

    def errors(response: Any) -> None:
        for t in response.topics:
            for p in t.partitions:
                check(p.error_code, f"commit offset of {t.name}-{p.partition_index}")

    await _to_coordinator(brokers, group_id, request, OFFSET_COMMIT_VERSION, errors)


async def _partitions_of(brokers: Brokers, topic: str) -> list[TopicPartition]:
    metadata = await brokers.metadata([topic])
    found = metadata.topics[0]
    check(found.error_code, f"topic {topic!r}")
    return sorted((topic, p.partition_index) for p in found.partitions)


async def _described(brokers: Brokers, group_id: str) -> tuple[int, Any]:
    """The group's coordinator and its DescribeGroups entry."""
    request = DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False)

    def errors(response: Any) -> None:
        group = response.groups[0]
        check(group.error_code, f"describe group {group_id!r}")

    coordinator, response = await _to_coordinator(
        brokers, group_id, request, DESCRIBE_GROUPS_VERSION, errors, with_coordinator=True)
    return coordinator, response.groups[0]


async def _committed(brokers: Brokers, group_id: str) -> dict[TopicPartition, int]:
    request = OffsetFetchRequest(group_id=group_id, topics=None, require_stable=False)

    def errors(response: Any) -> None:
        check(response.error_code, f"fetch offsets of group {group_id!r}")

    response = await _to_coordinator(brokers, group_id, request, OFFSET_FETCH_VERSION, errors)
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics
            for p in t.partitions if not p.error_code and p.committed_offset >= 0}


async def _to_coordinator(brokers: Brokers, group_id: str, request: Any, version: int,
                          errors: Callable[[Any], None], with_coordinator: bool = False) -> Any:
    """``request`` to the group's coordinator, found anew on each retry."""

    async def attempt() -> Any:
        coordinator = await _find_coordinator(brokers, group_id)
        response = await brokers.send(coordinator, request, version)
        errors(response)
        return (coordinator, response) if with_coordinator else response

    return await brokers.retrying(attempt)


async def _find_coordinator(brokers: Brokers, group_id: str) -> int:
    response = await brokers.send_any(FindCoordinatorRequest(key=group_id, key_type=0),
                                      FIND_COORDINATOR_VERSION)
    check(response.error_code, f"find the coordinator of group {group_id!r}",
          response.error_message)
    if response.node_id not in brokers.endpoints:
        brokers.endpoints[response.node_id] = (response.host, response.port)
    return int(response.node_id)


def _member_view(member: Any, protocol_type: str) -> MemberView:
    assignment: list[tuple[str, int]] = []
    if protocol_type == "consumer" and member.member_assignment:
        decoded = ConsumerProtocolAssignment.decode(bytes(member.member_assignment))
        assignment = sorted((t, p) for t, ps in decoded.assigned_partitions for p in ps)
    return MemberView(member.member_id, member.client_id, member.client_host.lstrip("/"),
                      assignment)


def _consumer_member_view(member: Any) -> MemberView:
    assignment = sorted((t.topic_name, p) for t in member.assignment.topic_partitions
                        for p in t.partitions)
    return MemberView(member.member_id, member.client_id, member.client_host.lstrip("/"),
                      assignment)


def _lag(tp: TopicPartition, committed: int | None, log_end: int | None,
         member_id: str | None) -> PartitionLag:
    lag = None if committed is None or log_end is None else max(log_end - committed, 0)
    return PartitionLag(tp[0], tp[1], committed, log_end, lag, member_id)


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in partitions)
