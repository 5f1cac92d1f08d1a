"""cluster/security/authorizer.py: Kafka 3.9 AclAuthorizer semantics over AclCache."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
from josefk.cluster.security.authorizer import (
    AclCache,
    authorize,
    authorize_by_resource_type,
)

Op = AclOperation
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB, SUPER = "User:alice", "User:bob", "User:superuser1"
HOST, OTHER_HOST = "192.168.0.1", "192.168.0.2"
CONCRETE_OPS = [o for o in Op if o not in (Op.UNKNOWN, Op.ANY)]


def acl(name: str = "foo", permission: AclPermissionType = ALLOW, operation: Op = Op.READ,
        principal: str = ALICE, host: str = "*", pattern: PatternType = LIT,
        resource_type: ResourceType = TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


def check(bindings: list[AclBinding], operation: Op = Op.READ, name: str = "foo",
          principal: str = ALICE, host: str = HOST, *, allow_everyone: bool = False,
          resource_type: ResourceType = TOPIC) -> bool:
    return authorize(AclCache(bindings), principal, host, operation, resource_type, name,
                     super_users=frozenset({SUPER}), allow_everyone_if_no_acl_found=allow_everyone)


AUTHORIZE_CASES = [
    # (id, ACLs, operation, resource name, principal, host, allowed)
    ("no-acls", [], Op.READ, "foo", ALICE, HOST, False),
    ("allow", [acl()], Op.READ, "foo", ALICE, HOST, True),
    ("allow-other-op", [acl(operation=Op.WRITE)], Op.READ, "foo", ALICE, HOST, False),
    ("allow-other-principal", [acl(principal=BOB)], Op.READ, "foo", ALICE, HOST, False),
    ("allow-other-resource", [acl("bar")], Op.READ, "foo", ALICE, HOST, False),
    ("allow-other-type", [acl(resource_type=GROUP)], Op.READ, "foo", ALICE, HOST, False),
    ("deny-over-allow", [acl(), acl(permission=DENY)], Op.READ, "foo", ALICE, HOST, False),
    ("deny-alone", [acl(permission=DENY)], Op.READ, "foo", ALICE, HOST, False),
    ("deny-other-op", [acl(), acl(permission=DENY, operation=Op.WRITE)],
     Op.READ, "foo", ALICE, HOST, True),
    ("deny-other-principal", [acl(), acl(permission=DENY, principal=BOB)],
     Op.READ, "foo", ALICE, HOST, True),
    # Principals: exact, or the wildcard User:* (only the User type has a wildcard).
    ("user-wildcard-allow", [acl(principal="User:*")], Op.READ, "foo", ALICE, HOST, True),
    ("user-wildcard-deny", [acl(), acl(permission=DENY, principal="User:*")],
     Op.READ, "foo", ALICE, HOST, False),
    ("group-wildcard-is-no-wildcard", [acl(principal="Group:*")],
     Op.READ, "foo", "Group:g", HOST, False),
    ("user-wildcard-for-other-type", [acl(principal="User:*")],
     Op.READ, "foo", "Group:g", HOST, True),
    ("principal-type-matters", [acl(principal="Group:alice")], Op.READ, "foo", ALICE, HOST, False),
    # Hosts: exact, or *.
    ("host-exact", [acl(host=HOST)], Op.READ, "foo", ALICE, HOST, True),
    ("host-other", [acl(host=OTHER_HOST)], Op.READ, "foo", ALICE, HOST, False),
    ("host-deny-exact", [acl(), acl(permission=DENY, host=HOST)],
     Op.READ, "foo", ALICE, HOST, False),
    ("host-deny-other", [acl(), acl(permission=DENY, host=OTHER_HOST)],
     Op.READ, "foo", ALICE, HOST, True),
    # Wildcard resource and prefixes.
    ("wildcard-resource", [acl("*")], Op.READ, "anything", ALICE, HOST, True),
    ("wildcard-deny", [acl(), acl("*", DENY)], Op.READ, "foo", ALICE, HOST, False),
    ("star-in-name-is-literal", [acl("fo*")], Op.READ, "foo", ALICE, HOST, False),
    ("prefixed", [acl("fo", pattern=PRE)], Op.READ, "foo", ALICE, HOST, True),
    ("prefixed-whole-name", [acl("foo", pattern=PRE)], Op.READ, "foo", ALICE, HOST, True),
    ("prefixed-longer", [acl("food", pattern=PRE)], Op.READ, "foo", ALICE, HOST, False),
    ("prefixed-not-a-prefix", [acl("oo", pattern=PRE)], Op.READ, "foo", ALICE, HOST, False),
    ("prefixed-star-is-literal-prefix", [acl("*", pattern=PRE)], Op.READ, "foo", ALICE, HOST,
     False),
    ("prefixed-deny-over-literal-allow", [acl(), acl("f", DENY, pattern=PRE)],
     Op.READ, "foo", ALICE, HOST, False),
    ("literal-deny-over-prefixed-allow", [acl("f", pattern=PRE), acl(permission=DENY)],
     Op.READ, "foo", ALICE, HOST, False),
    ("prefixed-other-type", [acl("f", pattern=PRE, resource_type=GROUP)],
     Op.READ, "foo", ALICE, HOST, False),
    # ALL.
    ("allow-all", [acl(operation=Op.ALL)], Op.CLUSTER_ACTION, "foo", ALICE, HOST, True),
    ("deny-all", [acl(operation=Op.ALL), acl(permission=DENY, operation=Op.ALL)],
     Op.DESCRIBE, "foo", ALICE, HOST, False),
    ("deny-all-over-allow-read", [acl(), acl(permission=DENY, operation=Op.ALL)],
     Op.READ, "foo", ALICE, HOST, False),
    # Implications work for ALLOW only.
    ("deny-describe-keeps-read", [acl(), acl(permission=DENY, operation=Op.DESCRIBE)],
     Op.READ, "foo", ALICE, HOST, True),
    ("deny-read-keeps-describe-by-write",
     [acl(operation=Op.WRITE), acl(permission=DENY, operation=Op.READ)],
     Op.DESCRIBE, "foo", ALICE, HOST, True),
    ("deny-describe-denies-implied-describe",
     [acl(), acl(permission=DENY, operation=Op.DESCRIBE)], Op.DESCRIBE, "foo", ALICE, HOST,
     False),
    # ACLs of someone else still count as "ACLs found" for the resource.
    ("others-acls-block-allow-everyone", [acl(principal=BOB)], Op.READ, "foo", ALICE, HOST,
     False),
    ("super-user", [acl(permission=DENY, principal="User:*", operation=Op.ALL)],
     Op.ALTER, "foo", SUPER, HOST, True),
]


@pytest.mark.parametrize(("acls", "operation", "name", "principal", "host", "allowed"),
                         [c[1:] for c in AUTHORIZE_CASES], ids=[c[0] for c in AUTHORIZE_CASES])
def test_authorize(acls: list[AclBinding], operation: Op, name: str, principal: str,
                   host: str, allowed: bool) -> None:
    assert check(acls, operation, name, principal, host) is allowed
    # allow.everyone.if.no.acl.found matters only when no ACL at all applies to the resource.
    found = AclCache(acls).applicable(TOPIC, name)
    assert check(acls, operation, name, principal, host, allow_everyone=True) is (
        allowed or not found)


def _implies(granted: Op, requested: Op) -> bool:
    """Kafka's table (AclOperation's javadoc, AclAuthorizer.allowAclExists)."""
    return (granted in (requested, Op.ALL)
            or (requested is Op.DESCRIBE
                and granted in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
            or (requested is Op.DESCRIBE_CONFIGS and granted is Op.ALTER_CONFIGS))


@pytest.mark.parametrize(("granted", "requested"), list(itertools.product(CONCRETE_OPS, repeat=2)),
                         ids=lambda o: o.name)
def test_implied_operations(granted: Op, requested: Op) -> None:
    assert check([acl(operation=granted)], requested) is _implies(granted, requested)


@pytest.mark.parametrize(("denied", "requested"), list(itertools.product(CONCRETE_OPS, repeat=2)),
                         ids=lambda o: o.name)
def test_deny_implies_nothing_but_all(denied: Op, requested: Op) -> None:
    bindings = [acl(operation=Op.ALL), acl(permission=DENY, operation=denied)]
    assert check(bindings, requested) is (denied not in (requested, Op.ALL))


def test_explicit_implications() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert check([acl(operation=op)], Op.DESCRIBE)
        assert not check([acl(operation=Op.DESCRIBE)], op)
    assert check([acl(operation=Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not check([acl(operation=Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS)
    assert not check([acl(operation=Op.ALTER_CONFIGS)], Op.DESCRIBE)
    assert not check([acl(operation=Op.ALTER)], Op.DESCRIBE_CONFIGS)


@pytest.mark.parametrize("allow_everyone", [False, True])
def test_allow_everyone_if_no_acl_found(allow_everyone: bool) -> None:
    assert check([], allow_everyone=allow_everyone) is allow_everyone
    # ACLs on other resources, or prefixes that do not apply, are no ACLs for "foo".
    unrelated = [acl("bar"), acl("food", pattern=PRE), acl("*", resource_type=GROUP)]
    assert check(unrelated, allow_everyone=allow_everyone) is allow_everyone
    assert check([], principal=SUPER) and check([acl(permission=DENY)], principal=SUPER)


# --- authorizeByResourceType (Kafka's BaseAuthorizerTest scenarios) ---------------------------

U1, U2 = "User:user1", "User:user2"
H1, H2 = "192.168.1.1", "192.168.1.2"


def by_type(cache: AclCache, principal: str, host: str, op: Op,
            resource_type: ResourceType = TOPIC, *, allow_everyone: bool = False) -> bool:
    return authorize_by_resource_type(cache, principal, host, op, resource_type,
                                      super_users=frozenset({SUPER}),
                                      allow_everyone_if_no_acl_found=allow_everyone)


def entry(principal: str, host: str, op: Op, permission: AclPermissionType) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, permission)


def add(cache: AclCache, pattern: ResourcePattern, *entries: AccessControlEntry) -> None:
    for e in entries:
        cache.add(AclBinding(pattern, e))


def test_by_type_multiple_add_and_remove() -> None:
    cache, r1 = AclCache(), ResourcePattern(TOPIC, "sb1", LIT)
    deny, allow = entry(U1, H1, Op.READ, DENY), entry(U1, H1, Op.READ, ALLOW)
    for _ in range(3):
        assert not by_type(cache, U1, H1, Op.READ)
        add(cache, r1, allow)
        assert by_type(cache, U1, H1, Op.READ)
        for _ in range(3):
            add(cache, r1, deny)
            assert not by_type(cache, U1, H1, Op.READ)
            cache.remove(AclBinding(r1, deny))
            add(cache, r1, allow)
            assert by_type(cache, U1, H1, Op.READ)
        cache.remove(AclBinding(r1, allow))
        assert not by_type(cache, U1, H1, Op.READ)


def test_by_type_unrelated_deny_does_not_dominate_allow() -> None:
    cache = AclCache()
    add(cache, ResourcePattern(TOPIC, "sb1", LIT), entry(U1, H1, Op.READ, DENY),
        entry(U2, H1, Op.READ, DENY), entry(U1, H2, Op.WRITE, DENY),
        entry(U2, H2, Op.READ, DENY), entry(U1, H2, Op.READ, ALLOW))
    add(cache, ResourcePattern(TOPIC, "sb2", LIT), entry(U1, H2, Op.READ, DENY))
    add(cache, ResourcePattern(GROUP, "s", PRE), entry(U1, H2, Op.READ, DENY))
    assert not by_type(cache, U1, H1, Op.READ, TOPIC)
    assert not by_type(cache, U1, H1, Op.READ, GROUP)
    assert not by_type(cache, U1, H1, Op.READ, ResourceType.TRANSACTIONAL_ID)
    assert not by_type(cache, U1, H1, Op.READ, ResourceType.CLUSTER)
    assert by_type(cache, U1, H2, Op.READ, TOPIC)


def test_by_type_deny_takes_precedence() -> None:
    cache, r1 = AclCache(), ResourcePattern(TOPIC, "sb1", LIT)
    add(cache, r1, entry(U1, H1, Op.WRITE, ALLOW))
    assert by_type(cache, U1, H1, Op.WRITE)
    add(cache, r1, entry(U1, H1, Op.WRITE, DENY))
    assert not by_type(cache, U1, H1, Op.WRITE)


def test_by_type_prefixed_deny_dominates() -> None:
    cache = AclCache()
    allow, deny = entry(U1, H1, Op.READ, ALLOW), entry(U1, H1, Op.READ, DENY)
    steps = [("abcde", allow, True), ("abcd", deny, False), ("abc", allow, True),
             ("a", deny, False), ("ab", allow, False)]
    for prefix, e, expected in steps:
        add(cache, ResourcePattern(GROUP, prefix, PRE), e)
        assert by_type(cache, U1, H1, Op.READ, GROUP) is expected, prefix


def test_by_type_wildcard_deny_dominates() -> None:
    cache = AclCache()
    allow, deny = entry(U1, H1, Op.WRITE, ALLOW), entry(U1, H1, Op.WRITE, DENY)
    steps = [(ResourcePattern(GROUP, "hello", PRE), allow, True),
             (ResourcePattern(GROUP, "*", LIT), deny, False),
             (ResourcePattern(GROUP, "*", LIT), allow, False),
             (ResourcePattern(GROUP, "aloha", LIT), allow, False)]
    for pattern, e, expected in steps:
        add(cache, pattern, e)
        assert by_type(cache, U1, H1, Op.WRITE, GROUP) is expected, pattern


def test_by_type_all_operation() -> None:
    cache, r1 = AclCache(), ResourcePattern(TOPIC, "sb1", LIT)
    assert not by_type(cache, U1, H1, Op.READ)
    add(cache, r1, entry(U1, H1, Op.WRITE, DENY), entry(U1, H1, Op.ALL, ALLOW))
    assert by_type(cache, U1, H1, Op.READ)
    add(cache, r1, entry(U1, H1, Op.ALL, DENY))
    assert not by_type(cache, U1, H1, Op.READ)


def test_by_type_wildcard_host_and_principal() -> None:
    for wildcard_entry in (lambda op, perm: entry(U1, "*", op, perm),
                           lambda op, perm: entry("User:*", H1, op, perm)):
        cache = AclCache()
        r1, r2 = ResourcePattern(TOPIC, "sb1", LIT), ResourcePattern(TOPIC, "sb2", LIT)
        other = (U1, H2) if wildcard_entry(Op.READ, DENY).host == "*" else (U2, H1)
        add(cache, r1, entry(U1, H1, Op.READ, ALLOW))
        assert by_type(cache, U1, H1, Op.READ)
        add(cache, r1, wildcard_entry(Op.READ, DENY))
        assert not by_type(cache, U1, H1, Op.READ)
        add(cache, r2, entry(U1, H1, Op.READ, DENY))
        assert not by_type(cache, U1, H1, Op.READ) and not by_type(cache, *other, Op.READ)
        add(cache, r2, wildcard_entry(Op.READ, ALLOW))
        assert by_type(cache, *other, Op.READ)
        add(cache, r2, wildcard_entry(Op.READ, DENY))
        assert not by_type(cache, *other, Op.READ)


def test_by_type_super_user_and_allow_everyone() -> None:
    cache = AclCache()
    for rt in (TOPIC, ResourceType.CLUSTER, GROUP, ResourceType.TRANSACTIONAL_ID):
        add(cache, ResourcePattern(rt, "*", LIT), entry("User:*", "*", Op.ALL, DENY))
        assert by_type(cache, SUPER, H1, Op.READ, rt)
        assert not by_type(cache, U1, H1, Op.READ, rt, allow_everyone=True)
    # Kafka 3.x: allow.everyone.if.no.acl.found allows once no DENY of `*` applies, even
    # when every ACL of the type is a DENY.
    cache = AclCache([acl("t", DENY, Op.WRITE, U1)])
    assert by_type(cache, U1, H1, Op.WRITE, allow_everyone=True)
    assert not by_type(cache, U1, H1, Op.WRITE)


def test_by_type_uses_no_implications_and_checks_arguments() -> None:
    cache = AclCache([acl("t", operation=Op.READ, principal=U1)])
    assert not by_type(cache, U1, H1, Op.DESCRIBE)
    assert by_type(cache, U1, H1, Op.READ)
    for op, rt in ((Op.ANY, TOPIC), (Op.UNKNOWN, TOPIC), (Op.READ, ResourceType.ANY),
                   (Op.READ, ResourceType.UNKNOWN)):
        with pytest.raises(ValueError):
            by_type(cache, U1, H1, op, rt)


def test_by_type_literal_allow_under_prefixed_deny() -> None:
    cache = AclCache([acl("txn-1", principal=U1, operation=Op.WRITE),
                      acl("txn", DENY, Op.WRITE, U1, pattern=PRE)])
    assert not by_type(cache, U1, H1, Op.WRITE)
    cache.add(acl("other", principal=U1, operation=Op.WRITE))
    assert by_type(cache, U1, H1, Op.WRITE)
    cache.add(acl("other", DENY, Op.WRITE, U1))
    assert not by_type(cache, U1, H1, Op.WRITE)
    cache.add(acl("*", principal=U1, operation=Op.WRITE))
    assert by_type(cache, U1, H1, Op.WRITE)  # an ALLOW on `*` survives literal DENYs


# --- the cache -------------------------------------------------------------------------------


def test_cache_add_remove_and_indexes() -> None:
    cache = AclCache()
    b1, b2 = acl(), acl("fo", pattern=PRE)
    assert cache.add(b1) and not cache.add(b1) and cache.add(b2)
    assert len(cache) == 2 and b1 in cache and acl("x") not in cache
    assert cache.applicable(TOPIC, "foo") == [b2.entry, b1.entry]
    assert cache.resource_names(b1.entry, TOPIC, LIT) == {"foo"}
    assert cache.remove(b1) and not cache.remove(b1) and cache.remove(b2)
    assert len(cache) == 0 and list(cache.bindings()) == []
    assert cache.applicable(TOPIC, "foo") == []
    assert cache.resource_names(b1.entry, TOPIC, LIT) is None
    assert cache._prefix_lengths[TOPIC] == {} and cache._names == {}


def test_cache_set_acls_replaces_a_resource() -> None:
    pattern = ResourcePattern(TOPIC, "ab", PRE)
    e1, e2 = acl().entry, acl(permission=DENY).entry
    cache = AclCache()
    cache.set_acls(pattern, [e1, e2, e1])
    assert cache.acls(pattern) == (e1, e2)
    cache.set_acls(pattern, [e2])
    assert cache.acls(pattern) == (e2,) and cache.resource_names(e1, TOPIC, PRE) is None
    cache.set_acls(pattern, [])
    assert cache.patterns() == [] and cache.applicable(TOPIC, "abc") == []


def test_cache_order_is_kafkas_resource_ordering() -> None:
    bindings = [acl("b"), acl("a", resource_type=GROUP), acl("c", pattern=PRE), acl("a"),
                acl("\uffff"), acl("\U0001f600")]
    names = [(p.resource_type, p.pattern_type, p.name) for p in AclCache(bindings).patterns()]
    # Name descending as Java compares strings: by UTF-16 code unit (U+FFFF after U+1F600).
    assert names == [(TOPIC, LIT, "\uffff"), (TOPIC, LIT, "\U0001f600"), (TOPIC, LIT, "b"),
                     (TOPIC, LIT, "a"), (TOPIC, PRE, "c"), (GROUP, LIT, "a")]


def test_cache_matching_and_deletions() -> None:
    bindings = [acl(), acl(principal=BOB), acl("fo", pattern=PRE), acl("*"), acl("bar")]
    cache = AclCache(bindings)
    match_foo = AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", PatternType.MATCH))
    assert cache.matching(match_foo) == [acl(), acl(principal=BOB), acl("*"),
                                         acl("fo", pattern=PRE)]
    by_bob = AclBindingFilter(entry=AccessControlEntryFilter(principal=BOB))
    assert cache.matching(by_bob) == [acl(principal=BOB)]
    everything = AclBindingFilter()
    # A binding two filters match is reported under the first only.
    assert cache.deletions([by_bob, everything, by_bob]) == [
        [acl(principal=BOB)], [acl("foo"), acl("bar"), acl("*"), acl("fo", pattern=PRE)], []]
    assert len(cache) == 5  # deletions only plans


# --- the index agrees with a scan of every ACL -------------------------------------------------

names = st.text("ab*", max_size=3)
bindings_st = st.lists(st.builds(
    acl, names, st.sampled_from([ALLOW, DENY]),
    st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL]), st.sampled_from([ALICE, "User:*"]),
    st.sampled_from(["*", HOST]), st.sampled_from([LIT, PRE]), st.sampled_from([TOPIC, GROUP])),
    max_size=8)


def scan(bindings: list[AclBinding], op: Op, name: str, allow_everyone: bool) -> bool:
    """authorizeAction written plainly over a list (the MATCH filter picks the ACLs)."""
    applicable = [b.entry for b in bindings
                  if ResourcePatternFilter(TOPIC, name, PatternType.MATCH).matches(b.pattern)
                  and (b.pattern.name or not name or b.pattern.pattern_type is LIT)]
    if not applicable:
        return allow_everyone

    def exists(o: Op, permission: AclPermissionType) -> bool:
        return any(e.permission is permission and e.principal in (ALICE, "User:*")
                   and e.operation in (o, Op.ALL) and e.host in (HOST, "*") for e in applicable)

    if exists(op, DENY):
        return False
    return any(exists(o, ALLOW) for o in CONCRETE_OPS if _implies(o, op))


@given(bindings_st, st.text("ab*", max_size=4), st.sampled_from([Op.READ, Op.DESCRIBE]),
       st.booleans())
def test_authorize_agrees_with_a_scan(bindings: list[AclBinding], name: str, op: Op,
                                      allow_everyone: bool) -> None:
    assert check(bindings, op, name, allow_everyone=allow_everyone) is scan(
        bindings, op, name, allow_everyone)


@given(bindings_st, st.data())
def test_removing_everything_empties_the_indexes(bindings: list[AclBinding],
                                                 data: st.DataObject) -> None:
    cache = AclCache(bindings)
    assert set(cache.bindings()) == set(bindings)
    for b in data.draw(st.permutations(bindings)):
        cache.remove(b)
    assert len(cache) == 0 and cache._names == {}
    assert all(not lengths for lengths in cache._prefix_lengths.values())


@given(st.lists(st.tuples(st.sampled_from([ResourcePattern(TOPIC, "a", LIT),
                                           ResourcePattern(TOPIC, "a", PRE),
                                           ResourcePattern(GROUP, "ab", PRE)]),
                          bindings_st.map(lambda bs: [b.entry for b in bs])), max_size=6))
def test_set_acls_is_a_fresh_load(updates: list[tuple[ResourcePattern,
                                                      list[AccessControlEntry]]]) -> None:
    cache, final = AclCache(), {}
    for pattern, entries in updates:
        cache.set_acls(pattern, entries)
        final[pattern] = entries
    fresh = AclCache(AclBinding(p, e) for p, entries in final.items() for e in entries)
    assert list(cache.bindings()) == list(fresh.bindings())
    assert cache._names == fresh._names
    assert ({t: c for t, c in cache._prefix_lengths.items() if c}
            == {t: c for t, c in fresh._prefix_lengths.items() if c})
