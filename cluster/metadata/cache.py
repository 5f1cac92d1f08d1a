"""A broker's view of the cluster, as the controller's UpdateMetadata requests tell it
(Kafka's ZooKeeper-mode ``ZkMetadataCache``): the live brokers and their endpoints,
the controller, and every partition's leader, ISR, replicas and offline replicas.

Metadata, DescribeCluster, FindCoordinator and DescribeTopicPartitions answer from
here, so every broker answers the same way a moment after the controller decides.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import trio

from josefk.cluster.metadata.requests import LEADER_DURING_DELETE, PartitionInfo, UpdateMetadata
from josefk.cluster.zk.znodes import BrokerRegistration

TP = tuple[str, int]


class MetadataCache:
    """What the last UpdateMetadata said; `changed` wakes anyone waiting for news;
    ``generation`` grows with every update (answers cached from it are stale then)."""

    def __init__(self) -> None:
        self.controller_id = -1
        self.controller_epoch = -1
        self.brokers: dict[int, BrokerRegistration] = {}
        self.partitions: dict[TP, PartitionInfo] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._changed = trio.Event()
        self.generation = 0

    def update(self, request: UpdateMetadata) -> list[TP]:
        """Apply an UpdateMetadata; returns the partitions it deleted."""
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.brokers = {b.broker_id: b for b in request.live_brokers}
        deleted = []
        for info in request.partitions:
            if info.leader == LEADER_DURING_DELETE:
                self.partitions.pop(info.key, None)
                deleted.append(info.key)
            else:
                self.partitions[info.key] = info
        for topic, topic_id in request.topic_ids.items():
            self.topic_ids[topic] = topic_id
        for topic in {tp[0] for tp in deleted}:
            if not any(tp[0] == topic for tp in self.partitions):
                self.topic_ids.pop(topic, None)
        self.generation += 1
        self._notify()
        return deleted

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self) -> None:
        await self._changed.wait()

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        return self.partitions.get((topic, partition))

    def topic_partitions(self, topic: str) -> list[PartitionInfo]:
        return sorted((i for i in self.partitions.values() if i.topic == topic),
                      key=lambda i: i.partition)

    def topics(self) -> list[str]:
        return sorted({tp[0] for tp in self.partitions})

    def has_leaders(self, topic: str, partitions: Iterable[int]) -> bool:
        """Every listed partition of ``topic`` is known here with a live leader."""
        for p in partitions:
            info = self.partitions.get((topic, p))
            if info is None or info.leader not in self.brokers:
                return False
        return True

    def alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers
