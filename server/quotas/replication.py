"""Replication quotas (Kafka's ``ReplicationQuotaManager``): a leader's and a follower's
throttled rate, and the partitions it applies to.

``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` are
dynamic broker configs (this broker's entity in the config store, else ``<default>``);
the topic configs ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` name the throttled replicas as
``partition:broker`` pairs, or ``*`` for all. While the measured rate of the throttled
partitions' bytes is over the bound, a leader answers an out-of-sync follower's fetch
of a throttled partition with no records, and a follower leaves its own out-of-sync
throttled partitions out of its fetches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from josefk.log.clock import now_ms
from josefk.server.quotas.rate import RateConfig, SampledRate

logger = logging.getLogger(__name__)

BROKERS, DEFAULT = "brokers", "<default>"
LEADER, FOLLOWER = "leader", "follower"
ALL = frozenset({-1})  # every partition ("*")


class EntityConfigs(Protocol):
    def get(self, entity_type: str, name: str) -> Mapping[str, str]: ...

    def subscribe(self, listener: Callable[[str, str], None]) -> None: ...


def throttled_partitions(value: str, broker_id: int) -> frozenset[int]:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on
    ``broker_id`` (Kafka's ``parseThrottledPartitions``)."""
    value = value.strip()
    if value == "*":
        return ALL
    partitions = set()
    for pair in filter(None, (p.strip() for p in value.split(","))):
        partition, _, broker = pair.partition(":")
        try:
            if int(broker) == broker_id:
                partitions.add(int(partition))
        except ValueError:
            logger.warning("ignoring throttled replica %r: not partition:broker", pair)
    return frozenset(partitions)


class ReplicaQuota:
    """One side's throttle: its rate bound, and which partitions it governs."""

    def __init__(self, side: str, broker_id: int, config: RateConfig,
                 topic_configs: Callable[[str], Mapping[str, str]]) -> None:
        self.side = side
        self.key = f"{side}.replication.throttled.replicas"
        self.broker_id = broker_id
        self.bound = float("inf")
        self.rate = SampledRate(config, now_ms())
        self._topic_configs = topic_configs
        # topic -> (its configs mapping when parsed, the throttled partitions)
        self._parsed: dict[str, tuple[Mapping[str, str], frozenset[int]]] = {}

    @property
    def enabled(self) -> bool:
        return self.bound != float("inf")

    def is_throttled(self, topic: str, partition: int) -> bool:
        configs = self._topic_configs(topic)
        parsed = self._parsed.get(topic)
        if parsed is None or parsed[0] is not configs:
            # Topic configs are replaced, never changed in place: parse each once.
            parsed = self._parsed[topic] = (configs, throttled_partitions(
                configs.get(self.key, ""), self.broker_id))
        throttled = parsed[1]
        return throttled is ALL or partition in throttled

    def exceeded(self) -> bool:
        return self.enabled and self.rate.measure(now_ms()) > self.bound

    def record(self, value: int) -> None:
        self.rate.record(value, now_ms())

    def throttles(self, topic: str, partition: int, in_sync: bool, size: int) -> bool:
        """Whether to leave out ``size`` bytes of a replica's read of a partition: an
        out-of-sync replica's throttled partition while over the rate. Bytes read of a
        throttled partition are counted against the rate."""
        if not self.enabled or not self.is_throttled(topic, partition):
            return False
        if not in_sync and self.exceeded():
            return True
        if size:
            self.record(size)
        return False


class ReplicationQuotas:
    """The leader's and the follower's quota of this broker, their rates from the entity
    config store."""

    def __init__(self, broker_id: int, config: RateConfig,
                 topic_configs: Callable[[str], Mapping[str, str]]) -> None:
        self.broker_id = broker_id
        self.leader = ReplicaQuota(LEADER, broker_id, config, topic_configs)
        self.follower = ReplicaQuota(FOLLOWER, broker_id, config, topic_configs)

    @classmethod
    def from_config(cls, broker_id: int, values: Mapping[str, object],
                    topic_configs: Callable[[str], Mapping[str, str]]) -> ReplicationQuotas:
        window_s = values["replication.quota.window.size.seconds"]
        samples = values["replication.quota.window.num"]
        assert isinstance(window_s, int) and isinstance(samples, int)
        return cls(broker_id, RateConfig(samples, window_s * 1000), topic_configs)

    def attach(self, store: EntityConfigs) -> None:
        self._load(store)
        store.subscribe(lambda entity_type, name: self._load(store)
                        if entity_type == BROKERS else None)

    def _load(self, store: EntityConfigs) -> None:
        mine = store.get(BROKERS, str(self.broker_id))
        default = store.get(BROKERS, DEFAULT)
        for quota in (self.leader, self.follower):
            key = f"{quota.side}.replication.throttled.rate"
            value = mine.get(key, default.get(key))
            bound = float("inf")
            if value is not None:
                try:
                    bound = float(value)
                except ValueError:
                    logger.warning("ignoring %s=%r: not a number", key, value)
            if bound != quota.bound:
                logger.info("broker %d: %s = %s", self.broker_id, key, value)
                quota.bound = bound
