"""Parts of the controller (`josefk.cluster.controller.Controller`), one concept a
class: topic deletion (Kafka's TopicDeletionManager) and partition reassignment
(KIP-455, and the ``/admin`` znodes of older tools). The controller inherits both, as it
does `controller_isr` and `controller_brokers`; they share its context, its ZooKeeper
writes and its request batches.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from josefk.cluster import znodes as zn
from josefk.cluster.controller_context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller_requests import ControllerResponse
from josefk.cluster.controller_states import PartitionState, ReplicaState
from josefk.cluster.znodes import PartitionState as LeaderIsr
from josefk.cluster.znodes import TopicAssignment
from josefk.cluster.zookeeper import Delete, NoNodeError, Op, SetData, ZooKeeper
from josefk.protocol.error_codes import (
    INVALID_REPLICA_ASSIGNMENT,
    NO_REASSIGNMENT_IN_PROGRESS,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
)

logger = logging.getLogger("josefk.cluster.controller")


class _ControllerParts:
    """What the controller's parts use of one another (see `Controller`)."""

    zk: ZooKeeper
    ctx: ControllerContext
    config: Any
    _watched_topics: set[str]

    if TYPE_CHECKING:
        @property
        def broker_id(self) -> int: ...

        def put(self, event: Callable[[], Awaitable[Any]]) -> None: ...

        def _watch(self, event: Callable[[], Awaitable[Any]]) -> Callable[[], None]: ...

        def _batch(self) -> RequestBatch: ...

        async def _multi(self, ops: list[Op]) -> None: ...

        async def _write_leader_isr(self, tp: TP, new: LeaderIsr) -> LeaderIsr | None: ...

        async def _elect(self, partitions: Iterable[TP], kind: str) -> dict[TP, int]: ...

        async def _remove_from_isr(self, brokers: Collection[int],
                                   partitions: Iterable[TP], batch: RequestBatch) -> None: ...

        async def elect_leaders(self, partitions: Iterable[TP] | None, kind: str
                                ) -> dict[TP, int]: ...

    @staticmethod
    async def _ignore_no_node(call: Awaitable[object]) -> None:
        with contextlib.suppress(NoNodeError):
            await call


class TopicDeletion(_ControllerParts):
    """Deleting a topic: every replica stops and deletes its log (StopReplica), and once
    all have, the topic's znodes go. A replica on a dead broker waits for it."""

    async def on_delete_topics(self) -> None:
        ctx = self.ctx
        try:
            names = await self.zk.get_children(zn.DELETE_TOPICS,
                                               self._watch(self.on_delete_topics))
        except NoNodeError:
            return
        for topic in names:
            if topic not in ctx.topic_ids:
                logger.info("controller %d: dropping deletion of unknown topic %s",
                            self.broker_id, topic)
                await self._ignore_no_node(self.zk.delete(zn.delete_topic_path(topic)))
                continue
            if not self.config.delete_topic_enable:
                await self._ignore_no_node(self.zk.delete(zn.delete_topic_path(topic)))
                continue
            ctx.topics_to_delete.add(topic)
        await self._process_deletions()

    async def _process_deletions(self) -> None:
        for topic in sorted(self.ctx.topics_to_delete):
            await self._delete_topic(topic)

    async def _delete_topic(self, topic: str) -> None:
        """Tell every replica to stop and delete; once every replica has, remove the
        topic's znodes (Kafka's TopicDeletionManager)."""
        ctx = self.ctx
        partitions = ctx.partitions_of(topic)
        batch = self._batch()
        batch.update_metadata(ctx.brokers, partitions, deleting=True)
        waiting = False
        for tp in partitions:
            for replica in ctx.assignments[tp]:
                state = ctx.replica_state(tp, replica)
                if state is ReplicaState.DELETION_SUCCESSFUL:
                    continue
                if replica not in ctx.brokers:
                    ctx.move_replica(tp, replica, ReplicaState.OFFLINE)
                    ctx.move_replica(tp, replica, ReplicaState.DELETION_INELIGIBLE)
                    waiting = True
                    continue
                if state is not ReplicaState.DELETION_STARTED:
                    ctx.move_replica(tp, replica, ReplicaState.OFFLINE)
                    ctx.move_replica(tp, replica, ReplicaState.DELETION_STARTED)
                batch.stop_replica(replica, tp, delete=True)
                waiting = True
        batch.send(on_stop_response=self._deletion_callback)
        if not waiting:
            await self._complete_deletion(topic)

    def _deletion_callback(self, broker_id: int) -> Callable[[ControllerResponse], None]:
        def on_response(response: ControllerResponse) -> None:
            self.put(lambda: self._on_replicas_deleted(broker_id, response))
        return on_response

    async def _on_replicas_deleted(self, broker_id: int, response: ControllerResponse) -> None:
        ctx = self.ctx
        touched = set()
        for tp, error in response.partition_errors.items():
            if tp[0] not in ctx.topics_to_delete:
                continue
            touched.add(tp[0])
            if ctx.replica_state(tp, broker_id) is not ReplicaState.DELETION_STARTED:
                continue
            target = (ReplicaState.DELETION_SUCCESSFUL if error == NONE
                      and response.error_code == NONE
                      else ReplicaState.DELETION_INELIGIBLE)
            ctx.move_replica(tp, broker_id, target)
        for topic in touched:
            done = all(ctx.replica_state(tp, r) is ReplicaState.DELETION_SUCCESSFUL
                       for tp in ctx.partitions_of(topic) for r in ctx.assignments[tp])
            if done:
                await self._complete_deletion(topic)

    async def _complete_deletion(self, topic: str) -> None:
        ctx = self.ctx
        for tp in ctx.partitions_of(topic):
            for replica in ctx.assignments[tp]:
                ctx.move_replica(tp, replica, ReplicaState.NON_EXISTENT)
            ctx.move_partition(tp, PartitionState.OFFLINE)
            ctx.move_partition(tp, PartitionState.NON_EXISTENT)
        ctx.remove_topic(topic)
        self._watched_topics.discard(topic)
        await self._ignore_no_node(self.zk.delete(zn.topic_path(topic), recursive=True))
        await self._ignore_no_node(self.zk.delete(zn.topic_config_path(topic)))
        await self._ignore_no_node(self.zk.delete(zn.delete_topic_path(topic)))
        logger.info("controller %d: deleted topic %s", self.broker_id, topic)



class Reassignment(_ControllerParts):
    """Moving a partition's replicas: add the new ones, wait until they are in the ISR,
    lead from the target, stop and delete the removed ones (Kafka's KIP-455 steps)."""

    def list_reassignments(self, partitions: Iterable[TP] | None = None
                           ) -> dict[TP, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
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
            results[tp] = await self._start_reassignment(tp, tuple(target))
        return results

    async def _start_reassignment(self, tp: TP, target: tuple[int, ...]) -> int:
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
        logger.info("controller %d: reassigning %s-%d from %s to %s", self.broker_id, *tp,
                    list(original), list(target))
        # Bump the leader epoch so every replica learns the new replica set.
        li = ctx.leader_isr.get(tp)
        batch = self._batch()
        if li is not None:
            new = LeaderIsr(li.leader, li.leader_epoch + 1, li.isr, ctx.epoch,
                            li.leader_recovery_state)
            await self._write_leader_isr(tp, new)
        for replica in ctx.adding[tp]:
            if ctx.replica_state(tp, replica) is ReplicaState.NON_EXISTENT:
                ctx.move_replica(tp, replica, ReplicaState.NEW)
            if replica in ctx.brokers:
                ctx.move_replica(tp, replica, ReplicaState.ONLINE)
        batch.leader_and_isr([b for b in union if b in ctx.brokers], tp)
        batch.send()
        await self._continue_reassignment(tp, target)
        return NONE

    async def _continue_reassignment(self, tp: TP, target: tuple[int, ...]) -> None:
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
        batch = self._batch()
        if li.leader not in target or li.leader not in ctx.live:
            await self._elect([tp], "reassignment")
            await self._remove_from_isr(removed, [tp], batch)
        else:
            new = LeaderIsr(li.leader, li.leader_epoch + 1,
                            tuple(b for b in li.isr if b in target), ctx.epoch,
                            li.leader_recovery_state)
            if await self._write_leader_isr(tp, new) is not None:
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
        logger.info("controller %d: reassignment of %s-%d to %s complete", self.broker_id, *tp,
                    list(target))

    async def _write_assignment(self, topic: str) -> None:
        ctx = self.ctx
        parts = ctx.partitions_of(topic)
        assignment = TopicAssignment(
            ctx.topic_ids.get(topic), {p: ctx.assignments[(t, p)] for t, p in parts},
            {p: ctx.adding[(t, p)] for t, p in parts if ctx.adding.get((t, p))},
            {p: ctx.removing[(t, p)] for t, p in parts if ctx.removing.get((t, p))})
        await self._multi([SetData(zn.topic_path(topic), assignment.encode())])

    async def on_legacy_reassignment(self) -> None:
        """``/admin/reassign_partitions`` (kafka-reassign-partitions.sh --zookeeper)."""
        try:
            data, _ = await self.zk.get(zn.REASSIGN_PARTITIONS,
                                        self._watch(self.on_legacy_reassignment))
        except NoNodeError:
            await self.zk.exists(zn.REASSIGN_PARTITIONS, self._watch(self.on_legacy_reassignment))
            return
        targets = _legacy_targets(data)
        if targets is None:
            return  # left in place, as Kafka does
        await self.reassign({tp: tuple(r) for tp, r in targets.items()
                             if tp not in self.ctx.reassignments})
        if not self.ctx.reassignments:
            await self._ignore_no_node(self.zk.delete(zn.REASSIGN_PARTITIONS))

    async def _remove_legacy_reassignment(self, tp: TP) -> None:
        try:
            data, stat = await self.zk.get(zn.REASSIGN_PARTITIONS)
        except NoNodeError:
            return
        targets = _legacy_targets(data) or {}
        targets.pop(tp, None)
        if targets:
            await self._multi([SetData(zn.REASSIGN_PARTITIONS, zn.encode_reassignment(targets),
                                       stat.version)])
        else:
            await self._multi([Delete(zn.REASSIGN_PARTITIONS, stat.version)])

    async def on_legacy_preferred_election(self) -> None:
        try:
            data, _ = await self.zk.get(zn.PREFERRED_REPLICA_ELECTION,
                                        self._watch(self.on_legacy_preferred_election))
        except NoNodeError:
            await self.zk.exists(zn.PREFERRED_REPLICA_ELECTION,
                                 self._watch(self.on_legacy_preferred_election))
            return
        partitions = zn.decode_partitions_list(data, zn.PREFERRED_REPLICA_ELECTION)
        await self.elect_leaders(list(partitions), "preferred")
        await self._ignore_no_node(self.zk.delete(zn.PREFERRED_REPLICA_ELECTION))


def _legacy_targets(data: bytes) -> dict[TP, list[int]] | None:
    """``/admin/reassign_partitions``'s targets; None when it cannot be parsed, which
    Kafka's getPartitionReassignment logs and ignores (a failover must not fail on it)."""
    try:
        return zn.decode_partitions_list(data, zn.REASSIGN_PARTITIONS)
    except zn.ZnodeFormatError as e:
        logger.warning("ignoring partition reassignment due to invalid data: %s", e)
        return None
