"""The active controller (Kafka 3.9's ZooKeeper-mode ``KafkaController``).

One broker at a time holds the ephemeral ``/controller`` znode (`controller_election`);
while it does, `Controller.run` owns the cluster's leadership: it loads the cluster from
ZooKeeper, then handles one event at a time from a queue that its watches, the
brokers' requests and its own timers feed (Kafka's ControllerEventManager). Every
write is a ZooKeeper multi that first checks ``/controller_epoch``'s version, so a
controller that lost its place cannot write; brokers learn the result through
LeaderAndIsr, UpdateMetadata and StopReplica on the `ControllerChannel`.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import trio

from josefk.cluster import znodes as zn
from josefk.cluster.controller_brokers import BrokerLifecycle
from josefk.cluster.controller_context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller_isr import IsrChanges
from josefk.cluster.controller_parts import Reassignment, TopicDeletion
from josefk.cluster.controller_pipeline import ControllerMovedError, first_leaf, for_each
from josefk.cluster.controller_requests import ControllerChannel
from josefk.cluster.controller_states import PartitionState, ReplicaState
from josefk.cluster.leader_election import (
    Election,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassignment_election,
)
from josefk.cluster.znodes import BrokerRegistration, TopicAssignment, ZnodeFormatError
from josefk.cluster.znodes import PartitionState as LeaderIsr
from josefk.cluster.zookeeper import (
    BadVersionError,
    Check,
    Create,
    NodeExistsError,
    NoNodeError,
    Op,
    SetData,
    ZkError,
    ZooKeeper,
)
from josefk.protocol.error_codes import (
    ELECTION_NOT_NEEDED,
    ELIGIBLE_LEADERS_NOT_AVAILABLE,
    NONE,
    PREFERRED_LEADER_NOT_AVAILABLE,
    STALE_BROKER_EPOCH,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
)

logger = logging.getLogger(__name__)


PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True)
class ControllerConfig:
    unclean_leader_election: Callable[[str], bool]
    # Reads the topics' configs not known yet, before an offline election asks
    # `unclean_leader_election` (Kafka reads the topic's config from ZooKeeper there).
    load_topic_configs: Callable[[set[str]], Awaitable[None]] | None = None
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_s: float = 300.0
    leader_imbalance_per_broker_percentage: int = 10
    delete_topic_enable: bool = True


Event = Callable[[], Awaitable[Any]]


class Controller(TopicDeletion, Reassignment, IsrChanges, BrokerLifecycle):
    """The controller's work while this broker holds ``/controller`` at ``epoch``."""

    def __init__(self, zk: ZooKeeper, channel: ControllerChannel, broker_id: int,
                 config: ControllerConfig, epoch: int, epoch_zk_version: int) -> None:
        self.zk = zk
        self.channel = channel
        self.config = config
        self.ctx = ControllerContext(broker_id, epoch, epoch_zk_version)
        self._send, self._receive = trio.open_memory_channel[Event](math.inf)
        self._watched_topics: set[str] = set()
        self._pending_calls: set[trio.Event] = set()

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

    def _watch(self, event: Event) -> Callable[[], None]:
        return lambda: self.put(event)

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

    # --- ZooKeeper writes, fenced by the controller epoch ------------------------------------

    async def _multi(self, ops: list[Op]) -> None:
        try:
            await self.zk.multi([Check(zn.CONTROLLER_EPOCH, self.ctx.epoch_zk_version), *ops])
        except BadVersionError:
            _, stat = await self.zk.get(zn.CONTROLLER_EPOCH)
            if stat.version != self.ctx.epoch_zk_version:
                raise ControllerMovedError(
                    f"/controller_epoch moved to version {stat.version}") from None
            raise

    async def _write_leader_isr(self, tp: TP, new: LeaderIsr) -> LeaderIsr | None:
        """Write a partition's new state over the one we know; None if it changed under
        us (the partition epoch moved), after re-reading it."""
        old = self.ctx.leader_isr[tp]
        path = zn.partition_state_path(*tp)
        try:
            await self._multi([SetData(path, new.encode(), old.zk_version)])
        except BadVersionError:
            data, stat = await self.zk.get(path)
            self.ctx.leader_isr[tp] = LeaderIsr.decode(data, stat.version)
            return None
        written = replace(new, zk_version=old.zk_version + 1)
        self.ctx.leader_isr[tp] = written
        return written

    # --- failover: load everything ----------------------------------------------------------

    async def _failover(self) -> None:
        ctx = self.ctx
        ids = await self.zk.get_children(zn.BROKER_IDS, self._watch(self.on_broker_change))
        ctx.brokers = await self._read_brokers(ids)
        names = await self.zk.get_children(zn.TOPICS, self._watch(self.on_topic_change))
        for topic in names:
            await self._load_topic(topic)
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
        # Replicas on live brokers are online (each gets a LeaderAndIsr), the rest offline.
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
        # Replicas on dead brokers leave the ISRs (Kafka's OfflineReplica transition).
        dead = {r for replicas in ctx.assignments.values() for r in replicas
                if r not in ctx.brokers}
        await self._remove_from_isr(dead, ctx.all_partitions(), batch)
        batch.send()
        await self._trigger_online_state_change()
        await self.on_delete_topics()
        for (topic, p), target in list(ctx.reassignments.items()):
            await self._continue_reassignment((topic, p), target)
        await self.on_legacy_reassignment()

    async def _read_brokers(self, ids: Iterable[str]) -> dict[int, BrokerRegistration]:
        brokers = {}
        for child in ids:
            try:
                data, stat = await self.zk.get(f"{zn.BROKER_IDS}/{child}")
                brokers[int(child)] = BrokerRegistration.decode(int(child), data, stat.czxid)
            except (NoNodeError, ValueError) as e:
                logger.warning("controller %d: skipping broker znode %s: %s", self.broker_id,
                               child, e)
        return brokers

    async def _load_topic(self, topic: str) -> TopicAssignment | None:
        try:
            data, _ = await self.zk.get(zn.topic_path(topic), self._topic_watch(topic))
            assignment = TopicAssignment.decode(topic, data)
        except NoNodeError:
            return None
        except ZnodeFormatError as e:
            # One unreadable topic must not keep the controller from the others.
            logger.error("controller %d: skipping topic %s: %s", self.broker_id, topic, e)
            return None
        self.ctx.set_topic(topic, assignment)

        async def read_state(p: int) -> None:
            try:
                data, stat = await self.zk.get(zn.partition_state_path(topic, p))
                self.ctx.leader_isr[(topic, p)] = LeaderIsr.decode(data, stat.version)
            except NoNodeError:
                pass
            except ZnodeFormatError as e:
                logger.error("controller %d: skipping the state of %s-%d: %s",
                             self.broker_id, topic, p, e)

        await for_each(assignment.partitions, read_state)
        for p, replicas in assignment.partitions.items():
            tp = (topic, p)
            if assignment.adding.get(p) or assignment.removing.get(p):
                # A reassignment was in flight: the target is the union minus the removed.
                removing = set(assignment.removing.get(p, ()))
                self.ctx.reassignments[tp] = tuple(b for b in replicas if b not in removing)
        return assignment

    def _topic_watch(self, topic: str) -> Callable[[], None]:
        self._watched_topics.add(topic)
        return self._watch(lambda: self.on_partition_modification(topic))

    def _batch(self) -> RequestBatch:
        return RequestBatch(self.ctx, self.channel)

    # --- elections ---------------------------------------------------------------------------

    async def _trigger_online_state_change(self, partitions: Iterable[TP] | None = None) -> None:
        """Elect leaders for every New or Offline partition (not being deleted)."""
        ctx = self.ctx
        candidates = partitions if partitions is not None else list(ctx.partition_states)
        todo = [tp for tp in candidates
                if ctx.partition_states.get(tp) in (PartitionState.NEW, PartitionState.OFFLINE)
                and tp[0] not in ctx.topics_to_delete]
        if todo:
            await self._elect(todo, "offline")

    async def _elect(self, partitions: Iterable[TP], kind: str) -> dict[TP, int]:
        """Elect leaders with strategy ``kind`` (offline, preferred, controlled_shutdown,
        reassignment); returns each partition's error code."""
        ctx = self.ctx
        partitions = list(partitions)
        if kind == "offline" and self.config.load_topic_configs is not None:
            await self.config.load_topic_configs({topic for topic, _ in partitions})
        batch = self._batch()
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
        live = [b for b in replicas if b in ctx.live]
        if not live:
            logger.error("controller %d: no live replica for new partition %s-%d among %s",
                         self.broker_id, *tp, list(replicas))
            return ELIGIBLE_LEADERS_NOT_AVAILABLE
        state = LeaderIsr(live[0], 0, tuple(live), ctx.epoch)
        path = zn.partition_state_path(*tp)
        try:
            await self._multi([Create(path, state.encode())])
            state = replace(state, zk_version=0)
        except (NodeExistsError, NoNodeError):
            try:
                await self.zk.ensure_path(zn.partition_path(*tp))
                await self._multi([Create(path, state.encode())])
                state = replace(state, zk_version=0)
            except NodeExistsError:
                data, stat = await self.zk.get(path)
                try:
                    state = LeaderIsr.decode(data, stat.version)
                except ZnodeFormatError as e:
                    # Kafka's failed NewPartition -> OnlinePartition: the partition stays new.
                    logger.error("controller %d: cannot initialize %s-%d: %s",
                                 self.broker_id, *tp, e)
                    return UNKNOWN_SERVER_ERROR
        ctx.leader_isr[tp] = state
        ctx.move_partition(tp, PartitionState.ONLINE)
        for replica in replicas:
            if replica in ctx.brokers:
                ctx.move_replica(tp, replica, ReplicaState.ONLINE)
        batch.leader_and_isr(replicas, tp, is_new=True)
        return NONE

    def _choose(self, tp: TP, kind: str, li: LeaderIsr) -> Election | None:
        ctx = self.ctx
        replicas = ctx.assignments[tp]
        match kind:
            case "preferred":
                return preferred_election(replicas, li.isr, ctx.live)
            case "controlled_shutdown":
                return controlled_shutdown_election(replicas, li.isr, ctx.brokers,
                                                    ctx.shutting_down)
            case "reassignment":
                return reassignment_election(ctx.reassignments.get(tp, replicas), li.isr,
                                             ctx.live)
            case "unclean":
                return offline_election(replicas, li.isr, ctx.live, True)
            case _:
                return offline_election(replicas, li.isr, ctx.live,
                                        self.config.unclean_leader_election(tp[0]))

    async def _elect_one(self, tp: TP, kind: str, batch: RequestBatch) -> int:
        ctx = self.ctx
        for _ in range(3):
            li = ctx.leader_isr[tp]
            if kind == "preferred" and li.leader == ctx.assignments[tp][0]:
                return ELECTION_NOT_NEEDED
            if kind == "unclean" and li.leader in ctx.live:
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
            written = await self._write_leader_isr(tp, new)
            if written is None:
                continue
            if election.unclean:
                logger.warning("controller %d: unclean leader election for %s-%d: broker %d "
                               "was not in the ISR %s; acknowledged data may be lost",
                               self.broker_id, *tp, election.leader, list(li.isr))
            ctx.move_partition(tp, PartitionState.ONLINE)
            logger.info("controller %d: %s election for %s-%d: leader %d epoch %d isr %s",
                        self.broker_id, kind, *tp, written.leader, written.leader_epoch,
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
            written = await self._write_leader_isr(tp, new)
            if written is None:
                return
        ctx.move_partition(tp, PartitionState.OFFLINE)
        logger.warning("controller %d: partition %s-%d is offline: no live replica in its ISR",
                       self.broker_id, *tp)
        batch.update_metadata(ctx.brokers, [tp])

    # --- topics -------------------------------------------------------------------------------

    async def on_topic_change(self) -> None:
        ctx = self.ctx
        names = set(await self.zk.get_children(zn.TOPICS, self._watch(self.on_topic_change)))
        new = sorted(names - ctx.topics())
        for topic in sorted(ctx.topics() - names):
            ctx.remove_topic(topic)
        if not new:
            return
        created: list[TP] = []
        for topic in new:
            assignment = await self._load_topic(topic)
            if assignment is not None:
                created.extend((topic, p) for p in sorted(assignment.partitions))
        logger.info("controller %d: new topics %s (%d partitions)", self.broker_id, new,
                    len(created))
        await self._create_partitions(created)

    async def _create_partitions(self, partitions: list[TP]) -> None:
        ctx = self.ctx
        for tp in partitions:
            ctx.leader_isr.pop(tp, None)
            ctx.partition_states.pop(tp, None)
            ctx.move_partition(tp, PartitionState.NEW)
        await self._elect(partitions, "offline")

    async def on_topic_config_change(self, topic: str) -> None:
        """A topic's configs changed: with unclean election now enabled, its offline
        partitions may elect a leader (Kafka's TopicUncleanLeaderElectionEnable)."""
        if topic in self.ctx.topic_ids and self.config.unclean_leader_election(topic):
            await self._trigger_online_state_change(self.ctx.partitions_of(topic))

    async def on_partition_modification(self, topic: str) -> None:
        """The topic znode changed: CreatePartitions grew it (or a reassignment wrote it)."""
        ctx = self.ctx
        if topic not in ctx.topic_ids and topic not in self._watched_topics:
            return
        try:
            data, _ = await self.zk.get(zn.topic_path(topic), self._topic_watch(topic))
        except NoNodeError:
            return
        assignment = TopicAssignment.decode(topic, data)
        added = [(topic, p) for p in sorted(assignment.partitions)
                 if (topic, p) not in ctx.assignments]
        if not added or topic in ctx.topics_to_delete:
            return
        for tp in added:
            ctx.assignments[tp] = tuple(assignment.partitions[tp[1]])
        logger.info("controller %d: topic %s grew by partitions %s", self.broker_id, topic,
                    [p for _, p in added])
        await self._create_partitions(added)

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
        results.update(await self._elect(valid, kind))
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
            await self._elect(todo, "preferred")

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
                await self._multi([op])
            except (BadVersionError, NodeExistsError):
                continue  # written by someone else meanwhile: take the next one
            logger.info("controller %d: producer ids %d-%d for broker %d", self.broker_id,
                        start, start + PRODUCER_ID_BLOCK_SIZE - 1, broker_id)
            return NONE, start, PRODUCER_ID_BLOCK_SIZE
