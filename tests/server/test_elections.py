"""The single broker's answers to ElectLeaders and AlterPartitionReassignments (KRaft's
ReplicationControlManager on one node), and the v1 replication-factor check of a
cluster's reassignments, over the topics of a metadata store (real `Topic` values)."""

from __future__ import annotations

import uuid

from josefk.cluster.metadata.store import Topic
from josefk.protocol import error_codes as ec
from josefk.server.handlers.elections import (
    elect_one_broker,
    reassign_one_broker,
    rf_changes,
)


class Store:
    """The two lookups the functions make of a MetadataStore."""

    def __init__(self, *topics: Topic) -> None:
        self._topics = {t.name: t for t in topics}

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def topics(self) -> list[Topic]:
        return list(self._topics.values())


STORE = Store(Topic.of("t", uuid.uuid4(), [[0], [0]]), Topic.of("u", uuid.uuid4(), [[0]]))


def test_elect_is_never_needed_and_unknown_partitions_are_named() -> None:
    got = elect_one_broker(STORE, [("t", 0), ("t", 1), ("t", 5), ("x", 0)])  # type: ignore[arg-type]
    assert {(t, p): e for t, rs in got.items() for p, e, _ in rs} == {
        ("t", 0): ec.ELECTION_NOT_NEEDED, ("t", 1): ec.ELECTION_NOT_NEEDED,
        ("t", 5): ec.UNKNOWN_TOPIC_OR_PARTITION, ("x", 0): ec.UNKNOWN_TOPIC_OR_PARTITION}
    assert got["x"][0][2] == "No such topic as x"
    # Every partition: each topic listed, none of its partitions.
    assert elect_one_broker(STORE, None) == {"t": [], "u": []}  # type: ignore[arg-type]


def test_reassign_to_the_only_replica_and_nothing_else() -> None:
    got = reassign_one_broker(STORE, 0, {  # type: ignore[arg-type]
        ("t", 0): (0,), ("t", 1): (1,), ("u", 0): (0, 0), ("x", 0): (0,), ("t", 9): (0,),
        ("u", 1): None})
    assert {tp: e for tp, (e, _) in got.items()} == {
        ("t", 0): ec.NONE, ("t", 1): ec.INVALID_REPLICA_ASSIGNMENT,
        ("u", 0): ec.INVALID_REPLICA_ASSIGNMENT, ("x", 0): ec.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 9): ec.UNKNOWN_TOPIC_OR_PARTITION, ("u", 1): ec.UNKNOWN_TOPIC_OR_PARTITION}
    assert got[("t", 1)][1] == ("The manual partition assignment includes broker 1, but no "
                                "such broker is registered.")
    assert reassign_one_broker(STORE, 0, {("t", 0): None}) == {  # type: ignore[arg-type]
        ("t", 0): (ec.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")}
    assert reassign_one_broker(STORE, 0, {("t", 0): ()})[("t", 0)][0] == (  # type: ignore[arg-type]
        ec.INVALID_REPLICA_ASSIGNMENT)


def test_replication_factor_changes_are_found() -> None:
    got = rf_changes(STORE, {("t", 0): (0, 1), ("t", 1): (1,), ("u", 0): None,  # type: ignore[arg-type]
                             ("x", 0): (1, 2)})
    assert got == {("t", 0): (38, "The replication factor is changed from 1 to 2")}
