"""Rack-aware replica placement: Kafka's ``AdminUtils.assignReplicasToBrokersRackAware``.

The exact cases come from Apache Kafka's ``AdminRackAwareTest`` (its broker -> rack maps
and, where it gives them, its expected assignments) or are worked out by hand from the
algorithm; the distribution checks are those Kafka's ``RackAwareTest`` makes.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.cluster.metadata.errors import (
    ClusterError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    MissingRackError,
)
from josefk.cluster.metadata.placement import assign_replicas, rack_alternated_brokers
from josefk.cluster.metadata.store import BrokerInfo, LocalMetadataStore

# Kafka's examples: the javadoc of assignReplicasToBrokers, and most of AdminRackAwareTest.
DOC_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
EVEN_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


class ScriptedRng:
    """Answers ``randrange`` with the given values in turn (start index, then shift)."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def randrange(self, stop: int, /) -> int:
        value = self.values.pop(0)
        assert 0 <= value < stop
        return value


def leaders(assignment: Iterable[list[int]]) -> Counter[int]:
    return Counter(replicas[0] for replicas in assignment)


def check_distribution(assignment: list[list[int]], racks: Mapping[int, str], partitions: int,
                       rf: int, *, rack_aware: bool = True, even_leaders: bool = True,
                       even_replicas: bool = True) -> None:
    """The checks of Kafka's ``RackAwareTest.checkReplicaDistribution``."""
    assert len(assignment) == partitions
    for replicas in assignment:
        assert len(replicas) == rf and len(set(replicas)) == rf
    if rack_aware:
        assert all(len({racks[b] for b in replicas}) == rf for replicas in assignment)
    if even_leaders:
        assert leaders(assignment) == dict.fromkeys(racks, partitions // len(racks))
    if even_replicas:
        counts = Counter(b for replicas in assignment for b in replicas)
        assert counts == dict.fromkeys(racks, partitions * rf // len(racks))


def every_start(racks: Mapping[int, str], partitions: int, rf: int,
                start_partition_id: int = 0) -> Iterable[list[list[int]]]:
    """The assignment for every random start index and shift Kafka could draw."""
    n = len(racks)
    for start in range(n):
        for shift in range(n):
            yield assign_replicas(racks, partitions, rf, rng=ScriptedRng(start, shift),
                                  start_partition_id=start_partition_id, racks=racks)


# --- the rack-alternated broker list -----------------------------------------------------


def test_rack_alternated_list_matches_kafkas() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    assert rack_alternated_brokers(DOC_RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in DOC_RACKS.items() if b != 5}) == [
        0, 3, 1, 4, 2]
    # The javadoc of getRackAlternatedBrokerList.
    nine = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_brokers(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_alternated_list_with_uneven_racks() -> None:
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assert rack_alternated_brokers(racks) == [0, 1, 2, 3, 4]
    assert rack_alternated_brokers({7: "z", 3: "z", 9: "y", 1: "x"}) == [1, 9, 3, 7]


def test_racks_are_ordered_as_java_strings() -> None:
    # Java orders strings by UTF-16 code units: U+FF21 comes after the surrogate pair of
    # U+1F600, although its code point is smaller.
    assert rack_alternated_brokers({0: "\uff21", 1: "\U0001f600", 2: "B", 3: "a"}) == [2, 3, 1, 0]


# --- exact assignments -------------------------------------------------------------------


def test_kafkas_expected_rack_aware_assignment() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers: 7
    # partitions, start index 0; partition 6 is where the followers' shift first grows.
    assert assign_replicas(DOC_RACKS, 7, 3, start_index=0, racks=DOC_RACKS) == [
        [0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2]]


def test_rack_aware_assignment_from_start_index_2() -> None:
    # AdminRackAwareTest.testAssignmentWithRackAware's input; worked out by hand over the
    # rack-alternated list 0, 1, 3, 5, 2, 4 with a shift of 2 * 3 racks.
    result = assign_replicas(EVEN_RACKS, 6, 3, start_index=2, racks=EVEN_RACKS)
    assert result == [[3, 2, 0], [5, 4, 1], [2, 0, 3], [4, 1, 5], [0, 3, 2], [1, 5, 4]]
    check_distribution(result, EVEN_RACKS, 6, 3)


def test_followers_skip_brokers_already_chosen() -> None:
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned's input (a negative start
    # partition counts as 0); worked out by hand. Rack "a" holds three of the five brokers,
    # so once every rack has a replica the look for followers runs into brokers already
    # chosen (partition 2 skips broker 2) and into full racks (partition 3 skips 3 and 4).
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    result = assign_replicas(racks, 6, 4, start_index=2, start_partition_id=-1, racks=racks)
    assert result == [[2, 0, 1, 3], [3, 1, 2, 4], [4, 2, 1, 3], [0, 1, 2, 3], [1, 4, 2, 3],
                      [2, 4, 1, 3]]
    check_distribution(result, racks, 6, 4, rack_aware=False, even_leaders=False,
                       even_replicas=False)


def test_random_start_draws_start_then_shift() -> None:
    # Kafka draws the start index, then the shift; they differ here.
    result = assign_replicas(DOC_RACKS, 2, 3, rng=ScriptedRng(1, 4), racks=DOC_RACKS)
    # Leaders at positions 1 and 2 of 0, 3, 1, 5, 4, 2 (racks 1, 2, 3, 1, 2, 3); the
    # followers are looked for 1 + (4 * 3 + k) % 5 = 3, 4, 5, ... places past the leader,
    # so each partition skips the first broker looked at, whose rack is the leader's.
    assert result == [[3, 2, 0], [1, 0, 3]]


def test_added_partitions_continue_the_assignment() -> None:
    whole = assign_replicas(DOC_RACKS, 14, 3, start_index=4, racks=DOC_RACKS)
    assert whole[:4] + assign_replicas(DOC_RACKS, 10, 3, start_index=4, start_partition_id=4,
                                       racks=DOC_RACKS) == whole
    # As in Kafka, the shift only grows at the multiples of the broker count the added
    # partitions pass, so past the first round the continuation differs.
    assert assign_replicas(DOC_RACKS, 5, 3, start_index=4, start_partition_id=9,
                           racks=DOC_RACKS) != whole[9:]


# --- Kafka's distribution checks ---------------------------------------------------------


@pytest.mark.parametrize(("racks", "partitions", "rf", "checks"), [
    # testAssignmentWithRackAwareWithRandomStartIndex
    (EVEN_RACKS, 6, 3, {}),
    # testAssignmentWithRackAwareWithUnevenRacks
    ({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3,
     {"even_replicas": False}),
    # testAssignmentWith2ReplicasRackAware
    (EVEN_RACKS, 12, 2, {}),
    # testAssignmentWith2ReplicasRackAwareWith6Partitions
    (EVEN_RACKS, 6, 2, {}),
    # testAssignmentWith2ReplicasRackAwareWith6PartitionsAnd3Brokers
    ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, {}),
    # testLargeNumberPartitionsAssignment
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1", 6: "rack1",
      7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}, 96, 3, {}),
    # RackAwareAutoTopicCreationTest: four brokers on racks "0", "0", "1", "1".
    ({0: "0", 1: "0", 2: "1", 3: "1"}, 8, 2, {}),
])
def test_kafkas_distribution_cases(racks: dict[int, str], partitions: int, rf: int,
                                   checks: dict[str, bool]) -> None:
    for result in every_start(racks, partitions, rf):
        check_distribution(result, racks, partitions, rf, **checks)


def test_uneven_replicas_from_start_index_0() -> None:
    # testAssignmentWithRackAwareWithUnevenReplicas: 13 partitions over 6 brokers.
    result = assign_replicas(EVEN_RACKS, 13, 3, start_index=0, racks=EVEN_RACKS)
    check_distribution(result, EVEN_RACKS, 13, 3, even_leaders=False, even_replicas=False)


def test_rack_aware_expansion() -> None:
    # testRackAwareExpansion: partitions 12-23 over brokers 6-11.
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    for result in every_start(racks, 12, 2, start_partition_id=12):
        check_distribution(result, racks, 12, 2)


def test_more_replicas_than_racks() -> None:
    # testMoreReplicasThanRacks: every partition still spans all 3 racks.
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for result in every_start(racks, 6, 5):
        assert all(len(r) == 5 and len({racks[b] for b in r}) == 3 for r in result)


def test_less_replicas_than_racks() -> None:
    # testLessReplicasThanRacks
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for result in every_start(racks, 6, 2):
        assert all(len(r) == 2 and len({racks[b] for b in r}) == 2 for r in result)


def test_single_rack() -> None:
    # testSingleRack: one rack, so each partition's replicas share it; one leader each.
    racks = dict.fromkeys(range(6), "rack1")
    for result in every_start(racks, 6, 3):
        assert all(len(r) == 3 and len(set(r)) == 3 for r in result)
        assert leaders(result) == dict.fromkeys(range(6), 1)


# --- errors ------------------------------------------------------------------------------


MIXED = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: None}


@pytest.mark.parametrize(("partitions", "rf", "error"), [
    # AdminRackAwareTest.testAssignReplicasToBrokersWithInvalidParameters: the counts are
    # checked before the racks.
    (0, 0, InvalidPartitionsError),
    (10, 0, InvalidReplicationFactorError),
    (10, 6, InvalidReplicationFactorError),
    (10, 5, MissingRackError),
    (1, 1, MissingRackError),
])
def test_mixed_racks_are_refused(partitions: int, rf: int, error: type[Exception]) -> None:
    with pytest.raises(error) as err:
        assign_replicas(MIXED, partitions, rf, racks=MIXED)
    if error is MissingRackError:
        assert str(err.value) == (
            "Not all brokers have rack information for replica rack aware assignment.")


def test_mixed_racks_error_is_unknown_server_error() -> None:
    # Kafka's AdminOperationException is no ApiException: UNKNOWN_SERVER_ERROR.
    assert issubclass(MissingRackError, ClusterError)
    assert MissingRackError.error_code == -1


def test_a_broker_missing_from_the_rack_map_has_no_rack() -> None:
    with pytest.raises(MissingRackError):
        assign_replicas([0, 1, 2], 3, 2, racks={0: "a", 1: "b"})


# --- properties --------------------------------------------------------------------------


@st.composite
def racked_brokers(draw: st.DrawFn) -> dict[int, str]:
    ids = draw(st.sets(st.integers(0, 1000), min_size=1, max_size=12))
    names = draw(st.lists(st.text("abcxyz\u00e9\U0001f600", min_size=1, max_size=3),
                          min_size=1, max_size=5, unique=True))
    return {b: draw(st.sampled_from(names)) for b in sorted(ids)}


@settings(max_examples=300)
@given(racked_brokers(), st.integers(1, 60), st.data())
def test_rack_aware_properties(racks: dict[int, str], partitions: int,
                               data: st.DataObject) -> None:
    n = len(racks)
    num_racks = len(set(racks.values()))
    rf = data.draw(st.integers(1, n))
    start = data.draw(st.one_of(st.none(), st.integers(0, n - 1)))
    first_partition = data.draw(st.integers(0, 30))
    result = assign_replicas(racks, partitions, rf, start, random.Random(0),
                             start_partition_id=first_partition, racks=racks)
    assert len(result) == partitions
    for replicas in result:
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(racks)
        # rf <= racks: one replica a rack; rf > racks: every rack holds one.
        assert len({racks[b] for b in replicas}) == min(rf, num_racks)
    # Leaders go round the rack-alternated list one by one, so they are spread evenly.
    arranged = rack_alternated_brokers(racks)
    first = arranged.index(result[0][0])
    assert [r[0] for r in result] == [arranged[(first + p) % n] for p in range(partitions)]
    counts = leaders(result)
    assert max(counts.values()) - min(counts.get(b, 0) for b in racks) <= 1
    if partitions % n == 0:
        assert counts == dict.fromkeys(racks, partitions // n)
    if start is not None:
        assert result[0][0] == arranged[(start + first_partition) % n]


@settings(max_examples=200)
@given(st.sets(st.integers(0, 1000), min_size=1, max_size=12), st.integers(1, 40),
       st.data())
def test_racks_that_cannot_matter_give_the_rack_unaware_assignment(
        brokers: set[int], partitions: int, data: st.DataObject) -> None:
    # One rack for all, or one rack each (named in id order): the rack-alternated list is
    # the sorted ids, no follower is ever skipped, and the shift times the number of racks
    # is the same modulo brokers - 1, so Kafka's two algorithms agree.
    rf = data.draw(st.integers(1, len(brokers)))
    start = data.draw(st.integers(0, len(brokers) - 1))
    first_partition = data.draw(st.integers(0, 30))
    unaware = assign_replicas(brokers, partitions, rf, start, start_partition_id=first_partition)
    one_rack = dict.fromkeys(brokers, "r")
    own_rack = {b: f"r{b:04d}" for b in brokers}
    for racks in (one_rack, own_rack):
        assert assign_replicas(brokers, partitions, rf, start, start_partition_id=first_partition,
                               racks=racks) == unaware


@settings(max_examples=200)
@given(st.sets(st.integers(0, 1000), min_size=1, max_size=12), st.integers(1, 40),
       st.data())
def test_no_racks_is_rack_unaware(brokers: set[int], partitions: int,
                                  data: st.DataObject) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    seed = data.draw(st.integers(0, 2**32))
    unaware = assign_replicas(brokers, partitions, rf, rng=random.Random(seed))
    assert assign_replicas(brokers, partitions, rf, rng=random.Random(seed),
                           racks=dict.fromkeys(brokers)) == unaware
    assert assign_replicas(brokers, partitions, rf, rng=random.Random(seed), racks={}) == unaware


def test_rack_unaware_assignment_unchanged() -> None:
    # AdminRackAwareTest.testReplicaAssignment: brokers without racks, start index 0.
    assert assign_replicas(range(5), 10, 3, start_index=0, racks=dict.fromkeys(range(5))) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
        [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2]]


# --- through the stores ------------------------------------------------------------------


class RackedStore(LocalMetadataStore):
    """The local store pretending the given brokers (and their racks)."""

    def __init__(self, tmp_path: Path, racks: Mapping[int, str | None], **kwargs: Any) -> None:
        self.racks = dict(racks)
        super().__init__(tmp_path / "data", BrokerInfo(0, "127.0.0.1", 9092), **kwargs)

    def brokers(self) -> list[BrokerInfo]:
        # Unsorted on purpose: placement must not depend on the order brokers come in.
        return [BrokerInfo(b, "127.0.0.1", 9092 + b, rack)
                for b, rack in sorted(self.racks.items(), reverse=True)]


async def test_create_topic_places_by_rack(tmp_path: Path) -> None:
    store = RackedStore(tmp_path, DOC_RACKS, rng=ScriptedRng(0, 0))
    topic = await store.create_topic("t", 7, 3)
    assert topic.replicas == [(0, 3, 1), (3, 1, 5), (1, 5, 4), (5, 4, 2), (4, 2, 0), (2, 0, 3),
                              (0, 4, 2)]


async def test_create_topic_uses_the_default_counts_by_rack(tmp_path: Path) -> None:
    store = RackedStore(tmp_path, EVEN_RACKS, rng=ScriptedRng(2, 2),
                        default_num_partitions=6, default_replication_factor=3)
    topic = await store.create_topic("t", -1, -1)
    assert topic.replicas == [(3, 2, 0), (5, 4, 1), (2, 0, 3), (4, 1, 5), (0, 3, 2), (1, 5, 4)]


async def test_create_partitions_places_by_rack(tmp_path: Path) -> None:
    # As Kafka's addPartitions: the start index is partition 0's leader's place among the
    # brokers sorted by id (broker 3: index 3), used on the rack-alternated list
    # 0, 3, 1, 5, 4, 2, from partition 1 on; worked out by hand.
    store = RackedStore(tmp_path, DOC_RACKS, rng=ScriptedRng())
    await store.create_topic("t", -1, -1, assignment=[[3, 1, 5]])
    topic = await store.create_partitions("t", 4)
    assert topic.replicas == [(3, 1, 5), (4, 5, 2), (2, 4, 0), (0, 2, 3)]
    assert [list(r) for r in topic.replicas[1:]] == assign_replicas(
        DOC_RACKS, 3, 3, start_index=3, start_partition_id=1, racks=DOC_RACKS)


async def test_store_without_racks_is_rack_unaware(tmp_path: Path) -> None:
    store = RackedStore(tmp_path, dict.fromkeys(range(5)), rng=ScriptedRng(0, 0))
    topic = await store.create_topic("t", 10, 3)
    assert [list(r) for r in topic.replicas] == assign_replicas(range(5), 10, 3, start_index=0)
    grown = await store.create_partitions("t", 13)
    assert [list(r) for r in grown.replicas[10:]] == assign_replicas(
        range(5), 3, 3, start_index=0, start_partition_id=10)


async def test_store_refuses_mixed_racks(tmp_path: Path) -> None:
    store = RackedStore(tmp_path, MIXED)
    with pytest.raises(MissingRackError) as err:
        await store.create_topic("t", 3, 2)
    assert err.value.error_code == -1
    assert store.get("t") is None
    # Too many replicas is still the controller's INVALID_REPLICATION_FACTOR, checked first.
    with pytest.raises(InvalidReplicationFactorError):
        await store.create_topic("t", 3, 6)
    # A manual assignment needs no placement.
    await store.create_topic("t", -1, -1, assignment=[[4, 0]])
    with pytest.raises(MissingRackError):
        await store.create_partitions("t", 2)
    assert store.get("t").num_partitions == 1  # type: ignore[union-attr]
