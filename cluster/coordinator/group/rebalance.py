"""A classic group's rebalance, as Kafka's classic group coordinator runs it: the join
phase and its completion (the next generation), the sync phase and the leader's
assignment, SyncGroup, Heartbeat, LeaveGroup and the group's timers (join, sync, pending
members, sessions). Each works on one :class:`~josefk.cluster.coordinator.group.state.Group`
and returns the records to write."""

from __future__ import annotations

from collections.abc import Sequence

from josefk.cluster.coordinator.group.api import (
    Clock,
    Error,
    GroupConfig,
    GroupError,
    JoinResult,
    Reply,
    Result,
    SyncRequest,
    SyncResult,
)
from josefk.cluster.coordinator.group.records import GroupMetadataKey, Record
from josefk.cluster.coordinator.group.state import Event, Group, GroupState, Member


class Rebalance:
    """The classic rebalance protocol over one group at a time."""

    def __init__(self, config: GroupConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock

    # --- the rebalance --------------------------------------------------------------------

    def maybe_prepare_rebalance_or_complete_join(self, group: Group) -> list[Record]:
        if group.can_rebalance():
            return self.prepare_rebalance(group)
        return self.maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: Group) -> list[Record]:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, Error.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        group.sync_deadline = None
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            # A new group: give more members time to join (group.initial.rebalance.delay.ms).
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline = self.clock() + delay
            group.initial_join = (delay, remaining)
        group.transition(Event.REBALANCE)
        return [] if initial else self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: Group) -> list[Record]:
        if group.has_all_members_joined():
            return self.complete_join(group)
        group.join_deadline = self.clock() + group.rebalance_timeout_ms()
        group.initial_join = None
        return []

    def maybe_complete_join_phase(self, group: Group) -> list[Record]:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return []
        if group.previous_state is GroupState.EMPTY:
            return []  # the initial rebalance ends only when its delay runs out
        if not group.has_all_members_joined():
            return []
        return self.complete_join(group)

    def complete_join(self, group: Group) -> list[Record]:
        group.join_deadline = None
        group.initial_join = None
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                group.remove_member(member.member_id)
        if group.is_in(GroupState.DEAD):
            return []
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            group.join_deadline = self.clock() + group.rebalance_timeout_ms()
            return []
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            return [(GroupMetadataKey(group.group_id), group.metadata_value({}))]
        for member in group.members.values():
            group.complete_join(member, group.join_result(member))
            group.reschedule_heartbeat(member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline = self.clock() + group.rebalance_timeout_ms()
        group.sync_generation = group.generation
        return []

    def _reset_and_propagate_assignment_error(self, group: Group, error: Error) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: Group, error: Error) -> None:
        ok = error is Error.NONE
        for member in group.members.values():
            result = SyncResult(error, group.protocol_type if ok else None,
                                group.protocol_name if ok else None, member.assignment)
            if group.complete_sync(member, result):
                group.reschedule_heartbeat(member)

    def _remove_member_and_update(self, group: Group, member: Member) -> list[Record]:
        group.complete_join(member, JoinResult(Error.UNKNOWN_MEMBER_ID))
        group.remove_member(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self.maybe_prepare_rebalance_or_complete_join(group)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            return self.complete_join(group)
        return []

    # --- timers ----------------------------------------------------------------------------

    def on_timer(self, group: Group) -> list[Record]:
        """Fire the group's due timers once each; returns the records to write."""
        now = self.clock()
        records: list[Record] = []
        if group.join_deadline is not None and group.join_deadline <= now:
            records += self._join_timer(group)
        if group.sync_deadline is not None and group.sync_deadline <= now:
            group.sync_deadline = None
            records += self._expire_pending_sync(group, group.sync_generation)
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now and member_id in group.pending_members:
                group.remove_member(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                    records += self.complete_join(group)
        for member in list(group.members.values()):
            deadline = member.heartbeat_deadline
            if deadline is None or deadline > now or member.member_id not in group.members:
                continue
            member.heartbeat_deadline = None
            if not member.has_satisfied_heartbeat:
                records += self._remove_member_and_update(group, member)
        return records

    def _join_timer(self, group: Group) -> list[Record]:
        if group.initial_join is None:
            return self.complete_join(group)
        delay, remaining = group.initial_join
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.join_deadline = self.clock() + new_delay
            group.initial_join = (new_delay, max(remaining - delay, 0))
            return []
        return self.complete_join(group)

    def _expire_pending_sync(self, group: Group, generation: int) -> list[Record]:
        if generation != group.generation or not group.pending_sync:
            return []
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return []
        for member_id in list(group.pending_sync):
            group.remove_member(member_id)
        return self.prepare_rebalance(group)

    # --- SyncGroup ------------------------------------------------------------------------

    def sync(self, group: Group | None, req: SyncRequest) -> Result[Reply[SyncResult]]:
        reply: Reply[SyncResult] = Reply()
        if group is None or group.is_in(GroupState.EMPTY):
            reply.set(SyncResult(Error.UNKNOWN_MEMBER_ID))
            return Result([], reply)
        error = self._validate_sync(group, req)
        if error is not Error.NONE:
            reply.set(SyncResult(error))
            return Result([], reply)
        member = group.members[req.member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            reply.set(SyncResult(Error.REBALANCE_IN_PROGRESS))
            return Result([], reply)
        if group.is_in(GroupState.STABLE):
            group.pending_sync.discard(member.member_id)
            reply.set(SyncResult(Error.NONE, group.protocol_type, group.protocol_name,
                                 member.assignment))
            return Result([], reply)
        # CompletingRebalance: park until the leader's assignment is written.
        if member.sync_reply is not None:
            member.sync_reply.set(SyncResult(Error.REBALANCE_IN_PROGRESS))
        member.sync_reply = reply
        group.pending_sync.discard(member.member_id)
        if group.pending_sync == set():
            group.sync_deadline = None
        if not group.is_leader(member.member_id):
            return Result([], reply)
        assignment = {m: b"" for m in group.members}
        for member_id, data in req.assignments:
            if member_id in assignment:
                assignment[member_id] = data
        generation = req.generation_id
        records: list[Record] = [(GroupMetadataKey(group.group_id),
                                  group.metadata_value(assignment))]

        def failure(error: Error) -> list[Record]:
            if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
                self._reset_and_propagate_assignment_error(group, error)
                return self.maybe_prepare_rebalance_or_complete_join(group)
            return []

        return Result(records, reply, on_failure=failure)

    @staticmethod
    def _validate_sync(group: Group, req: SyncRequest) -> Error:
        if group.is_in(GroupState.DEAD):
            return Error.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(req.member_id, req.group_instance_id)
        except GroupError as e:
            return e.code
        if req.generation_id != group.generation:
            return Error.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or \
                _inconsistent(req.protocol_name, group.protocol_name):
            return Error.INCONSISTENT_GROUP_PROTOCOL
        return Error.NONE

    # --- Heartbeat, LeaveGroup -----------------------------------------------------------

    def heartbeat(self, group: Group | None, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Error:
        if group is None:
            return Error.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return Error.COORDINATOR_NOT_AVAILABLE
        try:
            member = group.validate_member(member_id, group_instance_id)
        except GroupError as e:
            return e.code
        if generation_id != group.generation:
            return Error.ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return Error.UNKNOWN_MEMBER_ID
        group.reschedule_heartbeat(member)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return Error.REBALANCE_IN_PROGRESS
        return Error.NONE

    def leave(self, group: Group | None, members: Sequence[tuple[str, str | None]]
              ) -> Result[list[Error]]:
        """Remove members (member id, group instance id); one error per member."""
        if group is None:
            return Result([], [Error.UNKNOWN_MEMBER_ID] * len(members))
        if group.is_in(GroupState.DEAD):
            raise GroupError(Error.COORDINATOR_NOT_AVAILABLE)
        errors: list[Error] = []
        for member_id, instance_id in members:
            if member_id == "":
                # Administrative removal of a static member by its instance id.
                static_id = group.static_members.get(instance_id) if instance_id else None
                if static_id is None:
                    errors.append(Error.UNKNOWN_MEMBER_ID)
                    continue
                self._remove_leaving_member(group, static_id)
            elif member_id in group.pending_members:
                group.remove_member(member_id)
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except GroupError as e:
                    errors.append(e.code)
                    continue
                self._remove_leaving_member(group, member_id)
            errors.append(Error.NONE)
        records: list[Record] = []
        if Error.NONE in errors:
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                records = self.maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                records = self.maybe_complete_join_phase(group)
        return Result(records, errors)

    @staticmethod
    def _remove_leaving_member(group: Group, member_id: str) -> None:
        member = group.members[member_id]
        group.complete_join(member, JoinResult(Error.UNKNOWN_MEMBER_ID))
        group.remove_member(member_id)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
