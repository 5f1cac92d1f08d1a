"""The cleaner threads' offset maps stay within ``log.cleaner.dedupe.buffer.size``.

Kafka's SkimpyOffsetMap is a buffer of exactly ``dedupe.buffer.size / threads``
bytes at 24 bytes an entry; josefk's map is a dict, whose entries cost several
times that, so its slots are counted from what an entry really costs: filled to
its load factor (or wholly), the map's allocations stay within the thread's share.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest

from josefk.log.cleaner.cleaner import OffsetMap
from josefk.log.manager import LogManager
from josefk.server.config.broker import load_config
from josefk.server.log_cleaner import LogCleanerService

MIB = 1 << 20


def service(tmp_path: Path, buffer: int, threads: int, load_factor: float
            ) -> LogCleanerService:
    config = load_config(None, {
        "log.dirs": str(tmp_path), "log.cleaner.threads": str(threads),
        "log.cleaner.dedupe.buffer.size": str(buffer),
        "log.cleaner.io.buffer.load.factor": str(load_factor)})
    return LogCleanerService(SimpleNamespace(  # type: ignore[arg-type]
        config=config, log_manager=LogManager([tmp_path])))


def short_key(i: int) -> bytes:
    return b"k%013d" % i  # 14 bytes: kept as itself


def long_key(i: int) -> bytes:
    return b"customer-%012d-order" % i  # 27 bytes: kept as its MD5 digest


def fill_to_full(offset_map: OffsetMap, key: object) -> int:
    """Distinct keys until the map is full, as the cleaner feeds it; peak bytes allocated."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        offset_map.clear()
        i = 0
        while not offset_map.full:
            offset_map.put(key(i), (1 << 40) + i)  # type: ignore[operator]
            i += 1
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("key", [short_key, long_key], ids=["short", "md5"])
@pytest.mark.parametrize(("buffer", "threads", "load_factor"), [
    (4 * MIB, 2, 0.9),   # Kafka's load factor
    (2 * MIB, 1, 1.0),   # a full map
    # A share whose last key makes the dict's table double: the worst point.
    (((1 << 14) * 2 // 3 + 1) * 208, 1, 1.0),
])
def test_a_full_offset_map_stays_within_the_threads_share(
        tmp_path: Path, key: object, buffer: int, threads: int, load_factor: float) -> None:
    cleaner = service(tmp_path, buffer, threads, load_factor)
    share = buffer // threads
    offset_map = OffsetMap(cleaner.slots, cleaner.load_factor)
    assert offset_map.max_entries == int(cleaner.slots * load_factor) > 1000
    peak = fill_to_full(offset_map, key)
    assert len(offset_map) == offset_map.max_entries
    assert peak <= share, f"{peak / len(offset_map):.0f} bytes an entry"
    # The map's use, as the cleaner's INFO line reports it, is that of its budget.
    assert offset_map.utilization == pytest.approx(load_factor, abs=0.001)


def test_for_memory_counts_real_entries() -> None:
    """A map built for a budget holds what fits in it, and the kept MD5 digests still
    find their keys."""
    offset_map = OffsetMap.for_memory(MIB, 0.9)
    peak = fill_to_full(offset_map, long_key)
    assert len(offset_map) == offset_map.max_entries and peak <= MIB
    assert offset_map.get(long_key(7)) == (1 << 40) + 7
    assert offset_map.get(hashlib.md5(long_key(7)).digest()) == -1  # a key, not a hash
    with pytest.raises(ValueError):
        OffsetMap.for_memory(100)
