"""The broker's periodic work: flushing, removing deleted logs, retention, checkpoints and
producer expiry, each on Kafka's schedule."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import trio

from josefk.cluster.partition import Partition
from josefk.log.clock import now_ms
from josefk.log.manager import LogManager, remove_dirs, write_checkpoints
from josefk.server.config.broker import BrokerConfig

logger = logging.getLogger(__name__)


class FlushMetrics(Protocol):
    def flushed(self, seconds: float) -> None: ...


class JobsHost(Protocol):
    """What the jobs need of the broker."""

    config: BrokerConfig
    log_manager: LogManager
    partitions: Mapping[tuple[str, int], Partition]
    metrics: FlushMetrics | None

    def on_partition_data(self, partition: Partition) -> None: ...


class BackgroundJobs:
    """Flush policy, deleted logs' and segments' removal each second; retention, checkpoints and
    producer expiry on their intervals. A failing job is logged and retried, never fatal."""

    def __init__(self, host: JobsHost) -> None:
        self._host = host

    async def run(self) -> None:
        config = self._host.config
        jobs: list[tuple[float, Callable[[], Awaitable[object]]]] = [
            (config.log_retention_check_interval_ms / 1000, self.enforce_retention),
            (config.log_flush_offset_checkpoint_interval_ms / 1000, self.checkpoint),
            (config.values["producer.id.expiration.check.interval.ms"] / 1000,
             self.expire_producers),
        ]
        due = [trio.current_time() + every for every, _ in jobs]
        while True:
            await trio.sleep(1)
            await self._run_job(self.flush_due_logs)
            await self._run_job(self.remove_deleted_logs)
            await self._run_job(self.delete_due_files)
            now = trio.current_time()
            for i, (every, job) in enumerate(jobs):
                if now >= due[i]:
                    await self._run_job(job)
                    due[i] = now + every

    @staticmethod
    async def _run_job(job: Callable[[], Awaitable[object]]) -> None:
        try:
            await job()
        except Exception:
            logger.exception("background job %s failed", job.__name__)

    async def remove_deleted_logs(self) -> None:
        if dirs := self._host.log_manager.take_deleted_dirs():
            await trio.to_thread.run_sync(remove_dirs, dirs)

    async def delete_due_files(self) -> None:
        self._host.log_manager.delete_due_files()

    async def flush_due_logs(self) -> None:
        metrics = self._host.metrics
        for log in self._host.log_manager.logs_needing_flush():
            started = trio.current_time()
            await trio.to_thread.run_sync(log.flush_due)
            if metrics is not None:
                metrics.flushed(trio.current_time() - started)

    async def enforce_retention(self) -> None:
        partitions = self._host.partitions
        starts = {key: p.log.log_start_offset for key, p in partitions.items()}
        self._host.log_manager.enforce_retention()
        for key, partition in partitions.items():
            if partition.log.log_start_offset != starts[key]:
                # A new log start offset for fetch sessions to tell.
                self._host.on_partition_data(partition)

    async def checkpoint(self) -> None:
        # Offsets are read here, on the event loop; only the file writes go to a thread.
        manager = self._host.log_manager
        files = manager.checkpoint_offsets()
        # A checkpoint that cannot be written takes its log directory offline.
        await trio.to_thread.run_sync(write_checkpoints, files, True, manager.failures)

    async def expire_producers(self) -> None:
        now = now_ms()
        for log in self._host.log_manager.logs.values():
            log.producer_state.remove_expired(now)
