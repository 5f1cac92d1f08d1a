"""Group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups and DeleteGroups, answered by the broker's group coordinator."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import kafka.errors
from kafka.protocol.admin.groups import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import JoinGroupResponse, LeaveGroupResponse
from kafka.protocol.metadata import FindCoordinatorResponse

from josefk.cluster.coordinator.group.api import Error, JoinRequest, SyncRequest
from josefk.cluster.security.acls import AclOperation, ResourceType
from josefk.protocol.error_codes import (
    GROUP_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.network.connection import client_host

if TYPE_CHECKING:
    from josefk.server.broker import Broker

GROUP_KEY, TRANSACTION_KEY = 0, 1
# kafka-python models DescribeGroups' bit field as the set of its bits; None is
# Integer.MIN_VALUE, "not asked for".
AUTHORIZED_OPERATIONS_OMITTED = None
Op, Rt = AclOperation, ResourceType

Coordinator = FindCoordinatorResponse.Coordinator
JoinedMember = JoinGroupResponse.JoinGroupResponseMember
MemberResponse = LeaveGroupResponse.MemberResponse
DescribedGroup = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribedGroup.DescribedGroupMember
ListedGroup = ListGroupsResponse.ListedGroup
DeletedGroup = DeleteGroupsResponse.DeletableGroupResult


# --- FindCoordinator -------------------------------------------------------------------------


async def handle_find_coordinator(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    key_type = body.key_type if version >= 1 else GROUP_KEY
    if version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            Coordinator(key=key, error_message=None,
                        **(await _coordinator(broker, key_type, key)))
            for key in body.coordinator_keys]}
    fields = await _coordinator(broker, key_type, body.key)
    # Versions 1-3 carry the error's message.
    message = kafka.errors.for_code(fields["error_code"]).message if fields["error_code"] else None
    return {"throttle_time_ms": 0, "error_message": message, **fields}


async def _coordinator(broker: Broker, key_type: int, key: str) -> dict[str, Any]:
    refusal = _coordinator_refusal(broker, key_type, key)
    if refusal is not None:
        return {"error_code": refusal, "node_id": -1, "host": "", "port": -1}
    if key_type == GROUP_KEY:
        error, node = await broker.group_coordinator.coordinator_node(key)
    elif key_type == TRANSACTION_KEY:
        code, node = await broker.txn_service.coordinator_node(key)
        error = Error(code)
    else:
        error, node = Error.INVALID_REQUEST, None  # share groups (key type 2) and unknown types
    if node is None:
        return {"error_code": error, "node_id": -1, "host": "", "port": -1}
    return {"error_code": 0, "node_id": node.node_id, "host": node.host, "port": node.port}


def _coordinator_refusal(broker: Broker, key_type: int, key: str) -> int | None:
    """DESCRIBE on the group or transactional id whose coordinator is asked for."""
    authorizer = broker.authorizer
    if not authorizer.enabled:
        return None
    if key_type == GROUP_KEY and not authorizer.allowed(Op.DESCRIBE, Rt.GROUP, key):
        return GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION_KEY and not authorizer.allowed(Op.DESCRIBE,
                                                              Rt.TRANSACTIONAL_ID, key):
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------


def _may_read(broker: Broker, group_id: str) -> bool:
    return broker.authorizer.allowed(Op.READ, Rt.GROUP, group_id)


async def handle_join_group(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    if not _may_read(broker, body.group_id):
        # JoinGroupRequest.getErrorResponse
        return {"throttle_time_ms": 0, "error_code": GROUP_AUTHORIZATION_FAILED,
                "generation_id": -1, "protocol_type": None,
                "protocol_name": None if version >= 7 else "", "leader": "",
                "skip_assignment": False, "member_id": "", "members": []}
    req = JoinRequest(
        group_id=body.group_id, member_id=body.member_id,
        group_instance_id=body.group_instance_id if version >= 5 else None,
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=body.rebalance_timeout_ms if version >= 1 else
        body.session_timeout_ms,
        client_id=request.client_id or "", client_host=client_host.get(), api_version=version)
    r = await broker.group_coordinator.join(req)
    protocol_name = r.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # not nullable before v7
    return {"throttle_time_ms": 0, "error_code": r.error, "generation_id": r.generation_id,
            "protocol_type": r.protocol_type, "protocol_name": protocol_name,
            "leader": r.leader, "skip_assignment": r.skip_assignment, "member_id": r.member_id,
            "members": [JoinedMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                     metadata=m.metadata) for m in r.members]}


async def handle_sync_group(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    protocol_type = body.protocol_type if version >= 5 else None
    protocol_name = body.protocol_name if version >= 5 else None
    if version >= 5 and (protocol_type is None or protocol_name is None):
        return {"throttle_time_ms": 0, "error_code": Error.INCONSISTENT_GROUP_PROTOCOL,
                "assignment": b""}
    if not _may_read(broker, body.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_AUTHORIZATION_FAILED,
                "protocol_type": None, "protocol_name": None, "assignment": b""}
    req = SyncRequest(
        group_id=body.group_id, generation_id=body.generation_id, member_id=body.member_id,
        group_instance_id=body.group_instance_id if version >= 3 else None,
        protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in body.assignments))
    r = await broker.group_coordinator.sync(req)
    error = r.error
    if error == Error.NONE and not await broker.group_write_replicated(body.group_id):
        error = Error.COORDINATOR_NOT_AVAILABLE
    return {"throttle_time_ms": 0, "error_code": error, "protocol_type": r.protocol_type,
            "protocol_name": r.protocol_name, "assignment": r.assignment}


async def handle_heartbeat(broker: Broker, request: Request) -> Response:
    body = request.body
    if not _may_read(broker, body.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_AUTHORIZATION_FAILED}
    instance_id = body.group_instance_id if request.api_version >= 3 else None
    error = broker.group_coordinator.heartbeat(body.group_id, body.member_id, instance_id,
                                               body.generation_id)
    return {"throttle_time_ms": 0, "error_code": error}


async def handle_leave_group(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    if not _may_read(broker, body.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_AUTHORIZATION_FAILED,
                "members": []}
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        members = [(body.member_id, None)]
    error, errors = broker.group_coordinator.leave(body.group_id, members)
    if version < 3:
        # One member, whose error is the response's.
        return {"throttle_time_ms": 0,
                "error_code": error if error is not Error.NONE or not errors else errors[0]}
    return {"throttle_time_ms": 0, "error_code": error, "members": [
        MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=e)
        for (member_id, instance_id), e in zip(members, errors, strict=False)]}


# --- DescribeGroups, ListGroups, DeleteGroups -----------------------------------------------


async def handle_describe_groups(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    with_operations = version >= 3 and body.include_authorized_operations
    denied = broker.authorizer.denied_names(Op.DESCRIBE, Rt.GROUP, body.groups)
    # Kafka answers the groups the client may not describe first.
    groups = [DescribedGroup(
        error_code=GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=group_id,
        group_state="", protocol_type="", protocol_data="", members=[],
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for group_id in body.groups if group_id in denied]
    for group_id in body.groups:
        if group_id in denied:
            continue
        error, description = broker.group_coordinator.describe(group_id)
        unknown = description is not None and description.state == "Dead"
        if error is Error.GROUP_ID_NOT_FOUND or unknown:
            # A consumer group (KIP-848) or none: Kafka 4 says so from v6 on (KIP-1043).
            what = "not found" if unknown else "is not a classic group"
            groups.append(DescribedGroup(
                error_code=Error.GROUP_ID_NOT_FOUND if version >= 6 else 0,
                error_message=f"Group {group_id} {what}.", group_id=group_id,
                group_state="Dead", protocol_type="", protocol_data="", members=[],
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        if description is None:
            groups.append(DescribedGroup(
                error_code=error, error_message=error.name, group_id=group_id, group_state="",
                protocol_type="", protocol_data="", members=[],
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        groups.append(DescribedGroup(
            error_code=0, error_message=None, group_id=group_id,
            group_state=description.state, protocol_type=description.protocol_type,
            protocol_data=description.protocol_data,
            members=[DescribedMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host, member_metadata=m.metadata,
                member_assignment=m.assignment) for m in description.members],
            authorized_operations=broker.authorizer.authorized_operations(Rt.GROUP, group_id)
            if with_operations else AUTHORIZED_OPERATIONS_OMITTED))
    return {"throttle_time_ms": 0, "groups": groups}


async def handle_list_groups(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    states = body.states_filter if version >= 4 else []
    types = body.types_filter if version >= 5 else []
    error, listed = broker.group_coordinator.list_groups(states or [], types or [])
    authorizer = broker.authorizer
    if authorizer.enabled and not authorizer.cluster_allowed(Op.DESCRIBE, log_denial=False):
        listed = [g for g in listed
                  if authorizer.allowed(Op.DESCRIBE, Rt.GROUP, g[0], log_denial=False)]
    return {"throttle_time_ms": 0, "error_code": error, "groups": [
        ListedGroup(group_id=group_id, protocol_type=protocol_type, group_state=state,
                    group_type=group_type)
        for group_id, protocol_type, state, group_type in listed]}


async def handle_delete_groups(broker: Broker, request: Request) -> Response:
    group_ids = list(dict.fromkeys(request.body.groups_names))
    denied = broker.authorizer.denied_names(Op.DELETE, Rt.GROUP, group_ids)
    allowed = [g for g in group_ids if g not in denied]
    results: dict[str, int] = dict(broker.group_coordinator.delete_groups(allowed))
    results.update(dict.fromkeys(denied, GROUP_AUTHORIZATION_FAILED))
    # Kafka answers the groups the client may not delete last.
    return {"throttle_time_ms": 0, "results": [
        DeletedGroup(group_id=group_id, error_code=results[group_id])
        for group_id in allowed + [g for g in group_ids if g in denied]]}


HANDLERS = {
    ApiKey.FindCoordinator: handle_find_coordinator,
    ApiKey.JoinGroup: handle_join_group,
    ApiKey.SyncGroup: handle_sync_group,
    ApiKey.Heartbeat: handle_heartbeat,
    ApiKey.LeaveGroup: handle_leave_group,
    ApiKey.DescribeGroups: handle_describe_groups,
    ApiKey.ListGroups: handle_list_groups,
    ApiKey.DeleteGroups: handle_delete_groups,
}
