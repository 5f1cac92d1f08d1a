"""Replica placement: Kafka's ``AdminUtils.assignReplicasToBrokers``, rack-unaware, or
rack-aware once brokers have racks."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Protocol

from josefk.cluster.metadata.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    MissingRackError,
)


class Rng(Protocol):
    """Where the random start of a placement comes from (`random`, or a test's script)."""

    def randrange(self, stop: int, /) -> int: ...


def assign_replicas(broker_ids: Iterable[int], num_partitions: int, replication_factor: int,
                    start_index: int | None = None, rng: Rng = random, *,
                    start_partition_id: int = 0,
                    racks: Mapping[int, str | None] | None = None) -> list[list[int]]:
    """Kafka's ``AdminUtils.assignReplicasToBrokers`` over ``broker_ids``.

    ``racks`` maps broker ids to their racks (None or absent: no rack). With no rack
    anywhere the assignment is rack-unaware over the sorted ids: partition
    ``start_partition_id``'s first replica is the broker at ``start_index`` (random if
    None); each later partition's first replica is the next broker; the followers come
    after the first replica at a shift that also starts at ``start_index`` (or at random)
    and grows by one each time the partitions have gone once round the brokers. When
    every broker has a rack the same is done over `rack_alternated_brokers`, with the
    shift scaled by the number of racks and followers skipping brokers whose rack
    already holds a replica of the partition until every rack holds one (see
    `_assign_rack_aware`). Some brokers with a rack and some without is a
    `MissingRackError`. Returns the replica lists of the ``num_partitions`` partitions
    from ``start_partition_id`` on.
    """
    brokers = sorted(broker_ids)
    n = len(brokers)
    if len(set(brokers)) != n:
        raise ValueError(f"duplicate broker ids in {brokers}")
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    given = racks or {}
    with_rack = {b: rack for b in brokers if (rack := given.get(b)) is not None}
    if with_rack:
        if len(with_rack) < n:
            raise MissingRackError(
                "Not all brokers have rack information for replica rack aware assignment.")
        return _assign_rack_aware(with_rack, num_partitions, replication_factor,
                                  start_index, rng, start_partition_id)
    return [[brokers[leader]] + [brokers[(leader + 1 + (shift + j) % (n - 1)) % n]
                                 for j in range(replication_factor - 1)]
            for leader, shift in _rounds(n, num_partitions, start_index, rng, start_partition_id)]


def _rounds(n: int, num_partitions: int, start_index: int | None, rng: Rng,
            start_partition_id: int) -> Iterable[tuple[int, int]]:
    """Each partition's first replica's index among the ``n`` brokers, and the shift
    for its followers, as both Kafka assignments go: the start index, then the shift,
    are ``start_index`` or drawn at random, and the shift grows by one at every
    partition id (above 0) that is a multiple of ``n``."""
    first = start_index if start_index is not None and start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index is not None and start_index >= 0 else rng.randrange(n)
    for partition in range(max(0, start_partition_id), max(0, start_partition_id) + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        yield (partition + first) % n, shift


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: the brokers taken one rack at a time.

    Racks go in Kafka's (Java ``String``, so UTF-16 code unit) order, each rack's brokers
    by id; round after round every rack that still has brokers gives its next one. For
    rack1: 0, 1, 2; rack2: 3, 4; rack3: 6 that is 0, 3, 6, 1, 4, 2.
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    ordered = [by_rack[rack] for rack in sorted(by_rack, key=_java_string_order)]
    return [members[i] for i in range(max(map(len, ordered), default=0))
            for members in ordered if i < len(members)]


def _java_string_order(s: str) -> bytes:
    # Java compares strings by UTF-16 code units; big-endian UTF-16 bytes compare the same.
    return s.encode("utf-16-be", "surrogatepass")


def _assign_rack_aware(racks: Mapping[int, str], num_partitions: int, replication_factor: int,
                       start_index: int | None, rng: Rng,
                       start_partition_id: int) -> list[list[int]]:
    """Kafka's ``assignReplicasToBrokersRackAware`` (arguments already checked).

    The first replica goes round `rack_alternated_brokers` as in the rack-unaware case.
    Followers are looked for from the first replica at the position the (number of
    racks times the) shift gives, one further broker per look, the looks counted over
    all the partition's followers: a broker is taken unless it already holds a replica
    of the partition, or its rack does while some rack holds none.
    """
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    result = []
    for leader_index, shift in _rounds(n, num_partitions, start_index, rng, start_partition_id):
        replicas = [arranged[leader_index]]
        racks_used = {racks[replicas[0]]}
        k = 0
        while len(replicas) < replication_factor:
            broker = arranged[(leader_index + 1 + (shift * num_racks + k) % (n - 1)) % n]
            k += 1
            rack = racks[broker]
            if broker in replicas or (rack in racks_used and len(racks_used) < num_racks):
                continue
            replicas.append(broker)
            racks_used.add(rack)
        result.append(replicas)
    return result
