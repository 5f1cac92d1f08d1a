"""Which quota governs a (user, client id), and whose usage is summed with whose:
Kafka's DefaultQuotaCallback order, entity by entity."""

from __future__ import annotations

import pytest

from josefk.server.quotas.entities import (
    DEFAULT,
    MetricTags,
    QuotaEntity,
    from_store,
    metric_tags,
    quota_limit,
)
from josefk.server.quotas.manager import ClientQuotaManager, QuotaType
from josefk.server.quotas.rate import RateConfig

U, C = "alice", "app"
# Kafka's precedence, most specific first, each with a distinct bound.
ORDER = [
    (QuotaEntity(U, C), 1.0, MetricTags(U, C)),
    (QuotaEntity(U, DEFAULT), 2.0, MetricTags(U, C)),
    (QuotaEntity(U, None), 3.0, MetricTags(U, "")),
    (QuotaEntity(DEFAULT, C), 4.0, MetricTags(U, C)),
    (QuotaEntity(DEFAULT, DEFAULT), 5.0, MetricTags(U, C)),
    (QuotaEntity(DEFAULT, None), 6.0, MetricTags(U, "")),
    (QuotaEntity(None, C), 7.0, MetricTags("", C)),
    (QuotaEntity(None, DEFAULT), 8.0, MetricTags("", C)),
]


@pytest.mark.parametrize("first", range(len(ORDER)))
def test_the_most_specific_entity_with_a_quota_wins(first: int) -> None:
    quotas = {entity: bound for entity, bound, _ in ORDER[first:]}
    entity, bound, tags = ORDER[first]
    assert metric_tags(U, C, quotas.__contains__) == tags
    assert quota_limit(tags, quotas) == bound


def test_without_quotas_usage_is_kept_per_client_id_and_unbounded() -> None:
    assert metric_tags(U, C, lambda e: False) == MetricTags("", C)
    assert quota_limit(MetricTags("", C), {}) is None


def test_a_user_quota_is_shared_by_all_the_users_clients() -> None:
    quotas = {QuotaEntity(U, None): 100.0}
    assert metric_tags(U, "one", quotas.__contains__) == metric_tags(U, "two",
                                                                     quotas.__contains__)
    # Another user falls through to client quotas: there are none.
    assert quota_limit(metric_tags("bob", "one", quotas.__contains__), quotas) is None


def test_a_user_client_quota_falls_back_past_the_users_own_quota() -> None:
    # Tags (user, client) look up user+client entities only: a user's own quota
    # (no client) does not apply to them (Kafka's quotaLimit).
    quotas = {QuotaEntity(DEFAULT, DEFAULT): 5.0, QuotaEntity(U, None): 3.0}
    assert metric_tags(U, C, quotas.__contains__) == MetricTags(U, "")
    assert quota_limit(MetricTags(U, C), quotas) == 5.0


def test_store_entities_map_to_quota_entities() -> None:
    assert from_store("clients", "app") == QuotaEntity(None, "app")
    assert from_store("clients", DEFAULT) == QuotaEntity(None, DEFAULT)
    assert from_store("users", "alice") == QuotaEntity("alice", None)
    assert from_store("users", "<default>/clients/app") == QuotaEntity(DEFAULT, "app")
    assert from_store("users", "alice/clients/<default>") == QuotaEntity("alice", DEFAULT)
    assert from_store("brokers", "1") is None
    for entity in (QuotaEntity(None, "a"), QuotaEntity("u", None), QuotaEntity("u", "a")):
        assert from_store(*entity.store_key()) == entity


def test_manager_throttles_over_quota_and_bounds_the_request_quota() -> None:
    config = RateConfig(samples=11, window_ms=1000)
    produce = ClientQuotaManager(QuotaType.PRODUCE, config)
    assert produce.record(U, C, 10**9, 0) == 0  # no quota: measured, never throttled
    produce.update(QuotaEntity(None, C), 1000.0)
    assert produce.record(U, C, 5000, 0) > 0
    assert produce.max_value_in_window(U, C) == 10_000
    request = ClientQuotaManager(QuotaType.REQUEST, config, max_throttle_ms=1000)
    request.update(QuotaEntity(U, None), 1.0)
    assert request.record(U, C, 10_000, 0) == 1000
    produce.update(QuotaEntity(None, C), None)
    assert not produce.enabled and produce.record(U, C, 10**9, 0) == 0
