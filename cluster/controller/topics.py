"""Topics at the controller: the topic znodes it reads at failover and watches after,
topics created or removed under ``/brokers/topics``, partitions added to a topic, and a
topic's configs allowing unclean election. A part the
`josefk.cluster.controller.controller.Controller` owns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from josefk.cluster.controller.context import TP, ControllerContext
from josefk.cluster.controller.interfaces import Elections, Watcher
from josefk.cluster.controller.pipeline import for_each
from josefk.cluster.controller.states import PartitionState
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import NoNodeError, ZooKeeper
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.cluster.zk.znodes import TopicAssignment, ZnodeFormatError

logger = logging.getLogger("josefk.cluster.controller.controller")


class TopicChanges:
    """Loads topics into the context and follows their znodes; new partitions are
    elected leaders.

    Takes the context, the ZooKeeper session (topic and partition state znodes),
    ``elections``, ``watch`` for the topic znodes, and ``unclean_allowed`` (a topic's
    unclean.leader.election.enable, read at each change)."""

    def __init__(self, ctx: ControllerContext, zk: ZooKeeper, elections: Elections,
                 watch: Watcher, unclean_allowed: Callable[[str], bool]) -> None:
        self.ctx = ctx
        self.zk = zk
        self.elections = elections
        self.watch = watch
        self.unclean_allowed = unclean_allowed
        self._watched: set[str] = set()

    async def load_all(self) -> None:
        """Failover: read every topic (assignment and partition states) and watch them.
        The partition states of all topics are read together: at failover they are most
        of what the controller reads, one znode per partition."""
        names = await self.zk.get_children(zn.TOPICS, self.watch(self.on_topic_change))
        assignments: dict[str, TopicAssignment] = {}

        async def assignment(topic: str) -> None:
            if (got := await self._load_assignment(topic)) is not None:
                assignments[topic] = got

        await for_each(names, assignment)
        await self._read_states([(topic, p) for topic in names if topic in assignments
                                 for p in assignments[topic].partitions])

    async def load(self, topic: str) -> TopicAssignment | None:
        """Read ``topic``'s assignment and partition states into the context (an
        assignment with adding or removing replicas is a reassignment in flight)."""
        assignment = await self._load_assignment(topic)
        if assignment is not None:
            await self._read_states([(topic, p) for p in assignment.partitions])
        return assignment

    async def _load_assignment(self, topic: str) -> TopicAssignment | None:
        try:
            data, _ = await self.zk.get(zn.topic_path(topic), self._topic_watch(topic))
            assignment = TopicAssignment.decode(topic, data)
        except NoNodeError:
            return None
        except ZnodeFormatError as e:
            # One unreadable topic must not keep the controller from the others.
            logger.error("controller %d: skipping topic %s: %s", self.ctx.controller_id,
                         topic, e)
            return None
        self.ctx.set_topic(topic, assignment)
        for p, replicas in assignment.partitions.items():
            if assignment.adding.get(p) or assignment.removing.get(p):
                # A reassignment was in flight: the target is the union minus the removed.
                removing = set(assignment.removing.get(p, ()))
                self.ctx.reassignments[(topic, p)] = tuple(b for b in replicas
                                                           if b not in removing)
        return assignment

    async def _read_states(self, partitions: list[TP]) -> None:
        got = await self.zk.get_many([zn.partition_state_path(*tp) for tp in partitions])
        for tp, read in zip(partitions, got, strict=True):
            if isinstance(read, NoNodeError):
                continue
            if isinstance(read, Exception):
                raise read
            try:
                self.ctx.leader_isr[tp] = LeaderIsr.decode(read[0], read[1].version)
            except ZnodeFormatError as e:
                logger.error("controller %d: skipping the state of %s-%d: %s",
                             self.ctx.controller_id, *tp, e)

    def _topic_watch(self, topic: str) -> Callable[[], None]:
        self._watched.add(topic)
        return self.watch(lambda: self.on_partition_modification(topic))

    def forget(self, topic: str) -> None:
        """``topic`` is deleted: a change of its znode is no longer followed."""
        self._watched.discard(topic)

    async def on_topic_change(self) -> None:
        """``/brokers/topics`` changed: removed topics leave the context, new ones are
        loaded and their partitions elected leaders."""
        ctx = self.ctx
        names = set(await self.zk.get_children(zn.TOPICS, self.watch(self.on_topic_change)))
        new = sorted(names - ctx.topics())
        for topic in sorted(ctx.topics() - names):
            ctx.remove_topic(topic)
        if not new:
            return
        created: list[TP] = []
        for topic in new:
            assignment = await self.load(topic)
            if assignment is not None:
                created.extend((topic, p) for p in sorted(assignment.partitions))
        logger.info("controller %d: new topics %s (%d partitions)", ctx.controller_id, new,
                    len(created))
        await self._create_partitions(created)

    async def _create_partitions(self, partitions: list[TP]) -> None:
        ctx = self.ctx
        for tp in partitions:
            ctx.leader_isr.pop(tp, None)
            ctx.partition_states.pop(tp, None)
            ctx.move_partition(tp, PartitionState.NEW)
        await self.elections.elect(partitions, "offline")

    async def on_topic_config_change(self, topic: str) -> None:
        """A topic's configs changed: with unclean election now enabled, its offline
        partitions may elect a leader (Kafka's TopicUncleanLeaderElectionEnable)."""
        if topic in self.ctx.topic_ids and self.unclean_allowed(topic):
            await self.elections.trigger_online_state_change(self.ctx.partitions_of(topic))

    async def on_partition_modification(self, topic: str) -> None:
        """The topic znode changed: CreatePartitions grew it (or a reassignment wrote it)."""
        ctx = self.ctx
        if topic not in ctx.topic_ids and topic not in self._watched:
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
        logger.info("controller %d: topic %s grew by partitions %s", ctx.controller_id, topic,
                    [p for _, p in added])
        await self._create_partitions(added)
