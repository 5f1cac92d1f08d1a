"""The groups checker on small hand-made histories: a clean run passes, and offsets going
back, skipped records and two owners in one generation are each found."""

from __future__ import annotations

from typing import Any

import pytest

from .group_checker import check_groups

META = {"type": "meta", "seed": 1, "target": "josefk", "faults": []}


def _assigned(process: str, generation: int, partitions: list[int]) -> dict[str, Any]:
    return {"type": "assigned", "process": process, "generation": generation,
            "partitions": partitions, "t": 1.0}


def _poll(process: str, records: list[tuple[int, int]]) -> dict[str, Any]:
    return {"type": "poll", "process": process, "mode": "group", "generation": 1,
            "records": [[p, o, f"v{p}-{o}"] for p, o in records], "t": 2.0}


def _commit(process: str, generation: int, offsets: dict[int, int], ok: bool = True
            ) -> dict[str, Any]:
    return {"type": "commit", "process": process, "generation": generation, "ok": ok,
            "offsets": {str(p): o for p, o in offsets.items()}, "t": 3.0}


def _committed(offsets: dict[int, int], t: float, final: bool = False) -> dict[str, Any]:
    event = {"type": "committed", "offsets": {str(p): o for p, o in offsets.items()}, "t": t}
    return {**event, "final": True} if final else event


def _final(partition: int, count: int) -> dict[str, Any]:
    return {"type": "final", "partition": partition,
            "records": [[o, f"v{partition}-{o}"] for o in range(count)]}


def _clean() -> list[dict[str, Any]]:
    return [META,
            {"type": "member-start", "process": "m1"}, {"type": "member-start", "process": "m2"},
            _assigned("m1", 1, [0]), _assigned("m2", 1, [1]),
            _poll("m1", [(0, 0), (0, 1)]), _commit("m1", 1, {0: 2}),
            _poll("m2", [(1, 0)]), _commit("m2", 1, {1: 1}),
            _committed({0: 2, 1: 1}, 4.0),
            _assigned("m2", 2, [0, 1]), _poll("m2", [(0, 2), (1, 1)]),
            _commit("m2", 2, {0: 3, 1: 2}),
            _committed({0: 3, 1: 2}, 9.0, final=True),
            _final(0, 4), _final(1, 2)]


def test_a_clean_history_passes() -> None:
    result = check_groups(_clean())
    assert result.ok, result.report()
    assert (result.members, result.generations, result.commits, result.delivered) == (
        2, 2, 3, 5)


def _anomalies(events: list[dict[str, Any]]) -> dict[str, int]:
    result = check_groups(events)
    assert not result.ok
    return {name: count for name, count in result.counts.items() if count}


def test_offsets_going_back_are_found() -> None:
    events = _clean()
    events.insert(10, _committed({0: 1, 1: 1}, 5.0))  # the coordinator answered less
    events.insert(-3, _commit("m1", 3, {1: 1}))  # accepted in a later generation, lower
    assert _anomalies(events) == {"offsets_backwards": 2}


def test_a_rejected_commit_does_not_count() -> None:
    events = _clean()
    events.insert(-3, _commit("m1", 3, {1: 0}, ok=False))
    assert check_groups(events).ok


def test_a_record_below_the_committed_offset_never_delivered_is_found() -> None:
    events = _clean()
    events[5] = _poll("m1", [(0, 0)])  # offset 1 never delivered, yet 2 committed
    assert _anomalies(events) == {"skipped": 1}


def test_two_owners_in_one_generation_are_found() -> None:
    events = _clean()
    events.insert(5, _assigned("m3", 1, [1]))
    assert _anomalies(events) == {"double_owners": 1}


def test_a_history_without_final_offsets_is_refused() -> None:
    with pytest.raises(ValueError, match="final"):
        check_groups([META, _final(0, 1)])
