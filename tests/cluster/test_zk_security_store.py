"""SCRAM credentials and ACLs in a real ZooKeeper (Kafka 3.9's layout): what one store
writes, another store (another broker) sees after the change notification; conditional
ACL writes; the local file store keeps the same data across a restart."""

from __future__ import annotations

from pathlib import Path

import trio
from zk_harness import SessionFactory, wait_for

from josefk.cluster.metadata.security_store import LocalSecurityStore
from josefk.cluster.metadata.zk_security_store import ZkSecurityStore
from josefk.cluster.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from josefk.cluster.security.credentials import ScramCredential
from josefk.cluster.zk.znodes import decode_config

CRED = ScramCredential(b"salt", b"s" * 32, b"k" * 32, 4096)
READ_FOO = AclBinding(ResourcePattern(ResourceType.TOPIC, "foo", PatternType.LITERAL),
                      AccessControlEntry("User:alice", "*", AclOperation.READ,
                                         AclPermissionType.ALLOW))
WRITE_BAR = AclBinding(ResourcePattern(ResourceType.TOPIC, "bar-", PatternType.PREFIXED),
                       AccessControlEntry("User:bob", "*", AclOperation.WRITE,
                                          AclPermissionType.ALLOW))
ANY = AclBindingFilter(ResourcePatternFilter(), AccessControlEntryFilter())


async def test_credentials_reach_the_other_broker(zk_session: SessionFactory) -> None:
    one, other = ZkSecurityStore(await zk_session()), ZkSecurityStore(await zk_session())
    await one.load(acl_paths=True)
    await other.load(acl_paths=True)
    await one.alter_scram([("alice", "SCRAM-SHA-512", CRED)], [])
    data, _ = await one.zk.get("/config/users/alice")
    assert decode_config(data) == {"SCRAM-SHA-512": CRED.to_kafka_string()}
    assert one.scram_credential("SCRAM-SHA-512", "alice") == CRED
    await other.reload_sanitized_user("alice")  # what its config-change listener does
    assert other.scram_credential("SCRAM-SHA-512", "alice") == CRED
    await one.alter_scram([], [("alice", "SCRAM-SHA-512")])
    await other.reload_sanitized_user("alice")
    assert other.scram_credential("SCRAM-SHA-512", "alice") is None
    late = ZkSecurityStore(await zk_session())
    await late.load(acl_paths=False)
    assert late.users == {}


async def test_acls_reach_the_other_broker_through_notifications(
        zk_session: SessionFactory) -> None:
    one, other = ZkSecurityStore(await zk_session()), ZkSecurityStore(await zk_session())
    await one.load(acl_paths=True)
    await other.load(acl_paths=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(other.watch_acl_changes)
        await trio.sleep(0.5)  # its first pass marks what is there
        await one.create_acls([READ_FOO, WRITE_BAR])
        await wait_for(lambda: set(other.acls.bindings()) == {READ_FOO, WRITE_BAR})
        children = await one.zk.get_children("/kafka-acl-changes")
        assert children and all(c.startswith("acl_changes_") for c in children)
        removed = await one.delete_acls([ANY])
        assert set(removed[0]) == {READ_FOO, WRITE_BAR}
        await wait_for(lambda: not list(other.acls.bindings()))
        assert await one.zk.exists("/kafka-acl/Topic/foo") is None
        nursery.cancel_scope.cancel()
    fresh = ZkSecurityStore(await zk_session())
    await fresh.load(acl_paths=True)
    assert not list(fresh.acls.bindings())


async def test_concurrent_acl_writes_lose_nothing(zk_session: SessionFactory) -> None:
    stores = [ZkSecurityStore(await zk_session()) for _ in range(3)]
    for s in stores:
        await s.load(acl_paths=True)
    entries = [AclBinding(READ_FOO.pattern, AccessControlEntry(
        f"User:u{i}", "*", AclOperation.READ, AclPermissionType.ALLOW)) for i in range(9)]
    async with trio.open_nursery() as nursery:
        for i, binding in enumerate(entries):
            nursery.start_soon(stores[i % 3].create_acls, [binding])
    check = ZkSecurityStore(await zk_session())
    await check.load(acl_paths=True)
    assert set(check.acls.bindings()) == set(entries)


async def test_local_store_survives_a_restart(tmp_path: Path) -> None:
    store = LocalSecurityStore(tmp_path)
    await store.alter_scram([("alice", "SCRAM-SHA-256", CRED)], [])
    await store.create_acls([READ_FOO, WRITE_BAR])
    assert (tmp_path / "__josefk_security.json").stat().st_mode & 0o777 == 0o600
    again = LocalSecurityStore(tmp_path)
    assert again.scram_credential("SCRAM-SHA-256", "alice") == CRED
    assert set(again.acls.bindings()) == {READ_FOO, WRITE_BAR}
    assert (await again.delete_acls([ANY]))[0]
    assert not list(LocalSecurityStore(tmp_path).acls.bindings())
