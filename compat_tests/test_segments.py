"""On-disk layout: a partition directory of segments named by their base offsets.

Kafka's layout, which josefk keeps: ``<log.dir>/<topic>-<partition>/`` holds
``<20-digit base offset>.log`` with a ``.index`` and ``.timeindex`` each. A
segment rolls before it would exceed ``segment.bytes`` (at least 1 MiB for a
topic in Kafka 4.x). Only when the suite started the broker (it reads its files).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path

from kafka.record import MemoryRecords

from .clients import Rec, kafka_python_consume, now_ms, produce
from .conftest import Broker

SEGMENT_BYTES = 1024 * 1024
RECORD_BYTES = 10_000
N = 340  # ~3.4 MB: four segments
NAME_RE = re.compile(r"^(\d{20})\.log$")


def read_batches(path: Path) -> list[tuple[int, int, int]]:
    """``(position, base_offset, last_offset)`` of every batch in a segment file."""
    data = path.read_bytes()
    memory = MemoryRecords(data)
    out = []
    position = 0
    while True:
        batch = memory.next_batch()
        if batch is None:
            break
        out.append((position, batch.base_offset, batch.last_offset))
        position += batch.size_in_bytes
    assert position == len(data), f"{path.name}: {len(data) - position} trailing bytes"
    return out


def test_segment_roll_layout(owned_broker: Broker, make_topic: Callable[..., str]) -> None:
    assert owned_broker.data_dir is not None
    topic = make_topic(configs={"segment.bytes": str(SEGMENT_BYTES)})
    base = now_ms() - 600_000
    sent = [Rec(f"k{i}".encode(), bytes([i % 256]) * RECORD_BYTES, (), base + i) for i in range(N)]
    assert produce(owned_broker.bootstrap, topic, sent) == list(range(N))

    part_dir = owned_broker.data_dir / f"{topic}-0"
    assert part_dir.is_dir(), sorted(p.name for p in owned_broker.data_dir.iterdir())
    logs = sorted(p for p in part_dir.iterdir() if p.suffix == ".log")
    assert all(NAME_RE.match(p.name) for p in logs), [p.name for p in logs]
    bases = [int(p.stem) for p in logs]
    assert len(logs) >= 3, f"expected several segments, got {[p.name for p in logs]}"
    assert bases[0] == 0 and bases == sorted(bases)

    next_offset = 0
    for i, log in enumerate(logs):
        index = log.with_suffix(".index")
        timeindex = log.with_suffix(".timeindex")
        assert index.is_file() and timeindex.is_file(), log.name
        batches = read_batches(log)
        assert batches, f"{log.name} is empty"
        assert batches[0][1] == bases[i] == next_offset, log.name
        for (_, _, last), (_, nxt, _) in zip(batches, batches[1:], strict=False):
            assert nxt == last + 1, log.name
        next_offset = batches[-1][2] + 1
        if i == len(logs) - 1:
            continue  # the active segment: indexes preallocated, may still grow
        assert log.stat().st_size <= SEGMENT_BYTES, log.name
        # A rolled segment's indexes are trimmed to their entries.
        check_offset_index(index, bases[i], batches)
        check_time_index(timeindex, bases[i], batches[-1][2], base)
    assert next_offset == N

    got = kafka_python_consume(owned_broker.bootstrap, topic, N)
    assert [g.value for g in got] == [r.value for r in sent]


def check_offset_index(index: Path, base: int, batches: list[tuple[int, int, int]]) -> None:
    """Entries (relative offset, position) point at the batch holding that offset."""
    data = index.read_bytes()
    assert data and len(data) % 8 == 0, f"{index.name}: {len(data)} bytes"
    by_position = {pos: (first, last) for pos, first, last in batches}
    previous = -1
    for rel, pos in struct.iter_unpack(">ii", data):
        assert rel > previous, index.name
        previous = rel
        assert pos in by_position, f"{index.name}: position {pos} is not a batch start"
        first, last = by_position[pos]
        assert first <= base + rel <= last, f"{index.name}: offset {base + rel} not at {pos}"


def check_time_index(timeindex: Path, base: int, last_offset: int, first_ts: int) -> None:
    """Entries (timestamp, relative offset) increase and stay inside the segment."""
    data = timeindex.read_bytes()
    assert data and len(data) % 12 == 0, f"{timeindex.name}: {len(data)} bytes"
    previous_ts = -1
    for ts, rel in struct.iter_unpack(">qi", data):
        assert ts > previous_ts, timeindex.name
        previous_ts = ts
        assert first_ts <= ts < first_ts + N, f"{timeindex.name}: timestamp {ts}"
        assert base <= base + rel <= last_offset, f"{timeindex.name}: offset {base + rel}"
    # Records carry timestamps base_ts + offset: the last entry is the segment's largest.
    assert previous_ts == first_ts + last_offset, timeindex.name
