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


async def refrozen(since: int) -> int:
    """The freeze count once a refreeze has changed it from ``since``."""
    with trio.fail_after(20):
        while gc.get_freeze_count() == since:
            await trio.sleep(0.02)
    return gc.get_freeze_count()


def growth_due(frozen: int) -> list[Node]:
    """Enough new long-lived objects to make a refreeze due."""
    return [Node() for _ in range(max(MIN_GROWTH, frozen // 2) + 1000)]


async def test_frozen_while_serving_and_refrozen_as_it_grows() -> None:
    assert gc.get_freeze_count() == 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_frozen, 0.05)
        frozen = await refrozen(0)
        grown = growth_due(frozen)
        assert await refrozen(frozen) >= len(grown)
        nursery.cancel_scope.cancel()
    assert gc.get_freeze_count() == 0


async def test_garbage_among_frozen_objects_is_reclaimed_at_a_full_refreeze(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "FULL_EVERY", 1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_frozen, 0.05)
        doomed = growth_due(await refrozen(0))
        high = await refrozen(gc.get_freeze_count())
        count = len(doomed)
        del doomed  # a cycle each: only a collection frees them
        grown = growth_due(high)
        # Frozen, the doomed would still count; refrozen in full, they are gone.
        assert await refrozen(high) < high + len(grown) - count // 2
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
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A refreeze between full ones collects only what is not frozen (the growth)."""
    monkeypatch.setattr(heap, "FULL_EVERY", 3)
    fulls: list[bool] = []
    real = heap.refreeze

    def recorded(full: bool) -> int:
        fulls.append(full)
        return real(full)

    monkeypatch.setattr(heap, "refreeze", recorded)
    kept = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_frozen, 0.05)
        with trio.fail_after(60):
            while len(fulls) < 4:
                if len(kept) < len(fulls):  # refrozen: grow again
                    kept.append(growth_due(gc.get_freeze_count()))
                    gc.collect()  # into the oldest generation, as long-lived objects get
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert fulls == [True, False, False, True]
