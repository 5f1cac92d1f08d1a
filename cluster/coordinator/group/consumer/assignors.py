"""The server-side assignors of consumer groups: Kafka's ``uniform`` and ``range``.

An assignor gets every member's subscribed topic ids and current target partitions, and
the partition count of each topic, and returns every member's new target partitions.
``uniform`` (the default) balances all partitions over the members that may take them
(no two members differ by more than one where their subscriptions allow) and moves as few
partitions as it can; ``range`` gives each member subscribed to a topic a contiguous
range of its partitions, in member order, the first ``partitions % members`` one more.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from josefk.cluster.coordinator.group.consumer.records import Assignment

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member."""

    subscribed: frozenset[uuid.UUID]
    current: Assignment
    instance_id: str | None = None


class Assignor(Protocol):
    """A server-side assignor, named as clients choose it (``server_assignor``)."""

    name: str

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
               ) -> dict[str, Assignment]: ...


def _as_assignment(partitions: list[TopicPartition]) -> Assignment:
    by_topic: dict[uuid.UUID, set[int]] = {}
    for topic_id, p in partitions:
        by_topic.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in by_topic.items()}


class UniformAssignor:
    """Balanced and sticky: keep what each member has while it is within its share,
    hand the rest to the members with the fewest partitions, then move partitions from
    the fullest to the emptiest member that may take them until no move evens them."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
               ) -> dict[str, Assignment]:
        if not members:
            return {}
        order = sorted(members)
        eligible = {t: [m for m in order if t in members[m].subscribed] for t in topics}
        owned: dict[str, list[TopicPartition]] = {m: [] for m in order}
        total = sum(n for t, n in topics.items() if eligible[t])
        quota = -(-total // len(order))  # ceil: nobody keeps more than this
        taken: set[TopicPartition] = set()
        for m in order:
            for topic_id, parts in sorted(members[m].current.items()):
                if topic_id not in eligible or m not in eligible[topic_id]:
                    continue
                for p in sorted(parts):
                    tp = (topic_id, p)
                    if p < topics[topic_id] and tp not in taken and len(owned[m]) < quota:
                        owned[m].append(tp)
                        taken.add(tp)
        # The least loaded member that may take a partition gets it; topics with the fewest
        # subscribers first, as their partitions have the fewest homes.
        heap = [(len(owned[m]), m) for m in order]
        heapq.heapify(heap)
        for topic_id in sorted(topics, key=lambda t: (len(eligible[t]), str(t))):
            candidates = set(eligible[topic_id])
            for p in range(topics[topic_id]):
                if not candidates or (topic_id, p) in taken:
                    continue
                skipped = []
                while heap[0][1] not in candidates:
                    skipped.append(heapq.heappop(heap))
                _, m = heapq.heappop(heap)
                owned[m].append((topic_id, p))
                heapq.heappush(heap, (len(owned[m]), m))
                for entry in skipped:
                    heapq.heappush(heap, entry)
        self._balance(owned, eligible)
        return {m: _as_assignment(owned[m]) for m in order}

    @staticmethod
    def _balance(owned: dict[str, list[TopicPartition]],
                 eligible: Mapping[uuid.UUID, list[str]]) -> None:
        moved = True
        while moved:
            sizes = [len(parts) for parts in owned.values()]
            if max(sizes) - min(sizes) <= 1:
                return  # no move can even it out further
            moved = False
            for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
                for tp in reversed(owned[giver]):
                    takers = [m for m in eligible[tp[0]] if len(owned[m]) < len(owned[giver]) - 1]
                    if takers:
                        taker = min(takers, key=lambda m: (len(owned[m]), m))
                        owned[giver].remove(tp)
                        owned[taker].append(tp)
                        moved = True
                        break
                if moved:
                    break


class RangeAssignor:
    """Per topic, contiguous ranges over its subscribers sorted by instance id (static
    members) or member id, as Kafka's server-side RangeAssignor."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
               ) -> dict[str, Assignment]:
        order = sorted(members, key=lambda m: (members[m].instance_id or m, m))
        result: dict[str, list[TopicPartition]] = {m: [] for m in order}
        for topic_id, count in topics.items():
            subscribers = [m for m in order if topic_id in members[m].subscribed]
            if not subscribers:
                continue
            share, extra = divmod(count, len(subscribers))
            start = 0
            for i, m in enumerate(subscribers):
                n = share + (1 if i < extra else 0)
                result[m] += [(topic_id, p) for p in range(start, start + n)]
                start += n
        return {m: _as_assignment(parts) for m, parts in result.items()}


ASSIGNORS: Mapping[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
# Kafka accepts the assignors' class names in group.consumer.assignors as well.
_CLASS_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def configured(names: list[str]) -> dict[str, Assignor]:
    """The assignors ``group.consumer.assignors`` lists, in order (the first is the
    default); ValueError for one Kafka does not have."""
    result: dict[str, Assignor] = {}
    for name in names:
        short = _CLASS_NAMES.get(name, name)
        if short not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {name!r}")
        result[short] = ASSIGNORS[short]
    return result
