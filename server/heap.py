"""Keep the broker's long-lived objects out of CPython's full garbage collections.

CPython's cyclic collector runs a full collection whenever the objects that survived
into its oldest generation since the last one exceed a quarter of those it holds, and
a full collection walks every tracked object. A broker's state is tracked objects that
live as long as it does, about 40 per partition (its log, segment, indexes, producer
state, paths): at 10,000 partitions some 390,000 objects and two million references,
0.45 s of CPU per full collection on the development VM. A Fetch naming every one of
those partitions keeps tens of thousands of objects alive for as long as it runs, long
enough to reach the oldest generation: a full collection every few such requests, a
quarter of the broker's CPU in the scale bench's fetch (bench/results/scale/issue31).

``gc.freeze()`` moves every live object into a permanent generation that collections
skip. The broker freezes once started, then refreezes whenever the oldest generation
has grown by half the frozen count (new partitions): a collection of what is not frozen,
then a freeze, which costs only the growth. Every FULL_EVERY-th refreeze is a full one
(unfreeze, collect, freeze), so the garbage among formerly frozen objects (a deleted
topic's partitions) is reclaimed too. Unfreezing every time walked every object of the
broker at each step: at 50,000 partitions, two million objects per refreeze, three
quarters of the broker's CPU while its logs were first written (the scale bench).
A collection asked for while another thread's is under way (its finalizers run with the
lock released) does nothing, so a refreeze waits for one of its own to happen: freezing
after a skipped one would freeze the garbage it was meant to free.
Only a broker serving from the main thread (``josefk serve``) does it; one
embedded in a test process on a thread of its own (the pytest plugin) leaves that
process's collector alone. The broker unfreezes when it stops.
"""

from __future__ import annotations

import gc
import logging
import threading
import time

import trio

logger = logging.getLogger(__name__)

#: Seconds between looks at the oldest generation (a look lists it: ~1 ms per 100,000).
CHECK_S = 10.0
#: Below this many objects grown since the last freeze, never refreeze.
MIN_GROWTH = 50_000
#: One refreeze in this many also collects the frozen objects.
FULL_EVERY = 4
#: Seconds a refreeze waits for another thread's collection to end before its own.
COLLECT_WAIT_S = 5.0


def collect() -> None:
    """A full collection that happened: ``gc.collect()`` returns at once, collecting
    nothing, while another thread's is under way; then wait for that one and ask again."""
    deadline = time.monotonic() + COLLECT_WAIT_S
    while True:
        before = gc.get_stats()[2]["collections"]
        gc.collect()
        if gc.get_stats()[2]["collections"] > before or time.monotonic() > deadline:
            return
        time.sleep(0.001)  # lets the collecting thread finish


def refreeze(full: bool) -> int:
    """Collect what is not frozen (``full``: everything), then freeze what is alive; the
    frozen count."""
    began = time.monotonic()
    if full:
        gc.unfreeze()
    collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.debug("froze %d objects in %.3f s (full: %s)", frozen, time.monotonic() - began,
                 full)
    return frozen


def needs_refreeze(grown: int, frozen: int) -> bool:
    """Has the oldest generation grown enough since the last freeze to pay a collection?"""
    return grown >= max(MIN_GROWTH, frozen // 2)


async def keep_frozen(check_s: float = CHECK_S) -> None:
    """Freeze now and refreeze as the broker grows, until cancelled (then unfreeze)."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        frozen = refreeze(full=True)
        refreezes = 0
        while True:
            await trio.sleep(check_s)
            if needs_refreeze(len(gc.get_objects(generation=2)), frozen):
                refreezes += 1
                frozen = refreeze(full=refreezes % FULL_EVERY == 0)
    finally:
        gc.unfreeze()
