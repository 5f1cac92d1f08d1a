"""Brokers joining and leaving the cluster, as the controller sees them: registrations
appearing and vanishing under ``/brokers/ids``, and controlled shutdown. A part the
`josefk.cluster.controller.controller.Controller` owns.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from josefk.cluster.controller.context import TP, ControllerContext
from josefk.cluster.controller.interfaces import (
    BatchFactory,
    BrokerChannels,
    Elections,
    IsrRemoval,
    Watcher,
)
from josefk.cluster.controller.states import PartitionState, ReplicaState
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import NoNodeError, ZooKeeper
from josefk.cluster.zk.znodes import BrokerRegistration
from josefk.protocol.error_codes import BROKER_NOT_AVAILABLE, NONE, STALE_BROKER_EPOCH

logger = logging.getLogger("josefk.cluster.controller.controller")


class BrokerLifecycle:
    """Broker failure, startup and controlled shutdown: leaderships, ISRs and replica
    states follow the brokers (Kafka's onBrokerFailure, onBrokerStartup).

    Takes the context, the ZooKeeper session (``/brokers/ids``), the channels to the
    brokers, a request batch factory, ``watch`` for ``/brokers/ids``, ``elections``,
    ``isr`` (followers leave ISRs), and what goes on when brokers come up:
    ``resume_deletions`` (topics being deleted) and ``resume_reassignments`` (with the
    brokers started)."""

    def __init__(self, ctx: ControllerContext, zk: ZooKeeper, channel: BrokerChannels,
                 batch: BatchFactory, watch: Watcher, elections: Elections, isr: IsrRemoval,
                 resume_deletions: Callable[[], Awaitable[None]],
                 resume_reassignments: Callable[[list[int]], Awaitable[None]]) -> None:
        self.ctx = ctx
        self.zk = zk
        self.channel = channel
        self.batch = batch
        self.watch = watch
        self.elections = elections
        self.isr = isr
        self.resume_deletions = resume_deletions
        self.resume_reassignments = resume_reassignments

    async def load(self) -> None:
        """Failover: read every registration under ``/brokers/ids`` and watch it."""
        ids = await self.zk.get_children(zn.BROKER_IDS, self.watch(self.on_broker_change))
        self.ctx.brokers = await self._read_brokers(ids)

    async def _read_brokers(self, ids: Iterable[str]) -> dict[int, BrokerRegistration]:
        brokers = {}
        for child in ids:
            try:
                data, stat = await self.zk.get(f"{zn.BROKER_IDS}/{child}")
                brokers[int(child)] = BrokerRegistration.decode(int(child), data, stat.czxid)
            except (NoNodeError, ValueError) as e:
                logger.warning("controller %d: skipping broker znode %s: %s",
                               self.ctx.controller_id, child, e)
        return brokers

    async def on_broker_change(self) -> None:
        """``/brokers/ids`` changed: fail over the dead and bounced brokers, start up
        the new and bounced ones."""
        ctx = self.ctx
        ids = await self.zk.get_children(zn.BROKER_IDS, self.watch(self.on_broker_change))
        current = await self._read_brokers(ids)
        dead = [b for b in ctx.brokers if b not in current]
        new = [b for b in current if b not in ctx.brokers]
        bounced = [b for b in current
                   if b in ctx.brokers and current[b].epoch != ctx.brokers[b].epoch]
        if not (dead or new or bounced):
            return
        logger.info("controller %d: brokers new %s, dead %s, bounced %s; live now %s",
                    ctx.controller_id, new, dead, bounced, sorted(current))
        for broker_id in dead + new + bounced:
            # Back (or gone) with its log directories as they are now (Kafka forgets too).
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        for broker_id in dead + bounced:
            self.channel.remove_broker(broker_id)
        if dead or bounced:
            await self._on_broker_failure(dead + bounced)
        ctx.brokers = current
        for broker_id in new + bounced:
            self.channel.add_broker(current[broker_id])
        if new or bounced:
            await self._on_broker_startup(new + bounced)

    async def _on_broker_failure(self, failed: list[int]) -> None:
        ctx = self.ctx
        # Bounced brokers are back under a new epoch: fail them over like dead ones, then
        # bring them up again.
        ctx.brokers = {b: r for b, r in ctx.brokers.items() if b not in failed}
        ctx.shutting_down -= set(failed)
        led = [tp for b in failed for tp in ctx.partitions_led_by(b)
               if tp[0] not in ctx.topics_to_delete]
        for tp in led:
            ctx.move_partition(tp, PartitionState.OFFLINE)
        for broker_id in failed:
            for tp in ctx.partitions_on(broker_id):
                if ctx.replica_state(tp, broker_id) is ReplicaState.DELETION_STARTED:
                    # Its deletion is retried when it comes back (TopicDeletionManager).
                    ctx.move_replica(tp, broker_id, ReplicaState.DELETION_INELIGIBLE)
                elif tp[0] not in ctx.topics_to_delete:
                    ctx.move_replica(tp, broker_id, ReplicaState.OFFLINE)
        await self.elections.trigger_online_state_change(led)
        batch = self.batch()
        followers = [tp for b in failed for tp in ctx.partitions_on(b) if tp not in led]
        await self.isr.remove_from_isr(failed, followers, batch)
        batch.update_metadata(ctx.brokers, [])
        batch.send()

    async def _on_broker_startup(self, started: list[int]) -> None:
        ctx = self.ctx
        batch = self.batch()
        batch.update_metadata([b for b in ctx.brokers if b not in started])
        batch.send()
        # The new brokers learn the cluster before their LeaderAndIsr: a Kafka broker
        # refuses to follow a leader its metadata cache does not know.
        full = self.batch()
        full.update_metadata(started, ctx.all_partitions())
        full.send()
        replicas = self.batch()
        for broker_id in started:
            for tp in ctx.partitions_on(broker_id):
                if tp[0] in ctx.topics_to_delete:
                    continue
                ctx.move_replica(tp, broker_id, ReplicaState.ONLINE)
                if tp in ctx.leader_isr:
                    replicas.leader_and_isr([broker_id], tp)
        replicas.send()
        await self.elections.trigger_online_state_change()
        if ctx.topics_to_delete:
            await self.resume_deletions()
        await self.resume_reassignments(started)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TP]]:
        """Move leaderships and ISR memberships off a stopping broker; returns the error
        and the partitions it still leads (no other ISR member to take over)."""
        ctx = self.ctx
        registration = ctx.brokers.get(broker_id)
        if registration is None:
            return BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < registration.epoch:
            return STALE_BROKER_EPOCH, []
        ctx.shutting_down.add(broker_id)
        logger.info("controller %d: controlled shutdown of broker %d", ctx.controller_id,
                    broker_id)
        led = [tp for tp in ctx.partitions_led_by(broker_id) if len(ctx.assignments[tp]) > 1]
        followers = [tp for tp in ctx.partitions_on(broker_id)
                     if tp in ctx.leader_isr and ctx.leader_isr[tp].leader != broker_id]
        await self.elections.elect(led, "controlled_shutdown")
        batch = self.batch()
        for tp in followers:
            batch.stop_replica(broker_id, tp, delete=False)
            ctx.move_replica(tp, broker_id, ReplicaState.OFFLINE)
        await self.isr.remove_from_isr([broker_id], followers, batch)
        batch.send()
        remaining = list(ctx.partitions_led_by(broker_id))
        return NONE, remaining
