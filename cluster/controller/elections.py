"""Partition leader elections at the controller (Kafka's ``PartitionStateMachine`` with
its election strategies): a new partition's first state znode, and a new leader for a
partition that has none, or should have another (preferred, controlled shutdown,
reassignment, unclean). The strategies themselves are `leader_election`'s pure functions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace

from josefk.cluster.controller.context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller.interfaces import BatchFactory, ElectionConfig, ZkWrites
from josefk.cluster.controller.leader_election import (
    Election,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassignment_election,
)
from josefk.cluster.controller.pipeline import for_each
from josefk.cluster.controller.states import PartitionState, ReplicaState
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import Create, NodeExistsError, NoNodeError, ZooKeeper
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.cluster.zk.znodes import ZnodeFormatError
from josefk.protocol.error_codes import (
    ELECTION_NOT_NEEDED,
    ELIGIBLE_LEADERS_NOT_AVAILABLE,
    NONE,
    PREFERRED_LEADER_NOT_AVAILABLE,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
)

logger = logging.getLogger("josefk.cluster.controller.controller")


class PartitionElections:
    """Moves partitions to OnlinePartition: creates a new partition's state, elects
    leaders with a strategy, marks a partition offline when no replica qualifies.

    Takes the context, the ZooKeeper session (to create a partition's znodes), the
    fenced writes, a request batch factory and the current election settings."""

    def __init__(self, ctx: ControllerContext, zk: ZooKeeper, writes: ZkWrites,
                 batch: BatchFactory, config: Callable[[], ElectionConfig]) -> None:
        self.ctx = ctx
        self.zk = zk
        self.writes = writes
        self.batch = batch
        self.config = config

    async def trigger_online_state_change(self, partitions: Iterable[TP] | None = None) -> None:
        """Elect leaders for every New or Offline partition (not being deleted)."""
        ctx = self.ctx
        candidates = partitions if partitions is not None else list(ctx.partition_states)
        todo = [tp for tp in candidates
                if ctx.partition_states.get(tp) in (PartitionState.NEW, PartitionState.OFFLINE)
                and tp[0] not in ctx.topics_to_delete]
        if todo:
            await self.elect(todo, "offline")

    async def elect(self, partitions: Iterable[TP], kind: str) -> dict[TP, int]:
        """Elect leaders with strategy ``kind`` (offline, preferred, controlled_shutdown,
        reassignment, unclean); returns each partition's error code."""
        ctx = self.ctx
        partitions = list(partitions)
        load_topic_configs = self.config().load_topic_configs
        if kind == "offline" and load_topic_configs is not None:
            await load_topic_configs({topic for topic, _ in partitions})
        batch = self.batch()
        results: dict[TP, int] = {}

        async def elect(tp: TP) -> None:
            if tp not in ctx.assignments:
                results[tp] = UNKNOWN_TOPIC_OR_PARTITION
            elif ctx.partition_states.get(tp) is PartitionState.NEW or tp not in ctx.leader_isr:
                results[tp] = await self._initialize(tp, batch)
            else:
                results[tp] = await self._elect_one(tp, kind, batch)

        await for_each(partitions, elect)
        batch.send()
        return results

    async def _initialize(self, tp: TP, batch: RequestBatch) -> int:
        """NewPartition -> OnlinePartition: the first live replica leads, the live
        replicas form the ISR; the state znode is created."""
        ctx = self.ctx
        replicas = ctx.assignments[tp]
        for replica in replicas:
            if ctx.replica_state(tp, replica) is ReplicaState.NON_EXISTENT:
                ctx.move_replica(tp, replica, ReplicaState.NEW)
        live = [b for b in replicas if b in ctx.live_for(tp)]
        if not live:
            logger.error("controller %d: no live replica for new partition %s-%d among %s",
                         ctx.controller_id, *tp, list(replicas))
            return ELIGIBLE_LEADERS_NOT_AVAILABLE
        state = await self._create_state(tp, LeaderIsr(live[0], 0, tuple(live), ctx.epoch))
        if state is None:
            return UNKNOWN_SERVER_ERROR
        ctx.leader_isr[tp] = state
        ctx.move_partition(tp, PartitionState.ONLINE)
        for replica in replicas:
            if replica in ctx.brokers:
                ctx.move_replica(tp, replica, ReplicaState.ONLINE)
        batch.leader_and_isr(replicas, tp, is_new=True)
        return NONE

    async def _create_state(self, tp: TP, state: LeaderIsr) -> LeaderIsr | None:
        """Create the partition's state znode (and its parents if missing); the state
        found there if it exists already; None if that cannot be read."""
        path = zn.partition_state_path(*tp)
        try:
            await self.writes.multi([Create(path, state.encode())])
            return replace(state, zk_version=0)
        except (NodeExistsError, NoNodeError):
            pass
        try:
            await self.zk.ensure_path(zn.partition_path(*tp))
            await self.writes.multi([Create(path, state.encode())])
            return replace(state, zk_version=0)
        except NodeExistsError:
            data, stat = await self.zk.get(path)
            try:
                return LeaderIsr.decode(data, stat.version)
            except ZnodeFormatError as e:
                # Kafka's failed NewPartition -> OnlinePartition: the partition stays new.
                logger.error("controller %d: cannot initialize %s-%d: %s",
                             self.ctx.controller_id, *tp, e)
                return None

    def _choose(self, tp: TP, kind: str, li: LeaderIsr) -> Election | None:
        ctx = self.ctx
        replicas = ctx.assignments[tp]
        live = ctx.live_for(tp)  # replicas in a failed log directory cannot lead
        match kind:
            case "preferred":
                return preferred_election(replicas, li.isr, live)
            case "controlled_shutdown":
                return controlled_shutdown_election(
                    replicas, li.isr, [b for b in ctx.brokers if ctx.is_replica_online(tp, b)],
                    ctx.shutting_down)
            case "reassignment":
                return reassignment_election(ctx.reassignments.get(tp, replicas), li.isr,
                                             live)
            case "unclean":
                return offline_election(replicas, li.isr, live, True)
            case _:
                return offline_election(replicas, li.isr, live,
                                        self.config().unclean_leader_election(tp[0]))

    async def _elect_one(self, tp: TP, kind: str, batch: RequestBatch) -> int:
        ctx = self.ctx
        for _ in range(3):
            li = ctx.leader_isr[tp]
            if kind == "preferred" and li.leader == ctx.assignments[tp][0]:
                return ELECTION_NOT_NEEDED
            if kind == "unclean" and li.leader in ctx.live_for(tp):
                return ELECTION_NOT_NEEDED
            election = self._choose(tp, kind, li)
            if election is None:
                if kind in ("offline", "unclean"):
                    await self._mark_offline(tp, li, batch)
                    return ELIGIBLE_LEADERS_NOT_AVAILABLE
                return (PREFERRED_LEADER_NOT_AVAILABLE if kind == "preferred"
                        else ELIGIBLE_LEADERS_NOT_AVAILABLE)
            new = LeaderIsr(election.leader, li.leader_epoch + 1, election.isr, ctx.epoch,
                            li.leader_recovery_state)
            written = await self.writes.write_leader_isr(tp, new)
            if written is None:
                continue
            if election.unclean:
                logger.warning("controller %d: unclean leader election for %s-%d: broker %d "
                               "was not in the ISR %s; acknowledged data may be lost",
                               ctx.controller_id, *tp, election.leader, list(li.isr))
            ctx.move_partition(tp, PartitionState.ONLINE)
            logger.info("controller %d: %s election for %s-%d: leader %d epoch %d isr %s",
                        ctx.controller_id, kind, *tp, written.leader, written.leader_epoch,
                        list(written.isr))
            batch.leader_and_isr([b for b in ctx.assignments[tp] if b in ctx.brokers], tp)
            return NONE
        return UNKNOWN_SERVER_ERROR

    async def _mark_offline(self, tp: TP, li: LeaderIsr, batch: RequestBatch) -> None:
        """No eligible leader: leader -1, ISR kept as the last known (Kafka keeps the last
        ISR member so that it can lead again when it returns)."""
        ctx = self.ctx
        if li.leader != -1:
            new = LeaderIsr(-1, li.leader_epoch + 1, li.isr[-1:] if li.isr else (), ctx.epoch,
                            li.leader_recovery_state)
            written = await self.writes.write_leader_isr(tp, new)
            if written is None:
                return
        ctx.move_partition(tp, PartitionState.OFFLINE)
        logger.warning("controller %d: partition %s-%d is offline: no live replica in its ISR",
                       ctx.controller_id, *tp)
        batch.update_metadata(ctx.brokers, [tp])
