"""Kafka's ACL model: resource types, pattern types, operations and permissions with
their wire codes, the bindings and filters of ``org.apache.kafka.common.acl`` with
their matching rules, and the checks a ZooKeeper-mode Kafka 3.9 broker applies to
CreateAcls, DescribeAcls and DeleteAcls (``AclApis``, ``AclAuthorizer`` and the
request classes' ``validate``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

from josefk.protocol.error_codes import INVALID_REQUEST, UNKNOWN_SERVER_ERROR

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"

# What Kafka answers when no authorizer is configured (AclApis).
NO_AUTHORIZER_MESSAGE = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE_MESSAGE = "No Authorizer is configured on the broker"


def pascal_case(name: str) -> str:
    """``SecurityUtils.toPascalCase``: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(word[:1].upper() + word[1:].lower() for word in name.split("_"))


class _KafkaEnum(enum.IntEnum):
    """A Kafka enum whose code 0 is UNKNOWN, the answer for any code it lacks."""

    @classmethod
    def from_code(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @property
    def pascal_name(self) -> str:
        """The name in ZooKeeper's ACL JSON and paths (``SecurityUtils.*Name``)."""
        return pascal_case(self.name)

    @classmethod
    def from_pascal_name(cls, name: str) -> Self:
        """``SecurityUtils.resourceType/operation/permissionType``: the PascalCase name,
        or the same without regard to case (``READ``, ``clusteraction``); else UNKNOWN."""
        for member in cls:
            pascal = member.pascal_name
            if name == pascal or name.upper() == pascal.upper():
                return member
        return cls(0)


class ResourceType(_KafkaEnum):
    """``org.apache.kafka.common.resource.ResourceType``."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @classmethod
    def from_string(cls, text: str) -> ResourceType:
        """``ResourceType.fromString``: the enum name, any case; else UNKNOWN."""
        return cls.__members__.get(text.upper(), cls.UNKNOWN)


class PatternType(_KafkaEnum):
    """``org.apache.kafka.common.resource.PatternType``."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        return self in (PatternType.LITERAL, PatternType.PREFIXED)

    @classmethod
    def from_string(cls, text: str) -> PatternType:
        """``PatternType.fromString``: the exact enum name; else UNKNOWN."""
        return cls.__members__.get(text, cls.UNKNOWN)


class AclOperation(_KafkaEnum):
    """``org.apache.kafka.common.acl.AclOperation``."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    """``org.apache.kafka.common.acl.AclPermissionType``."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3



@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource name and how it is matched: LITERAL (``*`` is every name) or PREFIXED."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def is_unknown(self) -> bool:
        return (self.resource_type is ResourceType.UNKNOWN
                or self.pattern_type is PatternType.UNKNOWN)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (``Type:name`` principal, host or ``*``) may or may not do which operation."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def is_unknown(self) -> bool:
        return (self.operation is AclOperation.UNKNOWN
                or self.permission is AclPermissionType.UNKNOWN)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def is_unknown(self) -> bool:
        return self.pattern.is_unknown() or self.entry.is_unknown()


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """``ResourcePatternFilter``: ANY types match all; ``name=None`` matches any name;
    pattern type MATCH matches every pattern that applies to the literal name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def is_unknown(self) -> bool:
        return (self.resource_type is ResourceType.UNKNOWN
                or self.pattern_type is PatternType.UNKNOWN)

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        raise ValueError(f"Unsupported PatternType: {pattern.pattern_type.name}")

    def find_indefinite_field(self) -> str | None:
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """``AccessControlEntryFilter``: None and ANY match any value; the rest must equal."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        return (self.operation is AclOperation.UNKNOWN
                or self.permission is AclPermissionType.UNKNOWN)

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission in (AclPermissionType.ANY, entry.permission))

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Operation is {self.operation.name}"
        if self.permission in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            return f"Permission type is {self.permission.name}"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """``AclBindingFilter``: the default filter matches every binding."""

    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def is_unknown(self) -> bool:
        return self.pattern.is_unknown() or self.entry.is_unknown()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        return self.pattern.find_indefinite_field() or self.entry.find_indefinite_field()


def parse_principal(principal: str) -> tuple[str, str]:
    """``SecurityUtils.parseKafkaPrincipal``: ``Type:name`` split at the first colon."""
    principal_type, sep, name = principal.partition(":")
    if not sep:
        raise ValueError("expected a string in format principalType:principalName "
                         f"but got {principal}")
    return principal_type, name


# --- request checks ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AclError:
    """An error code and message as Kafka's ``ApiError.fromThrowable`` makes them."""

    code: int
    message: str | None


class MalformedAclRequest(ValueError):
    """Kafka's request class refuses to parse the request: the broker logs it and closes
    the connection instead of answering."""


def check_create_acls_request(creations: Sequence[AclBinding], version: int) -> None:
    """``CreateAclsRequest.validate``: v0 carries LITERAL patterns only, and no creation
    may hold an UNKNOWN (or unknown code) type, pattern type, operation or permission."""
    if version == 0 and any(b.pattern.pattern_type is not PatternType.LITERAL
                            for b in creations):
        raise MalformedAclRequest("Version 0 only supports literal resource pattern types")
    if any(b.pattern.resource_type is ResourceType.UNKNOWN
           or b.pattern.pattern_type is PatternType.UNKNOWN or b.entry.is_unknown()
           for b in creations):
        raise MalformedAclRequest("CreatableAcls contain unknown elements")


def check_acl_filter(acl_filter: AclBindingFilter, version: int) -> AclBindingFilter:
    """DescribeAcls' and DeleteAcls' ``normalizeAndValidate``: v0 reads pattern type ANY
    as LITERAL and refuses others; UNKNOWN fields refuse the request."""
    if version == 0:
        if acl_filter.pattern.pattern_type is PatternType.ANY:
            acl_filter = AclBindingFilter(
                ResourcePatternFilter(acl_filter.pattern.resource_type, acl_filter.pattern.name,
                                      PatternType.LITERAL), acl_filter.entry)
        elif acl_filter.pattern.pattern_type is not PatternType.LITERAL:
            raise MalformedAclRequest("Version 0 only supports literal resource pattern types")
    if acl_filter.is_unknown():
        raise MalformedAclRequest(f"ACL filter contains UNKNOWN elements: {acl_filter}")
    return acl_filter


def _constructible(binding: AclBinding) -> bool:
    # ResourcePattern and AccessControlEntry constructors throw on these filter-only values.
    return not (binding.pattern.resource_type is ResourceType.ANY
                or binding.pattern.pattern_type in (PatternType.ANY, PatternType.MATCH)
                or binding.entry.operation is AclOperation.ANY
                or binding.entry.permission is AclPermissionType.ANY)


def _binding_error(binding: AclBinding) -> AclError | None:
    pattern = binding.pattern
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return AclError(INVALID_REQUEST,
                        f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        return AclError(INVALID_REQUEST, "Invalid empty resource name")
    # AclAuthorizer.validateAclBinding, wrapped in InvalidRequestException("Failed to create ACL").
    if binding.is_unknown() or "/" in pattern.name:
        return AclError(INVALID_REQUEST, "Failed to create ACL")
    return None


def create_acls_errors(creations: Sequence[AclBinding]) -> list[AclError | None]:
    """Each creation's error (None: create it) as a ZooKeeper-mode Kafka 3.9 answers
    CreateAcls, after ``check_create_acls_request`` passed.

    A filter-only value (ANY type, ANY/MATCH pattern, ANY operation or permission) fails
    the whole request with UNKNOWN_SERVER_ERROR. A principal that is not ``Type:name``
    fails every creation for the same resource pattern with UNKNOWN_SERVER_ERROR (Kafka
    parses them together, while updating that resource's znode).
    """
    if not all(_constructible(b) for b in creations):
        return [AclError(UNKNOWN_SERVER_ERROR, None)] * len(creations)
    errors = [_binding_error(b) for b in creations]
    bad_patterns = set()
    for binding, error in zip(creations, errors, strict=True):
        if error is None and ":" not in binding.entry.principal:
            bad_patterns.add(binding.pattern)
    return [AclError(UNKNOWN_SERVER_ERROR, None)
            if error is None and binding.pattern in bad_patterns else error
            for binding, error in zip(creations, errors, strict=True)]
