"""The broker's client quotas: fed from the entity config store, charged by the request path.

Produce requests are charged their record bytes against ``producer_byte_rate``,
consumers' fetches their response bytes against ``consumer_byte_rate``, and every
request but the brokers' own its handler's CPU time against ``request_percentage``
(percent of one thread, as Kafka counts it). The larger throttle time a request earns
goes into its response's throttle_time_ms and is recorded in the throttle-time metric
of the manager that imposed it; the caller mutes the connection for it (KIP-219).

One difference from Kafka: Kafka answers a consumer's fetch that earns a throttle with no
records (and takes back what it counted); here the records read go out and the next
fetch waits. The rate held is the same, and a fetch session's state never disagrees
with what its client was sent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from josefk.log.clock import now_ms
from josefk.server.quotas.entities import CLIENTS, USERS, QuotaEntity, from_store, quota_limit
from josefk.server.quotas.manager import ClientQuotaManager, QuotaType
from josefk.server.quotas.mutation import MutationBuckets, MutationQuota
from josefk.server.quotas.rate import RateConfig
from josefk.server.quotas.responses import FETCH, PRODUCE, part_length, with_throttle

logger = logging.getLogger(__name__)

#: Percent of one thread per nanosecond, per second (Kafka's NanosToPercentagePerSecond).
NANOS_TO_PERCENT = 100.0 / 1e9
# Requests brokers and the controller send each other: never throttled (Kafka answers
# them with sendResponseExemptThrottle). LeaderAndIsr, StopReplica, UpdateMetadata,
# ControlledShutdown, WriteTxnMarkers, AlterPartition, AllocateProducerIds.
EXEMPT_KEYS = frozenset({4, 5, 6, 7, 27, 56, 67})
_USER_PREFIX = "User:"


class EntityConfigs(Protocol):
    """The part of the entity config store quotas read."""

    def get(self, entity_type: str, name: str) -> Mapping[str, str]: ...

    def names(self, entity_type: str) -> list[str]: ...

    def subscribe(self, listener: Callable[[str, str], None]) -> None: ...


def user_of(principal: str) -> str:
    """The quota user of a principal: its name without the ``User:`` type."""
    return principal[len(_USER_PREFIX):] if principal.startswith(_USER_PREFIX) else principal


def follower_fetch(body: Any, version: int) -> bool:
    """A fetch from a follower broker (its replica id), not from a consumer."""
    if version < 15:
        return body.replica_id >= 0
    state = body.replica_state
    return state is not None and state.replica_id >= 0


class ClientQuotas:
    """The produce, fetch, request and controller-mutation quota managers of one broker."""

    def __init__(self, config: RateConfig) -> None:
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, config)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, config)
        # The request quota's throttle is bounded by one window (ClientRequestQuotaManager).
        self.request = ClientQuotaManager(QuotaType.REQUEST, config,
                                          max_throttle_ms=config.window_ms)
        self.mutation = ClientQuotaManager(QuotaType.CONTROLLER_MUTATION, config)
        self.managers = (self.produce, self.fetch, self.request, self.mutation)
        self.mutation_buckets = MutationBuckets()
        self.enabled = False

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> ClientQuotas:
        return cls(RateConfig(values["quota.window.num"],
                              values["quota.window.size.seconds"] * 1000))

    def attach(self, store: EntityConfigs) -> None:
        """Load every quota the store holds, and follow its changes."""
        for entity_type in (CLIENTS, USERS):
            for name in store.names(entity_type):
                self._load(store, entity_type, name)
        store.subscribe(lambda entity_type, name: self._load(store, entity_type, name))

    def _load(self, store: EntityConfigs, entity_type: str, name: str) -> None:
        entity = from_store(entity_type, name)
        if entity is None:
            return
        configs = store.get(entity_type, name)
        for manager in self.managers:
            self._update(manager, entity, configs.get(manager.type.key))
        self.enabled = any(m.enabled for m in self.managers[:3])

    @staticmethod
    def _update(manager: ClientQuotaManager, entity: QuotaEntity, value: str | None) -> None:
        bound = None
        if value is not None:
            try:
                bound = float(value)
            except ValueError:
                logger.warning("ignoring %s=%r of %s: not a number", manager.type.key, value,
                               entity)
        if manager.quotas.get(entity) != bound:
            logger.info("%s quota of %s: %s", manager.type.jmx_type, entity, bound)
        manager.update(entity, bound)

    def mutation_quota(self, principal: str, client_id: str | None, strict: bool
                       ) -> MutationQuota:
        """The controller mutation quota of one CreateTopics, CreatePartitions or
        DeleteTopics request (unbounded when its client has none)."""
        config = self.mutation.config
        if not self.mutation.enabled:
            return MutationQuota(None, None, config, strict)
        tags = self.mutation.tags(user_of(principal), client_id or "")
        bound = quota_limit(tags, self.mutation.quotas)
        bucket = None if bound is None else self.mutation_buckets.bucket(tags)
        return MutationQuota(bucket, bound, config, strict)

    async def serve(self, request: Any, principal: str,
                    handle: Callable[[], Awaitable[Any]]) -> tuple[Any, int]:
        """Run ``handle`` and charge the request's usage: its result (with the throttle
        time written in) and the throttle time in ms."""
        user, client = user_of(principal), request.client_id or ""
        api_key, version, body = request.api_key, request.api_version, request.body
        consumer = api_key == FETCH and not follower_fetch(body, version)
        if consumer and self.fetch.enabled and version >= 3:
            # One fetch may not take more than the whole window's quota (Kafka's
            # getMaxValueInQuotaWindow bounds fetch.max.bytes by it).
            limit = self.fetch.max_value_in_window(user, client)
            body.max_bytes = int(min(body.max_bytes, limit))
        charge_time = self.request.enabled and api_key not in EXEMPT_KEYS and not (
            api_key == FETCH and not consumer)
        started = time.thread_time_ns() if charge_time else 0
        result = await handle()
        now = now_ms()
        throttles: list[tuple[int, ClientQuotaManager]] = []
        if api_key == PRODUCE and self.produce.enabled:
            throttles.append((self.produce.record(user, client, _record_bytes(body), now),
                              self.produce))
        elif consumer and self.fetch.enabled and isinstance(result, list):
            size = sum(map(part_length, result))
            throttles.append((self.fetch.record(user, client, size, now), self.fetch))
        if charge_time:
            used = (time.thread_time_ns() - started) * NANOS_TO_PERCENT
            throttles.append((self.request.record(user, client, used, now), self.request))
        throttle, manager = max(throttles, default=(0, None), key=lambda t: t[0])
        own = result.get("throttle_time_ms", 0) if isinstance(result, dict) else 0
        if own >= throttle:  # the handler's own (controller mutation quota) is longer
            return result, own
        if manager is None:
            return result, 0
        manager.throttled(user, client, throttle, now)
        return with_throttle(api_key, version, result, throttle), throttle


def _record_bytes(body: Any) -> int:
    """The record bytes of a produce request (Kafka charges the request's size; the
    records are all of it but a few dozen bytes per partition)."""
    return sum(len(p.records) for t in body.topic_data for p in t.partition_data
               if p.records is not None)
