"""ISR changes at the controller: a leader's AlterPartition (KIP-497), checked against
the partition epoch, and the removal of dead or stopping followers from ISRs. A part the
`josefk.cluster.controller.controller.Controller` owns.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass

from josefk.cluster.controller.context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller.interfaces import BatchFactory, ZkWrites
from josefk.cluster.controller.pipeline import for_each
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.protocol.error_codes import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_UPDATE_VERSION,
    NONE,
    NOT_CONTROLLER,
    STALE_BROKER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
)

logger = logging.getLogger("josefk.cluster.controller.controller")


@dataclass(frozen=True)
class AlterIsr:
    """One partition of an AlterPartition request."""

    tp: TP
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0


class IsrChanges:
    """Who is in each partition's ISR: the leaders' requests to change it, and the
    controller's own removals of followers that died or are stopping.

    Takes the context, the fenced writes, a request batch factory, and
    ``on_isr_changed``, awaited for each partition whose ISR a leader changed (after
    the UpdateMetadata that announces it), where a reassignment may go on."""

    def __init__(self, ctx: ControllerContext, writes: ZkWrites, batch: BatchFactory,
                 on_isr_changed: Callable[[TP], Awaitable[None]]) -> None:
        self.ctx = ctx
        self.writes = writes
        self.batch = batch
        self.on_isr_changed = on_isr_changed

    async def alter_partition(self, broker_id: int, broker_epoch: int, tp: TP,
                              leader_epoch: int, new_isr: tuple[int, ...],
                              partition_epoch: int, leader_recovery_state: int
                              ) -> tuple[int, LeaderIsr | None]:
        """A leader's ISR change (KIP-497): checked against the partition epoch."""
        answers = await self.alter_partitions(broker_id, broker_epoch, [AlterIsr(
            tp, leader_epoch, new_isr, partition_epoch, leader_recovery_state)])
        return answers[tp]

    async def alter_partitions(self, broker_id: int, broker_epoch: int,
                               changes: list[AlterIsr]
                               ) -> dict[TP, tuple[int, LeaderIsr | None]]:
        """One AlterPartition request: each change checked, the accepted ones written
        together and announced in one UpdateMetadata (after a broker fails, its
        followers' leaders send thousands at once)."""
        answers: dict[TP, tuple[int, LeaderIsr | None]] = {}
        written_tps: list[TP] = []

        async def alter(change: AlterIsr) -> None:
            refused = self._check_alter(broker_id, broker_epoch, change)
            if refused is not None:
                answers[change.tp] = refused
                return
            li = self.ctx.leader_isr[change.tp]
            new = LeaderIsr(li.leader, li.leader_epoch, change.new_isr, self.ctx.epoch,
                            change.leader_recovery_state)
            written = await self.writes.write_leader_isr(change.tp, new)
            if written is None:
                answers[change.tp] = (INVALID_UPDATE_VERSION, None)
                return
            logger.info("controller %d: ISR of %s-%d is now %s (partition epoch %d)",
                        self.ctx.controller_id, *change.tp, list(change.new_isr),
                        written.zk_version)
            answers[change.tp] = (NONE, written)
            written_tps.append(change.tp)

        await for_each(changes, alter)
        if written_tps:
            batch = self.batch()
            batch.update_metadata(self.ctx.brokers, written_tps)
            batch.send()
        for tp in written_tps:
            await self.on_isr_changed(tp)
        return answers

    def _check_alter(self, broker_id: int, broker_epoch: int, change: AlterIsr
                     ) -> tuple[int, LeaderIsr | None] | None:
        """Kafka's answer to an ISR change that must not be written, or None."""
        ctx = self.ctx
        tp = change.tp
        registration = ctx.brokers.get(broker_id)
        if registration is None or (broker_epoch != -1 and broker_epoch != registration.epoch):
            return STALE_BROKER_EPOCH, None
        if tp not in ctx.leader_isr or tp[0] in ctx.topics_to_delete:
            return UNKNOWN_TOPIC_OR_PARTITION, None
        li = ctx.leader_isr[tp]
        if li.leader != broker_id:
            return NOT_CONTROLLER if li.leader == -1 else FENCED_LEADER_EPOCH, None
        if change.leader_epoch < li.leader_epoch:
            return FENCED_LEADER_EPOCH, None
        if change.leader_epoch > li.leader_epoch or change.partition_epoch > li.zk_version:
            return NOT_CONTROLLER, None
        if change.partition_epoch < li.zk_version:
            if (change.new_isr == li.isr
                    and change.leader_recovery_state == li.leader_recovery_state):
                return NONE, li
            return INVALID_UPDATE_VERSION, None
        if any(b not in ctx.live_or_shutting_down or b in ctx.shutting_down
               for b in change.new_isr if b not in li.isr):
            return INELIGIBLE_REPLICA, None
        if any(b not in ctx.assignments[tp] for b in change.new_isr):
            return INELIGIBLE_REPLICA, None
        return None

    async def remove_from_isr(self, brokers: Collection[int], partitions: Iterable[TP],
                               batch: RequestBatch) -> None:
        """Drop dead or stopping followers from ISRs (Kafka's removeReplicasFromIsr). The
        ISR never becomes empty: its last member stays, so that the partition can come
        back without an unclean election when that replica returns."""
        ctx = self.ctx

        async def remove(tp: TP) -> None:
            for _ in range(3):
                li = ctx.leader_isr.get(tp)
                if li is None or li.leader in brokers:
                    return
                isr = tuple(b for b in li.isr if b not in brokers) or li.isr[-1:]
                if isr == li.isr:
                    return
                new = LeaderIsr(li.leader, li.leader_epoch + 1, isr, ctx.epoch,
                                li.leader_recovery_state)
                if await self.writes.write_leader_isr(tp, new) is not None:
                    batch.leader_and_isr([b for b in ctx.assignments[tp] if b in ctx.brokers
                                          and b not in brokers], tp)
                    return

        await for_each(partitions, remove)
