"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69),
answered by the group coordinator's consumer groups."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.api_key import ApiKey

from josefk.cluster.coordinator.group.api import Error
from josefk.cluster.coordinator.group.consumer.api import (
    ConsumerGroupDescription,
    HeartbeatRequest,
)
from josefk.cluster.coordinator.group.consumer.records import Assignment
from josefk.cluster.security.acls import AclOperation as Op
from josefk.cluster.security.acls import ResourceType as Rt
from josefk.protocol.error_codes import GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED
from josefk.protocol.messages import Request
from josefk.protocol.schemas.consumer_groups import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)
from josefk.server.handlers import Response
from josefk.server.network.connection import client_host

if TYPE_CHECKING:
    from josefk.server.broker import Broker

HeartbeatAssignment = ConsumerGroupHeartbeatResponse.Assignment
HeartbeatPartitions = HeartbeatAssignment.TopicPartitions
DescribedGroup = ConsumerGroupDescribeResponse.DescribedGroup
DescribedMember = DescribedGroup.Member
DescribedAssignment = DescribedMember.Assignment
DescribedPartitions = DescribedAssignment.TopicPartitions
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)  # Integer.MIN_VALUE, "not asked for"
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # MemberType (v1): the protocol a member speaks


async def handle_heartbeat(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version

    def refused(code: int, message: str | None = None) -> Response:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "member_id": None, "member_epoch": -1, "heartbeat_interval_ms": 0,
                "assignment": None}

    authorizer = broker.authorizer
    if not authorizer.allowed(Op.READ, Rt.GROUP, body.group_id):
        return refused(GROUP_AUTHORIZATION_FAILED)
    names = body.subscribed_topic_names
    if names and authorizer.enabled and authorizer.denied_names(Op.DESCRIBE, Rt.TOPIC, names):
        return refused(TOPIC_AUTHORIZATION_FAILED)
    owned = None if body.topic_partitions is None else [
        (tp.topic_id, list(tp.partitions)) for tp in body.topic_partitions if tp.topic_id]
    req = HeartbeatRequest(
        group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
        instance_id=body.instance_id, rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=body.subscribed_topic_regex if version >= 1 else None,
        server_assignor=body.server_assignor, owned=owned,
        client_id=request.client_id or "", client_host=client_host.get(),
        api_version=version)
    r = broker.group_coordinator.consumer_heartbeat(req)
    if r.error is not Error.NONE:
        return refused(r.error, r.message)
    if not await broker.group_write_replicated(body.group_id):
        return refused(Error.COORDINATOR_NOT_AVAILABLE)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "member_id": r.member_id, "member_epoch": r.member_epoch,
            "heartbeat_interval_ms": r.heartbeat_interval_ms,
            "assignment": None if r.assignment is None else HeartbeatAssignment(
                topic_partitions=_heartbeat_partitions(r.assignment))}


def _heartbeat_partitions(assignment: Assignment) -> list[HeartbeatPartitions]:
    return [HeartbeatPartitions(topic_id=topic_id, partitions=sorted(parts))
            for topic_id, parts in sorted(assignment.items())]


async def handle_describe(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    authorizer = broker.authorizer
    groups = []
    for group_id in body.group_ids:
        if not authorizer.allowed(Op.DESCRIBE, Rt.GROUP, group_id):
            groups.append(_failed(group_id, GROUP_AUTHORIZATION_FAILED, None))
            continue
        error, message, description = broker.group_coordinator.consumer_describe(group_id)
        if description is None:
            groups.append(_failed(group_id, error, message))
            continue
        operations = sum(1 << op for op in authorizer.authorized_operations(Rt.GROUP, group_id)) \
            if body.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        groups.append(_described(description, operations, version))
    return {"throttle_time_ms": 0, "groups": groups}


def _failed(group_id: str, error: int, message: str | None) -> DescribedGroup:
    return DescribedGroup(error_code=error, error_message=message, group_id=group_id,
                          group_state="", group_epoch=0, assignment_epoch=0,
                          assignor_name="", members=[],
                          authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _described(d: ConsumerGroupDescription, operations: int, version: int
               ) -> DescribedGroup:
    def assignment(parts: tuple) -> DescribedAssignment:
        return DescribedAssignment(topic_partitions=[
            DescribedPartitions(topic_id=topic_id, topic_name=name, partitions=list(ps))
            for topic_id, name, ps in parts])

    return DescribedGroup(
        error_code=0, error_message=None, group_id=d.group_id, group_state=d.state,
        group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch,
        assignor_name=d.assignor_name, authorized_operations=operations,
        members=[DescribedMember(
            member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=assignment(m.assignment),
            target_assignment=assignment(m.target_assignment),
            **({"member_type": CLASSIC_MEMBER if m.classic else CONSUMER_MEMBER}
               if version >= 1 else {}))
            for m in d.members])


HANDLERS = {
    ApiKey.ConsumerGroupHeartbeat: handle_heartbeat,
    ApiKey.ConsumerGroupDescribe: handle_describe,
}
