"""Delayed operations: requests parked until data arrives or they time out.

A fetch that has not reached ``min_bytes`` watches its partitions; an append
(or a high watermark move) notifies the partition and wakes exactly the
waiters watching it. Nothing polls.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable

import trio

from josefk.server.metrics.recorder import wait_ended, wait_started


def follower_key(topic: str, index: int) -> tuple[str, str, int]:
    """What followers' fetches watch: new records only, not high watermark moves."""
    return ("follower", topic, index)


class _Waiter:
    __slots__ = ("event", "fired")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.fired: set[Hashable] = set()


class Purgatory:
    """Waiters keyed by what they watch (e.g. a topic partition)."""

    def __init__(self) -> None:
        self._watchers: defaultdict[Hashable, set[_Waiter]] = defaultdict(set)
        self._subscribers: defaultdict[Hashable, set[Callable[[Hashable], None]]] = (
            defaultdict(set))

    def subscribe(self, keys: Iterable[Hashable], callback: Callable[[Hashable], None]
                  ) -> None:
        """Call ``callback(key)`` at every notification of one of ``keys`` until
        unsubscribed: a standing watch (a follower's fetch session), where a waiter
        watches once."""
        for key in keys:
            self._subscribers[key].add(callback)

    def unsubscribe(self, keys: Iterable[Hashable], callback: Callable[[Hashable], None]
                    ) -> None:
        for key in keys:
            callbacks = self._subscribers.get(key)
            if callbacks is not None:
                callbacks.discard(callback)
                if not callbacks:
                    del self._subscribers[key]

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or the timeout passes; True if notified."""
        return bool(await self.wait_for(keys, timeout_s))

    async def wait_for(self, keys: Iterable[Hashable], timeout_s: float) -> set[Hashable]:
        """Wait until one of ``keys`` is notified or the timeout passes; the keys notified
        meanwhile (empty on timeout), so a waiter watching thousands of partitions looks
        again only at those."""
        waiter = _Waiter()
        keys = list(keys)
        for key in keys:
            self._watchers[key].add(waiter)
        started = wait_started()
        try:
            with trio.move_on_after(timeout_s):
                await waiter.event.wait()
        finally:
            wait_ended(started)  # the request's remote time (its metrics)
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(waiter)
                    if not watchers:
                        del self._watchers[key]
        return waiter.fired

    def notify(self, key: Hashable) -> None:
        for waiter in self._watchers.pop(key, ()):
            waiter.fired.add(key)
            waiter.event.set()
        for callback in tuple(self._subscribers.get(key, ())):
            callback(key)

    def watching(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))
