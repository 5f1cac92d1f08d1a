"""A member's way to its target assignment, row by row of the transition table: it
revokes before anything is assigned, and takes partitions only once they are free."""

from __future__ import annotations

import uuid

import pytest

from josefk.cluster.coordinator.group.api import Error, GroupError
from josefk.cluster.coordinator.group.consumer.member import ConsumerMember, MemberState
from josefk.cluster.coordinator.group.consumer.reconciliation import (
    TRANSITIONS,
    Step,
    reconcile,
)

T = uuid.UUID(int=7)


def parts(*ps: int) -> dict[uuid.UUID, frozenset[int]]:
    return {T: frozenset(ps)} if ps else {}


def free(_topic: uuid.UUID, _p: int) -> int:
    return -1


def owned_by_other(*taken: int):
    return lambda _t, p: 5 if p in taken else -1


def member(epoch: int, assigned: tuple[int, ...] = (), state: MemberState = MemberState.STABLE,
           pending: tuple[int, ...] = ()) -> ConsumerMember:
    return ConsumerMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1,
                          state=state, assigned=parts(*assigned),
                          pending_revocation=parts(*pending))


def test_every_state_has_its_rows() -> None:
    assert {state for state, _ in TRANSITIONS} == set(MemberState)


def test_stable_at_target_stays() -> None:
    m = member(3, (0, 1))
    assert reconcile(m, 3, parts(0, 1, 2), free, [(T, [0, 1])]) is m


def test_stable_behind_gets_free_partitions_at_the_target_epoch() -> None:
    m = reconcile(member(3, (0,)), 4, parts(0, 1), free, [(T, [0])])
    assert (m.state, m.member_epoch, m.previous_member_epoch, m.assigned) == \
        (MemberState.STABLE, 4, 3, parts(0, 1))


def test_revokes_before_it_assigns() -> None:
    m = reconcile(member(3, (0, 1, 2)), 4, parts(0, 3), free, [(T, [0, 1, 2])])
    # Same epoch, only the kept partition; the new one waits for the revocation.
    assert (m.state, m.member_epoch, m.assigned, m.pending_revocation) == \
        (MemberState.UNREVOKED_PARTITIONS, 3, parts(0), parts(1, 2))
    # Still owning a revoked partition: nothing moves.
    assert reconcile(m, 4, parts(0, 3), free, [(T, [0, 1])]) is m
    # Unknown ownership (a heartbeat without TopicPartitions) counts as still owning.
    assert reconcile(m, 4, parts(0, 3), free, None) is m
    done = reconcile(m, 4, parts(0, 3), free, [(T, [0])])
    assert (done.state, done.member_epoch, done.assigned, done.pending_revocation) == \
        (MemberState.STABLE, 4, parts(0, 3), {})


def test_revoked_partitions_already_dropped_are_not_waited_for() -> None:
    m = reconcile(member(3, (0, 1)), 4, parts(0), free, [(T, [0])])
    assert (m.state, m.member_epoch, m.assigned) == (MemberState.STABLE, 4, parts(0))


def test_partitions_of_another_member_are_unreleased_until_free() -> None:
    m = reconcile(member(3, (0,)), 4, parts(0, 1), owned_by_other(1), [(T, [0])])
    assert (m.state, m.member_epoch, m.assigned) == \
        (MemberState.UNRELEASED_PARTITIONS, 4, parts(0))
    still = reconcile(m, 4, parts(0, 1), owned_by_other(1), [(T, [0])])
    assert still.state is MemberState.UNRELEASED_PARTITIONS
    released = reconcile(m, 4, parts(0, 1), free, [(T, [0])])
    assert (released.state, released.assigned) == (MemberState.STABLE, parts(0, 1))


def test_unknown_state_rejoins_or_is_fenced() -> None:
    m = member(3, (0,), state=MemberState.UNKNOWN)
    assert reconcile(m, 5, parts(1), free, []).member_epoch == 5
    for owned in (None, [(T, [0])]):
        with pytest.raises(GroupError) as e:
            reconcile(m, 5, parts(1), free, owned)
        assert e.value.code is Error.FENCED_MEMBER_EPOCH


def test_table_rows_map_to_steps() -> None:
    assert TRANSITIONS[(MemberState.UNREVOKED_PARTITIONS, "revoked")] is \
        Step.NEXT_AT_BUMPED_EPOCH
