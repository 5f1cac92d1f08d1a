"""Failed log directories, as the controller sees them (Kafka 3.9's
``processLogDirEventNotification``, ``onBrokerLogDirFailure``, the LeaderAndIsr answers'
KAFKA_STORAGE_ERROR and ``onReplicasBecomeOffline``). A part the
`josefk.cluster.controller.controller.Controller` owns.

A broker whose log directory failed writes ``/log_dir_event_notification/log_dir_event_<seq>``.
The controller then sends that broker a LeaderAndIsr for every replica it hosts; the
replicas it answers KAFKA_STORAGE_ERROR for are offline: partitions it led elect a new
leader among the other live ISR members, it leaves the ISRs, and it gets StopReplica.
Every LeaderAndIsr answer is read this way, so a controller that takes over learns of
offline replicas from its first requests. A broker that dies or registers again starts
afresh (its failed directory may have been repaired).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from josefk.cluster.controller.context import TP, ControllerContext
from josefk.cluster.controller.interfaces import (
    BatchFactory,
    Elections,
    IsrRemoval,
    Put,
    Watcher,
    ZkWrites,
)
from josefk.cluster.controller.states import PartitionState, ReplicaState
from josefk.cluster.controller.writes import ignore_no_node
from josefk.cluster.metadata.requests import ControllerResponse
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import Delete, NoNodeError, ZooKeeper
from josefk.protocol.error_codes import KAFKA_STORAGE_ERROR, NONE

logger = logging.getLogger("josefk.cluster.controller.controller")


class LogDirEvents:
    """Log dir event notifications and replicas in failed log directories.

    Takes the context, the ZooKeeper session (to read the notifications), fenced
    ``writes`` (to delete them), a request batch factory, ``put`` (answers arrive off the
    event queue), ``watch`` for ``/log_dir_event_notification``, ``elections`` and
    ``isr`` (the offline replica leaves the ISRs)."""

    def __init__(self, ctx: ControllerContext, zk: ZooKeeper, writes: ZkWrites,
                 batch: BatchFactory, put: Put, watch: Watcher, elections: Elections,
                 isr: IsrRemoval) -> None:
        self.ctx = ctx
        self.zk = zk
        self.writes = writes
        self.batch = batch
        self.put = put
        self.watch = watch
        self.elections = elections
        self.isr = isr

    async def load(self) -> None:
        """Failover: watch the notifications; those already there are stale, deleted as
        Kafka's failover does (the first LeaderAndIsr answers tell what is offline)."""
        children = await self._children()
        await self._delete(children)

    async def _children(self) -> list[str]:
        try:
            return await self.zk.get_children(zn.LOG_DIR_EVENT_NOTIFICATION,
                                              self.watch(self.on_notification))
        except NoNodeError:
            await self.zk.ensure_path(zn.LOG_DIR_EVENT_NOTIFICATION)
            return await self.zk.get_children(zn.LOG_DIR_EVENT_NOTIFICATION,
                                              self.watch(self.on_notification))

    async def on_notification(self) -> None:
        """New ``log_dir_event_`` znodes: ask their brokers about every replica they host;
        the znodes are deleted whatever happens."""
        children = await self._children()
        if not children:
            return
        try:
            brokers = set()
            for child in children:
                try:
                    data, _ = await self.zk.get(f"{zn.LOG_DIR_EVENT_NOTIFICATION}/{child}")
                    brokers.add(zn.decode_log_dir_event(data))
                except (NoNodeError, zn.ZnodeFormatError) as e:
                    logger.warning("controller %d: skipping log dir event %s: %s",
                                   self.ctx.controller_id, child, e)
            self._on_broker_log_dir_failure(sorted(brokers))
        finally:
            await self._delete(children)

    async def _delete(self, children: list[str]) -> None:
        for child in children:
            await ignore_no_node(self.writes.multi(
                [Delete(f"{zn.LOG_DIR_EVENT_NOTIFICATION}/{child}")]))

    def _on_broker_log_dir_failure(self, brokers: list[int]) -> None:
        """Kafka's onBrokerLogDirFailure: every replica of those brokers to OnlineReplica,
        which sends each its LeaderAndIsr; the answers say which are offline."""
        ctx = self.ctx
        logger.info("controller %d: handling log directory failure for brokers %s",
                    ctx.controller_id, ",".join(map(str, brokers)))
        batch = self.batch()
        for broker_id in brokers:
            if broker_id not in ctx.brokers:
                continue
            for tp in ctx.partitions_on(broker_id):
                if tp[0] in ctx.topics_to_delete:
                    continue
                ctx.move_replica(tp, broker_id, ReplicaState.ONLINE)
                if tp in ctx.leader_isr:
                    batch.leader_and_isr([broker_id], tp)
        batch.send()

    def on_leader_and_isr_response(self, broker_id: int
                                   ) -> Callable[[ControllerResponse], None]:
        """What reads ``broker_id``'s LeaderAndIsr answers (on the trio thread, outside
        the event queue: the work is queued)."""
        def read(response: ControllerResponse) -> None:
            if response.error_code != NONE:
                return
            errors = response.partition_errors
            offline = {tp for tp, code in errors.items() if code == KAFKA_STORAGE_ERROR}
            if offline or self.ctx.replicas_on_offline_dirs.get(broker_id):
                online = {tp for tp, code in errors.items() if code == NONE}

                async def event() -> None:
                    await self.on_replicas_answered(broker_id, offline, online)
                self.put(event)
        return read

    async def on_replicas_answered(self, broker_id: int, offline: set[TP], online: set[TP]
                                   ) -> None:
        """Kafka's LeaderAndIsrResponseReceived: track the broker's offline replicas and
        take the newly offline ones out of service."""
        ctx = self.ctx
        if broker_id not in ctx.brokers:
            return
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        new = sorted(tp for tp in current - previous if tp in ctx.assignments)
        if new:
            logger.info("controller %d: mark replicas %s on broker %d as offline",
                        ctx.controller_id, ", ".join(f"{t}-{p}" for t, p in new), broker_id)
            await self._replicas_offline(broker_id, new)

    async def _replicas_offline(self, broker_id: int, tps: list[TP]) -> None:
        """Kafka's onReplicasBecomeOffline: partitions the broker led elect again (it is
        no longer eligible), then its replicas go OfflineReplica: StopReplica to it and
        out of the ISRs."""
        ctx = self.ctx
        tps = [tp for tp in tps if tp[0] not in ctx.topics_to_delete]
        led = [tp for tp in tps if tp in ctx.leader_isr and ctx.leader_isr[tp].leader == broker_id]
        for tp in led:
            ctx.move_partition(tp, PartitionState.OFFLINE)
        await self.elections.trigger_online_state_change(led)
        batch = self.batch()
        for tp in tps:
            batch.stop_replica(broker_id, tp, delete=False)
            ctx.move_replica(tp, broker_id, ReplicaState.OFFLINE)
        await self.isr.remove_from_isr([broker_id], tps, batch)
        batch.update_metadata(ctx.brokers, tps)
        batch.send()
