"""Kafka's partition leader election strategies (``PartitionLeaderElectionAlgorithms``).

Each takes a partition's assignment (preferred replica first), its ISR and what is
alive, and returns the new leader and ISR, or None when no replica qualifies.
Pure functions: the controller writes the result to ZooKeeper and tells the brokers.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def offline_election(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                     unclean_enabled: bool) -> Election | None:
    """A partition without a live leader: the first live replica, in assignment order,
    that is in the ISR; with unclean election enabled, the first live replica at all
    (its ISR is then itself alone, and acknowledged data may be lost)."""
    live_isr = tuple(b for b in isr if b in live)
    for replica in assignment:
        if replica in live and replica in isr:
            return Election(replica, live_isr)
    if unclean_enabled:
        for replica in assignment:
            if replica in live:
                return Election(replica, (replica,), unclean=True)
    return None


def reassignment_election(target: Sequence[int], isr: Sequence[int], live: Collection[int]
                          ) -> Election | None:
    """After a reassignment: the first live replica of the target that is in the ISR."""
    for replica in target:
        if replica in live and replica in isr:
            return Election(replica, tuple(isr))
    return None


def preferred_election(assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
                       ) -> Election | None:
    """The preferred (first assigned) replica, when it is alive and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return Election(assignment[0], tuple(isr))
    return None


def controlled_shutdown_election(assignment: Sequence[int], isr: Sequence[int],
                                 live: Collection[int], shutting_down: Collection[int]
                                 ) -> Election | None:
    """Move leadership off brokers that are shutting down: the first live replica in the
    ISR that is not shutting down; the ISR loses the shutting-down brokers."""
    new_isr = tuple(b for b in isr if b not in shutting_down)
    for replica in assignment:
        if replica in live and replica in new_isr:
            return Election(replica, new_isr)
    return None
