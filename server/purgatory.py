"""Delayed operations: requests parked until data arrives or they time out.

A fetch that has not reached ``min_bytes`` watches its partitions; an append
(or a high watermark move) notifies the partition and wakes exactly the
waiters watching it. Nothing polls.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable

import trio


class Purgatory:
    """Waiters keyed by what they watch (e.g. a topic partition)."""

    def __init__(self) -> None:
        self._watchers: defaultdict[Hashable, set[trio.Event]] = defaultdict(set)

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or the timeout passes; True if notified."""
        event = trio.Event()
        keys = list(keys)
        for key in keys:
            self._watchers[key].add(event)
        try:
            with trio.move_on_after(timeout_s):
                await event.wait()
        finally:
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(event)
                    if not watchers:
                        del self._watchers[key]
        return event.is_set()

    def notify(self, key: Hashable) -> None:
        for event in self._watchers.pop(key, ()):
            event.set()

    def watching(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))
