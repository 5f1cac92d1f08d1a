"""Consumer groups through their coordinator: ListGroups, DescribeGroups, OffsetFetch
and OffsetCommit, with lag against ListOffsets, as ``kafka-consumer-groups.sh`` does."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.protocol.metadata import FindCoordinatorRequest

from josefk.server.admin.brokers import Brokers, check
from josefk.server.admin.errors import AdminError
from josefk.server.admin.offsets import EARLIEST, LATEST, TopicPartition, list_offsets
from josefk.server.admin.views import GroupListing, GroupView, MemberView, PartitionLag

FIND_COORDINATOR_VERSION = 3
LIST_GROUPS_VERSION = 4
DESCRIBE_GROUPS_VERSION = 5
OFFSET_FETCH_VERSION = 7
OFFSET_COMMIT_VERSION = 8
INACTIVE_STATES = ("Empty", "Dead")

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
    """State, members and per-partition lag; GROUP_ID_NOT_FOUND for no such group."""
    coordinator, described = await _described(brokers, group_id)
    if described.group_state == "Dead":
        raise AdminError("GROUP_ID_NOT_FOUND", f"consumer group {group_id!r} does not exist")
    members = [_member_view(m, described.protocol_type) for m in described.members]
    committed = await _committed(brokers, group_id)
    owner = {tp: m.member_id for m in members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owner))
    log_end = await list_offsets(brokers, partitions, LATEST)
    offsets = [_lag(tp, committed.get(tp), log_end.get(tp), owner.get(tp)) for tp in partitions]
    return GroupView(group_id, described.group_state, described.protocol_type,
                     described.protocol_data, coordinator, members, offsets)


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


def _lag(tp: TopicPartition, committed: int | None, log_end: int | None,
         member_id: str | None) -> PartitionLag:
    lag = None if committed is None or log_end is None else max(log_end - committed, 0)
    return PartitionLag(tp[0], tp[1], committed, log_end, lag, member_id)


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in partitions)
