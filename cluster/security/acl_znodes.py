"""Kafka 3.9's ZooKeeper layout of ACLs, byte for byte (``ZkData.scala``: ``ZkAclStore``,
``ZkAclChangeStore``, ``ResourceZNode``; ``AclEntry.toJsonCompatibleMap``).

==============================================================  ==============================
znode                                                           data
==============================================================  ==============================
/kafka-acl/<Type>/<name>             (LITERAL patterns)         `encode_acls`
/kafka-acl-extended/prefixed/<Type>/<name>  (PREFIXED)          `encode_acls`
/kafka-acl-changes/acl_changes_<10 digits>                      ``TOPIC:<name>`` (text)
/kafka-acl-extended-changes/acl_changes_<10 digits>             `encode_acl_change` (JSON)
==============================================================  ==============================

``<Type>`` is PascalCase (``Topic``, ``TransactionalId``); the change notifications use
the enum name (``TOPIC``, ``TRANSACTIONAL_ID``). Kafka writes the ACL JSON from Java
``HashMap`` objects, hence its key order ``{"acls":[{"principal","permissionType","host",
"operation"}],"version":1}``; the order of the ACLs in the list is that of a Scala set
(insertion order up to four, hash order beyond), which readers must not rely on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from josefk.cluster.security.acls import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_principal,
)
from josefk.cluster.zk.znodes import ZnodeFormatError

LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
PREFIXED_ACLS = f"{EXTENDED_ACLS}/prefixed"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACLS_VERSION = 1
ACL_CHANGE_VERSION = 1

# AclEntry.RESOURCE_TYPES: the concrete types, a folder each under every ACL root.
RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN,
                                                            ResourceType.ANY))


def _json(doc: Any) -> bytes:
    # Jackson writes compact UTF-8 and escapes only quotes, backslashes and controls.
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# --- paths -----------------------------------------------------------------------------


def acl_root(pattern_type: PatternType) -> str:
    """``ZkAclStore(patternType).aclPath``."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACLS
    if pattern_type is PatternType.PREFIXED:
        return PREFIXED_ACLS
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{acl_root(pattern_type)}/{resource_type.pascal_name}"


def resource_path(pattern: ResourcePattern) -> str:
    """``ResourceZNode.path``; the name goes in as is (CreateAcls refuses a ``/``)."""
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def acl_change_root(pattern_type: PatternType) -> str:
    """Where a change of ACLs of this pattern type is announced (``changeStore``)."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_CHANGES
    acl_root(pattern_type)  # refuses the non-specific pattern types
    return EXTENDED_ACL_CHANGES


def acl_change_path(pattern_type: PatternType) -> str:
    """The path to create PERSISTENT_SEQUENTIAL (``ZkAclChangeStore.createPath``)."""
    return f"{acl_change_root(pattern_type)}/{ACL_CHANGE_PREFIX}"


def acl_paths() -> tuple[str, ...]:
    """``KafkaZkClient.createAclPaths``: each ACL root and its resource-type folders, then
    the two change roots (parents first)."""
    paths: list[str] = [EXTENDED_ACLS]
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        paths.append(acl_root(pattern_type))
        paths.extend(resource_type_path(pattern_type, t) for t in RESOURCE_TYPES)
    return (*paths, LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES)


def pattern_at(pattern_type: PatternType, type_folder: str, name: str) -> ResourcePattern | None:
    """The pattern a child of ``resource_type_path`` names, as ``loadAllAcls`` reads it
    (``SecurityUtils.resourceType`` of the folder); None for a folder Kafka skips."""
    resource_type = ResourceType.from_pascal_name(type_folder)
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return None
    return ResourcePattern(resource_type, name, pattern_type)


# --- ACLs of one resource ----------------------------------------------------------------


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """``ResourceZNode.encode``: duplicates collapse, order is kept."""
    acls = [{"principal": e.principal, "permissionType": e.permission.pascal_name,
             "host": e.host, "operation": e.operation.pascal_name}
            for e in dict.fromkeys(entries)]
    return _json({"acls": acls, "version": ACLS_VERSION})


def decode_acls(data: bytes) -> tuple[AccessControlEntry, ...]:
    """``AclEntry.fromBytes``: empty data, or data that is not JSON, is no ACLs (Kafka's
    ``Json.parseBytes`` reads it as absent); any other shape Kafka refuses raises
    ZnodeFormatError. Names are read as ``SecurityUtils`` does (any case; unknown ones
    become UNKNOWN)."""
    if not data:
        return ()
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return ()
    if not isinstance(doc, dict):
        raise ZnodeFormatError(f"ACLs: not a JSON object: {data[:200]!r}")
    version = doc.get("version")
    if type(version) is not int or version != ACLS_VERSION:
        raise ZnodeFormatError(f"ACLs: unsupported version {version!r}: {data[:200]!r}")
    try:
        return tuple(dict.fromkeys(_entry(item) for item in _list(doc.get("acls"))))
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"ACLs: {e}: {data[:200]!r}") from e


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError("acls is not a list")
    return value


def _text(item: dict[str, Any], key: str) -> str:
    value = item[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


def _entry(item: Any) -> AccessControlEntry:
    if not isinstance(item, dict):
        raise TypeError("an ACL is not an object")
    principal = _text(item, "principal")
    parse_principal(principal)
    return AccessControlEntry(
        principal, _text(item, "host"),
        AclOperation.from_pascal_name(_text(item, "operation")),
        AclPermissionType.from_pascal_name(_text(item, "permissionType")))


# --- change notifications ------------------------------------------------------------------


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """The data of the change notification for ``pattern``: ``LiteralAclChangeStore``'s
    ``TOPIC:<name>`` text for a literal pattern, ``ExtendedAclChangeStore``'s JSON else."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    acl_root(pattern.pattern_type)  # refuses the non-specific pattern types
    return _json({"version": ACL_CHANGE_VERSION, "resourceType": pattern.resource_type.name,
                  "name": pattern.name, "patternType": pattern.pattern_type.name})


def decode_literal_acl_change(data: bytes) -> ResourcePattern:
    """``LiteralAclChangeStore.decode``: ``<type>:<name>``, the type any case."""
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise ZnodeFormatError(f"ACL change: {data[:200]!r}") from e
    type_name, sep, name = text.partition(":")
    if not sep:
        raise ZnodeFormatError("expected a string in format ResourceType:ResourceName "
                               f"but got {text}")
    return ResourcePattern(ResourceType.from_string(type_name), name, PatternType.LITERAL)


def decode_extended_acl_change(data: bytes) -> ResourcePattern:
    """``ExtendedAclChangeStore.decode``: the JSON of ``ExtendedAclChangeEvent``."""
    try:
        doc = json.loads(data)
        version, type_name = doc["version"], doc["resourceType"]
        name, pattern_name = doc["name"], doc["patternType"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise ZnodeFormatError(f"Failed to parse ACL change event: {data[:200]!r}") from e
    if type(version) is not int or version > ACL_CHANGE_VERSION:
        raise ZnodeFormatError(f"Acl change event received for unsupported version: {version}")
    if not all(isinstance(v, str) for v in (type_name, name, pattern_name)):
        raise ZnodeFormatError(f"Failed to parse ACL change event: {data[:200]!r}")
    return ResourcePattern(ResourceType.from_string(type_name), name,
                           PatternType.from_string(pattern_name))


def decode_acl_change(change_root: str, data: bytes) -> ResourcePattern:
    """The pattern whose ACLs changed, by the root the notification is under."""
    if change_root == LITERAL_ACL_CHANGES:
        return decode_literal_acl_change(data)
    if change_root == EXTENDED_ACL_CHANGES:
        return decode_extended_acl_change(data)
    raise ValueError(f"not an ACL change root: {change_root}")
