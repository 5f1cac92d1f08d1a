"""ClientQuotas and ReplicationQuotas follow the entity config store (the single
broker's, in a temporary log dir), and charge requests by quota type."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from josefk.cluster.configs.store import LocalEntityConfigStore
from josefk.server.quotas.entities import DEFAULT, QuotaEntity
from josefk.server.quotas.rate import RateConfig
from josefk.server.quotas.replication import ALL, ReplicationQuotas, throttled_partitions
from josefk.server.quotas.service import ClientQuotas, follower_fetch, user_of

CONFIG = RateConfig(11, 1000)


def _produce(client: str, size: int) -> Any:
    partition = SimpleNamespace(records=b"x" * size)
    body = SimpleNamespace(topic_data=[SimpleNamespace(partition_data=[partition])])
    return SimpleNamespace(api_key=0, api_version=9, client_id=client, body=body)


async def test_quotas_follow_the_store(tmp_path: Path) -> None:
    store = LocalEntityConfigStore(tmp_path)
    await store.alter("users", "alice", {"producer_byte_rate": "1000"}, ())
    await store.alter("users", "alice", {"SCRAM-SHA-256": "not a quota"}, ())
    quotas = ClientQuotas(CONFIG)
    quotas.attach(store)
    assert quotas.enabled and quotas.produce.quotas == {QuotaEntity("alice", None): 1000.0}
    await store.alter("users", f"{DEFAULT}/clients/app", {"consumer_byte_rate": "5",
                                                          "request_percentage": "2.5"}, ())
    assert quotas.fetch.quotas == {QuotaEntity(DEFAULT, "app"): 5.0}
    assert quotas.request.quotas == {QuotaEntity(DEFAULT, "app"): 2.5}
    await store.alter("users", "alice", {}, ["producer_byte_rate"])
    assert quotas.produce.quotas == {}


async def test_a_produce_over_quota_answers_its_throttle_time(tmp_path: Path) -> None:
    store = LocalEntityConfigStore(tmp_path)
    await store.alter("clients", "app", {"producer_byte_rate": "1000"}, ())
    quotas = ClientQuotas(CONFIG)
    quotas.attach(store)

    async def handle() -> dict[str, int]:
        return {"throttle_time_ms": 0}
    result, throttle = await quotas.serve(_produce("app", 100), "User:ANONYMOUS", handle)
    assert (result, throttle) == ({"throttle_time_ms": 0}, 0)
    result, throttle = await quotas.serve(_produce("app", 20_000), "User:ANONYMOUS", handle)
    # 20,100 bytes over a 10 s span against 1000/s: (2010 - 1000) / 1000 × 10 s (the span
    # is a few ms longer if the clock moved between the two).
    assert 10_000 < throttle <= 10_100 and result == {"throttle_time_ms": throttle}
    result, throttle = await quotas.serve(_produce("other", 20_000), "User:ANONYMOUS", handle)
    assert throttle == 0


def test_principals_and_followers() -> None:
    assert user_of("User:alice") == "alice" and user_of("User:ANONYMOUS") == "ANONYMOUS"
    assert follower_fetch(SimpleNamespace(replica_id=2), 12)
    assert not follower_fetch(SimpleNamespace(replica_id=-1), 12)
    assert not follower_fetch(SimpleNamespace(replica_state=None), 15)
    assert follower_fetch(SimpleNamespace(replica_state=SimpleNamespace(replica_id=1)), 15)


def test_throttled_replicas_parse_as_kafka() -> None:
    assert throttled_partitions("*", 1) is ALL
    assert throttled_partitions("0:1, 1:2 ,2:1", 1) == {0, 2}
    assert throttled_partitions("", 1) == frozenset()


async def test_replication_rates_come_from_the_brokers_entities(tmp_path: Path) -> None:
    store = LocalEntityConfigStore(tmp_path)
    topics = {"t": {"leader.replication.throttled.replicas": "0:1,1:2"}}
    quotas = ReplicationQuotas(1, CONFIG, lambda name: topics.get(name, {}))
    quotas.attach(store)
    assert not quotas.leader.enabled
    assert not quotas.leader.throttles("t", 0, in_sync=False, size=10**9)
    await store.alter("brokers", DEFAULT, {"leader.replication.throttled.rate": "100",
                                           "follower.replication.throttled.rate": "7"}, ())
    await store.alter("brokers", "1", {"leader.replication.throttled.rate": "1000"}, ())
    assert (quotas.leader.bound, quotas.follower.bound) == (1000.0, 7.0)
    assert quotas.leader.is_throttled("t", 0) and not quotas.leader.is_throttled("t", 1)
    assert not quotas.leader.is_throttled("other", 0)
    # Within the rate the bytes are counted; over it an out-of-sync replica gets none.
    assert not quotas.leader.throttles("t", 0, in_sync=False, size=50_000)
    assert quotas.leader.throttles("t", 0, in_sync=False, size=10)
    assert not quotas.leader.throttles("t", 0, in_sync=True, size=10)
    assert not quotas.leader.throttles("t", 1, in_sync=False, size=10)
    # A changed topic config is read anew.
    topics["t"] = {"leader.replication.throttled.replicas": "*"}
    assert quotas.leader.is_throttled("t", 1)
