"""Checker over a chaos run's history (JSON lines written by the runner).

``check(load(path))`` finds lost, duplicated, reordered and inconsistent records (the
anomalies that decide the verdict), poll skips and unexpected values (reported only),
and availability figures split into "during faults" and "calm".
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXAMPLES = 10
# The anomalies the checker counts; only the DECIDING ones fail a run.
ANOMALIES = ("lost", "duplicated", "reordered", "inconsistent", "poll_skips", "unexpected")
DECIDING = ("lost", "duplicated", "reordered", "inconsistent")
_VALUE = re.compile(r"^(.+):(\d+)$")


def load(path: str | Path) -> list[dict[str, Any]]:
    """The events of a JSON-lines history file; blank lines are skipped."""
    events: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON: {exc}") from exc
            if not isinstance(event, dict):
                raise ValueError(f"{path}:{lineno}: not a JSON object")
            events.append(event)
    return events


def parse_value(value: Any) -> tuple[str, int] | None:
    """``(process, seq)`` of a ``"<process>:<seq>"`` value, None for any other value."""
    if not isinstance(value, str):
        return None
    m = _VALUE.match(value)
    return (m.group(1), int(m.group(2))) if m else None


@dataclass
class FaultWindow:
    """One nemesis fault, from its start to its stop (or the end of the history)."""

    fault: str
    start: float
    stop: float
    targets: list[Any] = field(default_factory=list)
    detail: str = ""
    healed: bool = True


def end_time(events: Iterable[dict[str, Any]]) -> float:
    """The latest ``t`` in the history (0 when there is none)."""
    return max((float(e["t"]) for e in events if isinstance(e.get("t"), int | float)), default=0.0)


def fault_windows(events: list[dict[str, Any]]) -> list[FaultWindow]:
    """The nemesis windows, ordered by start; a start without a stop lasts to the end."""
    done: list[FaultWindow] = []
    open_: list[FaultWindow] = []
    for e in events:
        if e.get("type") != "nemesis":
            continue
        t = float(e.get("t", 0.0))
        fault = str(e.get("fault", "?"))
        if e.get("f") == "start":
            targets = e.get("targets") or []
            open_.append(FaultWindow(fault, t, math.inf, list(targets), str(e.get("detail", ""))))
        elif e.get("f") == "stop" and open_:
            # Close the latest window of this kind; a stop naming another kind still heals.
            i = next((i for i in range(len(open_) - 1, -1, -1) if open_[i].fault == fault), -1)
            window = open_.pop(i)
            window.stop = t
            done.append(window)
    end = end_time(events)
    for window in open_:
        window.stop, window.healed = max(end, window.start), False
        done.append(window)
    return sorted(done, key=lambda w: w.start)


@dataclass
class Availability:
    """Sends attempted, acknowledged and failed, and latency of the acknowledged ones."""

    attempted: int = 0
    acknowledged: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list, repr=False)

    @property
    def pending(self) -> int:
        """Sends invoked with neither an ok nor a fail (the run ended first)."""
        return max(0, self.attempted - self.acknowledged - self.failed)

    @property
    def share(self) -> float | None:
        """Share of the attempted sends that were acknowledged."""
        return self.acknowledged / self.attempted if self.attempted else None

    def percentile(self, q: float) -> float | None:
        """Nearest-rank percentile (0 < q <= 100) of the acknowledged latencies."""
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]

    @property
    def p50(self) -> float | None:
        return self.percentile(50)

    @property
    def p95(self) -> float | None:
        return self.percentile(95)

    @property
    def p99(self) -> float | None:
        return self.percentile(99)

    @property
    def max(self) -> float | None:
        return max(self.latencies, default=None)


@dataclass
class Result:
    """What the checker found. Only lost, duplicated, reordered, inconsistent decide ``ok``."""

    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    inconsistent: int = 0
    poll_skips: int = 0
    unexpected: int = 0
    lost_examples: list[str] = field(default_factory=list)
    duplicated_examples: list[str] = field(default_factory=list)
    reordered_examples: list[str] = field(default_factory=list)
    inconsistent_examples: list[str] = field(default_factory=list)
    poll_skips_examples: list[str] = field(default_factory=list)
    unexpected_examples: list[str] = field(default_factory=list)
    during_faults: Availability = field(default_factory=Availability)
    calm: Availability = field(default_factory=Availability)
    windows: list[FaultWindow] = field(default_factory=list)
    missing_final: list[int] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def attempted(self) -> int:
        return self.during_faults.attempted + self.calm.attempted

    @property
    def failed(self) -> int:
        return self.during_faults.failed + self.calm.failed

    @property
    def ok(self) -> bool:
        """True iff nothing was lost, duplicated, reordered or inconsistent."""
        return not any(getattr(self, name) for name in DECIDING)

    def summary_line(self, seed: Any) -> str:
        """The one-line verdict the harness prints."""
        return (
            f"chaos: {self.acknowledged} acknowledged, {self.lost} lost, "
            f"{self.duplicated} duplicated, {self.reordered} reordered, "
            f"{self.inconsistent} inconsistent, {self.poll_skips} poll-skips (seed {seed})"
        )

    def report(self) -> str:
        """A multi-line human-readable report: counts, examples, availability, faults."""
        m = self.meta
        faults = ", ".join(map(str, m.get("faults") or [])) or "none"
        lines = [
            f"chaos check: target {m.get('target', '?')}, seed {m.get('seed', '?')}, "
            f"topic {m.get('topic', '?')}, {m.get('partitions', '?')} partitions, "
            f"duration {m.get('duration', '?')} s, faults: {faults}",
            f"verdict: {'OK' if self.ok else 'FAILED'}",
        ]
        lines.append(f"  {'acknowledged':<13}{self.acknowledged:>9}")
        for name in ANOMALIES:
            count = getattr(self, name)
            note = "" if name in DECIDING else "  (reported; does not decide)"
            lines.append(f"  {name.replace('_', '-'):<13}{count:>9}{note}")
        if self.missing_final:
            lines.append(
                f"WARNING: acknowledged sends on partitions {self.missing_final} "
                "but no final read of them: their records count as lost"
            )
        for name in ANOMALIES:
            count, examples = getattr(self, name), getattr(self, f"{name}_examples")
            if examples:
                more = f" (first {len(examples)} of {count})" if count > len(examples) else ""
                lines.append(f"{name.replace('_', '-')}{more}:")
                lines += [f"  {x}" for x in examples]
        lines.append("availability (latency of acknowledged sends, ms):")
        lines.append(
            f"  {'':<14}{'attempted':>10}{'acked':>9}{'share':>8}{'failed':>8}{'pending':>8}"
            f"{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}"
        )
        total = Availability(
            self.attempted,
            self.during_faults.acknowledged + self.calm.acknowledged,
            self.failed,
            self.during_faults.latencies + self.calm.latencies,
        )
        for name, a in (("during faults", self.during_faults), ("calm", self.calm), ("all", total)):
            share = "-" if a.share is None else f"{a.share:.1%}"
            lat = "".join(
                f"{'-' if v is None else f'{v * 1000:.1f}':>9}"
                for v in (a.p50, a.p95, a.p99, a.max)
            )
            lines.append(
                f"  {name:<14}{a.attempted:>10}{a.acknowledged:>9}{share:>8}{a.failed:>8}"
                f"{a.pending:>8}{lat}"
            )
        lines.append(f"fault windows ({len(self.windows)}):")
        for w in self.windows:
            healed = "" if w.healed else " (never healed)"
            detail = f" {w.detail}" if w.detail else ""
            lines.append(
                f"  {w.start:8.2f} - {w.stop:8.2f} s  {w.fault} {w.targets}{detail}{healed}"
            )
        return "\n".join(lines)


def _add_example(examples: list[str], text: str) -> None:
    if len(examples) < EXAMPLES:
        examples.append(text)


def check(events: list[dict[str, Any]]) -> Result:
    """Check a history; raises ValueError when it holds no final read."""
    finals = [e for e in events if e.get("type") == "final"]
    if not finals:
        raise ValueError("history has no final read")
    result = Result(windows=fault_windows(events))
    result.meta = next((e for e in events if e.get("type") == "meta"), {})
    scan = _Scan(events, result)
    for e in events:
        kind = e.get("type")
        if kind == "ok" and e.get("f", "send") == "send":
            scan.ok(e)
        elif kind == "fail" and e.get("f", "send") == "send":
            scan.availability(e).failed += 1
        elif kind == "poll":
            proc = e.get("process", "?")
            for p, o, value in e.get("records") or []:
                scan.read((p, o), value, f"poll by {proc}")
        elif kind == "final":
            p = e.get("partition")
            offsets = scan.final_offsets.setdefault(p, [])
            for o, value in e.get("records") or []:
                offsets.append(o)
                scan.final_values.add(_key(value))
                scan.read((p, o), value, "final read")
    scan.conclude()
    _check_order(finals, result)
    _check_skips(events, scan.final_offsets, result)
    return result


def _key(value: Any) -> Any:
    """A read value as a hashable key (values of this workload are strings)."""
    return value if isinstance(value, str) else repr(value)


class _Scan:
    """State of the single pass over acknowledgements, polls and final reads."""

    def __init__(self, events: list[dict[str, Any]], result: Result) -> None:
        self.result = result
        # Windows are sorted by start: t is in one iff it is at most the furthest stop so far.
        self.starts = [w.start for w in result.windows]
        self.reach = list(itertools.accumulate((w.stop for w in result.windows), max))
        self.invoked: dict[Any, float] = {}
        for e in events:
            if e.get("type") == "invoke" and e.get("f", "send") == "send":
                self.invoked.setdefault(e.get("value"), float(e.get("t", 0.0)))
        for t in self.invoked.values():
            self._split(t).attempted += 1
        self.expected = {v for v in self.invoked if parse_value(v) is not None}
        self.acked: dict[Any, tuple[Any, Any]] = {}  # value -> (partition, offset) of first ok
        # (partition, offset) -> first value seen there; all distinct values when they differ.
        self.at: dict[tuple[int, int], Any] = {}
        self.clashes: dict[tuple[int, int], list[Any]] = {}
        # value -> first position read at; all distinct positions when it was read at several.
        self.read_at: dict[Any, tuple[int, int]] = {}
        self.dup_positions: dict[Any, list[tuple[int, int]]] = {}
        self.final_offsets: dict[int, list[int]] = {}
        self.final_values: set[Any] = set()
        self.unexpected: dict[Any, str] = {}

    def _split(self, invoke_t: float) -> Availability:
        i = bisect.bisect_right(self.starts, invoke_t) - 1
        faulty = i >= 0 and invoke_t <= self.reach[i]
        return self.result.during_faults if faulty else self.result.calm

    def availability(self, e: dict[str, Any]) -> Availability:
        """The availability bucket of an ok/fail, by the time its send was invoked."""
        t = self.invoked.get(e.get("value"))
        if t is None:  # no invoke recorded: estimate it from the latency
            t = float(e.get("t", 0.0)) - float(e.get("latency") or 0.0)
        return self._split(t)

    def ok(self, e: dict[str, Any]) -> None:
        self.result.acknowledged += 1
        a = self.availability(e)
        a.acknowledged += 1
        if isinstance(e.get("latency"), int | float):
            a.latencies.append(float(e["latency"]))
        value, p, o = e.get("value"), e.get("partition"), e.get("offset")
        self.acked.setdefault(value, (p, o))
        if isinstance(p, int) and isinstance(o, int) and o >= 0:
            self.place((p, o), _key(value))

    def place(self, pos: tuple[int, int], key: Any) -> None:
        first = self.at.setdefault(pos, key)
        if first != key:
            seen = self.clashes.setdefault(pos, [first])
            if key not in seen:
                seen.append(key)

    def read(self, pos: tuple[int, int], value: Any, source: str) -> None:
        key = _key(value)
        self.place(pos, key)
        first = self.read_at.setdefault(key, pos)
        if first != pos:
            positions = self.dup_positions.setdefault(key, [first])
            if pos not in positions:
                positions.append(pos)
        if key not in self.expected and key not in self.unexpected:
            why = "never invoked" if parse_value(value) else "not <process>:<seq>"
            self.unexpected[key] = f"{key} at p{pos[0]} offset {pos[1]} ({source}; {why})"

    def conclude(self) -> None:
        """Turn the collected state into counts and examples."""
        r = self.result
        for value, (p, o) in self.acked.items():
            if _key(value) not in self.final_values:
                r.lost += 1
                _add_example(r.lost_examples, f"{value} acknowledged at p{p} offset {o}")
        acked_partitions = {p for p, _ in self.acked.values() if p is not None}
        r.missing_final = sorted(acked_partitions - set(self.final_offsets), key=str)
        r.duplicated = len(self.dup_positions)
        for value, positions in self.dup_positions.items():
            where = ", ".join(f"p{p}@{o}" for p, o in positions)
            _add_example(r.duplicated_examples, f"{value} at {where}")
        r.inconsistent = len(self.clashes)
        for (p, o), values in self.clashes.items():
            _add_example(r.inconsistent_examples, f"p{p} offset {o} holds {values}")
        r.unexpected = len(self.unexpected)
        r.unexpected_examples = list(self.unexpected.values())[:EXAMPLES]
        for offsets in self.final_offsets.values():
            offsets.sort()


def _check_order(finals: list[dict[str, Any]], result: Result) -> None:
    """Count, per final read and producer, each seq lower than that producer's previous one."""
    for e in finals:
        p = e.get("partition")
        previous: dict[str, tuple[int, int]] = {}
        for o, value in e.get("records") or []:
            parsed = parse_value(value)
            if parsed is None:
                continue
            proc, seq = parsed
            before = previous.get(proc)
            if before is not None and seq < before[0]:
                result.reordered += 1
                _add_example(
                    result.reordered_examples,
                    f"p{p}: {proc}:{seq} at offset {o} after {proc}:{before[0]} "
                    f"at offset {before[1]}",
                )
            previous[proc] = (seq, o)


def _check_skips(
    events: list[dict[str, Any]], final_offsets: dict[int, list[int]], result: Result
) -> None:
    """Count consumer reads that jump over offsets the final read holds."""
    last: dict[tuple[Any, Any], int] = {}
    for e in events:
        kind = e.get("type")
        proc = e.get("process", "?")
        if kind == "rebalance":
            for key in [k for k in last if k[0] == proc]:
                del last[key]
        elif kind == "seek":
            last.pop((proc, e.get("partition")), None)
        elif kind == "poll":
            for p, o, _ in e.get("records") or []:
                a = last.get((proc, p))
                last[(proc, p)] = o
                if a is None or o <= a + 1:
                    continue
                offsets = final_offsets.get(p, [])
                between = bisect.bisect_left(offsets, o) - bisect.bisect_right(offsets, a)
                if between > 0:
                    result.poll_skips += 1
                    _add_example(
                        result.poll_skips_examples,
                        f"{proc} p{p}: read offset {a} then {o}, skipping {between} "
                        "offset(s) the final read holds",
                    )
