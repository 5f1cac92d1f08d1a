"""A census of a process's Python objects by type, cheap enough for a full-speed soak.

tracemalloc slows a broker several times; this counts, from a thread that lets the event
loop run between objects, the objects the collector tracks and the untracked ones they
refer to (strings, bytes, bytearrays, numbers, and the tuples and dicts of only those),
with their ``sys.getsizeof``.
An object referred to from several containers is counted once per reference: the sizes
are a measure to compare between censuses of one process, not the heap's size.

The broker freezes its long-lived objects (``server/heap.py``), and the collector neither
lists nor collects frozen objects. So each census first unfreezes and collects everything
with ``gc.DEBUG_SAVEALL``: what that finds unreachable is counted apart as garbage (and
kept, so the process's memory grows as it would have), the rest as live; then it freezes
again, as the broker's own full refreeze does.

    JOSEFK_CENSUS_EVERY_S=300 make soak ...

writes one JSON line per census to ``heap/<pid>.census`` beside each josefk broker's
data; ``python -m compat_tests.chaos.census DIR [SKIP]`` prints what grew in each
process between its census number SKIP and its last.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

TOP = 25
#: How many of the largest objects a census names, with what holds each.
BIGGEST = 20


def _name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


#: The garbage found by earlier censuses, kept so that memory grows as without them.
_kept: list[object] = []


def count(objects: list[object], biggest: list[tuple[int, object, object]] | None = None
          ) -> dict[str, list[int]]:
    """Type name -> [objects, bytes] over ``objects`` and the untracked ones they hold;
    the BIGGEST largest of them go into ``biggest`` as (size, object, the tracked object
    it was reached from, or None)."""
    totals: dict[type, list[int]] = defaultdict(lambda: [0, 0])
    floor = 0

    def add(obj: object, via: object = None) -> None:
        nonlocal floor
        size = sys.getsizeof(obj)
        entry = totals[type(obj)]
        entry[0] += 1
        entry[1] += size
        if biggest is not None and size > floor:
            biggest.append((size, obj, via))
            if len(biggest) > 2 * BIGGEST:
                biggest.sort(key=lambda pair: pair[0], reverse=True)
                del biggest[BIGGEST:]
                floor = biggest[-1][0]

    for obj in objects:
        add(obj)
        # Untracked: no collector list holds them. An untracked dict or tuple holds only
        # untracked objects (a dict of bytearrays), so this walk ends.
        untracked = [ref for ref in gc.get_referents(obj) if not gc.is_tracked(ref)]
        while untracked:
            ref = untracked.pop()
            add(ref, obj)
            if isinstance(ref, (dict, tuple)):
                untracked += gc.get_referents(ref)
    if biggest is not None:
        biggest.sort(key=lambda pair: pair[0], reverse=True)
        del biggest[BIGGEST:]
    return {_name(kind): entry for kind, entry in totals.items()}


def _holder(obj: object, via: object, ignore: set[int]) -> str:
    """What refers to ``obj`` (or, for an untracked object, to the tracked ``via`` it was
    reached from): the type of each referrer (through an instance's dict, its owner's)."""
    names = []
    for ref in [via] if via is not None else gc.get_referrers(obj):
        if id(ref) in ignore or type(ref).__name__ == "frame":
            continue
        if isinstance(ref, dict):
            owners = [o for o in gc.get_referrers(ref)
                      if id(o) not in ignore and getattr(o, "__dict__", None) is ref]
            names.append(f"{_name(type(owners[0]))}.__dict__" if owners else "dict")
        else:
            names.append(_name(type(ref)))
    return ", ".join(sorted(set(names))[:4])


def take() -> dict:
    """One census: when, pymalloc's allocated blocks, the objects frozen before it, and
    the counts by type of the live objects and of the garbage found since the last."""
    frozen = gc.get_freeze_count()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.unfreeze()
        gc.collect()
    finally:
        gc.set_debug(0)
    garbage = list(gc.garbage)
    gc.garbage.clear()
    _kept.extend(garbage)
    dead = {id(obj) for obj in _kept} | {id(_kept), id(garbage)}
    live = [obj for obj in gc.get_objects() if id(obj) not in dead]
    biggest: list[tuple[int, object, object]] = []
    types = count(live, biggest)
    # Before the freeze: gc.get_referrers() does not look among frozen objects.
    ignore = {id(live), id(biggest), id(garbage), id(_kept)} | {id(row) for row in biggest}
    big = [[_name(type(obj)), size, _holder(obj, via, ignore)] for size, obj, via in biggest]
    del live, biggest
    gc.freeze()
    return {"t": time.time(), "blocks": sys.getallocatedblocks(), "frozen": frozen,
            "garbage": count(garbage), "types": types, "big": big}


def record_every(every: float, directory: Path) -> None:
    """Append a census to ``directory/<pid>.census`` every ``every`` seconds, forever."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{os.getpid()}.census"
    while True:
        time.sleep(every)
        line = json.dumps(take())
        with path.open("a") as out:
            out.write(line + "\n")


def load(path: Path) -> list[dict]:
    """The censuses of one file, oldest first (a line cut short by a kill is skipped)."""
    censuses = []
    for line in path.read_text().splitlines():
        try:
            censuses.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return censuses


def diff(first: dict[str, list[int]], last: dict[str, list[int]],
         top: int = TOP) -> list[tuple[str, int, int]]:
    """The types that grew most in bytes: (name, objects added, bytes added)."""
    grown = []
    for name in set(first) | set(last):
        before, after = first.get(name, [0, 0]), last.get(name, [0, 0])
        grown.append((name, after[0] - before[0], after[1] - before[1]))
    grown.sort(key=lambda row: row[2], reverse=True)
    return grown[:top]


def garbage_since(censuses: list[dict]) -> dict[str, list[int]]:
    """The garbage of all ``censuses`` added up by type."""
    total: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for census in censuses:
        for name, (objects, size) in census["garbage"].items():
            total[name][0] += objects
            total[name][1] += size
    return dict(total)


def compare(directory: Path, skip: int = 1, top: int = TOP) -> str:
    """What grew in each process between its census ``skip`` and its last."""
    lines = []
    for path in sorted(directory.glob("*.census")):
        censuses = load(path)
        if len(censuses) < 2:
            continue
        start = min(skip, len(censuses) - 2)
        first, last = censuses[start], censuses[-1]
        minutes = (last["t"] - first["t"]) / 60
        lines.append(f"process {path.stem}: {last['blocks'] - first['blocks']:+,} pymalloc "
                     f"blocks over {minutes:.0f} min ({len(censuses)} censuses); live:")
        lines += _rows(diff(first["types"], last["types"], top))
        lines.append("  garbage the collector found among frozen objects since:")
        lines += _rows(diff({}, garbage_since(censuses[start + 1:]), top))
        lines.append("  the largest objects at the last census, and what holds them:")
        lines += [f"  {size / 1e3:10.1f} kB  {name}  <- {holder}"
                  for name, size, holder in last.get("big", [])]
    return "\n".join(lines)


def _rows(rows: list[tuple[str, int, int]]) -> list[str]:
    return [f"  {size / 1e3:+10.1f} kB {objects:+9,}  {name}" for name, objects, size in rows]


def main(argv: list[str]) -> None:
    print(compare(Path(argv[0]), int(argv[1]) if len(argv) > 1 else 1))


if __name__ == "__main__":
    main(sys.argv[1:])
