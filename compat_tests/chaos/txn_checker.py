"""Checker of the transactions workload's history (``txn_workload.py``).

Deciding anomalies:

- ``aborted_reads``: a value of an aborted transaction read (by a read_committed poll or
  the final read).
- ``lost_commits``: a value of a committed transaction missing from the final read.
- ``partial``: a transaction of which the final read holds some values but not all.
- ``partial_reads``: a read_committed consumer read one of a transaction's values in a
  partition and went past another of its values there without reading it.
- ``duplicated`` / ``reordered``: a value twice in a partition, or one producer's
  values out of order within a partition.
- ``eos_lost`` / ``eos_duplicated``: an input of the consume-transform-produce loop with
  no output, or with more than one.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .anomalies import Tally

DECIDING = ("aborted_reads", "lost_commits", "partial", "partial_reads", "duplicated",
            "reordered", "eos_lost", "eos_duplicated")
_VALUE = re.compile(r"^(.+):(\d+):(\d+)$")


@dataclass
class Txn:
    values: list[tuple[int, str]]
    abort: bool
    outcome: str = "open"


@dataclass
class TxnResult:
    """What the transactional clients did, and the anomalies found."""

    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    inputs: int = 0
    tally: Tally = field(default_factory=lambda: Tally(DECIDING))
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def acknowledged(self) -> int:
        """Committed transactions (the figure a run's liveness is judged by)."""
        return self.committed

    @property
    def ok(self) -> bool:
        return self.tally.ok

    @property
    def counts(self) -> Counter[str]:
        return self.tally.counts

    def add(self, anomaly: str, example: str) -> None:
        self.tally.add(anomaly, example)

    def summary_line(self, seed: Any) -> str:
        return (f"chaos txn: {self.committed} committed, {self.aborted} aborted, "
                f"{self.unknown} unknown, {self.inputs} inputs; {self.tally.found()} "
                f"(seed {seed})")

    def report(self) -> str:
        return self.tally.report("transactions", self.meta,
                                 f"transactions: {self.committed} committed, {self.aborted} "
                                 f"aborted, {self.unknown} unknown outcome; {self.inputs} "
                                 "transformer inputs")


def _txns(events: list[dict[str, Any]]) -> dict[str, Txn]:
    txns: dict[str, Txn] = {}
    for e in events:
        if e.get("type") == "txn-begin":
            txns[e["txn"]] = Txn([(int(p), str(v)) for p, v in e["values"]], bool(e["abort"]))
        elif e.get("type") == "txn-end" and e.get("txn") in txns:
            txns[e["txn"]].outcome = str(e["outcome"])
    return txns


def _txn_of(value: str) -> tuple[str, int, int] | None:
    m = _VALUE.match(value)
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else None


def check_txn(events: list[dict[str, Any]]) -> TxnResult:
    """Check a transactions run; raises ValueError when it holds no final read."""
    meta = next((e for e in events if e.get("type") == "meta"), {})
    topic = meta.get("topic")
    finals = [e for e in events if e.get("type") == "final"]
    if not finals:
        raise ValueError("history has no final read")
    result = TxnResult(meta=meta)
    txns = _txns(events)
    outcomes = Counter(t.outcome for t in txns.values())
    result.committed, result.aborted = outcomes["committed"], outcomes["aborted"]
    result.unknown = len(txns) - result.committed - result.aborted
    main = [e for e in finals if e.get("topic", topic) == topic]
    final_at = _check_partitions(main, result)
    _check_visibility(txns, final_at, {int(e["partition"]) for e in main}, result)
    _check_polls(events, txns, final_at, result)
    _check_eos(events, [e for e in finals if e.get("topic") == f"{topic}-out"], result)
    return result


def _check_partitions(finals: list[dict[str, Any]], result: TxnResult
                      ) -> dict[str, tuple[int, int]]:
    """Duplicates and reorders in each partition; where each value was finally read."""
    at: dict[str, tuple[int, int]] = {}
    for e in finals:
        partition = int(e["partition"])
        last: dict[str, tuple[int, int, int]] = {}  # process -> (txn, i, offset)
        for offset, value in e.get("records") or []:
            if value in at:
                result.add("duplicated", f"{value} at {at[value]} and {(partition, offset)}")
                continue
            at[value] = (partition, offset)
            parsed = _txn_of(value) if isinstance(value, str) else None
            if parsed is None:
                continue
            process, number, i = parsed
            previous = last.get(process)
            if previous is not None and (number, i) < previous[:2]:
                result.add("reordered", f"{value} at offset {offset} of partition "
                           f"{partition}, after {process}:{previous[0]}:{previous[1]} at "
                           f"offset {previous[2]}")
            last[process] = (number, i, offset)
    return at


def _check_visibility(txns: dict[str, Txn], final_at: dict[str, tuple[int, int]],
                      read: set[int], result: TxnResult) -> None:
    for name, txn in txns.items():
        present = [v for p, v in txn.values if v in final_at]
        missing = [v for p, v in txn.values if v not in final_at and p in read]
        if txn.outcome == "aborted":
            for value in present:
                result.add("aborted_reads", f"{value} of aborted {name} in the final read")
        elif txn.outcome == "committed" and missing:
            result.add("lost_commits", f"{name}: {missing} never read")
        if present and missing:
            result.add("partial", f"{name} ({txn.outcome}): read {present}, not {missing}")


def _check_polls(events: list[dict[str, Any]], txns: dict[str, Txn],
                 final_at: dict[str, tuple[int, int]], result: TxnResult) -> None:
    """Aborted values in read_committed polls, and transactions read in part."""
    by_value = {v: name for name, txn in txns.items() for _, v in txn.values}
    seen: dict[tuple[str, int], set[int]] = defaultdict(set)  # (consumer, partition)
    furthest: dict[tuple[str, int], int] = defaultdict(lambda: -1)
    touched: dict[tuple[str, int], set[str]] = defaultdict(set)
    for e in events:
        if e.get("type") != "poll" or e.get("mode") != "read_committed":
            continue
        for partition, offset, value in e.get("records") or []:
            key = (str(e.get("process")), int(partition))
            seen[key].add(int(offset))
            furthest[key] = max(furthest[key], int(offset))
            name = by_value.get(value)
            if name is None:
                continue
            touched[key].add(name)
            if txns[name].outcome == "aborted":
                result.add("aborted_reads", f"{value} of aborted {name} polled by {key[0]}")
    for key, names in touched.items():
        consumer, partition = key
        for name in sorted(names):
            passed = [v for p, v in txns[name].values if p == partition and v in final_at
                      and final_at[v][1] <= furthest[key] and final_at[v][1] not in seen[key]]
            if passed:
                result.add("partial_reads", f"{consumer} read part of {name} in partition "
                           f"{partition} and went past {passed}")


def _check_eos(events: list[dict[str, Any]], outputs: list[dict[str, Any]],
               result: TxnResult) -> None:
    inputs = [v for e in events if e.get("type") == "inputs" for v in e.get("values") or []]
    result.inputs = len(inputs)
    if not inputs:
        return
    written = Counter(value for e in outputs for _, value in e.get("records") or [])
    for value in inputs:
        count = written[f"out:{value}"]
        if count == 0:
            result.add("eos_lost", f"{value} has no output")
        elif count > 1:
            result.add("eos_duplicated", f"{value} output {count} times")
