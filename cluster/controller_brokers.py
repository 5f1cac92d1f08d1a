"""Brokers joining and leaving the cluster, as the controller sees them: registrations
appearing and vanishing under ``/brokers/ids``, and controlled shutdown. A part of
`josefk.cluster.controller.Controller`, as in `controller_parts`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from josefk.cluster import znodes as zn
from josefk.cluster.controller_context import TP
from josefk.cluster.controller_parts import _ControllerParts
from josefk.cluster.controller_requests import ControllerChannel
from josefk.cluster.controller_states import PartitionState, ReplicaState
from josefk.cluster.znodes import BrokerRegistration
from josefk.protocol.error_codes import BROKER_NOT_AVAILABLE, NONE, STALE_BROKER_EPOCH

logger = logging.getLogger("josefk.cluster.controller")


class BrokerLifecycle(_ControllerParts):
    """Broker failure, startup and controlled shutdown: leaderships, ISRs and replica
    states follow the brokers (Kafka's onBrokerFailure, onBrokerStartup)."""

    channel: ControllerChannel

    if TYPE_CHECKING:
        async def _read_brokers(self, ids: Iterable[str]) -> dict[int, BrokerRegistration]: ...

        async def _trigger_online_state_change(self, partitions: Iterable[TP] | None = None
                                               ) -> None: ...

        async def _process_deletions(self) -> None: ...

        async def _continue_reassignment(self, tp: TP, target: tuple[int, ...]) -> None: ...

    async def on_broker_change(self) -> None:
        ctx = self.ctx
        ids = await self.zk.get_children(zn.BROKER_IDS, self._watch(self.on_broker_change))
        current = await self._read_brokers(ids)
        dead = [b for b in ctx.brokers if b not in current]
        new = [b for b in current if b not in ctx.brokers]
        bounced = [b for b in current
                   if b in ctx.brokers and current[b].epoch != ctx.brokers[b].epoch]
        if not (dead or new or bounced):
            return
        logger.info("controller %d: brokers new %s, dead %s, bounced %s; live now %s",
                    self.broker_id, new, dead, bounced, sorted(current))
        for broker_id in dead + bounced:
            self.channel.remove_broker(broker_id)
        if dead or bounced:
            await self._on_broker_failure(dead + bounced, current)
        ctx.brokers = current
        for broker_id in new + bounced:
            self.channel.add_broker(current[broker_id])
        if new or bounced:
            await self._on_broker_startup(new + bounced)

    async def _on_broker_failure(self, failed: list[int],
                                 current: dict[int, BrokerRegistration]) -> None:
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
        await self._trigger_online_state_change(led)
        batch = self._batch()
        followers = [tp for b in failed for tp in ctx.partitions_on(b) if tp not in led]
        await self._remove_from_isr(failed, followers, batch)
        batch.update_metadata(ctx.brokers, [])
        batch.send()

    async def _on_broker_startup(self, started: list[int]) -> None:
        ctx = self.ctx
        batch = self._batch()
        batch.update_metadata([b for b in ctx.brokers if b not in started])
        batch.send()
        # The new brokers learn the cluster before their LeaderAndIsr: a Kafka broker
        # refuses to follow a leader its metadata cache does not know.
        full = self._batch()
        full.update_metadata(started, ctx.all_partitions())
        full.send()
        replicas = self._batch()
        for broker_id in started:
            for tp in ctx.partitions_on(broker_id):
                if tp[0] in ctx.topics_to_delete:
                    continue
                ctx.move_replica(tp, broker_id, ReplicaState.ONLINE)
                if tp in ctx.leader_isr:
                    replicas.leader_and_isr([broker_id], tp)
        replicas.send()
        await self._trigger_online_state_change()
        if ctx.topics_to_delete:
            await self._process_deletions()
        for tp, target in list(ctx.reassignments.items()):
            if set(target) & set(started):
                await self._continue_reassignment(tp, target)

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
        logger.info("controller %d: controlled shutdown of broker %d", self.broker_id, broker_id)
        led = [tp for tp in ctx.partitions_led_by(broker_id) if len(ctx.assignments[tp]) > 1]
        followers = [tp for tp in ctx.partitions_on(broker_id)
                     if tp in ctx.leader_isr and ctx.leader_isr[tp].leader != broker_id]
        await self._elect(led, "controlled_shutdown")
        batch = self._batch()
        for tp in followers:
            batch.stop_replica(broker_id, tp, delete=False)
            ctx.move_replica(tp, broker_id, ReplicaState.OFFLINE)
        await self._remove_from_isr([broker_id], followers, batch)
        batch.send()
        remaining = [tp for tp in ctx.partitions_led_by(broker_id)]
        return NONE, remaining
