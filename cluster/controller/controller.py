"""The active controller (Kafka 3.9's ZooKeeper-mode ``KafkaController``).

One broker at a time holds the ephemeral ``/controller`` znode (`membership`); while it
does, `Controller.run` owns the cluster's leadership: it loads the cluster from
ZooKeeper, then handles one event at a time from a queue that its watches, the
brokers' requests and its own timers feed (Kafka's ControllerEventManager). Brokers
learn the result through LeaderAndIsr, UpdateMetadata and StopReplica on the
`ControllerChannel`.

The controller owns the `ControllerContext` (what it knows) and these parts, each
built on the narrow interfaces of `interfaces` and wired together here:

- `FencedWrites`: every ZooKeeper write, a multi that first checks
  ``/controller_epoch``'s version, so a controller that lost its place cannot write;
- `PartitionElections`: new partitions' states and leader elections (Kafka's
  PartitionStateMachine);
- `TopicChanges`: the topic znodes, new topics and partitions;
- `IsrChanges`: AlterPartition, and followers leaving ISRs;
- `BrokerLifecycle`: broker failure, startup and controlled shutdown;
- `TopicDeletionManager`: topic deletion (Kafka's TopicDeletionManager);
- `ReassignmentManager`: partition reassignment (KIP-455 and ``/admin``);
- `LogDirEvents`: brokers' failed log directories and the replicas in them.

It keeps for itself the event queue, the failover, ElectLeaders and its legacy znode,
the automatic leader rebalance and producer id blocks.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import trio

from josefk.cluster.controller.brokers import BrokerLifecycle
from josefk.cluster.controller.context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller.deletion import TopicDeletionManager
from josefk.cluster.controller.elections import PartitionElections
from josefk.cluster.controller.interfaces import Event
from josefk.cluster.controller.isr import AlterIsr, IsrChanges
from josefk.cluster.controller.log_dirs import LogDirEvents
from josefk.cluster.controller.pipeline import ControllerMovedError, first_leaf, for_each
from josefk.cluster.controller.reassignment import Ongoing, ReassignmentManager
from josefk.cluster.controller.states import PartitionState, ReplicaState
from josefk.cluster.controller.topics import TopicChanges
from josefk.cluster.controller.writes import FencedWrites, ignore_no_node
from josefk.cluster.metadata.requests import ControllerChannel
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import (
    BadVersionError,
    Create,
    NodeExistsError,
    NoNodeError,
    SetData,
    ZkError,
    ZooKeeper,
)
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.protocol.error_codes import NONE, STALE_BROKER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION

__all__ = ["Controller", "ControllerConfig", "ControllerMovedError", "Event", "for_each"]

logger = logging.getLogger(__name__)


PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True)
class ControllerConfig:
    """The broker settings the controller reads (each time it needs one)."""

    unclean_leader_election: Callable[[str], bool]
    # Reads the topics' configs not known yet, before an offline election asks
    # `unclean_leader_election` (Kafka reads the topic's config from ZooKeeper there).
    load_topic_configs: Callable[[set[str]], Awaitable[None]] | None = None
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_s: float = 300.0
    leader_imbalance_per_broker_percentage: int = 10
    delete_topic_enable: bool = True


class Controller:
    """The controller's work while this broker holds ``/controller`` at ``epoch``: the
    event queue, and the parts it owns (see the module's docstring)."""

    def __init__(self, zk: ZooKeeper, channel: ControllerChannel, broker_id: int,
                 config: ControllerConfig, epoch: int, epoch_zk_version: int) -> None:
        self.zk = zk
        self.channel = channel
        self.config = config
        self.ctx = ControllerContext(broker_id, epoch, epoch_zk_version)
        self._send, self._receive = trio.open_memory_channel[Event](math.inf)
        self._pending_calls: set[trio.Event] = set()
        ctx = self.ctx
        self.writes = FencedWrites(zk, ctx)
        self.elections = PartitionElections(ctx, zk, self.writes, self._batch,
                                            lambda: self.config)
        self.topics = TopicChanges(ctx, zk, self.elections, self._watch,
                                   lambda topic: self.config.unclean_leader_election(topic))
        self.deletion = TopicDeletionManager(
            ctx, zk, self._batch, self.put, self._watch,
            lambda: self.config.delete_topic_enable, self.topics.forget)
        self.isr = IsrChanges(ctx, self.writes, self._batch,
                              lambda tp: self.reassignment.on_isr_changed(tp))
        self.reassignment = ReassignmentManager(ctx, zk, self.writes, self._batch,
                                                self.elections, self.isr, self._watch)
        self.lifecycle = BrokerLifecycle(
            ctx, zk, channel, self._batch, self._watch, self.elections, self.isr,
            self.deletion.resume, self.reassignment.on_brokers_started)
        self.log_dirs = LogDirEvents(ctx, zk, self.writes, self._batch, self.put, self._watch,
                                     self.elections, self.isr)

    @property
    def broker_id(self) -> int:
        return self.ctx.controller_id

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    def put(self, event: Event) -> None:
        """Queue an event; events run one at a time, in order. Dropped once the
        controller has stopped."""
        with contextlib.suppress(ControllerMovedError):
            self._queue(event)

    def _queue(self, event: Event) -> None:
        try:
            self._send.send_nowait(event)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ControllerMovedError("the controller has stopped") from None

    async def call(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``fn`` as an event (after those queued before it) and return its result."""
        done = trio.Event()
        outcome: list[Any] = []

        async def event() -> None:
            try:
                outcome.append((True, await fn()))
            except (ControllerMovedError, trio.Cancelled):
                raise
            except Exception as e:  # handed to the caller, the controller carries on
                outcome.append((False, e))
            finally:
                done.set()

        # A stopped controller runs nothing more: answer at once, not never.
        self._queue(event)
        self._pending_calls.add(done)
        try:
            await done.wait()
        finally:
            self._pending_calls.discard(done)
        if not outcome:
            raise ControllerMovedError("the controller stopped before answering")
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    # --- the event loop ----------------------------------------------------------------

    async def run(self) -> None:
        """Act as controller until cancelled or until another controller takes over
        (raises ControllerMovedError)."""
        logger.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.channel.run)
                await self._failover()
                if self.config.auto_leader_rebalance_enable:
                    nursery.start_soon(self._rebalance_timer)
                async for event in self._receive:
                    await self._process(event)
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The nursery wraps what ended the controller; hand a lone cause on bare.
            ended, rest = group.split((ControllerMovedError, ZkError))
            if ended is not None and rest is None:
                raise first_leaf(ended) from None
            raise
        finally:
            self._send.close()
            for pending in list(self._pending_calls):
                pending.set()
            logger.info("broker %d resigned as controller (epoch %d)", self.broker_id,
                        self.epoch)

    async def _process(self, event: Event) -> None:
        """Run one event. A failure of its own is logged and the next event runs, as in
        Kafka's ControllerEventManager; a moved controller, a ZooKeeper failure or a
        cancellation still ends the controller."""
        try:
            await event()
        except (ControllerMovedError, ZkError):
            raise
        except Exception:
            logger.exception("controller %d: error processing event %s", self.broker_id,
                             getattr(event, "__qualname__", event))

    async def _rebalance_timer(self) -> None:
        while True:
            await trio.sleep(self.config.leader_imbalance_check_interval_s)
            self.put(self.auto_rebalance)

    def _watch(self, event: Event) -> Callable[[], None]:
        return lambda: self.put(event)

    def _batch(self) -> RequestBatch:
        # Every LeaderAndIsr answer is read for replicas in failed log directories.
        return RequestBatch(self.ctx, self.channel, self.log_dirs.on_leader_and_isr_response)

    # --- failover: load everything ----------------------------------------------------------

    async def _failover(self) -> None:
        ctx = self.ctx
        await self.lifecycle.load()
        await self.log_dirs.load()
        await self.topics.load_all()
        await self.zk.exists(zn.PREFERRED_REPLICA_ELECTION,
                             self._watch(self.on_legacy_preferred_election))
        for broker in ctx.brokers.values():
            self.channel.add_broker(broker)
        # Every broker first learns who is alive (Kafka's failover does the same).
        brokers_only = self._batch()
        brokers_only.update_metadata(ctx.brokers)
        brokers_only.send()
        logger.info("controller %d: %d live brokers %s, %d topics, %d partitions",
                    self.broker_id, len(ctx.brokers), sorted(ctx.brokers), len(ctx.topic_ids),
                    len(ctx.assignments))
        batch = self._batch()
        if ctx.assignments:
            batch.update_metadata(ctx.brokers, ctx.all_partitions())
        self._initial_states(batch)
        batch.send()
        # Leaders first, as Kafka's onBrokerFailure orders it (its failover removes the
        # dead replicas from the ISRs first): the two touch different partitions (a
        # partition whose leader is dead is elected; ISR removal skips it), and clients
        # wait for leaders, not for the ISRs to shrink.
        await self.elections.trigger_online_state_change()
        # Replicas on dead brokers leave the ISRs (Kafka's OfflineReplica transition).
        dead = {r for replicas in ctx.assignments.values() for r in replicas
                if r not in ctx.brokers}
        removal = self._batch()
        await self.isr.remove_from_isr(dead, ctx.all_partitions(), removal)
        removal.send()
        await self.deletion.on_delete_topics()
        await self.reassignment.resume()
        await self.reassignment.on_legacy_reassignment()

    def _initial_states(self, batch: RequestBatch) -> None:
        """Replicas on live brokers are online (each gets a LeaderAndIsr), the rest
        offline; a partition is new without a state, else online with a live leader."""
        ctx = self.ctx
        for tp, replicas in ctx.assignments.items():
            for replica in replicas:
                online = replica in ctx.brokers
                state = ReplicaState.ONLINE if online else ReplicaState.OFFLINE
                ctx.replica_states[(tp[0], tp[1], replica)] = state
                if online and tp in ctx.leader_isr:
                    batch.leader_and_isr([replica], tp)
            li = ctx.leader_isr.get(tp)
            if li is None:
                ctx.partition_states[tp] = PartitionState.NEW
            elif li.leader in ctx.brokers:
                ctx.partition_states[tp] = PartitionState.ONLINE
            else:
                ctx.partition_states[tp] = PartitionState.OFFLINE

    # --- the parts' events and requests ---------------------------------------------------

    async def on_broker_change(self) -> None:
        await self.lifecycle.on_broker_change()

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TP]]:
        """ControlledShutdown: see `BrokerLifecycle.controlled_shutdown`."""
        return await self.lifecycle.controlled_shutdown(broker_id, broker_epoch)

    async def alter_partition(self, broker_id: int, broker_epoch: int, tp: TP,
                              leader_epoch: int, new_isr: tuple[int, ...],
                              partition_epoch: int, leader_recovery_state: int
                              ) -> tuple[int, LeaderIsr | None]:
        """One partition's AlterPartition: see `IsrChanges.alter_partition`."""
        return await self.isr.alter_partition(broker_id, broker_epoch, tp, leader_epoch,
                                              new_isr, partition_epoch, leader_recovery_state)

    async def alter_partitions(self, broker_id: int, broker_epoch: int,
                               changes: list[AlterIsr]
                               ) -> dict[TP, tuple[int, LeaderIsr | None]]:
        """AlterPartition: see `IsrChanges.alter_partitions`."""
        return await self.isr.alter_partitions(broker_id, broker_epoch, changes)

    def list_reassignments(self, partitions: Iterable[TP] | None = None) -> Ongoing:
        """ListPartitionReassignments: partition -> (replicas, adding, removing)."""
        return self.reassignment.list_reassignments(partitions)

    async def reassign(self, targets: dict[TP, tuple[int, ...] | None]) -> dict[TP, int]:
        """AlterPartitionReassignments: see `ReassignmentManager.reassign`."""
        return await self.reassignment.reassign(targets)

    async def on_legacy_reassignment(self) -> None:
        await self.reassignment.on_legacy_reassignment()

    async def on_delete_topics(self) -> None:
        await self.deletion.on_delete_topics()

    async def on_topic_change(self) -> None:
        await self.topics.on_topic_change()

    async def on_topic_config_change(self, topic: str) -> None:
        """A topic's configs changed: see `TopicChanges.on_topic_config_change`."""
        await self.topics.on_topic_config_change(topic)

    async def on_partition_modification(self, topic: str) -> None:
        await self.topics.on_partition_modification(topic)

    # --- requests from brokers and admin clients ----------------------------------------------

    async def elect_leaders(self, partitions: Iterable[TP] | None, kind: str
                            ) -> dict[TP, int]:
        """ElectLeaders: ``kind`` preferred or unclean; None means every partition."""
        ctx = self.ctx
        wanted = list(partitions) if partitions is not None else [
            tp for tp in ctx.all_partitions()
            if tp in ctx.leader_isr and ctx.leader_isr[tp].leader != ctx.assignments[tp][0]]
        valid = [tp for tp in wanted if tp in ctx.assignments
                 and tp[0] not in ctx.topics_to_delete]
        results = {tp: UNKNOWN_TOPIC_OR_PARTITION for tp in wanted if tp not in valid}
        results.update(await self.elections.elect(valid, kind))
        return results

    async def auto_rebalance(self) -> None:
        """Preferred-leader election for brokers whose imbalance passes
        ``leader.imbalance.per.broker.percentage`` (Kafka's checkAndTriggerAutoLeaderRebalance)."""
        ctx = self.ctx
        by_preferred: dict[int, list[TP]] = {}
        for tp, replicas in ctx.assignments.items():
            if replicas and tp[0] not in ctx.topics_to_delete and tp not in ctx.reassignments:
                by_preferred.setdefault(replicas[0], []).append(tp)
        todo: list[TP] = []
        for broker_id, tps in sorted(by_preferred.items()):
            if broker_id not in ctx.live:
                continue
            imbalanced = [tp for tp in tps if tp in ctx.leader_isr
                          and ctx.leader_isr[tp].leader != broker_id]
            ratio = len(imbalanced) * 100 / len(tps)
            if ratio > self.config.leader_imbalance_per_broker_percentage:
                todo.extend(tp for tp in imbalanced if broker_id in ctx.leader_isr[tp].isr)
        if todo:
            logger.info("controller %d: auto leader rebalance of %d partitions",
                        self.broker_id, len(todo))
            await self.elections.elect(todo, "preferred")

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int
                                    ) -> tuple[int, int, int]:
        """AllocateProducerIds: the next block of ids after ``/latest_producer_id_block``
        (error, first id, length), as Kafka's ZooKeeper-mode controller hands them out."""
        registration = self.ctx.brokers.get(broker_id)
        if registration is None or broker_epoch not in (-1, registration.epoch):
            return STALE_BROKER_EPOCH, -1, -1
        while True:
            try:
                data, stat = await self.zk.get(zn.PRODUCER_ID_BLOCK)
                start, version = zn.decode_producer_id_block_end(data) + 1, stat.version
            except NoNodeError:
                start, version = 0, -2
            block = zn.encode_producer_id_block(broker_id, start,
                                                start + PRODUCER_ID_BLOCK_SIZE - 1)
            op = (Create(zn.PRODUCER_ID_BLOCK, block) if version == -2
                  else SetData(zn.PRODUCER_ID_BLOCK, block, version))
            try:
                await self.writes.multi([op])
            except (BadVersionError, NodeExistsError):
                continue  # written by someone else meanwhile: take the next one
            logger.info("controller %d: producer ids %d-%d for broker %d", self.broker_id,
                        start, start + PRODUCER_ID_BLOCK_SIZE - 1, broker_id)
            return NONE, start, PRODUCER_ID_BLOCK_SIZE

    async def on_legacy_preferred_election(self) -> None:
        """``/admin/preferred_replica_election`` (kafka-preferred-replica-election.sh)."""
        try:
            data, _ = await self.zk.get(zn.PREFERRED_REPLICA_ELECTION,
                                        self._watch(self.on_legacy_preferred_election))
        except NoNodeError:
            await self.zk.exists(zn.PREFERRED_REPLICA_ELECTION,
                                 self._watch(self.on_legacy_preferred_election))
            return
        partitions = zn.decode_partitions_list(data, zn.PREFERRED_REPLICA_ELECTION)
        await self.elect_leaders(list(partitions), "preferred")
        await ignore_no_node(self.zk.delete(zn.PREFERRED_REPLICA_ELECTION))
