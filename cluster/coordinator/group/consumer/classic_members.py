"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup of members that speak the classic
protocol in a consumer group (Kafka 4's classicGroupJoinToConsumerGroup,
classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup,
classicGroupLeaveToConsumerGroup).

A JoinGroup is a full heartbeat: the member's subscription and owned partitions come
from its embedded ConsumerProtocolSubscription, the server assignor computes the target
and the member reconciles towards it (revoke before assign, as any member); the answer
names no leader, and SyncGroup hands out the member's assigned partitions. A classic
member whose epoch is behind the group's, or who must revoke, or whose awaited
partitions are free, is told REBALANCE_IN_PROGRESS on Heartbeat and rejoins.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from josefk.cluster.coordinator.group.api import (
    Error,
    GroupError,
    JoinRequest,
    JoinResult,
    Result,
    SyncRequest,
    SyncResult,
)
from josefk.cluster.coordinator.group.consumer.api import HeartbeatRequest, Refused
from josefk.cluster.coordinator.group.consumer.group import ConsumerGroup, Deadlines
from josefk.cluster.coordinator.group.consumer.heartbeat import Heartbeat
from josefk.cluster.coordinator.group.consumer.member import ConsumerMember, MemberState
from josefk.cluster.coordinator.group.consumer.migration import (
    Malformed,
    by_topic_id,
    encode_assignment,
    subscription,
)
from josefk.cluster.coordinator.group.consumer.records import ClassicMetadata
from josefk.cluster.coordinator.group.state import CONSUMER_PROTOCOL_TYPE

if TYPE_CHECKING:  # the manager hands itself in
    from josefk.cluster.coordinator.group.consumer.manager import ConsumerGroups


class ClassicMembers:
    """The classic-protocol requests of the members of consumer groups."""

    def __init__(self, groups: ConsumerGroups) -> None:
        self.groups = groups

    def _timers(self, group: ConsumerGroup, member_id: str) -> Deadlines:
        return group.deadlines.setdefault(member_id, Deadlines())

    # --- JoinGroup -------------------------------------------------------------------------

    def join(self, group: ConsumerGroup, req: JoinRequest) -> Result[JoinResult]:
        try:
            return self._join(group, req)
        except GroupError as e:  # Refused, or a member reconciliation fences
            return Result([], JoinResult(e.code, req.member_id))

    def _join(self, group: ConsumerGroup, req: JoinRequest) -> Result[JoinResult]:
        config, image = self.groups.config, self.groups.image
        unknown = req.member_id == ""
        member_id = str(uuid.uuid4()) if unknown else req.member_id
        if member_id not in group.members and len(group.members) >= config.max_size:
            raise Refused(Error.GROUP_MAX_SIZE_REACHED)
        if not group.supports_classic(req.protocol_type, {n for n, _ in req.protocols}):
            raise Refused(Error.INCONSISTENT_GROUP_PROTOCOL,
                          f"Member {member_id}'s protocols are not supported.")
        if unknown and req.group_instance_id is None and req.api_version >= 4:
            return Result([], JoinResult(Error.MEMBER_ID_REQUIRED, member_id))
        try:
            sub = subscription(req.protocols[0][1])
        except Malformed as e:
            raise Refused(Error.INCONSISTENT_GROUP_PROTOCOL) from e
        existing = self._joining(group, member_id, req.group_instance_id, unknown)
        owned = by_topic_id(((t.topic, t.partitions)
                             for t in getattr(sub, "owned_partitions", None) or ()), image)
        beat = Heartbeat(group, config, image, self.groups.clock())
        response, member = beat.run(HeartbeatRequest(
            group.group_id, existing.member_id if existing else member_id,
            existing.member_epoch if existing else 0, req.group_instance_id,
            getattr(sub, "rack_id", None), req.rebalance_timeout_ms,
            tuple(sorted(sub.topics)), owned=list(owned.items()), client_id=req.client_id,
            client_host=req.client_host,
            classic=ClassicMetadata(req.session_timeout_ms, req.protocols)))
        result = JoinResult(Error.NONE, member.member_id, member.member_epoch,
                            CONSUMER_PROTOCOL_TYPE, req.protocols[0][0])

        def joined() -> None:
            self.groups.after_heartbeat(group.group_id, member, beat)
            now = self.groups.clock()
            timers = self._timers(group, member.member_id)
            timers.join = None
            timers.session = now + req.session_timeout_ms
            timers.sync = now + req.rebalance_timeout_ms

        return Result(beat.records, result, on_success=joined)

    @staticmethod
    def _joining(group: ConsumerGroup, member_id: str, instance_id: str | None,
                 unknown: bool) -> ConsumerMember | None:
        """The member a JoinGroup continues, None for a new one (Kafka's
        getOrMaybeSubscribe...Member): a static member joining without its member id
        replaces the one of its instance id under the new id (the old one is fenced)."""
        if instance_id is None:
            return group.members.get(member_id)
        existing = group.static_member(instance_id)
        if unknown:
            return None
        if existing is None:
            raise Refused(Error.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise Refused(Error.FENCED_INSTANCE_ID)
        return existing

    # --- SyncGroup, Heartbeat ---------------------------------------------------------------

    def sync(self, group: ConsumerGroup, req: SyncRequest) -> SyncResult:
        try:
            member = self._member(group, req.member_id, req.group_instance_id)
            _check_generation(member, req.generation_id)
            assert member.classic is not None
            protocol = member.classic.protocols[0]
            if req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE \
                    or req.protocol_name is not None and req.protocol_name != protocol[0]:
                raise Refused(Error.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and \
                    member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._rejoin_within_timeout(group, member)
                raise Refused(Error.REBALANCE_IN_PROGRESS)
        except Refused as e:
            return SyncResult(e.code)
        timers = self._timers(group, member.member_id)
        timers.sync = None
        timers.session = self.groups.clock() + member.classic.session_timeout_ms
        return SyncResult(Error.NONE, req.protocol_type, req.protocol_name,
                          encode_assignment(member.assigned, self.groups.image, protocol[1]))

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                  generation_id: int) -> Error:
        try:
            member = self._member(group, member_id, instance_id)
            _check_generation(member, generation_id)
        except Refused as e:
            return e.code
        assert member.classic is not None
        self._timers(group, member.member_id).session = \
            self.groups.clock() + member.classic.session_timeout_ms
        if member.member_epoch < group.group_epoch or \
                member.state is MemberState.UNREVOKED_PARTITIONS or \
                (member.state is MemberState.UNRELEASED_PARTITIONS
                 and not group.waiting_on_unreleased(member)):
            self._rejoin_within_timeout(group, member)
            return Error.REBALANCE_IN_PROGRESS
        return Error.NONE

    def _rejoin_within_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        timers = self._timers(group, member.member_id)
        if timers.join is None:
            timers.join = self.groups.clock() + max(member.rebalance_timeout_ms, 0)

    # --- LeaveGroup ------------------------------------------------------------------------

    def leave(self, group: ConsumerGroup, members: Sequence[tuple[str, str | None]]
              ) -> Result[list[Error]]:
        """Remove classic members (member id, instance id): their tombstones and one new
        group epoch; an error per member."""
        errors: list[Error] = []
        leaving: dict[str, ConsumerMember] = {}
        for member_id, instance_id in members:
            try:
                if instance_id is None:
                    member = self._member(group, member_id, None)
                else:
                    member = _static(group, instance_id)
                    if member_id and member.member_id != member_id:
                        raise Refused(Error.FENCED_INSTANCE_ID)
                    _check_classic(member)
            except Refused as e:
                errors.append(e.code)
                continue
            leaving[member.member_id] = member
            errors.append(Error.NONE)
        beat = Heartbeat(group, self.groups.config, self.groups.image, self.groups.clock())
        if leaving:
            beat.fence_all(leaving.values())
        return Result(beat.records, errors)

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str, instance_id: str | None
                ) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember, then a classic member."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise Refused(Error.UNKNOWN_MEMBER_ID)
        else:
            member = _static(group, instance_id)
            if member.member_id != member_id:
                raise Refused(Error.FENCED_INSTANCE_ID)
        _check_classic(member)
        return member


def _static(group: ConsumerGroup, instance_id: str) -> ConsumerMember:
    member = group.static_member(instance_id)
    if member is None:
        raise Refused(Error.UNKNOWN_MEMBER_ID)
    return member


def _check_classic(member: ConsumerMember) -> None:
    if member.classic is None:
        raise Refused(Error.UNKNOWN_MEMBER_ID,
                      f"Member {member.member_id} does not use the classic protocol.")


def _check_generation(member: ConsumerMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise Refused(Error.ILLEGAL_GENERATION)
