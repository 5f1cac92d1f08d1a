"""Partition reassignment at the controller (KIP-455's AlterPartitionReassignments,
and ``/admin/reassign_partitions`` of older tools). A part the
`josefk.cluster.controller.controller.Controller` owns.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from josefk.cluster.controller.context import TP, ControllerContext
from josefk.cluster.controller.interfaces import (
    BatchFactory,
    Elect,
    IsrRemoval,
    Watcher,
    ZkWrites,
)
from josefk.cluster.controller.states import ReplicaState
from josefk.cluster.controller.writes import ignore_no_node
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import Delete, NoNodeError, SetData, ZooKeeper
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.cluster.zk.znodes import TopicAssignment
from josefk.protocol.error_codes import (
    INVALID_REPLICA_ASSIGNMENT,
    NO_REASSIGNMENT_IN_PROGRESS,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
)

logger = logging.getLogger("josefk.cluster.controller.controller")

#: Partition -> (replicas, adding, removing) of an ongoing reassignment.
Ongoing = dict[TP, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


class ReassignmentManager:
    """Moving a partition's replicas: add the new ones, wait until they are in the ISR,
    lead from the target, stop and delete the removed ones (Kafka's KIP-455 steps).

    Takes the context, the ZooKeeper session (``/admin/reassign_partitions``), the
    fenced writes (topic and partition znodes), a request batch factory, ``elections``
    (a leader from the target), ``isr`` (the removed replicas leave the ISR) and
    ``watch`` for ``/admin/reassign_partitions``."""

    def __init__(self, ctx: ControllerContext, zk: ZooKeeper, writes: ZkWrites,
                 batch: BatchFactory, elections: Elect, isr: IsrRemoval,
                 watch: Watcher) -> None:
        self.ctx = ctx
        self.zk = zk
        self.writes = writes
        self.batch = batch
        self.elections = elections
        self.isr = isr
        self.watch = watch

    def list_reassignments(self, partitions: Iterable[TP] | None = None) -> Ongoing:
        """Ongoing reassignments: partition -> (replicas, adding, removing)."""
        ctx = self.ctx
        wanted = ctx.reassignments if partitions is None else [
            tp for tp in partitions if tp in ctx.reassignments]
        return {tp: (ctx.assignments[tp], ctx.adding.get(tp, ()), ctx.removing.get(tp, ()))
                for tp in wanted}

    async def reassign(self, targets: dict[TP, tuple[int, ...] | None]) -> dict[TP, int]:
        """AlterPartitionReassignments: start (or, with None, cancel) reassignments."""
        ctx = self.ctx
        results: dict[TP, int] = {}
        for tp, target in targets.items():
            if tp not in ctx.assignments or tp[0] in ctx.topics_to_delete:
                results[tp] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            if target is None:
                if tp not in ctx.reassignments:
                    results[tp] = NO_REASSIGNMENT_IN_PROGRESS
                    continue
                removing = set(ctx.removing.get(tp, ()))
                original = tuple(b for b in ctx.assignments[tp] if b not in ctx.adding.get(tp, ()))
                target = original or tuple(b for b in ctx.assignments[tp] if b in removing)
            elif not target or len(set(target)) != len(target) or any(
                    b not in ctx.brokers and b not in ctx.assignments[tp] for b in target):
                results[tp] = INVALID_REPLICA_ASSIGNMENT
                continue
            results[tp] = await self._start(tp, tuple(target))
        return results

    async def _start(self, tp: TP, target: tuple[int, ...]) -> int:
        ctx = self.ctx
        current = ctx.assignments[tp]
        original = tuple(b for b in current if b not in ctx.adding.get(tp, ()))
        if target == current and tp not in ctx.reassignments:
            return NONE
        union = target + tuple(b for b in original if b not in target)
        ctx.assignments[tp] = union
        ctx.adding[tp] = tuple(b for b in target if b not in original)
        ctx.removing[tp] = tuple(b for b in original if b not in target)
        ctx.reassignments[tp] = target
        await self._write_assignment(tp[0])
        logger.info("controller %d: reassigning %s-%d from %s to %s", ctx.controller_id, *tp,
                    list(original), list(target))
        # Bump the leader epoch so every replica learns the new replica set.
        li = ctx.leader_isr.get(tp)
        batch = self.batch()
        if li is not None:
            new = LeaderIsr(li.leader, li.leader_epoch + 1, li.isr, ctx.epoch,
                            li.leader_recovery_state)
            await self.writes.write_leader_isr(tp, new)
        for replica in ctx.adding[tp]:
            if ctx.replica_state(tp, replica) is ReplicaState.NON_EXISTENT:
                ctx.move_replica(tp, replica, ReplicaState.NEW)
            if replica in ctx.brokers:
                ctx.move_replica(tp, replica, ReplicaState.ONLINE)
        batch.leader_and_isr([b for b in union if b in ctx.brokers], tp)
        batch.send()
        await self.continue_reassignment(tp, target)
        return NONE

    async def continue_reassignment(self, tp: TP, target: tuple[int, ...]) -> None:
        """Finish once every target replica is in the ISR: lead from the target, stop
        and delete the removed replicas, write the final assignment."""
        ctx = self.ctx
        li = ctx.leader_isr.get(tp)
        if li is None or not set(target) <= set(li.isr):
            return
        removed = [b for b in ctx.assignments[tp] if b not in target]
        ctx.assignments[tp] = target
        ctx.adding[tp] = ()
        ctx.removing[tp] = ()
        del ctx.reassignments[tp]
        batch = self.batch()
        if li.leader not in target or li.leader not in ctx.live:
            await self.elections.elect([tp], "reassignment")
            await self.isr.remove_from_isr(removed, [tp], batch)
        else:
            new = LeaderIsr(li.leader, li.leader_epoch + 1,
                            tuple(b for b in li.isr if b in target), ctx.epoch,
                            li.leader_recovery_state)
            if await self.writes.write_leader_isr(tp, new) is not None:
                batch.leader_and_isr([b for b in target if b in ctx.brokers], tp)
        for replica in removed:
            ctx.move_replica(tp, replica, ReplicaState.OFFLINE)
            batch.stop_replica(replica, tp, delete=True)
            ctx.move_replica(tp, replica, ReplicaState.DELETION_STARTED)
            ctx.move_replica(tp, replica, ReplicaState.DELETION_SUCCESSFUL)
            ctx.move_replica(tp, replica, ReplicaState.NON_EXISTENT)
        batch.send()
        await self._write_assignment(tp[0])
        await self._remove_legacy_reassignment(tp)
        logger.info("controller %d: reassignment of %s-%d to %s complete", ctx.controller_id,
                    *tp, list(target))

    async def on_isr_changed(self, tp: TP) -> None:
        """A leader changed ``tp``'s ISR: a reassignment of it may be done now."""
        if tp in self.ctx.reassignments:
            await self.continue_reassignment(tp, self.ctx.reassignments[tp])

    async def on_brokers_started(self, started: list[int]) -> None:
        """Brokers came up: the reassignments moving replicas to them go on."""
        for tp, target in list(self.ctx.reassignments.items()):
            if set(target) & set(started):
                await self.continue_reassignment(tp, target)

    async def resume(self) -> None:
        """After failover: every reassignment found in ZooKeeper goes on."""
        for tp, target in list(self.ctx.reassignments.items()):
            await self.continue_reassignment(tp, target)

    async def _write_assignment(self, topic: str) -> None:
        ctx = self.ctx
        parts = ctx.partitions_of(topic)
        assignment = TopicAssignment(
            ctx.topic_ids.get(topic), {p: ctx.assignments[(t, p)] for t, p in parts},
            {p: ctx.adding[(t, p)] for t, p in parts if ctx.adding.get((t, p))},
            {p: ctx.removing[(t, p)] for t, p in parts if ctx.removing.get((t, p))})
        await self.writes.multi([SetData(zn.topic_path(topic), assignment.encode())])

    async def on_legacy_reassignment(self) -> None:
        """``/admin/reassign_partitions`` (kafka-reassign-partitions.sh --zookeeper)."""
        try:
            data, _ = await self.zk.get(zn.REASSIGN_PARTITIONS,
                                        self.watch(self.on_legacy_reassignment))
        except NoNodeError:
            await self.zk.exists(zn.REASSIGN_PARTITIONS, self.watch(self.on_legacy_reassignment))
            return
        targets = _legacy_targets(data)
        if targets is None:
            return  # left in place, as Kafka does
        await self.reassign({tp: tuple(r) for tp, r in targets.items()
                             if tp not in self.ctx.reassignments})
        if not self.ctx.reassignments:
            await ignore_no_node(self.zk.delete(zn.REASSIGN_PARTITIONS))

    async def _remove_legacy_reassignment(self, tp: TP) -> None:
        try:
            data, stat = await self.zk.get(zn.REASSIGN_PARTITIONS)
        except NoNodeError:
            return
        targets = _legacy_targets(data) or {}
        targets.pop(tp, None)
        if targets:
            await self.writes.multi([SetData(zn.REASSIGN_PARTITIONS,
                                             zn.encode_reassignment(targets), stat.version)])
        else:
            await self.writes.multi([Delete(zn.REASSIGN_PARTITIONS, stat.version)])


def _legacy_targets(data: bytes) -> dict[TP, list[int]] | None:
    """``/admin/reassign_partitions``'s targets; None when it cannot be parsed, which
    Kafka's getPartitionReassignment logs and ignores (a failover must not fail on it)."""
    try:
        return zn.decode_partitions_list(data, zn.REASSIGN_PARTITIONS)
    except zn.ZnodeFormatError as e:
        logger.warning("ignoring partition reassignment due to invalid data: %s", e)
        return None
