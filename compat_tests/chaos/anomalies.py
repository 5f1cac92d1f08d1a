"""What the transactions and groups checkers share: a tally of the anomalies each one
decides on, with the first examples of each, and the lines of its report."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

EXAMPLES = 10


class Tally:
    """How many of each deciding anomaly were found, and the first few of each."""

    def __init__(self, deciding: tuple[str, ...]) -> None:
        self.deciding = deciding
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)

    def add(self, anomaly: str, example: str) -> None:
        assert anomaly in self.deciding, anomaly
        self.counts[anomaly] += 1
        if len(self.examples[anomaly]) < EXAMPLES:
            self.examples[anomaly].append(example)

    @property
    def ok(self) -> bool:
        return not any(self.counts[name] for name in self.deciding)

    def found(self) -> str:
        """``0 lost-commits, 0 partial, ...`` for a summary line."""
        return ", ".join(f"{self.counts[n]} {n.replace('_', '-')}" for n in self.deciding)

    def report(self, kind: str, meta: dict[str, Any], done: str) -> str:
        """The report: what ran, the verdict, ``done`` (what the clients did), each
        anomaly's count, then its examples."""
        faults = ", ".join(meta.get("faults") or []) or "none"
        lines = [f"chaos {kind} check: target {meta.get('target', '?')}, seed "
                 f"{meta.get('seed', '?')}, faults: {faults}",
                 f"verdict: {'OK' if self.ok else 'FAILED'}", f"  {done}"]
        lines += [f"  {n.replace('_', '-'):<18}{self.counts[n]:>7}" for n in self.deciding]
        for name in self.deciding:
            if self.examples.get(name):
                lines.append(f"{name.replace('_', '-')}:")
                lines += [f"  {x}" for x in self.examples[name]]
        return "\n".join(lines)
