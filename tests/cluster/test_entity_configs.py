"""The entity config store (dynamic broker configs and client quotas): the single broker's
file keeps its entities across a restart; in a real ZooKeeper, what one broker's store
writes lands in Kafka 3.9's znodes with a change notification, another broker's store
follows it, and a user's SCRAM credentials in the same znode are kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from zk_harness import SessionFactory

from josefk.cluster.configs.store import LocalEntityConfigStore
from josefk.cluster.configs.zk_store import ZkEntityConfigStore, entity_of, entity_path
from josefk.cluster.metadata.zk_security_store import ZkSecurityStore
from josefk.cluster.security.credentials import ScramCredential
from josefk.cluster.zk.znodes import decode_config, decode_config_change


async def test_the_local_store_keeps_entities_across_a_restart(tmp_path: Path) -> None:
    store = LocalEntityConfigStore(tmp_path)
    changes: list[tuple[str, str]] = []
    store.subscribe(lambda kind, name: changes.append((kind, name)))
    await store.alter("clients", "app", {"producer_byte_rate": "1024"}, [])
    await store.alter("users", "alice/clients/app", {"consumer_byte_rate": "2048"}, [])
    await store.alter("brokers", "<default>", {"log.retention.ms": "1000"}, [])
    await store.alter("brokers", "<default>", {"log.retention.ms": "1000"}, [])  # no change
    await store.alter("clients", "app", {}, ["producer_byte_rate"])
    assert changes == [("clients", "app"), ("users", "alice/clients/app"),
                       ("brokers", "<default>"), ("clients", "app")]
    reopened = LocalEntityConfigStore(tmp_path)
    assert reopened.names("clients") == []
    assert reopened.get("users", "alice/clients/app") == {"consumer_byte_rate": "2048"}
    assert reopened.get("brokers", "<default>") == {"log.retention.ms": "1000"}
    with pytest.raises(ValueError, match="unknown entity type"):
        reopened.get("topics", "t")


def test_a_damaged_local_file_is_refused_with_its_name(tmp_path: Path) -> None:
    (tmp_path / "entity-configs.json").write_text('{"clients": [1, 2]}')
    with pytest.raises(ValueError, match="entity-configs.json"):
        LocalEntityConfigStore(tmp_path)


def test_entity_paths_are_sanitized_as_kafkas() -> None:
    assert entity_path("clients", "a b*") == "clients/a%20b%2A"
    assert entity_path("users", "<default>/clients/x y") == "users/<default>/clients/x%20y"
    assert entity_path("brokers", "<default>") == "brokers/<default>"
    assert entity_of("users/al%2Fice/clients/a%20b") == ("users", "al/ice/clients/a b")
    with pytest.raises(ValueError):
        entity_of("topics/t")
    with pytest.raises(ValueError):
        entity_of("clients/a/b")


async def _last_notification(store: ZkEntityConfigStore) -> str:
    children = sorted(await store.zk.get_children("/config/changes"))
    data, _ = await store.zk.get(f"/config/changes/{children[-1]}")
    return decode_config_change(data)


async def test_another_broker_follows_the_notifications(zk_session: SessionFactory) -> None:
    one, other = ZkEntityConfigStore(await zk_session()), ZkEntityConfigStore(await zk_session())
    await one.load()
    await other.load()
    seen: list[tuple[str, str]] = []
    other.subscribe(lambda kind, name: seen.append((kind, name)))
    await one.alter("users", "bob/clients/a b", {"producer_byte_rate": "10"}, [])
    path = await _last_notification(one)
    assert path == "users/bob/clients/a%20b"
    data, _ = await one.zk.get("/config/users/bob/clients/a%20b")
    assert decode_config(data) == {"producer_byte_rate": "10"}
    await other.on_change(path)  # what its config-change listener does
    assert other.get("users", "bob/clients/a b") == {"producer_byte_rate": "10"}
    await one.alter("brokers", "<default>", {"log.cleaner.threads": "2"}, [])
    await other.on_change(await _last_notification(one))
    assert seen == [("users", "bob/clients/a b"), ("brokers", "<default>")]
    late = ZkEntityConfigStore(await zk_session())
    await late.load()
    assert late.names("users") == ["bob/clients/a b"]
    assert late.get("brokers", "<default>") == {"log.cleaner.threads": "2"}


async def test_a_users_scram_credentials_are_kept(zk_session: SessionFactory) -> None:
    zk = await zk_session()
    security, configs = ZkSecurityStore(zk), ZkEntityConfigStore(zk)
    await security.load(acl_paths=False)
    credential = ScramCredential(b"salt", b"s" * 32, b"k" * 32, 4096)
    await security.alter_scram([("alice", "SCRAM-SHA-256", credential)], [])
    await configs.alter("users", "alice", {"request_percentage": "50"}, [])
    data, _ = await zk.get("/config/users/alice")
    assert decode_config(data) == {"SCRAM-SHA-256": credential.to_kafka_string(),
                                   "request_percentage": "50"}
    await security.reload_user("alice")
    assert security.scram_credential("SCRAM-SHA-256", "alice") == credential
