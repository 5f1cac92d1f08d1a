"""Moving one member towards its target assignment (Kafka's ``CurrentAssignmentBuilder``),
as a table of transitions.

Revoke before assign: a member first keeps only the target partitions it has and is
told to give up the others (UNREVOKED_PARTITIONS, same epoch); once a heartbeat shows it
no longer owns them it takes the target's epoch and the new partitions that are free;
partitions still owned (or being revoked) by another member wait (UNRELEASED_PARTITIONS)
until a later heartbeat finds them free.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from enum import Enum

from josefk.cluster.coordinator.group.api import Error, GroupError
from josefk.cluster.coordinator.group.consumer.member import ConsumerMember, MemberState
from josefk.cluster.coordinator.group.consumer.records import Assignment

# The epoch of the member a partition is assigned to (or being revoked from), -1 if free.
PartitionEpoch = Callable[[uuid.UUID, int], int]
# What a heartbeat says the member owns: None when it did not say.
Owned = Iterable[tuple[uuid.UUID, Iterable[int]]] | None


class Step(Enum):
    """What a heartbeat does to a member's assignment."""

    STAY = "stay"
    NEXT_AT_MEMBER_EPOCH = "next assignment, member epoch kept"
    NEXT_AT_BUMPED_EPOCH = "next assignment, member epoch + 1"
    NEXT_AT_TARGET_EPOCH = "next assignment at the target's epoch"
    FENCE = "fence"


# (state, condition) -> step. The conditions are computed by `_condition`.
TRANSITIONS: dict[tuple[MemberState, str], Step] = {
    (MemberState.STABLE, "at target epoch"): Step.STAY,
    (MemberState.STABLE, "behind target epoch"): Step.NEXT_AT_MEMBER_EPOCH,
    (MemberState.UNREVOKED_PARTITIONS, "still owns revoked"): Step.STAY,
    (MemberState.UNREVOKED_PARTITIONS, "revoked"): Step.NEXT_AT_BUMPED_EPOCH,
    (MemberState.UNRELEASED_PARTITIONS, "any"): Step.NEXT_AT_MEMBER_EPOCH,
    (MemberState.UNKNOWN, "owns nothing"): Step.NEXT_AT_TARGET_EPOCH,
    (MemberState.UNKNOWN, "owns something or did not say"): Step.FENCE,
}


def _owns_any(owned: Owned, partitions: Assignment) -> bool:
    """Whether the heartbeat's partitions include any of ``partitions`` (unknown: yes)."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, ()) for topic_id, parts in owned for p in parts)


def _condition(member: ConsumerMember, target_epoch: int, owned: Owned) -> str:
    match member.state:
        case MemberState.STABLE:
            return "at target epoch" if member.member_epoch == target_epoch else \
                "behind target epoch"
        case MemberState.UNREVOKED_PARTITIONS:
            return "still owns revoked" if _owns_any(owned, member.pending_revocation) else \
                "revoked"
        case MemberState.UNRELEASED_PARTITIONS:
            return "any"
        case _:
            nothing = owned is not None and not any(list(parts) for _, parts in owned)
            return "owns nothing" if nothing else "owns something or did not say"


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              partition_epoch: PartitionEpoch, owned: Owned) -> ConsumerMember:
    """The member after one heartbeat towards ``target`` (at ``target_epoch``);
    GroupError(FENCED_MEMBER_EPOCH) when it must rejoin."""
    owned = None if owned is None else [(t, list(ps)) for t, ps in owned]
    step = TRANSITIONS[(member.state, _condition(member, target_epoch, owned))]
    if step is Step.STAY:
        return member
    if step is Step.FENCE:
        raise GroupError(Error.FENCED_MEMBER_EPOCH)
    epoch = {Step.NEXT_AT_MEMBER_EPOCH: member.member_epoch,
             Step.NEXT_AT_BUMPED_EPOCH: member.member_epoch + 1,
             Step.NEXT_AT_TARGET_EPOCH: target_epoch}[step]
    return next_assignment(member, epoch, target_epoch, target, partition_epoch, owned)


def next_assignment(member: ConsumerMember, epoch: int, target_epoch: int, target: Assignment,
                    partition_epoch: PartitionEpoch, owned: Owned) -> ConsumerMember:
    """Kafka's computeNextAssignment: keep, revoke, or take free target partitions."""
    kept: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    new: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep, revoke = current & wanted, current - wanted
        free = frozenset(p for p in wanted - keep if partition_epoch(topic_id, p) == -1)
        unreleased |= len(free) < len(wanted - keep)
        for into, parts in ((kept, keep), (revoking, revoke), (new, free)):
            if parts:
                into[topic_id] = parts
    if revoking and _owns_any(owned, revoking):
        return member.with_epoch(epoch).replace(
            state=MemberState.UNREVOKED_PARTITIONS, assigned=kept, pending_revocation=revoking,
            assignment_epochs=member.owned_epochs())
    epochs = {tp: member.epoch_of(*tp) for tp in _pairs(kept)}
    for topic_id, parts in new.items():
        kept[topic_id] = kept.get(topic_id, frozenset()) | parts
        epochs.update(((topic_id, p), target_epoch) for p in parts)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch).replace(state=state, assigned=kept,
                                                   pending_revocation={},
                                                   assignment_epochs=epochs)


def _pairs(assignment: Assignment) -> Iterable[tuple[uuid.UUID, int]]:
    return ((topic_id, p) for topic_id, parts in assignment.items() for p in parts)
