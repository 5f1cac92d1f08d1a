"""Topic deletion at the controller (Kafka's ``TopicDeletionManager``): every replica
of a topic under ``/admin/delete_topics`` stops and deletes its log (StopReplica), and
once all have, the topic's znodes go. A part the
`josefk.cluster.controller.controller.Controller` owns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from josefk.cluster.controller.context import ControllerContext
from josefk.cluster.controller.interfaces import BatchFactory, Put, Watcher
from josefk.cluster.controller.states import PartitionState, ReplicaState
from josefk.cluster.controller.writes import ignore_no_node
from josefk.cluster.metadata.requests import ControllerResponse
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import NoNodeError, ZooKeeper
from josefk.protocol.error_codes import NONE

logger = logging.getLogger("josefk.cluster.controller.controller")


class TopicDeletionManager:
    """Deleting topics: a replica on a dead broker waits for it (ReplicaDeletionIneligible)
    and is retried when it comes back; the topic is gone once every replica answered.

    Takes the context, the ZooKeeper session (``/admin/delete_topics`` and the topic's
    znodes), a request batch factory, ``put`` to queue the StopReplica answers as
    events, ``watch`` for ``/admin/delete_topics``, ``enabled`` (delete.topic.enable,
    read at each request) and ``on_deleted``, told each topic once it is gone."""

    def __init__(self, ctx: ControllerContext, zk: ZooKeeper, batch: BatchFactory, put: Put,
                 watch: Watcher, enabled: Callable[[], bool],
                 on_deleted: Callable[[str], None]) -> None:
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.put = put
        self.watch = watch
        self.enabled = enabled
        self.on_deleted = on_deleted

    async def on_delete_topics(self) -> None:
        """``/admin/delete_topics`` changed: queue its known topics for deletion (or
        drop the request), then carry every deletion on."""
        ctx = self.ctx
        try:
            names = await self.zk.get_children(zn.DELETE_TOPICS,
                                               self.watch(self.on_delete_topics))
        except NoNodeError:
            return
        for topic in names:
            if topic not in ctx.topic_ids:
                logger.info("controller %d: dropping deletion of unknown topic %s",
                            ctx.controller_id, topic)
                await ignore_no_node(self.zk.delete(zn.delete_topic_path(topic)))
                continue
            if not self.enabled():
                await ignore_no_node(self.zk.delete(zn.delete_topic_path(topic)))
                continue
            ctx.topics_to_delete.add(topic)
        await self.resume()

    async def resume(self) -> None:
        """Carry every queued deletion on (after a broker came back, say)."""
        for topic in sorted(self.ctx.topics_to_delete):
            await self._delete_topic(topic)

    async def _delete_topic(self, topic: str) -> None:
        """Tell every replica to stop and delete; once every replica has, remove the
        topic's znodes."""
        ctx = self.ctx
        partitions = ctx.partitions_of(topic)
        batch = self.batch()
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
            self.put(lambda: self.on_replicas_deleted(broker_id, response))
        return on_response

    async def on_replicas_deleted(self, broker_id: int, response: ControllerResponse) -> None:
        """A StopReplica (delete) answer of ``broker_id``: its replicas are deleted, or
        ineligible on an error; a topic whose replicas all are deleted is completed."""
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
        self.on_deleted(topic)
        await ignore_no_node(self.zk.delete(zn.topic_path(topic), recursive=True))
        await ignore_no_node(self.zk.delete(zn.topic_config_path(topic)))
        await ignore_no_node(self.zk.delete(zn.delete_topic_path(topic)))
        logger.info("controller %d: deleted topic %s", ctx.controller_id, topic)
