"""The active controller's ZooKeeper work in flight at once (`for_each`), and the error
that ends a controller another broker has replaced (`ControllerMovedError`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio


class ControllerMovedError(Exception):
    """Another broker is controller now: this one stops acting at once."""


def first_leaf(group: BaseException) -> BaseException:
    """The first exception at the bottom of (nested) exception groups."""
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


#: Partition state writes (and reads) the controller keeps in flight at once.
ZK_PIPELINE = 64


async def for_each(items: Iterable[Any], fn: Callable[[Any], Awaitable[None]],
                   limit: int = ZK_PIPELINE) -> None:
    """``await fn(item)`` for every item, up to ``limit`` at a time. Each partition's state
    is a znode of its own: written one after another, 10,000 partitions cost 10,000
    ZooKeeper round trips in sequence; pipelined, as Kafka's controller sends them
    (asynchronously, all at once), a fraction of that. ``fn`` touches only its own
    item's state. A ControllerMovedError among the failures is what is raised."""
    limiter = trio.CapacityLimiter(limit)

    async def one(item: Any) -> None:
        async with limiter:
            await fn(item)

    try:
        async with trio.open_nursery() as nursery:
            for item in items:
                nursery.start_soon(one, item)
    except BaseExceptionGroup as group:
        moved, _ = group.split(ControllerMovedError)
        raise first_leaf(moved if moved is not None else group) from None
