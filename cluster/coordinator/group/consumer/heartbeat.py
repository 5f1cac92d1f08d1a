"""ConsumerGroupHeartbeat and the removal of members, as Kafka 4's GroupMetadataManager
computes them: the records to write and the answer, from a group's state, without
changing it (the records change it when they are replayed).

A heartbeat updates the member's subscription; a changed subscription or changed topic
metadata bumps the group epoch; a group epoch past the assignment epoch recomputes the
target assignment with the group's assignor; then the member reconciles towards its
target (:mod:`~josefk.cluster.coordinator.group.consumer.reconciliation`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable

from josefk.cluster.coordinator.group.api import Error
from josefk.cluster.coordinator.group.consumer.api import (
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResponse,
    Refused,
    TopicImage,
)
from josefk.cluster.coordinator.group.consumer.assignors import Assignor, MemberSpec
from josefk.cluster.coordinator.group.consumer.group import ConsumerGroup
from josefk.cluster.coordinator.group.consumer.member import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerMember,
)
from josefk.cluster.coordinator.group.consumer.reconciliation import reconcile
from josefk.cluster.coordinator.group.consumer.records import (
    CURRENT_ASSIGNMENT,
    MEMBER_METADATA,
    METADATA,
    PARTITION_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    Assignment,
    AssignmentEpochValue,
    ConsumerKey,
    ConsumerValue,
    GroupEpochValue,
    TargetMemberValue,
    TopicMetadata,
)
from josefk.cluster.coordinator.group.consumer.regex_refresh import unused, wants_refresh
from josefk.cluster.coordinator.group.consumer.subscriptions import (
    group_hash,
    subscribed_names,
    subscription_metadata,
)

Records = list[tuple[ConsumerKey, ConsumerValue | None]]


class Heartbeat:
    """One ConsumerGroupHeartbeat against ``group`` (a new, unsaved one for a first join)."""

    def __init__(self, group: ConsumerGroup, config: ConsumerGroupConfig, image: TopicImage,
                 now: int) -> None:
        self.group = group
        self.config = config
        self.image = image
        self.now = now
        self.records: Records = []
        self.topics: dict[str, TopicMetadata] = {}
        self.topics_known = False  # `topics` was computed (not by a static member away)
        self.carried: dict[str, Assignment] = {}  # targets of replaced static members
        self.regex_refresh = False  # the group's regular expressions are to be resolved

    def target(self, member_id: str) -> Assignment:
        return self.group.target.get(member_id) or self.carried.get(member_id, {})

    def _add(self, key_type: int, value: ConsumerValue | None, member_id: str | None = None
             ) -> None:
        self.records.append((ConsumerKey(key_type, self.group.group_id, member_id), value))

    # --- joining and heartbeating ---------------------------------------------------------

    def run(self, req: HeartbeatRequest) -> tuple[HeartbeatResponse, ConsumerMember]:
        group = self.group
        joining = req.member_epoch == 0
        member_id = req.member_id or str(uuid.uuid4())
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise Refused(Error.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its "
                          f"maximum capacity of {self.config.max_size} members.")
        member, is_new = self._member(req, member_id)
        updated = member.replace(
            instance_id=req.instance_id or member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=req.subscribed_topic_names
            if req.subscribed_topic_names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex
            if req.subscribed_topic_regex is not None else member.subscribed_topic_regex,
            client_id=req.client_id, client_host=req.client_host, classic=req.classic)
        bump = False
        if is_new or updated.metadata_value() != member.metadata_value():
            self._add(MEMBER_METADATA, updated.metadata_value(), member_id)
            bump = is_new or (updated.subscribed_topic_names, updated.subscribed_topic_regex) \
                != (member.subscribed_topic_names, member.subscribed_topic_regex)
        members = {**group.members, member_id: updated}
        if updated.subscribed_topic_regex != member.subscribed_topic_regex:
            self.records += unused(group.group_id, group.members.values(), members.values())
        group_epoch = self._maybe_bump(members, bump)
        self.regex_refresh = wants_refresh(group, members.values(), self.image, self.now,
                                           self.config.regex_refresh_interval_ms)
        if group_epoch > group.assignment_epoch and self._may_assign():
            targets = self._assign(members, group_epoch)
            target_epoch, target = group_epoch, targets.get(member_id, {})
        else:
            target_epoch, target = group.assignment_epoch, self.target(member_id)
        reconciled = updated
        if not (updated.member_epoch == target_epoch and updated.state == 0):
            reconciled = reconcile(updated, target_epoch, target, group.partition_epoch,
                                   req.owned)
        if is_new or reconciled.assignment_value() != member.assignment_value():
            self._add(CURRENT_ASSIGNMENT, reconciled.assignment_value(), member_id)
        full = joining or (req.rebalance_timeout_ms != -1 and req.owned is not None
                           and req.subscribed_topic_names is not None)
        changed = reconciled.assigned != member.assigned
        return HeartbeatResponse(
            member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=reconciled.assigned if full or changed or is_new else None), reconciled

    def _member(self, req: HeartbeatRequest, member_id: str) -> tuple[ConsumerMember, bool]:
        """The member the request is from, and whether it is new to the group."""
        group = self.group
        joining = req.member_epoch == 0
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise Refused(Error.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a "
                                  f"member of group {group.group_id}.")
                return ConsumerMember(member_id), True
            if not joining:  # a known member joining again goes on as it is, as in Kafka 4.3
                _check_epoch(member, req)
            return member, False
        existing = group.static_member(req.instance_id)
        if joining:
            if existing is None:
                return ConsumerMember(member_id, instance_id=req.instance_id), True
            if existing.member_id == member_id:
                return existing, False
            # Kafka lets a static member of either protocol replace a classic one at once;
            # two consumer-protocol ones only after the old one left.
            if existing.member_epoch != STATIC_LEAVE_EPOCH and req.classic is None \
                    and existing.classic is None:
                raise Refused(Error.UNRELEASED_INSTANCE_ID, f"Static member {existing.member_id}"
                              f" with instance id {req.instance_id} is present in the group.")
            return self._replace_static(existing, member_id), False
        if existing is None:
            raise Refused(Error.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise Refused(Error.FENCED_INSTANCE_ID, f"Static member {member_id} with instance "
                          f"id {req.instance_id} was fenced by member {existing.member_id}.")
        _check_epoch(existing, req)
        return existing, False

    def _replace_static(self, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """A static member back under a new member id takes the old one's place and
        assignment (Kafka's replaceMember)."""
        new = old.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
        target = self.group.target.get(old.member_id)
        self._remove(old)
        self._add(MEMBER_METADATA, new.metadata_value(), member_id)
        if target is not None:
            self._add(TARGET_MEMBER, TargetMemberValue(target), member_id)
            self.carried[member_id] = target
        self._add(CURRENT_ASSIGNMENT, new.assignment_value(), member_id)
        return new

    # --- the group epoch and the target assignment ----------------------------------------

    def _maybe_bump(self, members: dict[str, ConsumerMember], bump: bool) -> int:
        """The group epoch after this change: +1 if subscriptions changed or their topics'
        metadata hash is not the group's (Kafka's updateSubscriptionMetadata)."""
        group = self.group
        self.topics = subscription_metadata(members.values(), self.image, group.regexes)
        self.topics_known = True
        metadata_hash = group_hash(self.topics.values())
        bump |= metadata_hash != group.metadata_hash
        # Kafka 4.3 gives a new group epoch 2 at its first member.
        epoch = group.group_epoch if group.created else 1
        if bump:
            epoch += 1
            self._add(METADATA, GroupEpochValue(epoch, metadata_hash))
        if group.partition_metadata_record:  # Kafka 4.0's form, replaced by the hash
            self._add(PARTITION_METADATA, None)
        return epoch

    def _may_assign(self) -> bool:
        """At most one new target assignment per ``group.consumer.assignment.interval.ms``."""
        last = self.group.assignment_timestamp
        return last < 0 or self.now - last >= self.config.assignment_interval_ms

    def _assign(self, members: dict[str, ConsumerMember], epoch: int) -> dict[str, Assignment]:
        group = self.group
        ids = {name: t.topic_id for name, t in self.topics.items()}
        specs = {m.member_id: MemberSpec(
            frozenset(ids[n] for n in subscribed_names(m, group.regexes) if n in ids),
            self.target(m.member_id), m.instance_id) for m in members.values()}
        counts = {t.topic_id: t.num_partitions for t in self.topics.values()}
        targets = self.assignor(members.values()).assign(specs, counts)
        for member_id, assignment in targets.items():
            if assignment != self.target(member_id) or member_id not in group.target:
                self._add(TARGET_MEMBER, TargetMemberValue(assignment), member_id)
        self._add(TARGET_METADATA, AssignmentEpochValue(epoch, self.now))
        return targets

    def assignor(self, members: Iterable[ConsumerMember]) -> Assignor:
        """The assignor most members ask for, else the first configured."""
        chosen = Counter(m.server_assignor for m in members
                         if m.server_assignor in self.config.assignors)
        if not chosen:
            return self.config.default_assignor
        return self.config.assignors[max(chosen, key=lambda n: (chosen[n], n))]  # type: ignore[index]

    # --- leaving -------------------------------------------------------------------------

    def leave(self, req: HeartbeatRequest) -> HeartbeatResponse:
        group = self.group
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise Refused(Error.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a "
                              f"member of group {group.group_id}.")
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise Refused(Error.UNKNOWN_MEMBER_ID,
                              f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise Refused(Error.FENCED_INSTANCE_ID, f"Static member {req.member_id} with "
                              f"instance id {req.instance_id} was fenced.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is not None:
            away = member.replace(member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
            self._add(CURRENT_ASSIGNMENT, away.assignment_value(), member.member_id)
        else:
            self.fence(member)
        return HeartbeatResponse(member_id=member.member_id, member_epoch=req.member_epoch)

    def fence(self, member: ConsumerMember) -> None:
        """Remove a member: its records' tombstones, then a new group epoch."""
        self.fence_all([member])

    def fence_all(self, members: Iterable[ConsumerMember]) -> None:
        """Remove several members, then one new group epoch."""
        gone = {m.member_id for m in members}
        for member_id in gone:
            self._remove(self.group.members[member_id])
        remaining = {m.member_id: m for m in self.group.members.values()
                     if m.member_id not in gone}
        self.records += unused(self.group.group_id, self.group.members.values(),
                               remaining.values())
        self._maybe_bump(remaining, True)

    def _remove(self, member: ConsumerMember) -> None:
        for key_type in (CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA):
            self._add(key_type, None, member.member_id)


def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member may lag one epoch behind
    if the response that moved it on was lost and it owns no more than it is assigned."""
    epoch = req.member_epoch
    if epoch == member.member_epoch:
        return
    if epoch < member.member_epoch and epoch == member.previous_member_epoch and \
            req.owned is not None and all(
                set(parts) <= member.assigned.get(topic_id, frozenset())
                for topic_id, parts in req.owned):
        return
    raise Refused(Error.FENCED_MEMBER_EPOCH, f"The consumer group member has a "
                  f"{'greater' if epoch > member.member_epoch else 'smaller'} member epoch "
                  f"({epoch}) than the one known by the group coordinator "
                  f"({member.member_epoch}). The member must abandon all its partitions "
                  "and rejoin.")


__all__ = ["LEAVE_EPOCH", "Heartbeat"]
