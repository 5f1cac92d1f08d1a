"""The log cleaner's threads: Kafka's ``LogCleaner``, scheduled from the event loop.

Each of ``log.cleaner.threads`` workers picks the filthiest compacted log on the
event loop, cleans it on a worker thread (``trio.to_thread``) with an offset map
of ``log.cleaner.dedupe.buffer.size / threads`` and the shared
``log.cleaner.io.max.bytes.per.second`` throttle, and has each cleaned segment
swapped in on the event loop (``trio.from_thread``), where appends, reads,
truncation and retention also change the log. With nothing to clean it sleeps
``log.cleaner.backoff.ms``. Stopping the broker aborts a pass between batches.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from josefk.log.cleaner.cleaner import (
    BYTES_PER_ENTRY,
    Cleaner,
    CleanerStats,
    CleaningAbortedError,
    CleaningPlan,
    OffsetMap,
    SourceSegment,
    Throttler,
)
from josefk.log.cleaner.manager import LogCleanerManager
from josefk.log.cleaner.swap import CleanedSegmentWriter
from josefk.log.clock import now_ms
from josefk.log.manager import write_checkpoints

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger("josefk.log.cleaner.cleaner")


class LogCleanerService:
    """Runs the cleaner threads of one broker."""

    def __init__(self, broker: Broker) -> None:
        values = broker.config.values
        self.enabled: bool = values["log.cleaner.enable"]
        self.throttler = Throttler(values["log.cleaner.io.max.bytes.per.second"])
        self._configure(values)
        self._restart = trio.Event()
        self.manager = LogCleanerManager(broker.log_manager)
        self.passes = 0
        self.running = 0  # worker tasks started with the current settings
        # For the metrics: the last pass's figures and the bytes of every pass.
        self.last_stats: CleanerStats | None = None
        self.bytes_read = 0
        self.bytes_written = 0

    def startup(self) -> None:
        """After the logs load: read each log dir's ``cleaner-offset-checkpoint``."""
        self.manager.load_checkpoints()

    def _configure(self, values: Mapping[str, Any]) -> None:
        self.threads: int = values["log.cleaner.threads"]
        self.backoff_s: float = values["log.cleaner.backoff.ms"] / 1000
        self.load_factor: float = values["log.cleaner.io.buffer.load.factor"]
        self.slots = int(values["log.cleaner.dedupe.buffer.size"] / max(self.threads, 1)
                         / BYTES_PER_ENTRY)
        self.throttler.rate = values["log.cleaner.io.max.bytes.per.second"]

    def reconfigure(self, values: Mapping[str, Any]) -> None:
        """New ``log.cleaner.*`` settings (dynamic broker configs): as Kafka's
        ``LogCleaner.reconfigure``, the throttle changes at once and the workers are
        stopped (a pass in progress is aborted) and started anew with the new settings."""
        self._configure(values)
        self._restart.set()

    async def run(self) -> None:
        if not self.enabled:
            return
        while True:
            self._restart = trio.Event()
            self.running = self.threads
            async with trio.open_nursery() as nursery:
                for i in range(self.threads):
                    nursery.start_soon(self._worker, i)
                await self._restart.wait()
                nursery.cancel_scope.cancel()

    async def _worker(self, index: int) -> None:
        cleaner = Cleaner(OffsetMap(self.slots, self.load_factor), self.throttler)
        while True:
            if not await self.clean_filthiest(cleaner):
                await trio.sleep(self.backoff_s)

    async def clean_filthiest(self, cleaner: Cleaner) -> bool:
        """Clean the filthiest log, if any needs it; False if none did."""
        plan = self.manager.grab_filthiest()
        if plan is None:
            return False
        result: int | BaseException | None = None
        try:
            async with trio.open_nursery() as nursery:
                # Cancelling the broker sets plan.aborted: the thread stops between batches.
                nursery.start_soon(_abort_when_cancelled, plan)
                try:
                    result = await trio.to_thread.run_sync(self._clean_on_thread, cleaner, plan)
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            self.manager.done(plan, result if isinstance(result, int) else None,
                              failed=isinstance(result, Exception)
                              and not isinstance(result, CleaningAbortedError))
        self.passes += 1
        files = self.manager.checkpoint_offsets()
        await trio.to_thread.run_sync(write_checkpoints, files)
        return True

    def _clean_on_thread(self, cleaner: Cleaner, plan: CleaningPlan) -> int | BaseException:
        """The pass, on a worker thread: the next first dirty offset, or what stopped it."""
        def replace(group: list[SourceSegment], writer: CleanedSegmentWriter) -> bool:
            return trio.from_thread.run_sync(self.manager.replace, plan, group, writer)
        try:
            end_offset, stats = cleaner.clean(plan, replace)
        except CleaningAbortedError as e:
            logger.info("log cleaning stopped: %s", e)
            return e
        except OSError as e:
            # As Kafka's cleaner: an I/O error takes the log's directory offline.
            self.manager.log_manager.failures.report(
                plan.log.directory.parent, f"Error while cleaning {plan.name}", e)
            return e
        except Exception as e:
            logger.exception("cleaning %s failed; it is left alone until a restart", plan.name)
            return e
        logger.info("%s", stats.summary(plan.name))
        self.last_stats = stats
        self.bytes_read += stats.bytes_read
        self.bytes_written += stats.bytes_written
        return end_offset

    def max_dirty_ratio(self) -> float:
        """The highest dirty ratio over the compacted logs (Kafka's max-dirty-percent)."""
        now = now_ms()
        ratios = [self.manager.cleanable(tp, log, now).cleanable_ratio
                  for tp, log in list(self.manager.log_manager.logs.items())
                  if log.config.compact and len(log.segments) > 1]
        return max(ratios, default=0.0)


async def _abort_when_cancelled(plan: CleaningPlan) -> None:
    try:
        await trio.sleep_forever()
    finally:
        plan.aborted.set()
