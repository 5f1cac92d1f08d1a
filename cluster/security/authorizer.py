"""Kafka 3.9's ``AclAuthorizer`` as pure functions over an in-memory ``AclCache``:
``authorize`` (``authorizeAction``) and ``authorize_by_resource_type``
(``authorizeByResourceType``), plus the cache's DescribeAcls and DeleteAcls matching.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet

from josefk.cluster.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

_Entries = dict[AccessControlEntry, None]  # an insertion-ordered set
_TypeKey = tuple[AccessControlEntry, ResourceType, PatternType]
_Names = list[AbstractSet[str]]  # name sets of the entries a check matched

# An ALLOW of any of these operations also allows the key (AclAuthorizer.allowAclExists).
_IMPLIED_BY: dict[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.DESCRIBE: (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                            AclOperation.DELETE, AclOperation.ALTER),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
}


class AclCache:
    """The ACLs a broker knows, indexed the ways the checks read them: by resource
    pattern (literal and wildcard lookups, prefixed lookups by the prefix lengths present)
    and, for ``authorize_by_resource_type``, by (entry, resource type, pattern type)."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._acls: dict[ResourcePattern, _Entries] = {}
        self._prefix_lengths: dict[ResourceType, Counter[int]] = {}
        self._names: dict[_TypeKey, set[str]] = {}
        for binding in bindings:
            self.add(binding)

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._acls.values())

    def __contains__(self, binding: object) -> bool:
        return (isinstance(binding, AclBinding)
                and binding.entry in self._acls.get(binding.pattern, {}))

    def add(self, binding: AclBinding) -> bool:
        """Adds one ACL; False when it was already there."""
        pattern, entry = binding.pattern, binding.entry
        entries = self._acls.get(pattern)
        if entries is None:
            entries = self._acls[pattern] = {}
            self._count_prefix(pattern, 1)
        elif entry in entries:
            return False
        entries[entry] = None
        self._names.setdefault(_type_key(pattern, entry), set()).add(pattern.name)
        return True

    def remove(self, binding: AclBinding) -> bool:
        """Removes one ACL; False when it was not there."""
        pattern, entry = binding.pattern, binding.entry
        entries = self._acls.get(pattern)
        if entries is None or entry not in entries:
            return False
        del entries[entry]
        if not entries:
            del self._acls[pattern]
            self._count_prefix(pattern, -1)
        names = self._names[_type_key(pattern, entry)]
        names.discard(pattern.name)
        if not names:
            del self._names[_type_key(pattern, entry)]
        return True

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replaces the ACLs of one resource pattern, as a znode read does
        (``AclAuthorizer.updateCache``); no entries removes the pattern."""
        new = dict.fromkeys(entries)
        for entry in self.acls(pattern):
            if entry not in new:
                self.remove(AclBinding(pattern, entry))
        for entry in new:
            self.add(AclBinding(pattern, entry))
        if pattern in self._acls:  # the znode's order
            self._acls[pattern] = new

    def _count_prefix(self, pattern: ResourcePattern, delta: int) -> None:
        if pattern.pattern_type is not PatternType.PREFIXED:
            return
        lengths = self._prefix_lengths.setdefault(pattern.resource_type, Counter())
        lengths[len(pattern.name)] += delta
        if not lengths[len(pattern.name)]:
            del lengths[len(pattern.name)]

    def acls(self, pattern: ResourcePattern) -> tuple[AccessControlEntry, ...]:
        return tuple(self._acls.get(pattern, ()))

    def patterns(self) -> list[ResourcePattern]:
        """The resource patterns with ACLs, in ``AclAuthorizer.ResourceOrdering``:
        resource type, pattern type, then name descending."""
        by_name = sorted(self._acls, key=_java_order, reverse=True)
        return sorted(by_name, key=lambda p: (p.resource_type, p.pattern_type))

    def bindings(self) -> Iterator[AclBinding]:
        for pattern in self.patterns():
            for entry in self._acls[pattern]:
                yield AclBinding(pattern, entry)

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls (``AclAuthorizer.acls``): every binding the filter matches."""
        return [b for b in self.bindings() if acl_filter.matches(b)]

    def deletions(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """DeleteAcls: for each filter, the bindings it deletes. A binding several filters
        match is reported under the first of them only, as ``AclAuthorizer.deleteAcls``
        does. The cache is left unchanged (``remove`` each once the store agreed)."""
        deleted: list[list[AclBinding]] = [[] for _ in filters]
        for pattern in self.patterns():
            matching = [i for i, f in enumerate(filters) if f.pattern.matches(pattern)]
            for entry in self._acls[pattern] if matching else ():
                first = next((i for i in matching if filters[i].entry.matches(entry)), None)
                if first is not None:
                    deleted[first].append(AclBinding(pattern, entry))
        return deleted

    def applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """``AclAuthorizer.matchingAcls``: the ACLs of the prefixed patterns that start
        ``name``, of the wildcard ``*`` and of ``name`` itself, all LITERAL otherwise."""
        found: list[AccessControlEntry] = []
        # Kafka's range over its sorted map never reaches the empty prefix of a non-empty name.
        for length in self._prefix_lengths.get(resource_type, ()):
            if (1 <= length <= len(name)) or (length == 0 and not name):
                pattern = ResourcePattern(resource_type, name[:length], PatternType.PREFIXED)
                found.extend(self._acls.get(pattern, ()))
        for literal in (WILDCARD_RESOURCE, name):
            found.extend(self._acls.get(ResourcePattern(resource_type, literal,
                                                        PatternType.LITERAL), ()))
        return found

    def resource_names(self, entry: AccessControlEntry, resource_type: ResourceType,
                       pattern_type: PatternType) -> AbstractSet[str] | None:
        """``AclAuthorizer.resourceCache``: the names of this type and pattern type that
        carry exactly this entry (a live view: do not keep it); None when there are none."""
        return self._names.get((entry, resource_type, pattern_type))


def _type_key(pattern: ResourcePattern, entry: AccessControlEntry) -> _TypeKey:
    return (entry, pattern.resource_type, pattern.pattern_type)


def _java_order(pattern: ResourcePattern) -> bytes:
    # Java compares strings by UTF-16 code unit, which big-endian UTF-16 bytes keep.
    return pattern.name.encode("utf-16-be", "surrogatepass")


def _acl_exists(entries: Iterable[AccessControlEntry], principal: str, host: str,
                operation: AclOperation, permission: AclPermissionType) -> bool:
    """``AclAuthorizer.matchingAclExists``."""
    return any(e.permission is permission
               and e.principal in (principal, WILDCARD_PRINCIPAL)
               and e.operation in (operation, AclOperation.ALL)
               and e.host in (host, WILDCARD_HOST)
               for e in entries)


def authorize(acls: AclCache, principal: str, host: str, operation: AclOperation,
              resource_type: ResourceType, resource_name: str, *,
              super_users: frozenset[str], allow_everyone_if_no_acl_found: bool) -> bool:
    """``AclAuthorizer.authorizeAction`` for a literal resource: super users may do
    anything; with no ACL at all on the resource the answer is
    ``allow_everyone_if_no_acl_found``; else a matching DENY (of the operation or ALL)
    refuses, and a matching ALLOW (of the operation, ALL, or one implying it) allows.

    ``principal`` is ``Type:name``; ``host`` the client's address as text.
    """
    if principal in super_users:
        return True
    entries = acls.applicable(resource_type, resource_name)
    if not entries:
        return allow_everyone_if_no_acl_found
    if _acl_exists(entries, principal, host, operation, AclPermissionType.DENY):
        return False
    return any(_acl_exists(entries, principal, host, implied, AclPermissionType.ALLOW)
               for implied in _IMPLIED_BY.get(operation, (operation,)))


def _check_by_resource_type_args(operation: AclOperation, resource_type: ResourceType) -> None:
    """``SecurityUtils.authorizeByResourceTypeCheckArgs``."""
    if resource_type is ResourceType.ANY:
        raise ValueError("Must specify a non-filter resource type for authorizeByResourceType")
    if resource_type is ResourceType.UNKNOWN:
        raise ValueError("Unknown resource type")
    if operation is AclOperation.ANY:
        raise ValueError("Must specify a non-filter operation type for authorizeByResourceType")
    if operation is AclOperation.UNKNOWN:
        raise ValueError("Unknown operation type")


def _matching_names(acls: AclCache, principal: str, host: str, operation: AclOperation,
                    permission: AclPermissionType, resource_type: ResourceType,
                    pattern_type: PatternType) -> _Names:
    """``AclAuthorizer.matchingResources``: no implied operations here, only ALL."""
    found = []
    for p in dict.fromkeys((principal, WILDCARD_PRINCIPAL)):
        for h in dict.fromkeys((host, WILDCARD_HOST)):
            for o in dict.fromkeys((operation, AclOperation.ALL)):
                names = acls.resource_names(AccessControlEntry(p, h, o, permission),
                                            resource_type, pattern_type)
                if names is not None:
                    found.append(names)
    return found


def _denied_by_prefix(name: str, deny_prefixes: _Names) -> bool:
    """``hasDominantPrefixedDeny``: some DENY prefix starts ``name``."""
    return any(name[:i] in names for i in range(1, len(name) + 1) for names in deny_prefixes)


def authorize_by_resource_type(acls: AclCache, principal: str, host: str,
                               operation: AclOperation, resource_type: ResourceType, *,
                               super_users: frozenset[str],
                               allow_everyone_if_no_acl_found: bool) -> bool:
    """``AclAuthorizer.authorizeByResourceType``: may the principal do ``operation`` on
    some resource of this type? True when an ALLOW (of the operation or ALL) names a
    literal or a prefix that no DENY covers; a DENY on the literal ``*`` refuses all.

    Raises ValueError for an ANY or UNKNOWN operation or resource type, as Kafka does.
    """
    _check_by_resource_type_args(operation, resource_type)
    if principal in super_users:
        return True

    def matching(permission: AclPermissionType, pattern_type: PatternType) -> _Names:
        return _matching_names(acls, principal, host, operation, permission, resource_type,
                               pattern_type)

    deny_literals = matching(AclPermissionType.DENY, PatternType.LITERAL)
    if any(WILDCARD_RESOURCE in n for n in deny_literals):
        return False
    # Kafka 3.x answers before looking at any ALLOW: there may be resources with no ACLs.
    if allow_everyone_if_no_acl_found:
        return True
    deny_prefixes = matching(AclPermissionType.DENY, PatternType.PREFIXED)
    allow_literals = matching(AclPermissionType.ALLOW, PatternType.LITERAL)
    allow_prefixes = matching(AclPermissionType.ALLOW, PatternType.PREFIXED)
    if not deny_literals and not deny_prefixes:
        return bool(allow_literals or allow_prefixes)
    if any(not _denied_by_prefix(prefix, deny_prefixes)
           for names in allow_prefixes for prefix in names):
        return True
    return any(literal == WILDCARD_RESOURCE
               or (not any(literal in n for n in deny_literals)
                   and not _denied_by_prefix(literal, deny_prefixes))
               for names in allow_literals for literal in names)
