"""The broker keeps its long-lived objects out of full garbage collections: frozen once
it serves, refrozen as it grows, unfrozen when it stops; a broker on a thread of its
own (the pytest plugin's) leaves the process's collector alone."""

from __future__ import annotations

import gc
import threading

import pytest
import trio

from josefk.server import heap
from josefk.server.heap import MIN_GROWTH, keep_frozen, needs_refreeze


class Node:
    """A long-lived object in a reference cycle, as a broker's partitions are."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def refreezes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
    """Each refreeze of the test's keep_frozen, in order: (full, frozen count after). (The
    freeze count alone also drops whenever a frozen object is freed.)"""
    done: list[tuple[bool, int]] = []
    real = heap.refreeze

    def recorded(full: bool) -> int:
        done.append((full, real(full)))
        return done[-1][1]

    monkeypatch.setattr(heap, "refreeze", recorded)
    return done


async def nth(refreezes: list[tuple[bool, int]], n: int) -> int:
    """The frozen count after refreeze number ``n`` (from 0), once it has happened."""
    with trio.fail_after(20):
        while len(refreezes) <= n:
            await trio.sleep(0.02)
    return refreezes[n][1]


def growth_due(frozen: int) -> list[Node]:
    """Enough new long-lived objects (in the oldest generation) to make a refreeze due."""
    grown = [Node() for _ in range(max(MIN_GROWTH, frozen // 2) + 1000)]
    gc.collect()
    return grown


async def test_frozen_while_serving_and_refrozen_as_it_grows(
        refreezes: list[tuple[bool, int]]) -> None:
    assert gc.get_freeze_count() == 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_frozen, 0.05)
        frozen = await nth(refreezes, 0)
        grown = growth_due(frozen)
        assert await nth(refreezes, 1) >= frozen + len(grown)
        nursery.cancel_scope.cancel()
    assert gc.get_freeze_count() == 0


async def test_garbage_among_frozen_objects_is_reclaimed_at_a_full_refreeze(
        monkeypatch: pytest.MonkeyPatch, refreezes: list[tuple[bool, int]]) -> None:
    monkeypatch.setattr(heap, "FULL_EVERY", 1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_frozen, 0.05)
        doomed = growth_due(await nth(refreezes, 0))
        high = await nth(refreezes, 1)
        count = len(doomed)
        assert high >= count
        del doomed  # a cycle each: only a collection frees them
        grown = growth_due(high)
        # Frozen, the doomed would still count; refrozen in full, they are gone.
        assert await nth(refreezes, 2) < high + len(grown) - count // 2
        nursery.cancel_scope.cancel()


def test_a_broker_on_another_thread_leaves_the_collector_alone() -> None:
    counts = []

    def serve() -> None:
        async def main() -> None:
            await keep_frozen(0.01)
            counts.append(gc.get_freeze_count())
        trio.run(main)

    thread = threading.Thread(target=serve)
    thread.start()
    thread.join(10)
    assert counts == [0]


def test_refreeze_pays_only_for_real_growth() -> None:
    assert not needs_refreeze(MIN_GROWTH - 1, 0)
    assert needs_refreeze(MIN_GROWTH, 0)
    assert not needs_refreeze(300_000, 1_000_000)
    assert needs_refreeze(500_000, 1_000_000)


async def test_only_every_few_refreezes_walks_the_frozen_objects(
        monkeypatch: pytest.MonkeyPatch, refreezes: list[tuple[bool, int]]) -> None:
    """A refreeze between full ones collects only what is not frozen (the growth)."""
    monkeypatch.setattr(heap, "FULL_EVERY", 3)
    kept = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_frozen, 0.05)
        with trio.fail_after(60):
            while len(refreezes) < 4:
                if len(kept) < len(refreezes):  # refrozen: grow again
                    kept.append(growth_due(gc.get_freeze_count()))
                    gc.collect()  # into the oldest generation, as long-lived objects get
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert [full for full, _ in refreezes] == [True, False, False, True]


class SlowToDie:
    """Garbage whose finalizer holds a collection open until told to go on."""

    def __init__(self, inside: threading.Event, go_on: threading.Event) -> None:
        self.me, self.inside, self.go_on = self, inside, go_on

    def __del__(self) -> None:
        self.inside.set()
        self.go_on.wait(10)


def test_a_full_refreeze_waits_out_another_threads_collection() -> None:
    """gc.collect() does nothing while another thread's collection runs finalizers: the
    refreeze must not freeze the garbage it was meant to free (seen under pytest-xdist)."""
    inside, go_on = threading.Event(), threading.Event()

    def collect_slowly() -> None:
        SlowToDie(inside, go_on)
        gc.collect()

    doomed = [Node() for _ in range(1000)]
    gc.freeze()
    del doomed
    other = threading.Thread(target=collect_slowly)
    other.start()
    try:
        assert inside.wait(10)
        threading.Timer(0.2, go_on.set).start()
        heap.refreeze(full=True)
        assert not [obj for obj in gc.get_objects() if type(obj) is Node]
        gc.unfreeze()
        assert not [obj for obj in gc.get_objects() if type(obj) is Node]
    finally:
        go_on.set()
        other.join(10)
        gc.unfreeze()
