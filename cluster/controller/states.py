"""The controller's partition and replica state machines, as tables (Kafka's
``PartitionStateMachine`` and ``ReplicaStateMachine``).

Each table maps a target state to the states it may be entered from; anything else is
an `IllegalStateTransition`, logged and refused as Kafka does. The states themselves
live in `ControllerContext`; the controller decides the transitions and the requests
that go with them.
"""

from __future__ import annotations

from enum import Enum
from types import MappingProxyType
from typing import TypeVar


class PartitionState(Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(Enum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


_P = PartitionState
PARTITION_TRANSITIONS = MappingProxyType({
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
})

_R = ReplicaState
REPLICA_TRANSITIONS = MappingProxyType({
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
})


class IllegalStateTransition(Exception):
    """A transition the table does not list."""


S = TypeVar("S", PartitionState, ReplicaState)


def check_transition(table: MappingProxyType[S, frozenset[S]], what: str, current: S,
                     target: S) -> None:
    """Raise IllegalStateTransition unless ``table`` allows ``current`` -> ``target``."""
    if current not in table[target]:
        raise IllegalStateTransition(
            f"{what}: illegal state transition from {current.value} to {target.value}; "
            f"valid previous states are "
            f"{', '.join(sorted(s.value for s in table[target]))}")
