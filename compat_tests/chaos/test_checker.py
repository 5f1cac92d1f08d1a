"""The chaos checker finds every anomaly in hand-made histories; no broker involved."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from .checker import ANOMALIES, Result, check, fault_windows, load
from .timeline import plot


class History:
    """Builds a history event by event; time advances 0.1 s per event."""

    def __init__(self, partitions: int = 2, seed: int = 7) -> None:
        self.t = 0.0
        self.seq: dict[str, int] = defaultdict(int)
        self.events: list[dict[str, Any]] = []
        meta = {"topic": "chaos", "partitions": partitions, "duration": 10.0, "faults": ["kill"]}
        self.add("meta", seed=seed, target="josefk", **meta)

    def add(self, type_: str, **fields: Any) -> dict[str, Any]:
        event = {"type": type_, "t": round(self.t, 3), **fields}
        self.events.append(event)
        self.t += 0.1
        return event

    def invoke(self, process: str, partition: int) -> str:
        value = f"{process}:{self.seq[process]}"
        self.seq[process] += 1
        self.add("invoke", process=process, f="send", value=value, partition=partition)
        return value

    def send(self, process: str, partition: int, offset: int, latency: float = 0.01) -> str:
        """An acknowledged send."""
        value = self.invoke(process, partition)
        op = {"process": process, "f": "send", "value": value, "partition": partition}
        self.add("ok", **op, offset=offset, latency=latency)
        return value

    def send_fail(self, process: str, partition: int, latency: float = 5.0) -> str:
        """A send the client reported failed (indeterminate)."""
        value = self.invoke(process, partition)
        op = {"process": process, "f": "send", "value": value, "partition": partition}
        self.add("fail", **op, error="RequestTimedOut", latency=latency)
        return value

    def poll(self, process: str, records: list[tuple[int, int, str]]) -> None:
        self.add("poll", process=process, mode="group", records=[list(r) for r in records])

    def final(self, partition: int, records: list[tuple[int, str]]) -> None:
        self.add("final", partition=partition, records=[list(r) for r in records])


def clean_history() -> History:
    """Two producers, two partitions, one consumer reading everything in order."""
    h = History()
    h.add("rebalance", process="c0", assigned=[0, 1])
    log: dict[int, list[tuple[int, str]]] = {0: [], 1: []}
    for i in range(6):
        for process in ("p0", "p1"):
            partition = i % 2
            offset = len(log[partition])
            log[partition].append((offset, h.send(process, partition, offset)))
    h.poll("c0", [(0, o, v) for o, v in log[0][:4]] + [(1, o, v) for o, v in log[1][:2]])
    h.poll("c0", [(1, o, v) for o, v in log[1][2:]] + [(0, o, v) for o, v in log[0][4:]])
    h.add("phase", name="final-read")
    h.final(0, log[0])
    h.final(1, log[1])
    h.add("phase", name="done")
    return h


def counts(result: Result) -> dict[str, int]:
    return {name: getattr(result, name) for name in ANOMALIES}


ZERO = dict.fromkeys(ANOMALIES, 0)


def test_clean_history_has_no_anomaly() -> None:
    result = check(clean_history().events)
    assert counts(result) == ZERO
    assert result.acknowledged == 12
    assert result.attempted == 12 and result.failed == 0
    assert result.ok
    assert not any(getattr(result, f"{name}_examples") for name in ANOMALIES)


def test_lost_acknowledged_value() -> None:
    h = History()
    a = h.send("p0", 0, 0)
    b = h.send("p0", 0, 1)
    c = h.send("p0", 1, 0)
    h.poll("c0", [(0, 0, a), (0, 1, b)])  # consumers saw b, yet the log lost it (truncation)
    h.final(0, [(0, a)])
    h.final(1, [(0, c)])
    result = check(h.events)
    assert counts(result) == {**ZERO, "lost": 1}
    assert result.lost_examples == [f"{b} acknowledged at p0 offset 1"]
    assert not result.ok


def test_lost_examples_are_capped_but_all_are_counted() -> None:
    h = History()
    for offset in range(15):
        h.send("p0", 0, offset)
    h.final(0, [])
    result = check(h.events)
    assert result.lost == 15
    assert len(result.lost_examples) == 10
    assert "(first 10 of 15)" in result.report()


def test_value_found_on_another_partition_is_not_lost() -> None:
    h = History()
    a = h.send("p0", 0, 0)
    h.final(0, [])
    h.final(1, [(0, a)])
    assert check(h.events).lost == 0


def test_duplicated_in_final_read() -> None:
    h = History()
    a = h.send("p0", 0, 0)
    b = h.send("p1", 0, 1)
    h.final(0, [(0, a), (1, b), (2, a)])
    h.final(1, [])
    result = check(h.events)
    assert counts(result) == {**ZERO, "duplicated": 1}
    assert result.duplicated_examples == [f"{a} at p0@0, p0@2"]
    assert not result.ok


def test_duplicated_across_poll_and_final_counts_values_once() -> None:
    h = History()
    a = h.send("p0", 0, 0)
    b = h.send("p1", 1, 0)
    # a read at three positions still counts as one duplicated value.
    h.poll("c0", [(1, 1, a), (0, 0, a)])
    h.poll("c0", [(0, 0, a), (1, 1, a)])  # re-reading the same positions adds nothing
    h.poll("c1", [(1, 2, a)])
    h.final(0, [(0, a)])
    h.final(1, [(0, b), (1, a), (2, a)])
    result = check(h.events)
    assert counts(result) == {**ZERO, "duplicated": 1}
    assert result.duplicated_examples == [f"{a} at p1@1, p0@0, p1@2"]


def test_reordered_counts_adjacent_inversions_per_partition_and_producer() -> None:
    h = History()
    # p0 writes seqs 0..5 to partition 0 but the log holds them as 0, 3, 1, 2, 5, 4: 2 inversions
    # (1 after 3, 4 after 5; 2 after 1 is in order); p1's 0..2 land on partition 1 as 2, 1, 0.
    order = (0, 3, 1, 2, 5, 4)
    v = [h.send("p0", 0, order.index(seq)) for seq in range(6)]
    w = [h.send("p1", 1, o) for o in (2, 1, 0)]
    h.final(0, [(o, v[seq]) for o, seq in enumerate(order)])
    h.final(1, [(0, w[2]), (1, w[1]), (2, w[0])])
    result = check(h.events)
    assert counts(result) == {**ZERO, "reordered": 4}
    assert result.reordered_examples[0] == "p0: p0:1 at offset 2 after p0:3 at offset 1"
    assert not result.ok


def test_interleaved_producers_and_partitions_are_not_reordered() -> None:
    h = History()
    a0 = h.send("p0", 0, 0)
    b0 = h.send("p1", 0, 1)
    a1 = h.send("p0", 1, 0)  # p0's seq 1 on partition 1, seq 2 back on partition 0
    a2 = h.send("p0", 0, 2)
    b1 = h.send("p1", 0, 3)
    h.final(0, [(0, a0), (1, b0), (2, a2), (3, b1)])
    h.final(1, [(0, a1)])
    assert counts(check(h.events)) == ZERO


def test_inconsistent_acknowledgements() -> None:
    h = History()
    a = h.send("p0", 0, 1)  # acknowledged at offset 1, but the log holds it at 0
    b = h.send("p0", 0, 1)
    c = h.send("p0", 0, 1)  # a third value at the same offset: still one position
    h.final(0, [(0, a), (1, b), (2, c)])
    h.final(1, [])
    result = check(h.events)
    assert counts(result) == {**ZERO, "inconsistent": 1}
    assert result.inconsistent_examples == [f"p0 offset 1 holds ['{a}', '{b}', '{c}']"]
    assert not result.ok


def test_inconsistent_poll_and_final_read() -> None:
    h = History()
    a = h.send("p0", 0, 0)
    x = h.send_fail("p0", 0)
    b = h.send("p0", 0, 1)
    h.poll("c0", [(0, 0, a), (0, 1, x)])  # the consumer saw x where the final read has b
    h.final(0, [(0, a), (1, b)])
    h.final(1, [])
    result = check(h.events)
    assert counts(result) == {**ZERO, "inconsistent": 1}
    assert result.inconsistent_examples == [f"p0 offset 1 holds ['{b}', '{x}']"]


def test_poll_skip_within_and_across_polls() -> None:
    h = History()
    v = [h.send("p0", 0, o) for o in range(6)]
    h.poll("c0", [(0, 0, v[0]), (0, 2, v[2])])  # skips 1
    h.poll("c0", [(0, 3, v[3])])
    h.poll("c0", [(0, 5, v[5])])  # skips 4, across polls
    h.poll("c0", [(0, 1, v[1]), (0, 3, v[3])])  # back to 1 (no skip), then skips 2
    h.final(0, list(enumerate(v)))
    h.final(1, [])
    result = check(h.events)
    assert counts(result) == {**ZERO, "poll_skips": 3}
    assert result.poll_skips_examples[0] == (
        "c0 p0: read offset 0 then 2, skipping 1 offset(s) the final read holds"
    )
    assert result.ok, "poll skips are reported but do not decide the verdict"


def test_gaps_missing_from_final_read_and_backward_jumps_are_not_skips() -> None:
    h = History()
    v = [h.send("p0", 0, o) for o in (0, 3, 4)]  # offsets 1, 2 hold no record (e.g. markers)
    w = h.send("p0", 1, 0)
    h.poll("c0", [(0, 0, v[0]), (1, 0, w), (0, 3, v[1]), (0, 4, v[2])])
    h.poll("c0", [(0, 0, v[0]), (0, 3, v[1])])  # backward to 0, then 0 -> 3 is no skip either
    h.final(0, [(0, v[0]), (3, v[1]), (4, v[2])])
    h.final(1, [(0, w)])
    assert counts(check(h.events)) == ZERO


def test_skip_tracking_is_per_consumer_and_partition() -> None:
    h = History()
    v = [h.send("p0", 0, o) for o in range(3)]
    w = [h.send("p1", 1, o) for o in range(3)]
    h.poll("c0", [(0, 0, v[0]), (1, 0, w[0])])
    h.poll("c1", [(0, 1, v[1]), (1, 2, w[2])])  # c1's first records: nothing to skip from
    h.poll("c0", [(0, 1, v[1]), (1, 1, w[1]), (0, 2, v[2]), (1, 2, w[2])])
    h.final(0, list(enumerate(v)))
    h.final(1, list(enumerate(w)))
    assert counts(check(h.events)) == ZERO


def skip_history(between: dict[str, Any] | None) -> list[dict[str, Any]]:
    """c0 reads p0 offsets 0, 1, then (after event `between`) 3: one skip unless reset."""
    h = History()
    v = [h.send("p0", 0, o) for o in range(4)]
    h.add("rebalance", process="c0", assigned=[0, 1])
    h.poll("c0", [(0, 0, v[0]), (0, 1, v[1])])
    if between is not None:
        h.add(**between)
    h.poll("c0", [(0, 3, v[3])])
    h.final(0, list(enumerate(v)))
    h.final(1, [])
    return h.events


def _seek(process: str, partition: int) -> dict[str, Any]:
    return {"type_": "seek", "process": process, "partition": partition, "offset": 3}


@pytest.mark.parametrize(
    ("between", "skips"),
    [
        pytest.param(None, 1, id="nothing"),
        pytest.param({"type_": "rebalance", "process": "c0", "assigned": [0]}, 0, id="rebalance"),
        pytest.param({"type_": "rebalance", "process": "c1", "assigned": [1]}, 1, id="other-c"),
        pytest.param(_seek("c0", 0), 0, id="seek"),
        pytest.param(_seek("c0", 1), 1, id="seek-other-partition"),
        pytest.param(_seek("c1", 0), 1, id="seek-other-consumer"),
        pytest.param({"type_": "client-error", "process": "c0", "error": "x"}, 1, id="error"),
    ],
)
def test_rebalance_and_seek_reset_skip_tracking(between: dict[str, Any] | None, skips: int) -> None:
    assert counts(check(skip_history(between))) == {**ZERO, "poll_skips": skips}


@pytest.mark.parametrize("in_log", [True, False], ids=["present", "absent"])
def test_indeterminate_fail_is_no_anomaly(in_log: bool) -> None:
    h = History()
    a = h.send("p0", 0, 0)
    x = h.send_fail("p0", 0)
    b = h.send("p0", 0, 2 if in_log else 1)
    records = [(0, a), (1, x), (2, b)] if in_log else [(0, a), (1, b)]
    h.poll("c0", [(0, o, v) for o, v in records])
    h.final(0, records)
    h.final(1, [])
    result = check(h.events)
    assert counts(result) == ZERO
    assert result.ok
    assert (result.acknowledged, result.failed, result.attempted) == (2, 1, 3)


def test_unexpected_values_are_reported_but_do_not_decide() -> None:
    h = History()
    a = h.send("p0", 0, 0)
    h.poll("c0", [(0, 0, a), (1, 0, "p9:1")])
    h.final(0, [(0, a)])
    h.final(1, [(0, "p9:1"), (1, "garbage"), (2, None)])  # type: ignore[list-item]
    result = check(h.events)
    assert counts(result) == {**ZERO, "unexpected": 3}
    assert result.unexpected_examples == [
        "p9:1 at p1 offset 0 (poll by c0; never invoked)",
        "garbage at p1 offset 1 (final read; not <process>:<seq>)",
        "None at p1 offset 2 (final read; not <process>:<seq>)",
    ]
    assert result.ok


def test_missing_final_read_raises() -> None:
    h = History()
    h.send("p0", 0, 0)
    with pytest.raises(ValueError, match="history has no final read"):
        check(h.events)


def test_missing_final_of_one_partition_is_flagged() -> None:
    h = History()
    a = h.send("p0", 0, 0)
    h.send("p0", 1, 0)
    h.final(0, [(0, a)])
    result = check(h.events)
    assert result.lost == 1
    assert result.missing_final == [1]
    assert "no final read of them" in result.report()


def test_summary_line_format() -> None:
    result = Result(
        acknowledged=120, lost=1, duplicated=2, reordered=3, inconsistent=4, poll_skips=5
    )
    assert result.summary_line(42) == (
        "chaos: 120 acknowledged, 1 lost, 2 duplicated, 3 reordered, 4 inconsistent, "
        "5 poll-skips (seed 42)"
    )
    assert check(clean_history().events).summary_line(7) == (
        "chaos: 12 acknowledged, 0 lost, 0 duplicated, 0 reordered, 0 inconsistent, "
        "0 poll-skips (seed 7)"
    )


def test_ok_is_decided_by_lost_duplicated_reordered_inconsistent() -> None:
    assert Result(acknowledged=10, poll_skips=3, unexpected=2).ok
    for field in ("lost", "duplicated", "reordered", "inconsistent"):
        assert not Result(acknowledged=10, **{field: 1}).ok, field


def test_availability_split_by_fault_windows() -> None:
    h = History()
    h.send("p0", 0, 0, latency=0.010)  # t 0.1: calm
    h.add("nemesis", f="start", fault="kill", targets=[1], detail="SIGKILL broker 1")
    h.send_fail("p0", 0, latency=5.0)
    h.send("p0", 0, 1, latency=2.0)
    h.invoke("p0", 0)  # never answered: pending
    h.add("nemesis", f="stop", fault="kill", targets=[1], detail="restarted")
    h.send("p0", 0, 2, latency=0.020)
    h.add("nemesis", f="start", fault="pause", targets=[2], detail="SIGSTOP")  # never stopped
    h.send("p0", 0, 3, latency=0.5)
    h.final(0, [(o, f"p0:{s}") for o, s in ((0, 0), (1, 2), (2, 4), (3, 5))])
    result = check(h.events)
    assert counts(result) == ZERO
    faulty, calm = result.during_faults, result.calm
    assert (faulty.attempted, faulty.acknowledged, faulty.failed, faulty.pending) == (4, 2, 1, 1)
    assert faulty.share == 0.5
    assert (faulty.p50, faulty.p99, faulty.max) == (0.5, 2.0, 2.0)
    assert (calm.attempted, calm.acknowledged, calm.failed, calm.pending) == (2, 2, 0, 0)
    assert (calm.p50, calm.p95, calm.max) == (0.010, 0.020, 0.020)
    windows = fault_windows(h.events)
    assert [(w.fault, w.healed) for w in windows] == [("kill", True), ("pause", False)]
    assert windows[1].stop == h.events[-1]["t"]
    report = result.report()
    assert "during faults" in report and "calm" in report and "(never healed)" in report


def test_load_ignores_unknown_events_and_fields(tmp_path: Path) -> None:
    events = clean_history().events
    events.insert(3, {"type": "future-thing", "t": 0.3, "whatever": [1, 2]})
    events[5] = {**events[5], "extra": {"nested": True}}
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n\n")
    loaded = load(path)
    assert loaded == events
    assert counts(check(loaded)) == ZERO
    path.write_text(json.dumps(events[0]) + "\n{truncated\n")
    with pytest.raises(ValueError, match=r"history\.jsonl:2: not JSON"):
        load(path)


def test_report_names_counts_and_examples() -> None:
    h = History()
    a = h.send("p0", 0, 0)
    h.send("p0", 0, 1)
    h.final(0, [(0, a)])
    report = check(h.events).report()
    assert "verdict: FAILED" in report
    assert "lost:" in report and "p0:1 acknowledged at p0 offset 1" in report
    assert "target josefk, seed 7" in report


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_timeline_writes_png(tmp_path: Path) -> None:
    h = History()
    for i in range(40):
        h.send("p0", i % 2, i // 2, latency=0.005 * (1 + i % 7))
        if i == 10:
            h.add("nemesis", f="start", fault="kill", targets=[1], detail="")
        if i == 20:
            h.add("nemesis", f="stop", fault="kill", targets=[1], detail="")
            h.add("client-error", process="p0", error="NotLeaderForPartition")
            h.send_fail("p0", 0)
        if i == 30:
            h.add("nemesis", f="start", fault="partition", targets=[2, 3], detail="")
    h.poll("c0", [(0, 0, "p0:0"), (0, 1, "p0:2")])
    h.add("phase", name="healed")
    h.add("phase", name="final-read")
    h.final(0, [])
    h.add("phase", name="done")
    path = tmp_path / "timeline.png"
    plot(h.events, path)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 20_000


@pytest.mark.parametrize(
    "events",
    [[], [{"type": "meta", "t": 0, "seed": 1, "target": "kafka"}]],
    ids=["empty", "meta-only"],
)
def test_timeline_survives_short_histories(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    path = tmp_path / "timeline.png"
    plot(events, path)
    assert path.read_bytes().startswith(PNG_MAGIC)
