"""JoinGroup of a classic group's new and known members, as Kafka's classic group
coordinator handles it (KIP-394's member ids, KIP-345's static members): each adds or
updates the member, then leaves the group's next step to
:class:`~josefk.cluster.coordinator.group.rebalance.Rebalance`."""

from __future__ import annotations

import uuid

from josefk.cluster.coordinator.group.api import (
    Clock,
    Error,
    GroupConfig,
    GroupError,
    JoinRequest,
    JoinResult,
    Reply,
    Result,
)
from josefk.cluster.coordinator.group.rebalance import Rebalance
from josefk.cluster.coordinator.group.records import GroupMetadataKey, Record
from josefk.cluster.coordinator.group.state import Group, GroupState, Member

MAX_MEMBER_ID_BYTES = 32767  # a STRING (int16 length) in the group's records


class Joins:
    """The JoinGroup paths of one classic group's members."""

    def __init__(self, config: GroupConfig, clock: Clock, rebalance: Rebalance) -> None:
        self.config = config
        self.clock = clock
        self.rebalance = rebalance

    def join_new_member(self, group: Group, req: JoinRequest, reply: Reply[JoinResult]
                         ) -> Result[Reply[JoinResult]]:
        if group.is_in(GroupState.DEAD):
            reply.set(JoinResult(Error.COORDINATOR_NOT_AVAILABLE))
            return Result([], reply)
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            reply.set(JoinResult(Error.INCONSISTENT_GROUP_PROTOCOL))
            return Result([], reply)
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if len(new_id.encode()) > MAX_MEMBER_ID_BYTES:
            # A client id near 32 KiB: the member id could not be written to
            # __consumer_offsets or answered before JoinGroup v6. Kafka answers this.
            reply.set(JoinResult(Error.UNKNOWN_SERVER_ERROR))
            return Result([], reply)
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                return self._update_static_member(group, req, existing, new_id, reply)
            return Result(self._add_member_and_rebalance(group, req, new_id, reply), reply)
        if req.api_version >= 4:
            # KIP-394: the member learns its id first and joins again with it.
            group.pending_members[new_id] = self.clock() + req.session_timeout_ms
            reply.set(JoinResult(Error.MEMBER_ID_REQUIRED, new_id))
            return Result([], reply)
        return Result(self._add_member_and_rebalance(group, req, new_id, reply), reply)

    def join_existing_member(self, group: Group, req: JoinRequest, reply: Reply[JoinResult]
                              ) -> Result[Reply[JoinResult]]:
        mid = req.member_id
        if group.is_in(GroupState.DEAD):
            reply.set(JoinResult(Error.COORDINATOR_NOT_AVAILABLE, mid))
            return Result([], reply)
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            reply.set(JoinResult(Error.INCONSISTENT_GROUP_PROTOCOL, mid))
            return Result([], reply)
        if mid in group.pending_members:
            return Result(self._add_member_and_rebalance(group, req, mid, reply), reply)
        try:
            member = group.validate_member(mid, req.group_instance_id)
        except GroupError as e:
            reply.set(JoinResult(e.code, mid))
            return Result([], reply)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return Result(self._update_member_and_rebalance(group, member, req, reply), reply)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.protocols == req.protocols:
                # It missed the JoinGroup response: the same answer again.
                reply.set(group.join_result(member))
                return Result([], reply)
            return Result(self._update_member_and_rebalance(group, member, req, reply), reply)
        if group.is_in(GroupState.STABLE):
            if group.is_leader(mid) or member.protocols != req.protocols:
                # The leader rejoins to rebalance (e.g. new partitions); others on change.
                return Result(self._update_member_and_rebalance(group, member, req, reply),
                              reply)
            reply.set(group.join_result(member, with_members=False))
            return Result([], reply)
        reply.set(JoinResult(Error.UNKNOWN_MEMBER_ID, mid))
        return Result([], reply)

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str,
                                  reply: Reply[JoinResult]) -> list[Record]:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        req.protocols, is_new=True)
        if group.is_in(GroupState.PREPARING_REBALANCE) and \
                group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add_member(member, reply)
        # A parked JoinGroup cannot heartbeat: new members get a join timeout instead.
        group.reschedule_heartbeat(member, self.config.new_member_join_timeout_ms)
        return self.rebalance.maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest,
                                     reply: Reply[JoinResult]) -> list[Record]:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, reply)
        return self.rebalance.maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(self, group: Group, req: JoinRequest, old_id: str, new_id: str,
                              reply: Reply[JoinResult]) -> Result[Reply[JoinResult]]:
        """KIP-345: a static member back with a new member id takes its old place."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        old_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        group.reschedule_heartbeat(member)
        old_settings = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, reply)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name != group.select_protocol():
                return Result(self.rebalance.maybe_prepare_rebalance_or_complete_join(group), reply)
            # Same protocol: no rebalance, the new id is written and the member rejoins
            # the current generation.
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            records: list[Record] = [(GroupMetadataKey(group.group_id),
                                      group.metadata_value(assignment))]

            def success() -> None:
                if req.api_version >= 9:
                    leader = group.is_leader(new_id)
                    result = group.join_result(member, skip_assignment=leader)
                else:
                    result = group.join_result(member, leader=old_leader, with_members=False)
                group.complete_join(member, result)

            def failure(error: Error) -> list[Record]:
                group.update_member(member, *old_settings, None)
                restored = group.replace_static_member(instance_id, new_id, old_id)
                group.reschedule_heartbeat(restored)
                reply.set(JoinResult(error, "", group.generation, group.protocol_type,
                                     group.protocol_name, old_leader or ""))
                return []

            return Result(records, reply, success, failure)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may already hold the old id: rebalance so the new one gets assigned.
            return Result(self.rebalance.prepare_rebalance(group), reply)
        return Result(self.rebalance.maybe_complete_join_phase(group), reply)

