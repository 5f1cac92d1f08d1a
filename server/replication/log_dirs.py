"""What a broker does when one of its log directories fails (Kafka's
``ReplicaManager.handleLogDirFailure``).

The `LogDirFailureChannel` of the log manager reports the failure, from whichever thread
saw the I/O error; the handling runs on the event loop: the directory's logs leave
service, their partitions stop being followed here (a former leader answers
KAFKA_STORAGE_ERROR, then NOT_LEADER_OR_FOLLOWER once the controller moved it), waiting
requests are woken, and in a cluster the controller is told through a
``/log_dir_event_notification/log_dir_event_<seq>`` znode. With no directory left
online the broker halts, as Kafka's does.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from josefk.log.manager import LogManager, TopicPartition

if TYPE_CHECKING:
    from josefk.cluster.zk.client import ZooKeeper

logger = logging.getLogger(__name__)


class OfflinePartitions(Protocol):
    """The broker's side: stop serving partitions whose log went offline."""

    def on_partitions_offline(self, keys: list[TopicPartition]) -> None: ...


class LogDirFailureHandler:
    """Reacts to the log manager's failed directories on the event loop (`run`)."""

    def __init__(self, manager: LogManager, partitions: OfflinePartitions,
                 notify_controller: Callable[[], Awaitable[None]] | None = None,
                 halt: Callable[[int], object] = os._exit) -> None:
        self.manager = manager
        self.partitions = partitions
        self.notify_controller = notify_controller
        self.halt = halt
        self._send, self._receive = trio.open_memory_channel[Path](math.inf)
        self._token: trio.lowlevel.TrioToken | None = None
        self._handled: set[Path] = set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Handle failed directories for the broker's lifetime (those that failed at
        start-up first)."""
        self._token = trio.lowlevel.current_trio_token()
        self.manager.failures.listen(self._on_failure)
        for log_dir in self.manager.failures.offline_dirs:
            self._send.send_nowait(log_dir)
        task_status.started()
        async with self._receive:
            async for log_dir in self._receive:
                await self.handle(log_dir)

    def _on_failure(self, log_dir: Path) -> None:
        # Any thread (a flush fails on a worker thread): hop onto the event loop. At
        # shutdown no one handles it any more: the directory just misses its marker.
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(self._queue, log_dir)

    def _queue(self, log_dir: Path) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError,
                                 trio.WouldBlock):
            self._send.send_nowait(log_dir)

    async def handle(self, log_dir: Path) -> None:
        if log_dir in self._handled:
            return
        self._handled.add(log_dir)
        logger.warning("stopping serving replicas in dir %s because the log directory has "
                       "failed", log_dir)
        keys = self.manager.handle_dir_failure(log_dir)
        if not self.manager.live_log_dirs:
            logger.critical("Shutdown broker because all log dirs in %s have failed",
                            ", ".join(str(d) for d in self.manager.log_dirs))
            self.halt(1)
            return
        self.partitions.on_partitions_offline(keys)
        logger.warning("stopped serving partitions %s because they are in the failed log "
                       "directory %s", ", ".join(f"{t}-{p}" for t, p in keys) or "(none)",
                       log_dir)
        if self.notify_controller is not None:
            await self.notify_controller()


async def propagate_log_dir_event(zk: ZooKeeper, broker_id: int) -> None:
    """Tell the controller (Kafka's ``propagateLogDirEvent``): a persistent sequential
    ``log_dir_event_`` znode under ``/log_dir_event_notification``."""
    from josefk.cluster.zk import znodes as zn  # cluster mode only: one broker never needs it

    while True:
        try:
            path = await zk.create(zn.log_dir_event_path(), zn.encode_log_dir_event(broker_id),
                                   sequence=True, makepath=True)
        except Exception as e:  # ZooKeeper unreachable for now: the controller must hear
            logger.warning("broker %d: cannot write the log dir event notification: %s; "
                           "retrying", broker_id, e)
            await trio.sleep(1)
            continue
        logger.info("broker %d: log dir failure notified at %s", broker_id, path)
        return
