"""What the active controller knows (Kafka's ``ControllerContext``), and the batch of
requests it builds from it (``ControllerBrokerRequestBatch``).

Filled from ZooKeeper when a broker becomes controller and kept current by the
controller's own writes and its watches; nothing here does I/O.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from josefk.cluster.controller.states import (
    PARTITION_TRANSITIONS,
    REPLICA_TRANSITIONS,
    IllegalStateTransition,
    PartitionState,
    ReplicaState,
    check_transition,
)
from josefk.cluster.metadata.requests import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    ControllerChannel,
    ControllerResponse,
    LeaderAndIsr,
    PartitionInfo,
    StopReplica,
    StopReplicaPartition,
    UpdateMetadata,
)
from josefk.cluster.zk.znodes import BrokerRegistration, TopicAssignment
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr

logger = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass
class ControllerContext:
    """The cluster as the controller sees it."""

    controller_id: int
    epoch: int = 0
    epoch_zk_version: int = 0
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[TP, tuple[int, ...]] = field(default_factory=dict)
    adding: dict[TP, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[TP, tuple[int, ...]] = field(default_factory=dict)
    leader_isr: dict[TP, LeaderIsr] = field(default_factory=dict)
    partition_states: dict[TP, PartitionState] = field(default_factory=dict)
    replica_states: dict[tuple[str, int, int], ReplicaState] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    # Partition -> target replicas, while a reassignment is in flight.
    reassignments: dict[TP, tuple[int, ...]] = field(default_factory=dict)
    # Broker -> its replicas in a failed log directory (Kafka's replicasOnOfflineDirs):
    # learnt from LeaderAndIsr answers, forgotten when the broker dies or registers again.
    replicas_on_offline_dirs: dict[int, set[TP]] = field(default_factory=dict)

    @property
    def live(self) -> set[int]:
        """Live brokers that are not shutting down (where leaders may go)."""
        return set(self.brokers) - self.shutting_down

    @property
    def live_or_shutting_down(self) -> set[int]:
        return set(self.brokers)

    def is_replica_online(self, tp: TP, broker_id: int) -> bool:
        """Kafka's ``isReplicaOnline``: a registered broker, the replica not in one of its
        failed log directories."""
        return (broker_id in self.brokers
                and tp not in self.replicas_on_offline_dirs.get(broker_id, ()))

    def live_for(self, tp: TP) -> set[int]:
        """The brokers where ``tp``'s leader may go: live, not shutting down, and with
        ``tp``'s replica in an online log directory."""
        return {b for b in self.live if self.is_replica_online(tp, b)}

    def topics(self) -> set[str]:
        return set(self.topic_ids)

    def partitions_of(self, topic: str) -> list[TP]:
        return sorted(tp for tp in self.assignments if tp[0] == topic)

    def all_partitions(self) -> list[TP]:
        return sorted(self.assignments)

    def partitions_on(self, broker_id: int) -> list[TP]:
        return [tp for tp, replicas in sorted(self.assignments.items()) if broker_id in replicas]

    def partitions_led_by(self, broker_id: int) -> list[TP]:
        return [tp for tp, li in sorted(self.leader_isr.items()) if li.leader == broker_id]

    def set_topic(self, topic: str, assignment: TopicAssignment) -> None:
        if assignment.topic_id is not None:
            self.topic_ids[topic] = assignment.topic_id
        for p, replicas in assignment.partitions.items():
            self.assignments[(topic, p)] = tuple(replicas)
            self.adding[(topic, p)] = tuple(assignment.adding.get(p, ()))
            self.removing[(topic, p)] = tuple(assignment.removing.get(p, ()))

    def remove_topic(self, topic: str) -> None:
        self.topic_ids.pop(topic, None)
        for tp in self.partitions_of(topic):
            for table in (self.assignments, self.adding, self.removing, self.leader_isr,
                          self.partition_states, self.reassignments):
                table.pop(tp, None)
        for key in [k for k in self.replica_states if k[0] == topic]:
            del self.replica_states[key]
        self.topics_to_delete.discard(topic)

    # --- state machines -------------------------------------------------------------

    def move_partition(self, tp: TP, target: PartitionState) -> bool:
        return self._move(PARTITION_TRANSITIONS, self.partition_states, tp, target,
                          PartitionState.NON_EXISTENT, f"partition {tp[0]}-{tp[1]}")

    def move_replica(self, tp: TP, replica: int, target: ReplicaState) -> bool:
        return self._move(REPLICA_TRANSITIONS, self.replica_states, (tp[0], tp[1], replica),
                          target, ReplicaState.NON_EXISTENT,
                          f"replica {replica} of {tp[0]}-{tp[1]}")

    def _move(self, table: Any, states: dict[Any, Any], key: Any, target: Any, absent: Any,
              what: str) -> bool:
        """Apply one transition if the table allows it (an absent key is in ``absent``);
        log and refuse it otherwise, as Kafka's state machines do."""
        try:
            check_transition(table, what, states.get(key, absent), target)
        except IllegalStateTransition as e:
            logger.error("controller %d: %s", self.controller_id, e)
            return False
        if target is absent:
            states.pop(key, None)
        else:
            states[key] = target
        return True

    def replica_state(self, tp: TP, replica: int) -> ReplicaState:
        return self.replica_states.get((tp[0], tp[1], replica), ReplicaState.NON_EXISTENT)

    # --- what requests say ------------------------------------------------------------

    def partition_info(self, tp: TP, *, is_new: bool = False, deleting: bool = False
                       ) -> PartitionInfo | None:
        li = self.leader_isr.get(tp)
        if li is None:
            return None
        replicas = self.assignments.get(tp, ())
        return PartitionInfo(
            topic=tp[0], partition=tp[1], controller_epoch=li.controller_epoch,
            leader=LEADER_DURING_DELETE if deleting else li.leader,
            leader_epoch=li.leader_epoch, isr=li.isr, partition_epoch=li.zk_version,
            replicas=replicas, adding=self.adding.get(tp, ()), removing=self.removing.get(tp, ()),
            offline=tuple(b for b in replicas if not self.is_replica_online(tp, b)),
            is_new=is_new,
            leader_recovery_state=li.leader_recovery_state)


class RequestBatch:
    """Requests gathered per broker during one controller event, then sent together
    (Kafka's ``ControllerBrokerRequestBatch``)."""

    def __init__(self, context: ControllerContext, channel: ControllerChannel,
                 on_leader_and_isr: Callable[[int], Callable[[ControllerResponse], None]]
                 | None = None) -> None:
        """``on_leader_and_isr``: for a broker id, what reads its LeaderAndIsr answer."""
        self.context = context
        self.channel = channel
        self.on_leader_and_isr = on_leader_and_isr
        self._leader_and_isr: dict[int, dict[TP, PartitionInfo]] = defaultdict(dict)
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata: dict[TP, PartitionInfo] = {}
        self._stop: dict[int, dict[TP, StopReplicaPartition]] = defaultdict(dict)

    def leader_and_isr(self, brokers: Iterable[int], tp: TP, *, is_new: bool = False) -> None:
        """LeaderAndIsr for ``tp`` to ``brokers``, and UpdateMetadata to everyone."""
        info = self.context.partition_info(tp, is_new=is_new)
        if info is None:
            return
        for broker_id in brokers:
            if broker_id in self.context.brokers:
                self._leader_and_isr[broker_id][tp] = info
        self.update_metadata(self.context.brokers, [tp])

    def update_metadata(self, brokers: Iterable[int], partitions: Iterable[TP] = (), *,
                        deleting: bool = False) -> None:
        self._update_metadata_brokers.update(b for b in brokers if b in self.context.brokers)
        for tp in partitions:
            info = self.context.partition_info(tp, deleting=deleting)
            if info is not None:
                self._update_metadata[tp] = info

    def stop_replica(self, broker_id: int, tp: TP, delete: bool) -> None:
        if broker_id not in self.context.brokers:
            return
        li = self.context.leader_isr.get(tp)
        # Kafka sends EpochDuringDelete (-2) only for topics being deleted.
        epoch = (EPOCH_DURING_DELETE if tp[0] in self.context.topics_to_delete
                 else li.leader_epoch if li else -1)
        current = self._stop[broker_id].get(tp)
        # A deletion wins over a plain stop for the same partition.
        self._stop[broker_id][tp] = StopReplicaPartition(tp[0], tp[1], epoch,
                                                         delete or bool(current and current.delete))

    def send(self, on_stop_response: Callable[[int], Callable[[ControllerResponse], None]]
             | None = None) -> None:
        """Send everything gathered: LeaderAndIsr, then UpdateMetadata, then StopReplica."""
        ctx = self.context
        for broker_id, infos in self._leader_and_isr.items():
            registration = ctx.brokers[broker_id]
            # The live brokers that lead a partition of this request.
            live_leaders = tuple(ctx.brokers[b] for b in sorted({i.leader for i in infos.values()})
                                 if b in ctx.brokers)
            topics = {tp[0] for tp in infos}
            self.channel.send(broker_id, LeaderAndIsr(
                ctx.controller_id, ctx.epoch, registration.epoch, tuple(infos.values()),
                {t: ctx.topic_ids[t] for t in topics if t in ctx.topic_ids}, live_leaders),
                self.on_leader_and_isr(broker_id) if self.on_leader_and_isr else None)
        if self._update_metadata_brokers:
            infos = tuple(self._update_metadata.values())
            topic_ids = {t: ctx.topic_ids[t] for t in {i.topic for i in infos}
                         if t in ctx.topic_ids}
            live = tuple(ctx.brokers[b] for b in sorted(ctx.brokers))
            for broker_id in sorted(self._update_metadata_brokers):
                self.channel.send(broker_id, UpdateMetadata(
                    ctx.controller_id, ctx.epoch, ctx.brokers[broker_id].epoch, infos,
                    topic_ids, live))
        for broker_id, stops in self._stop.items():
            callback = on_stop_response(broker_id) if on_stop_response is not None else None
            self.channel.send(broker_id, StopReplica(
                ctx.controller_id, ctx.epoch, ctx.brokers[broker_id].epoch,
                tuple(stops.values()),
                {t: ctx.topic_ids[t] for t in {tp[0] for tp in stops} if t in ctx.topic_ids}),
                callback)
        self._leader_and_isr.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata.clear()
        self._stop.clear()
