"""cluster/security/acls.py: Kafka's ACL enums, bindings, filters and CreateAcls checks."""

from __future__ import annotations

import pytest

from josefk.cluster.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    MalformedAclRequest,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    check_acl_filter,
    check_create_acls_request,
    create_acls_errors,
    parse_principal,
)
from josefk.protocol.error_codes import INVALID_REQUEST, SECURITY_DISABLED, UNKNOWN_SERVER_ERROR

LIT, PRE, ANY_PT, MATCH = (PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY,
                           PatternType.MATCH)
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE = AclOperation.READ, AclOperation.WRITE


def test_wire_codes_are_kafkas() -> None:
    assert {t.name: t.value for t in ResourceType} == {
        "UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5,
        "DELEGATION_TOKEN": 6, "USER": 7}
    assert {t.name: t.value for t in PatternType} == {
        "UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
    assert [(o.name, o.value) for o in AclOperation] == [
        ("UNKNOWN", 0), ("ANY", 1), ("ALL", 2), ("READ", 3), ("WRITE", 4), ("CREATE", 5),
        ("DELETE", 6), ("ALTER", 7), ("DESCRIBE", 8), ("CLUSTER_ACTION", 9),
        ("DESCRIBE_CONFIGS", 10), ("ALTER_CONFIGS", 11), ("IDEMPOTENT_WRITE", 12),
        ("CREATE_TOKENS", 13), ("DESCRIBE_TOKENS", 14)]
    assert {p.name: p.value for p in AclPermissionType} == {
        "UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
    assert SECURITY_DISABLED == 54


def test_unknown_codes_read_as_unknown() -> None:
    assert ResourceType.from_code(99) is ResourceType.UNKNOWN
    assert PatternType.from_code(-1) is PatternType.UNKNOWN
    assert AclOperation.from_code(15) is AclOperation.UNKNOWN
    assert AclPermissionType.from_code(4) is AclPermissionType.UNKNOWN
    assert AclOperation.from_code(12) is AclOperation.IDEMPOTENT_WRITE


def test_pascal_names() -> None:
    """SecurityUtils.operationName and friends."""
    assert [o.pascal_name for o in AclOperation][2:] == [
        "All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
        "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens"]
    assert [t.pascal_name for t in ResourceType][2:] == [
        "Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"]
    assert (ALLOW.pascal_name, DENY.pascal_name) == ("Allow", "Deny")


@pytest.mark.parametrize(("name", "expected"), [
    ("ClusterAction", AclOperation.CLUSTER_ACTION), ("CLUSTERACTION", AclOperation.CLUSTER_ACTION),
    ("clusteraction", AclOperation.CLUSTER_ACTION), ("CLUSTER_ACTION", AclOperation.UNKNOWN),
    ("Read", READ), ("read", READ), ("Reed", AclOperation.UNKNOWN), ("All", AclOperation.ALL)])
def test_names_read_as_security_utils_does(name: str, expected: AclOperation) -> None:
    assert AclOperation.from_pascal_name(name) is expected


def test_from_string() -> None:
    assert ResourceType.from_string("Topic") is TOPIC
    assert ResourceType.from_string("transactional_id") is ResourceType.TRANSACTIONAL_ID
    assert ResourceType.from_string("TransactionalId") is ResourceType.UNKNOWN
    assert PatternType.from_string("PREFIXED") is PRE
    assert PatternType.from_string("prefixed") is PatternType.UNKNOWN


def test_parse_principal() -> None:
    assert parse_principal("User:alice") == ("User", "alice")
    assert parse_principal("User:a:b") == ("User", "a:b")
    assert parse_principal("User:") == ("User", "")
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_principal("alice")


# --- filters -----------------------------------------------------------------------------

FOO = ResourcePattern(TOPIC, "foo", LIT)
STAR = ResourcePattern(TOPIC, "*", LIT)
FO_PREFIX = ResourcePattern(TOPIC, "fo", PRE)
FOO_PREFIX = ResourcePattern(TOPIC, "foo", PRE)
BAR = ResourcePattern(TOPIC, "bar", LIT)
FOO_GROUP = ResourcePattern(GROUP, "foo", LIT)


@pytest.mark.parametrize(("pattern_filter", "matched"), [
    (ResourcePatternFilter(), {FOO, STAR, FO_PREFIX, FOO_PREFIX, BAR, FOO_GROUP}),
    (ResourcePatternFilter(TOPIC), {FOO, STAR, FO_PREFIX, FOO_PREFIX, BAR}),
    (ResourcePatternFilter(TOPIC, None, PRE), {FO_PREFIX, FOO_PREFIX}),
    # ANY: the exact name, whatever the pattern type; `*` is only itself.
    (ResourcePatternFilter(TOPIC, "foo", ANY_PT), {FOO, FOO_PREFIX}),
    (ResourcePatternFilter(ResourceType.ANY, "foo", ANY_PT), {FOO, FOO_PREFIX, FOO_GROUP}),
    (ResourcePatternFilter(TOPIC, "*", LIT), {STAR}),
    (ResourcePatternFilter(TOPIC, "foo", LIT), {FOO}),
    (ResourcePatternFilter(TOPIC, "fo", PRE), {FO_PREFIX}),
    # MATCH: every pattern that applies to the literal name.
    (ResourcePatternFilter(TOPIC, "foo", MATCH), {FOO, STAR, FO_PREFIX, FOO_PREFIX}),
    (ResourcePatternFilter(TOPIC, "food", MATCH), {STAR, FO_PREFIX, FOO_PREFIX}),
    (ResourcePatternFilter(TOPIC, "f", MATCH), {STAR}),
    (ResourcePatternFilter(TOPIC, None, MATCH), {FOO, STAR, FO_PREFIX, FOO_PREFIX, BAR}),
])
def test_resource_pattern_filter(pattern_filter: ResourcePatternFilter,
                                 matched: set[ResourcePattern]) -> None:
    every = [FOO, STAR, FO_PREFIX, FOO_PREFIX, BAR, FOO_GROUP]
    assert {p for p in every if pattern_filter.matches(p)} == matched


ENTRY = AccessControlEntry("User:alice", "10.0.0.1", READ, ALLOW)


@pytest.mark.parametrize(("entry_filter", "matches"), [
    (AccessControlEntryFilter(), True),
    (AccessControlEntryFilter("User:alice"), True),
    (AccessControlEntryFilter("User:bob"), False),
    # No wildcard semantics in filters: `User:*` and `*` are values like any other.
    (AccessControlEntryFilter("User:*"), False),
    (AccessControlEntryFilter(None, "*"), False),
    (AccessControlEntryFilter(None, "10.0.0.1", READ, ALLOW), True),
    (AccessControlEntryFilter(operation=WRITE), False),
    (AccessControlEntryFilter(operation=AclOperation.ALL), False),
    (AccessControlEntryFilter(permission=DENY), False),
])
def test_entry_filter(entry_filter: AccessControlEntryFilter, matches: bool) -> None:
    assert entry_filter.matches(ENTRY) is matches
    assert AclBindingFilter(ResourcePatternFilter(), entry_filter).matches(
        AclBinding(FOO, ENTRY)) is matches


def test_indefinite_fields() -> None:
    assert AclBindingFilter().find_indefinite_field() == "Resource type is ANY."
    exact = AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", LIT),
                             AccessControlEntryFilter("User:a", "*", READ, ALLOW))
    assert exact.matches_at_most_one()
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", MATCH), exact.entry)
    assert match.find_indefinite_field() == "Resource pattern type is MATCH."
    assert AclBindingFilter(exact.pattern, AccessControlEntryFilter(
        "User:a", "*", AclOperation.ANY, ALLOW)).find_indefinite_field() == "Operation is ANY"
    assert AclBindingFilter(exact.pattern, AccessControlEntryFilter(
        "User:a", None, READ, ALLOW)).find_indefinite_field() == "Host is NULL"


# --- request checks ----------------------------------------------------------------------


def binding(resource_type: ResourceType = TOPIC, name: str = "foo", pattern: PatternType = LIT,
            principal: str = "User:alice", operation: AclOperation = READ,
            permission: AclPermissionType = ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, "*", operation, permission))


def test_create_request_parse_checks() -> None:
    check_create_acls_request([binding(), binding(pattern=PRE)], 1)
    with pytest.raises(MalformedAclRequest, match="Version 0"):
        check_create_acls_request([binding(pattern=PRE)], 0)
    for bad in (binding(ResourceType.UNKNOWN), binding(pattern=PatternType.UNKNOWN),
                binding(operation=AclOperation.UNKNOWN),
                binding(permission=AclPermissionType.UNKNOWN)):
        with pytest.raises(MalformedAclRequest, match="unknown elements"):
            check_create_acls_request([binding(), bad], 3)


def test_filter_parse_checks() -> None:
    v0 = check_acl_filter(AclBindingFilter(), 0)
    assert v0.pattern.pattern_type is LIT and v0.entry == AclBindingFilter().entry
    assert check_acl_filter(AclBindingFilter(), 1) == AclBindingFilter()
    with pytest.raises(MalformedAclRequest):
        check_acl_filter(AclBindingFilter(ResourcePatternFilter(pattern_type=MATCH)), 0)
    with pytest.raises(MalformedAclRequest):
        check_acl_filter(AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN)), 2)


INVALID_CLUSTER = AclError(INVALID_REQUEST,
                           "The only valid name for the CLUSTER resource is kafka-cluster")


@pytest.mark.parametrize(("creation", "error"), [
    (binding(), None),
    (binding(pattern=PRE, name="fo"), None),
    (binding(name="*"), None),
    (binding(CLUSTER, "kafka-cluster", operation=AclOperation.CLUSTER_ACTION), None),
    (binding(CLUSTER, "other"), INVALID_CLUSTER),
    (binding(CLUSTER, "kafka-cluster", PRE), None),
    (binding(name=""), AclError(INVALID_REQUEST, "Invalid empty resource name")),
    (binding(CLUSTER, ""), INVALID_CLUSTER),
    (binding(name="a/b"), AclError(INVALID_REQUEST, "Failed to create ACL")),
    (binding(principal="alice"), AclError(UNKNOWN_SERVER_ERROR, None)),
    (binding(principal="User:"), None),
    (binding(operation=AclOperation.ALL, permission=DENY), None),
])
def test_create_acls_errors(creation: AclBinding, error: AclError | None) -> None:
    assert create_acls_errors([creation]) == [error]


@pytest.mark.parametrize("filter_only", [
    binding(ResourceType.ANY), binding(pattern=ANY_PT), binding(pattern=MATCH),
    binding(operation=AclOperation.ANY), binding(permission=AclPermissionType.ANY)])
def test_filter_only_values_fail_the_whole_request(filter_only: AclBinding) -> None:
    """Kafka's ResourcePattern/AccessControlEntry constructors throw while the handler
    builds the bindings: every creation answers UNKNOWN_SERVER_ERROR."""
    assert create_acls_errors([binding(), filter_only, binding(GROUP)]) == [
        AclError(UNKNOWN_SERVER_ERROR, None)] * 3


def test_bad_principal_fails_its_resource_pattern_only() -> None:
    creations = [binding(), binding(principal="bob"), binding(operation=WRITE),
                 binding(name="other"), binding(CLUSTER, "x", principal="bob")]
    assert create_acls_errors(creations) == [
        AclError(UNKNOWN_SERVER_ERROR, None), AclError(UNKNOWN_SERVER_ERROR, None),
        AclError(UNKNOWN_SERVER_ERROR, None), None, INVALID_CLUSTER]
