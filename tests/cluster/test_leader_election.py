"""cluster/leader_election.py (Kafka's PartitionLeaderElectionAlgorithms and the leader
and ISR that PartitionStateMachine derives from them) and the state tables of
cluster/controller_states.py (Kafka's PartitionStateMachine / ReplicaStateMachine)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.cluster.controller.context import ControllerContext
from josefk.cluster.controller.leader_election import (
    Election,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassignment_election,
)
from josefk.cluster.controller.states import (
    PARTITION_TRANSITIONS,
    REPLICA_TRANSITIONS,
    IllegalStateTransition,
    PartitionState,
    ReplicaState,
    check_transition,
)

# --- offline (OfflinePartitionLeaderElectionStrategy) --------------------------------------


def test_offline_first_live_isr_replica_in_assignment_order() -> None:
    # Assignment order decides, not ISR order: 3 comes before 2 in the assignment.
    assert offline_election([1, 3, 2], isr=[2, 3, 1], live={2, 3},
                            unclean_enabled=False) == Election(3, (2, 3))
    # The ISR keeps its order and loses the dead replicas only.
    assert offline_election([1, 2, 3, 4], isr=[4, 1, 2], live={2, 3, 4},
                            unclean_enabled=False) == Election(2, (4, 2))


def test_offline_skips_live_replicas_outside_the_isr() -> None:
    # 2 is alive but not in the ISR; 3 is in the ISR and alive.
    assert offline_election([1, 2, 3], isr=[1, 3], live={2, 3},
                            unclean_enabled=True) == Election(3, (3,))


def test_offline_without_live_isr_replica_and_unclean_disabled() -> None:
    assert offline_election([1, 2, 3], isr=[1], live={2, 3}, unclean_enabled=False) is None
    assert offline_election([1, 2], isr=[1, 2], live=set(), unclean_enabled=False) is None


def test_offline_unclean_takes_first_live_replica_with_isr_of_itself() -> None:
    election = offline_election([1, 3, 2], isr=[1], live={2, 3}, unclean_enabled=True)
    assert election == Election(3, (3,), unclean=True)
    assert offline_election([1, 2], isr=[1], live=set(), unclean_enabled=True) is None


def test_offline_clean_election_is_not_marked_unclean() -> None:
    election = offline_election([1, 2], isr=[1, 2], live={2}, unclean_enabled=True)
    assert election == Election(2, (2,)) and not election.unclean


# --- preferred -----------------------------------------------------------------------------


def test_preferred_only_the_first_assigned_replica() -> None:
    assert preferred_election([2, 1, 3], isr=[1, 3, 2], live={1, 2, 3}) == Election(2, (1, 3, 2))
    # Not alive, or not in the ISR: no election (the next replica is never taken).
    assert preferred_election([2, 1, 3], isr=[1, 3], live={1, 2, 3}) is None
    assert preferred_election([2, 1, 3], isr=[1, 2, 3], live={1, 3}) is None
    assert preferred_election([], isr=[1], live={1}) is None


# --- controlled shutdown -----------------------------------------------------------------


def test_controlled_shutdown_moves_leader_and_isr_off_stopping_brokers() -> None:
    # Broker 1 (leader) is stopping: 2 leads, 1 leaves the ISR.
    assert controlled_shutdown_election([1, 2, 3], isr=[1, 2, 3], live={1, 2, 3},
                                        shutting_down={1}) == Election(2, (2, 3))
    # Two stopping brokers: neither leads, both leave the ISR.
    assert controlled_shutdown_election([1, 2, 3], isr=[1, 2, 3], live={1, 2, 3},
                                        shutting_down={1, 2}) == Election(3, (3,))


def test_controlled_shutdown_needs_a_live_isr_replica_that_is_not_stopping() -> None:
    assert controlled_shutdown_election([1, 2, 3], isr=[1], live={1, 2, 3},
                                        shutting_down={1}) is None
    # 2 is in the ISR but dead.
    assert controlled_shutdown_election([1, 2], isr=[1, 2], live={1},
                                        shutting_down={1}) is None
    # Assignment order decides.
    assert controlled_shutdown_election([1, 3, 2], isr=[2, 3, 1], live={1, 2, 3},
                                        shutting_down={1}) == Election(3, (2, 3))


# --- reassignment --------------------------------------------------------------------------


def test_reassignment_picks_from_the_target() -> None:
    # Target [4, 5]: 4 is not in the ISR yet, 5 is; 1 (old replica) is never chosen.
    assert reassignment_election([4, 5], isr=[1, 5], live={1, 4, 5}) == Election(5, (1, 5))
    assert reassignment_election([4, 5], isr=[1, 4, 5], live={1, 4, 5}) == Election(4, (1, 4, 5))
    assert reassignment_election([4, 5], isr=[1], live={1, 4, 5}) is None
    assert reassignment_election([4, 5], isr=[4, 5], live={1}) is None


# --- properties -----------------------------------------------------------------------------

ids = st.integers(0, 6)


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[int], list[int], set[int]]:
    assignment = draw(st.lists(ids, min_size=1, max_size=5, unique=True))
    isr = draw(st.lists(st.sampled_from(assignment), unique=True))
    live = draw(st.sets(ids))
    return assignment, isr, live


@given(partitions(), st.booleans())
def test_offline_election_properties(p: tuple[list[int], list[int], set[int]],
                                     unclean: bool) -> None:
    assignment, isr, live = p
    election = offline_election(assignment, isr, live, unclean)
    clean = [r for r in assignment if r in live and r in isr]
    if clean:
        assert election == Election(clean[0], tuple(b for b in isr if b in live))
    elif unclean and any(r in live for r in assignment):
        first = next(r for r in assignment if r in live)
        assert election == Election(first, (first,), unclean=True)
    else:
        assert election is None


@given(partitions(), st.sets(ids))
def test_controlled_shutdown_election_properties(p: tuple[list[int], list[int], set[int]],
                                                stopping: set[int]) -> None:
    assignment, isr, live = p
    election = controlled_shutdown_election(assignment, isr, live, stopping)
    if election is not None:
        assert election.leader not in stopping and election.leader in live
        assert election.leader in election.isr
        assert not set(election.isr) & stopping
        assert election.isr == tuple(b for b in isr if b not in stopping)
        assert election.leader == next(r for r in assignment
                                       if r in live and r in isr and r not in stopping)
    else:
        assert not any(r in live and r in isr and r not in stopping for r in assignment)


# --- state machines -----------------------------------------------------------------------

P = PartitionState
R = ReplicaState

# Kafka 3.9 PartitionStateMachine.scala: each state's validPreviousStates.
KAFKA_PARTITION_TRANSITIONS = {
    P.NEW: {P.NON_EXISTENT},
    P.ONLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.OFFLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.NON_EXISTENT: {P.OFFLINE},
}
# Kafka 3.9 ReplicaStateMachine.scala.
KAFKA_REPLICA_TRANSITIONS = {
    R.NEW: {R.NON_EXISTENT},
    R.ONLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.OFFLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.DELETION_STARTED: {R.OFFLINE},
    R.DELETION_SUCCESSFUL: {R.DELETION_STARTED},
    R.DELETION_INELIGIBLE: {R.OFFLINE, R.DELETION_STARTED},
    R.NON_EXISTENT: {R.DELETION_SUCCESSFUL},
}


def test_state_names_are_kafkas() -> None:
    assert {s.value for s in P} == {"NonExistentPartition", "NewPartition", "OnlinePartition",
                                    "OfflinePartition"}
    assert {s.value for s in R} == {
        "NonExistentReplica", "NewReplica", "OnlineReplica", "OfflineReplica",
        "ReplicaDeletionStarted", "ReplicaDeletionSuccessful", "ReplicaDeletionIneligible"}


def test_tables_are_kafkas() -> None:
    assert dict(PARTITION_TRANSITIONS) == KAFKA_PARTITION_TRANSITIONS
    assert dict(REPLICA_TRANSITIONS) == KAFKA_REPLICA_TRANSITIONS
    with pytest.raises(TypeError):
        PARTITION_TRANSITIONS[P.NEW] = frozenset()  # type: ignore[index]


@pytest.mark.parametrize(("current", "target"), list(itertools.product(P, P)),
                         ids=lambda s: s.name)
def test_partition_transitions(current: PartitionState, target: PartitionState) -> None:
    if current in KAFKA_PARTITION_TRANSITIONS[target]:
        check_transition(PARTITION_TRANSITIONS, "p", current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=target.value):
            check_transition(PARTITION_TRANSITIONS, "p", current, target)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(R, R)),
                         ids=lambda s: s.name)
def test_replica_transitions(current: ReplicaState, target: ReplicaState) -> None:
    if current in KAFKA_REPLICA_TRANSITIONS[target]:
        check_transition(REPLICA_TRANSITIONS, "r", current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=current.value):
            check_transition(REPLICA_TRANSITIONS, "r", current, target)


def test_context_refuses_illegal_transitions_and_keeps_the_state() -> None:
    ctx = ControllerContext(controller_id=1)
    tp = ("t", 0)
    assert not ctx.move_partition(tp, P.ONLINE)  # NonExistent -> Online: illegal
    assert tp not in ctx.partition_states
    assert ctx.move_partition(tp, P.NEW)
    assert ctx.move_partition(tp, P.ONLINE)
    assert not ctx.move_partition(tp, P.NEW)
    assert ctx.partition_states[tp] is P.ONLINE
    assert not ctx.move_partition(tp, P.NON_EXISTENT)  # only from Offline
    assert ctx.move_partition(tp, P.OFFLINE) and ctx.move_partition(tp, P.NON_EXISTENT)
    assert tp not in ctx.partition_states

    assert not ctx.move_replica(tp, 3, R.ONLINE)
    assert ctx.replica_state(tp, 3) is R.NON_EXISTENT
    for state in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL):
        assert ctx.move_replica(tp, 3, state)
    assert not ctx.move_replica(tp, 3, R.ONLINE)
    assert ctx.replica_state(tp, 3) is R.DELETION_SUCCESSFUL
    assert ctx.move_replica(tp, 3, R.NON_EXISTENT)
    assert (tp[0], tp[1], 3) not in ctx.replica_states
