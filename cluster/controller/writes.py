"""The controller's ZooKeeper writes, fenced by its epoch: every write is a multi that
first checks ``/controller_epoch``'s version, so a controller another broker has
replaced cannot write (Kafka's ``KafkaZkClient`` with the controller epoch zk version).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from dataclasses import replace

from josefk.cluster.controller.context import TP, ControllerContext
from josefk.cluster.controller.pipeline import ControllerMovedError
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import BadVersionError, Check, NoNodeError, Op, SetData, ZooKeeper
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr


class FencedWrites:
    """Writes checked against ``/controller_epoch`` at the version this controller set;
    the partition states it writes are kept in ``ctx.leader_isr``."""

    def __init__(self, zk: ZooKeeper, ctx: ControllerContext) -> None:
        self.zk = zk
        self.ctx = ctx

    async def multi(self, ops: list[Op]) -> None:
        """``ops`` in one multi after the epoch check; ControllerMovedError if the
        epoch moved."""
        try:
            await self.zk.multi([Check(zn.CONTROLLER_EPOCH, self.ctx.epoch_zk_version), *ops])
        except BadVersionError:
            _, stat = await self.zk.get(zn.CONTROLLER_EPOCH)
            if stat.version != self.ctx.epoch_zk_version:
                raise ControllerMovedError(
                    f"/controller_epoch moved to version {stat.version}") from None
            raise

    async def write_leader_isr(self, tp: TP, new: LeaderIsr) -> LeaderIsr | None:
        """Write a partition's new state over the one we know; None if it changed under
        us (the partition epoch moved), after re-reading it."""
        old = self.ctx.leader_isr[tp]
        path = zn.partition_state_path(*tp)
        try:
            await self.multi([SetData(path, new.encode(), old.zk_version)])
        except BadVersionError:
            data, stat = await self.zk.get(path)
            self.ctx.leader_isr[tp] = LeaderIsr.decode(data, stat.version)
            return None
        written = replace(new, zk_version=old.zk_version + 1)
        self.ctx.leader_isr[tp] = written
        return written


async def ignore_no_node(call: Awaitable[object]) -> None:
    """Await ``call`` (a delete, say); a znode already gone is no error."""
    with contextlib.suppress(NoNodeError):
        await call
