"""The compaction checker on hand-made histories holding each anomaly, and none."""

from __future__ import annotations

from typing import Any

from .compaction import check_compact, keyed


def _write(ident: str, key: str, offset: int | None, partition: int = 0,
           tombstone: bool = False) -> list[dict[str, Any]]:
    events = [{"t": 0, "type": "invoke", "process": ident.split(":")[0], "f": "send",
               "value": ident, "partition": partition, "key": key, "tombstone": tombstone}]
    if offset is not None:
        events.append({"t": 1, "type": "ok", "value": ident, "partition": partition,
                       "offset": offset})
    return events


def _final(*records: list[Any], partition: int = 0) -> dict[str, Any]:
    return {"t": 9, "type": "final", "partition": partition, "records": list(records)}


# p0:0 (k1) at 0, p0:1 (k2) at 1, p0:2 (k1 again) at 2, p0:3 deletes k2 at 3.
WRITES = [*_write("p0:0", "k1", 0), *_write("p0:1", "k2", 1), *_write("p0:2", "k1", 2),
          *_write("p0:3", "k2", 3, tombstone=True)]


def test_compacted_away_is_not_lost() -> None:
    result = check_compact([*WRITES, _final([2, "p0:2", "k1", False], [3, "p0:3", "k2", True])])
    assert result.ok, result.report()
    assert (result.acknowledged, result.keys, result.left) == (4, 2, 2)


def test_the_latest_write_of_a_key_missing_is_lost() -> None:
    result = check_compact([*WRITES, _final([0, "p0:0", "k1", False], [3, "p0:3", "k2", True])])
    assert result.tally.counts["lost"] == 1, result.report()
    assert "p0:2" in result.tally.examples["lost"][0]


def test_another_write_at_an_acknowledged_offset_is_inconsistent() -> None:
    events = [*WRITES, *_write("p0:4", "k1", None),
              _final([2, "p0:4", "k1", False], [3, "p0:3", "k2", True])]
    assert check_compact(events).tally.counts["inconsistent"] == 1


def test_unknown_duplicated_and_reordered_reads() -> None:
    result = check_compact([*WRITES, _final(
        [0, "p0:2", "k1", False],  # an older offset holds the later write of k1...
        [2, "p0:0", "k1", False],  # ...read before the earlier one: reordered
        [3, "p0:3", "k2", True], [4, "p0:3", "k2", True],  # one write twice
        [5, "x:1", "k9", False],  # never sent
        [6, "p0:1", "k2", True],  # sent with a value, read as a tombstone
    )])
    counts = result.tally.counts
    assert counts["unknown"] == 2 and counts["duplicated"] == 1, result.report()
    assert counts["reordered"] == 1 and not result.ok, result.report()


def test_keys_are_overwritten_and_now_and_then_deleted() -> None:
    writes = [keyed(seq) for seq in range(1000)]
    assert len({w.key for w in writes}) == 100
    assert 0 < sum(w.tombstone for w in writes) < 300
