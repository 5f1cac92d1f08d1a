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
        # Indexes of the two maps above, so that a topic's lookup does not scan every
        # partition of the cluster (a Metadata answer looks up every topic).
        self._by_topic: dict[str, dict[int, PartitionInfo]] = {}
        self._names: dict[uuid.UUID, str] = {}
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
                self._by_topic.get(info.topic, {}).pop(info.partition, None)
                deleted.append(info.key)
            else:
                self.partitions[info.key] = info
                self._by_topic.setdefault(info.topic, {})[info.partition] = info
        for topic, topic_id in request.topic_ids.items():
            self._forget_id(topic)
            self.topic_ids[topic] = topic_id
            self._names[topic_id] = topic
        for topic in {tp[0] for tp in deleted}:
            if not self._by_topic.get(topic):
                self._by_topic.pop(topic, None)
                self._forget_id(topic)
        self.generation += 1
        self._notify()
        return deleted

    def _forget_id(self, topic: str) -> None:
        topic_id = self.topic_ids.pop(topic, None)
        if topic_id is not None and self._names.get(topic_id) == topic:
            del self._names[topic_id]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with ``topic_id``, when known here."""
        return self._names.get(topic_id)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self) -> None:
        await self._changed.wait()

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        return self.partitions.get((topic, partition))

    def topic_partitions(self, topic: str) -> list[PartitionInfo]:
        by_index = self._by_topic.get(topic, {})
        return [by_index[p] for p in sorted(by_index)]

    def topics(self) -> list[str]:
        return sorted(t for t, by_index in self._by_topic.items() if by_index)

    def has_leaders(self, topic: str, partitions: Iterable[int]) -> bool:
        """Every listed partition of ``topic`` is known here with a live leader."""
        for p in partitions:
            info = self.partitions.get((topic, p))
            if info is None or info.leader not in self.brokers:
                return False
        return True

    def alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers
