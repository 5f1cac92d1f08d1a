"""Checker of the groups workload's history (``group_workload.py``).

Deciding anomalies:

- ``offsets_backwards``: the group's committed offset of a partition went down — between
  two of the coordinator's answers, or a commit the coordinator accepted in a generation
  below that of an earlier accepted one.
- ``skipped``: a record below a partition's final committed offset that no member was
  ever given (a commit implies every record before it was delivered).
- ``double_owners``: one partition assigned to two members in the same generation.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .anomalies import Tally

DECIDING = ("offsets_backwards", "skipped", "double_owners")


@dataclass
class GroupResult:
    """What the members did, and the anomalies found."""

    members: int = 0
    generations: int = 0
    delivered: int = 0
    commits: int = 0
    tally: Tally = field(default_factory=lambda: Tally(DECIDING))
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def acknowledged(self) -> int:
        return self.commits

    @property
    def ok(self) -> bool:
        return self.tally.ok

    @property
    def counts(self) -> Counter[str]:
        return self.tally.counts

    def add(self, anomaly: str, example: str) -> None:
        self.tally.add(anomaly, example)

    def summary_line(self, seed: Any) -> str:
        return (f"chaos groups: {self.members} members, {self.generations} generations, "
                f"{self.commits} commits, {self.delivered} records delivered; "
                f"{self.tally.found()} (seed {seed})")

    def report(self) -> str:
        return self.tally.report("groups", self.meta,
                                 f"{self.members} members, {self.generations} generations, "
                                 f"{self.commits} accepted commits, {self.delivered} "
                                 "records delivered")


def check_groups(events: list[dict[str, Any]]) -> GroupResult:
    """Check a groups run; raises ValueError without a final read or final offsets."""
    finals = {int(e["partition"]): [int(o) for o, _ in e.get("records") or []]
              for e in events if e.get("type") == "final"}
    last = [e for e in events if e.get("type") == "committed" and e.get("final")]
    if not finals or not last:
        raise ValueError("history has no final read or no final committed offsets")
    result = GroupResult(meta=next((e for e in events if e.get("type") == "meta"), {}))
    result.members = len({e["process"] for e in events if e.get("type") == "member-start"})
    _check_observed(events, result)
    _check_commits(events, result)
    _check_owners(events, result)
    _check_skips(events, finals, {int(p): int(o) for p, o in last[-1]["offsets"].items()},
                 result)
    return result


def _check_observed(events: list[dict[str, Any]], result: GroupResult) -> None:
    seen: dict[int, tuple[int, float]] = {}
    for e in events:
        if e.get("type") != "committed":
            continue
        for p, o in e.get("offsets", {}).items():
            partition, offset = int(p), int(o)
            before = seen.get(partition)
            if before is not None and offset < before[0]:
                result.add("offsets_backwards", f"partition {partition}: {before[0]} at "
                           f"{before[1]:.1f}s, then {offset} at {e['t']:.1f}s")
            seen[partition] = (offset, float(e.get("t", 0.0)))


def _check_commits(events: list[dict[str, Any]], result: GroupResult) -> None:
    best: dict[int, dict[int, int]] = defaultdict(dict)  # partition -> generation -> max
    for e in events:
        if e.get("type") != "commit" or not e.get("ok"):
            continue
        result.commits += 1
        generation = int(e["generation"])
        for p, o in e.get("offsets", {}).items():
            partition, offset = int(p), int(o)
            earlier = [(g, x) for g, x in best[partition].items() if g < generation
                       and x > offset]
            if earlier:
                g, x = max(earlier)
                result.add("offsets_backwards", f"partition {partition}: {e['process']} "
                           f"committed {offset} in generation {generation} after {x} was "
                           f"accepted in generation {g}")
            best[partition][generation] = max(best[partition].get(generation, -1), offset)


def _check_owners(events: list[dict[str, Any]], result: GroupResult) -> None:
    owners: dict[tuple[int, int], set[str]] = defaultdict(set)
    for e in events:
        if e.get("type") == "assigned":
            for partition in e.get("partitions") or []:
                owners[(int(e["generation"]), int(partition))].add(str(e["process"]))
    result.generations = len({g for g, _ in owners})
    for (generation, partition), members in sorted(owners.items()):
        if len(members) > 1:
            result.add("double_owners", f"partition {partition} in generation {generation}: "
                       f"{sorted(members)}")


def _check_skips(events: list[dict[str, Any]], finals: dict[int, list[int]],
                 committed: dict[int, int], result: GroupResult) -> None:
    delivered: dict[int, set[int]] = defaultdict(set)
    for e in events:
        if e.get("type") == "poll" and e.get("mode") == "group":
            for partition, offset, _ in e.get("records") or []:
                delivered[int(partition)].add(int(offset))
    result.delivered = sum(len(s) for s in delivered.values())
    for partition, offsets in sorted(finals.items()):
        limit = committed.get(partition, 0)
        skipped = [o for o in offsets if o < limit and o not in delivered[partition]]
        if skipped:
            result.add("skipped", f"partition {partition}: {len(skipped)} records below the "
                       f"committed {limit} never delivered, first {skipped[:5]}")
