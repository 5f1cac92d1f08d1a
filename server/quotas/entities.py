"""Quota entities and Kafka's precedence among them (``DefaultQuotaCallback``).

An entity is a (user, client id) pair where either may be absent (None) or the default
(``DEFAULT``). A client's usage is measured under metric tags chosen by the most
specific entity that has a quota; the quota for those tags is then looked up in
Kafka's order: user+client, user+default client, default user+client, default
user+default client; user, default user; client, default client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

#: The default entity's name, as ZooKeeper keeps it (Kafka's ``ZooKeeperInternals``).
DEFAULT = "<default>"
#: The entity types of the config store that hold client quotas.
USERS, CLIENTS = "users", "clients"
_USER_CLIENT = "/clients/"


class QuotaEntity(NamedTuple):
    """A user, a client id, or both; ``DEFAULT`` for a default, None where absent."""

    user: str | None
    client: str | None

    def store_key(self) -> tuple[str, str]:
        """The (entity type, name) the config store keeps this entity under."""
        if self.user is None:
            assert self.client is not None
            return CLIENTS, self.client
        if self.client is None:
            return USERS, self.user
        return USERS, f"{self.user}{_USER_CLIENT}{self.client}"


def from_store(entity_type: str, name: str) -> QuotaEntity | None:
    """The quota entity of a config-store entity; None for other entity types."""
    if entity_type == CLIENTS:
        return QuotaEntity(None, name)
    if entity_type != USERS:
        return None
    user, sep, client = name.partition(_USER_CLIENT)
    return QuotaEntity(user, client) if sep else QuotaEntity(name, None)


class MetricTags(NamedTuple):
    """Whose usage is summed together: "" where the quota does not distinguish."""

    user: str
    client: str


def metric_tags(user: str, client: str, has: Callable[[QuotaEntity], bool]) -> MetricTags:
    """The tags ``user`` and ``client`` are measured under, given which entities have a
    quota (``has``): Kafka's ``quotaMetricTags``."""
    both = MetricTags(user, client)
    if (has(QuotaEntity(user, client)) or has(QuotaEntity(user, DEFAULT))):
        return both
    if has(QuotaEntity(user, None)):
        return MetricTags(user, "")
    if has(QuotaEntity(DEFAULT, client)) or has(QuotaEntity(DEFAULT, DEFAULT)):
        return both
    if has(QuotaEntity(DEFAULT, None)):
        return MetricTags(user, "")
    return MetricTags("", client)


def quota_limit(tags: MetricTags, quotas: Mapping[QuotaEntity, float]) -> float | None:
    """The bound for usage measured under ``tags`` (Kafka's ``quotaLimit``); None: none."""
    user, client = tags
    if user and client:
        order = [QuotaEntity(user, client), QuotaEntity(user, DEFAULT),
                 QuotaEntity(DEFAULT, client), QuotaEntity(DEFAULT, DEFAULT)]
    elif user:
        order = [QuotaEntity(user, None), QuotaEntity(DEFAULT, None)]
    elif client:
        order = [QuotaEntity(None, client), QuotaEntity(None, DEFAULT)]
    else:
        return None
    return next((quotas[e] for e in order if e in quotas), None)
