"""The compaction workload and its checker: an idempotent producer overwrites and deletes
the keys of a compacted topic whose segments roll every few seconds, so Kafka's log
cleaner rewrites them while the nemesis runs.

Each write's id (``"<process>:<seq>"``) is its value, or, for a tombstone (no value), a
header ``id``. After the last heal every partition is read from the beginning. Deciding
anomalies, on the rule compaction must keep (a record may go only when a later record of
its key stays; tombstones stay for ``delete.retention.ms``, a day):

- ``lost``: an acknowledged write missing from the final read with no later record of
  its key there.
- ``inconsistent``: a final record at an offset acknowledged for another write.
- ``unknown``: a final record no producer sent (or with another key, or value-ness).
- ``duplicated``: one write at two offsets.
- ``reordered``: one producer's writes of a key read in another order than sent.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from .anomalies import Tally
from .checker import parse_value
from .workload import Keyed

KEYS = 100
# Each key is deleted (a tombstone) in one round of KEYS writes out of this many.
DELETE_EVERY = 7
DECIDING = ("lost", "inconsistent", "unknown", "duplicated", "reordered")
# Segments roll often and the cleaner takes any dirty share, so it runs within a minute.
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "10000",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "2",
}


def keyed(seq: int) -> Keyed:
    """The ``seq``-th write of a producer: key ``k<seq mod KEYS>``, now and then deleted."""
    return Keyed(f"k{seq % KEYS}", tombstone=(seq // KEYS) % DELETE_EVERY == DELETE_EVERY - 1)


def final_row(m: Message) -> list[object]:
    """``[offset, id, key, tombstone]`` of one record of the final read."""
    value = m.value()
    headers = dict(m.headers() or [])
    ident = value.decode() if value is not None else (headers.get("id") or b"").decode()
    key = m.key()
    return [m.offset(), ident, key.decode() if key else None, value is None]


@dataclass
class CompactResult:
    """What the producer wrote and what compaction left, and the anomalies found."""

    acknowledged: int = 0
    keys: int = 0
    left: int = 0
    tally: Tally = field(default_factory=lambda: Tally(DECIDING))
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.tally.ok

    def _done(self) -> str:
        return (f"{self.acknowledged} acknowledged writes over {self.keys} keys, "
                f"{self.left} records left after compaction")

    def summary_line(self, seed: Any) -> str:
        return f"chaos compact: {self._done()}; {self.tally.found()} (seed {seed})"

    def report(self) -> str:
        return self.tally.report("compact", self.meta, self._done())


def check_compact(events: list[dict[str, Any]]) -> CompactResult:
    """Check a compaction history; raises ValueError when it holds no final read."""
    finals = [e for e in events if e.get("type") == "final"]
    if not finals:
        raise ValueError("history has no final read")
    result = CompactResult(meta=next((e for e in events if e.get("type") == "meta"), {}))
    sent = {e["value"]: e for e in events if e.get("type") == "invoke"}
    acked = {(int(e["partition"]), int(e["offset"])): e["value"]
             for e in events if e.get("type") == "ok"}
    result.acknowledged = len(acked)
    # (partition, offset) -> (id, key, tombstone) as read; key -> offsets read.
    read: dict[tuple[int, int], tuple[str, str | None, bool]] = {}
    for e in finals:
        for offset, ident, key, tombstone in e.get("records") or []:
            read[(int(e["partition"]), int(offset))] = (ident, key, bool(tombstone))
    result.left = len(read)
    result.keys = len({key for _, key, _ in read.values()})
    _check_reads(read, sent, acked, result)
    _check_acked(read, sent, acked, result)
    return result


def _check_reads(read: dict[tuple[int, int], tuple[str, str | None, bool]],
                 sent: dict[str, dict[str, Any]], acked: dict[tuple[int, int], str],
                 result: CompactResult) -> None:
    seen: dict[str, tuple[int, int]] = {}
    last: dict[tuple[str | None, str], tuple[int, int]] = {}  # (key, process) -> (seq, offset)
    for position in sorted(read):
        ident, key, tombstone = read[position]
        write = sent.get(ident)
        if write is None or write.get("key") != key or bool(write.get("tombstone")) != tombstone:
            result.tally.add("unknown", f"{ident!r} (key {key}) at {position}")
            continue
        if acked.get(position, ident) != ident:
            result.tally.add("inconsistent", f"{ident} at {position}, acknowledged for "
                             f"{acked[position]}")
        if ident in seen:
            result.tally.add("duplicated", f"{ident} at {seen[ident]} and {position}")
        seen[ident] = position
        process, seq = parse_value(ident) or ("?", -1)
        before = last.get((key, process))
        if before is not None and before[0] > seq:
            result.tally.add("reordered", f"key {key}: {process}:{before[0]} at {before[1]} "
                             f"before {ident} at {position}")
        last[(key, process)] = (seq, position[1])


def _check_acked(read: dict[tuple[int, int], tuple[str, str | None, bool]],
                 sent: dict[str, dict[str, Any]], acked: dict[tuple[int, int], str],
                 result: CompactResult) -> None:
    latest: dict[tuple[int, str | None], int] = defaultdict(lambda: -1)
    for (partition, offset), (_, key, _) in read.items():
        latest[(partition, key)] = max(latest[(partition, key)], offset)
    for (partition, offset), ident in sorted(acked.items()):
        if (partition, offset) in read:
            continue
        key = sent.get(ident, {}).get("key")
        if latest[(partition, key)] <= offset:
            result.tally.add("lost", f"{ident} (key {key}) acknowledged at "
                             f"{(partition, offset)}, no later record of its key left")
