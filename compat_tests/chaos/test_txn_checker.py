"""The transactions checker on small hand-made histories: a clean run passes, and each
anomaly it exists for is found and named."""

from __future__ import annotations

from typing import Any

import pytest

from .txn_checker import check_txn

META = {"type": "meta", "topic": "t", "seed": 1, "target": "josefk", "faults": []}


def _begin(txn: str, values: list[tuple[int, str]], abort: bool = False) -> dict[str, Any]:
    return {"type": "txn-begin", "txn": txn, "values": [list(v) for v in values],
            "abort": abort}


def _end(txn: str, outcome: str) -> dict[str, Any]:
    return {"type": "txn-end", "txn": txn, "outcome": outcome}


def _final(partition: int, records: list[tuple[int, str]], topic: str = "t"
           ) -> dict[str, Any]:
    return {"type": "final", "topic": topic, "partition": partition,
            "records": [list(r) for r in records]}


def _poll(records: list[tuple[int, int, str]]) -> dict[str, Any]:
    return {"type": "poll", "process": "r0", "mode": "read_committed",
            "records": [list(r) for r in records]}


def _clean() -> list[dict[str, Any]]:
    return [META,
            _begin("t0:0", [(0, "t0:0:0"), (1, "t0:0:1")]), _end("t0:0", "committed"),
            _begin("t0:1", [(0, "t0:1:0"), (1, "t0:1:1")], abort=True),
            _end("t0:1", "aborted"),
            _begin("t0:2", [(0, "t0:2:0"), (1, "t0:2:1")]), _end("t0:2", "committed"),
            _poll([(0, 0, "t0:0:0"), (0, 4, "t0:2:0")]),
            _final(0, [(0, "t0:0:0"), (4, "t0:2:0")]),
            _final(1, [(0, "t0:0:1"), (4, "t0:2:1")]),
            {"type": "inputs", "values": ["in:0", "in:1"]},
            _final(0, [(0, "out:in:0")], topic="t-out"),
            _final(1, [(0, "out:in:1")], topic="t-out")]


# Where _clean() has the end of t0:2 and the final reads of partitions 0 and 1.
END_2, FINAL_0, FINAL_1 = 6, -5, -4


def test_a_clean_history_passes() -> None:
    result = check_txn(_clean())
    assert result.ok, result.report()
    assert (result.committed, result.aborted, result.unknown, result.inputs) == (2, 1, 0, 2)


def _anomalies(events: list[dict[str, Any]]) -> dict[str, int]:
    result = check_txn(events)
    assert not result.ok
    return {name: count for name, count in result.counts.items() if count}


def test_an_aborted_value_read_is_found() -> None:
    events = _clean()
    events[FINAL_0] = _final(0, [(0, "t0:0:0"), (2, "t0:1:0"), (4, "t0:2:0")])
    events.insert(FINAL_0, _poll([(1, 2, "t0:1:1")]))
    assert _anomalies(events) == {"aborted_reads": 2, "partial": 1}


def test_a_lost_commit_is_found() -> None:
    events = _clean()
    events[FINAL_1] = _final(1, [(0, "t0:0:1")])
    assert _anomalies(events) == {"lost_commits": 1, "partial": 1}


def test_an_unknown_outcome_may_go_either_way_but_not_half() -> None:
    events = _clean()
    events[END_2] = _end("t0:2", "unknown")
    assert check_txn(events).ok
    events[FINAL_1] = _final(1, [(0, "t0:0:1")])
    assert _anomalies(events) == {"partial": 1}


def test_a_consumer_passing_part_of_a_transaction_is_found() -> None:
    events = [META,
              _begin("t0:0", [(0, "t0:0:0"), (0, "t0:0:1")]), _end("t0:0", "committed"),
              _begin("t1:0", [(0, "t1:0:0")]), _end("t1:0", "committed"),
              _poll([(0, 0, "t0:0:0"), (0, 2, "t1:0:0")]),  # past offset 1 without it
              _final(0, [(0, "t0:0:0"), (1, "t0:0:1"), (2, "t1:0:0")])]
    assert _anomalies(events) == {"partial_reads": 1}


def test_duplicates_and_reorders_within_a_partition_are_found() -> None:
    events = _clean()
    events[FINAL_0] = _final(0, [(0, "t0:2:0"), (4, "t0:0:0"), (5, "t0:0:0")])
    assert _anomalies(events) == {"duplicated": 1, "reordered": 1}


def test_exactly_once_losses_and_duplicates_are_found() -> None:
    events = _clean()
    events[-2] = _final(0, [(0, "out:in:0"), (1, "out:in:0")], topic="t-out")
    events[-1] = _final(1, [], topic="t-out")
    assert _anomalies(events) == {"eos_duplicated": 1, "eos_lost": 1}


def test_a_history_without_a_final_read_is_refused() -> None:
    with pytest.raises(ValueError, match="no final read"):
        check_txn([META])
