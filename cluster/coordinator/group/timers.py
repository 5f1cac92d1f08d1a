"""The group coordinator's timers (session, rebalance, sync, initial delay, and those of
consumer group members): one task sleeps until the earliest group deadline, fires what
is due and writes its records, and is woken when an earlier deadline appears."""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Iterable

import trio

from josefk.cluster.background import failures_logged
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.records import Record

logger = logging.getLogger(__name__)


class GroupTimers:
    """The deadlines of the groups, earliest first."""

    def __init__(self, groups: Groups, clock: Callable[[], int],
                 write_best_effort: Callable[[Iterable[Record]], None]) -> None:
        self.groups = groups
        self.clock = clock
        self.write_best_effort = write_best_effort
        # (deadline, seq, group id) and the deadline last pushed per group.
        self._heap: list[tuple[int, int, str]] = []
        self._scheduled: dict[str, int] = {}
        self._seq = itertools.count()
        self._wakeup: trio.Event | None = None

    # --- scheduling ------------------------------------------------------------------------------

    def touch(self, group_id: str, *, wake: bool = True) -> None:
        """Schedule the group's earliest deadline if it is earlier than the one pending."""
        deadline = self.groups.next_deadline(group_id)
        if deadline is None:
            return
        scheduled = self._scheduled.get(group_id)
        if scheduled is not None and scheduled <= deadline:
            return
        self._scheduled[group_id] = deadline
        heapq.heappush(self._heap, (deadline, next(self._seq), group_id))
        if wake and self._heap[0][0] == deadline and self._wakeup is not None:
            self._wakeup.set()

    async def run(self) -> None:
        while True:
            while self._heap and self._heap[0][0] <= self.clock():
                deadline, _, group_id = heapq.heappop(self._heap)
                if self._scheduled.get(group_id) != deadline:
                    continue  # superseded by an earlier deadline
                del self._scheduled[group_id]
                # A timer that fails leaves its group unscheduled until its next request,
                # so that it cannot fire again at once, forever.
                with failures_logged(logger, f"the timer of group {group_id}"):
                    self.write_best_effort(self.groups.on_timer(group_id))
                    self.touch(group_id, wake=False)
                await trio.lowlevel.checkpoint()
            self._wakeup = trio.Event()
            if self._heap:
                with trio.move_on_after(max(0, self._heap[0][0] - self.clock()) / 1000):
                    await self._wakeup.wait()
            else:
                await self._wakeup.wait()
