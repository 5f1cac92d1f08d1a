"""cluster/security/acl_znodes.py: Kafka 3.9's ACL znodes, paths and bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.cluster.security import acl_znodes as az
from josefk.cluster.security.acls import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from josefk.cluster.zk.znodes import ZnodeFormatError

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
READ_ALICE = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
DENY_BOB = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.CLUSTER_ACTION,
                              AclPermissionType.DENY)


def test_paths() -> None:
    assert az.resource_path(ResourcePattern(ResourceType.TOPIC, "t-1", LIT)) == (
        "/kafka-acl/Topic/t-1")
    assert az.resource_path(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LIT)) == (
        "/kafka-acl/Cluster/kafka-cluster")
    assert az.resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PRE)) == (
        "/kafka-acl-extended/prefixed/TransactionalId/tx")
    assert az.resource_type_path(PRE, ResourceType.DELEGATION_TOKEN) == (
        "/kafka-acl-extended/prefixed/DelegationToken")
    assert az.acl_change_path(LIT) == "/kafka-acl-changes/acl_changes_"
    assert az.acl_change_path(PRE) == "/kafka-acl-extended-changes/acl_changes_"
    for bad in (PatternType.ANY, PatternType.MATCH, PatternType.UNKNOWN):
        with pytest.raises(ValueError, match="Invalid pattern type"):
            az.acl_root(bad)
        with pytest.raises(ValueError):
            az.acl_change_root(bad)


def test_acl_paths_are_create_acl_paths() -> None:
    types = ["Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"]
    assert az.acl_paths() == (
        "/kafka-acl-extended", "/kafka-acl", *(f"/kafka-acl/{t}" for t in types),
        "/kafka-acl-extended/prefixed", *(f"/kafka-acl-extended/prefixed/{t}" for t in types),
        "/kafka-acl-changes", "/kafka-acl-extended-changes")


def test_pattern_at() -> None:
    assert az.pattern_at(PRE, "TransactionalId", "tx") == ResourcePattern(
        ResourceType.TRANSACTIONAL_ID, "tx", PRE)
    assert az.pattern_at(LIT, "TOPIC", "t") == ResourcePattern(ResourceType.TOPIC, "t", LIT)
    assert az.pattern_at(LIT, "Nonsense", "t") is None
    assert az.pattern_at(LIT, "Any", "t") is None


def test_acls_bytes_as_kafka_writes_them() -> None:
    """Java HashMap key order, compact, UTF-8 unescaped (checked against Kafka 3.9.1's
    ResourceZNode.encode in test_security_vs_kafka.py)."""
    assert az.encode_acls([READ_ALICE]) == (
        b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
        b'"operation":"Read"}],"version":1}')
    assert az.encode_acls([READ_ALICE, DENY_BOB, READ_ALICE]) == (
        b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
        b'"operation":"Read"},{"principal":"User:bob","permissionType":"Deny",'
        b'"host":"10.0.0.1","operation":"ClusterAction"}],"version":1}')
    assert az.encode_acls([]) == b'{"acls":[],"version":1}'
    odd = AccessControlEntry('User:\u00e9"\x01\\/', "h", AclOperation.IDEMPOTENT_WRITE,
                             AclPermissionType.ALLOW)
    assert az.encode_acls([odd]) == (
        '{"acls":[{"principal":"User:\u00e9\\"\\u0001\\\\/","permissionType":"Allow",'
        '"host":"h","operation":"IdempotentWrite"}],"version":1}').encode()


def test_decode_acls_reads_what_kafka_accepts() -> None:
    doc = (b'{"version": 1, "acls": [{"host": "h", "permissionType": "ALLOW",'
           b' "operation": "clusteraction", "principal": "User:x"},'
           b' {"host": "*", "permissionType": "Deny", "operation": "Fly", "principal": "G:y"}]}')
    assert az.decode_acls(doc) == (
        AccessControlEntry("User:x", "h", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW),
        AccessControlEntry("G:y", "*", AclOperation.UNKNOWN, AclPermissionType.DENY))
    # Empty data, or data Kafka's Json.parseBytes cannot parse, is no ACLs.
    assert az.decode_acls(b"") == () and az.decode_acls(b"{nope") == ()


@pytest.mark.parametrize("data", [
    b'{"version":2,"acls":[]}', b'{"version":"1","acls":[]}', b'{"acls":[]}', b"[1]",
    b'{"version":1}', b'{"version":1,"acls":{}}', b'{"version":1,"acls":[1]}',
    b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","host":"*",'
    b'"operation":"Read"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","host":1,'
    b'"operation":"Read"}]}',
])
def test_decode_acls_refuses_what_kafka_refuses(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        az.decode_acls(data)


@pytest.mark.parametrize(("pattern", "data"), [
    (ResourcePattern(ResourceType.TOPIC, "foo", LIT), b"TOPIC:foo"),
    (ResourcePattern(ResourceType.TRANSACTIONAL_ID, "a:b", LIT), b"TRANSACTIONAL_ID:a:b"),
    (ResourcePattern(ResourceType.TOPIC, "foo", PRE),
     b'{"version":1,"resourceType":"TOPIC","name":"foo","patternType":"PREFIXED"}'),
    (ResourcePattern(ResourceType.DELEGATION_TOKEN, "\u00e9", PRE),
     '{"version":1,"resourceType":"DELEGATION_TOKEN","name":"\u00e9",'
     '"patternType":"PREFIXED"}'.encode()),
])
def test_acl_change_bytes(pattern: ResourcePattern, data: bytes) -> None:
    assert az.encode_acl_change(pattern) == data
    assert az.decode_acl_change(az.acl_change_root(pattern.pattern_type), data) == pattern


def test_decode_acl_change_leniency() -> None:
    """ResourceType.fromString: any case; PatternType.fromString: exact."""
    assert az.decode_literal_acl_change(b"Topic:x") == ResourcePattern(
        ResourceType.TOPIC, "x", LIT)
    assert az.decode_literal_acl_change(b"TransactionalId:x").resource_type is (
        ResourceType.UNKNOWN)
    assert az.decode_extended_acl_change(
        b'{"version":0,"resourceType":"group","name":"g","patternType":"prefixed"}'
    ) == ResourcePattern(ResourceType.GROUP, "g", PatternType.UNKNOWN)
    with pytest.raises(ZnodeFormatError):
        az.decode_literal_acl_change(b"no-separator")
    for bad in (b'{"version":2,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}',
                b'{"version":1,"resourceType":"TOPIC","patternType":"PREFIXED"}', b"x"):
        with pytest.raises(ZnodeFormatError):
            az.decode_extended_acl_change(bad)
    with pytest.raises(ValueError):
        az.encode_acl_change(ResourcePattern(ResourceType.TOPIC, "x", PatternType.ANY))
    with pytest.raises(ValueError):
        az.decode_acl_change("/elsewhere", b"TOPIC:x")


# --- round trips -------------------------------------------------------------------------------

concrete = [t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)]
operations = [o for o in AclOperation if o is not AclOperation.ANY]
entries = st.builds(
    AccessControlEntry,
    st.builds(lambda t, n: f"{t}:{n}", st.text(max_size=5).filter(lambda t: ":" not in t),
              st.text(max_size=8)),
    st.text(max_size=8), st.sampled_from(operations),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY, AclPermissionType.UNKNOWN]))
patterns = st.builds(ResourcePattern, st.sampled_from(concrete), st.text(min_size=1, max_size=12),
                     st.sampled_from([LIT, PRE]))


@given(st.lists(entries, max_size=6))
def test_acls_round_trip(acls: list[AccessControlEntry]) -> None:
    assert az.decode_acls(az.encode_acls(acls)) == tuple(dict.fromkeys(acls))


@given(patterns)
def test_acl_change_round_trip(pattern: ResourcePattern) -> None:
    root = az.acl_change_root(pattern.pattern_type)
    assert az.decode_acl_change(root, az.encode_acl_change(pattern)) == pattern
