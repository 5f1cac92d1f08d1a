"""Where a broker keeps SCRAM credentials and ACLs, behind one interface: a file in the
single broker's log directory (this module), or ZooKeeper's ``/config/users`` and
``/kafka-acl`` in a cluster. Reads come from memory; every change is written before it
is applied, so a change acknowledged to a client survives a crash."""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from josefk.cluster.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from josefk.cluster.security.authorizer import AclCache
from josefk.cluster.security.credentials import ScramCredential
from josefk.log.checkpoint import write_atomic

SECURITY_FILE = "__josefk_security.json"

Upsertion = tuple[str, str, ScramCredential]  # user, mechanism, credential
Deletion = tuple[str, str]  # user, mechanism


class SecurityStore(ABC):
    """SCRAM credentials by user and mechanism, and the cluster's ACLs."""

    def __init__(self) -> None:
        self.acls = AclCache()
        self.users: dict[str, dict[str, ScramCredential]] = {}

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    @abstractmethod
    async def alter_scram(self, upsertions: Sequence[Upsertion],
                          deletions: Sequence[Deletion]) -> None:
        """Store and remove credentials (the caller has checked each one)."""

    @abstractmethod
    async def create_acls(self, bindings: Sequence[AclBinding]) -> None: ...

    @abstractmethod
    async def delete_acls(self, filters: Sequence[AclBindingFilter]
                          ) -> list[list[AclBinding]]:
        """Remove what each filter matches; the bindings removed, per filter."""


class LocalSecurityStore(SecurityStore):
    """The single broker's: ``__josefk_security.json`` in the first log directory, readable
    by the broker's user only (it holds salted credentials, never passwords)."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__()
        self.path = log_dir / SECURITY_FILE
        self._lock = trio.Lock()
        if self.path.exists():
            self._load(json.loads(self.path.read_text()))

    def _load(self, doc: Mapping[str, Any]) -> None:
        self.users = {user: {m: ScramCredential.from_kafka_string(c) for m, c in creds.items()}
                      for user, creds in doc.get("users", {}).items()}
        self.acls = AclCache(_binding(a) for a in doc.get("acls", []))

    async def alter_scram(self, upsertions: Sequence[Upsertion],
                          deletions: Sequence[Deletion]) -> None:
        async with self._lock:
            users = {u: dict(c) for u, c in self.users.items()}
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
            for user, mechanism, credential in upsertions:
                users.setdefault(user, {})[mechanism] = credential
            users = {u: c for u, c in users.items() if c}
            await self._write(users, list(self.acls.bindings()))
            self.users = users

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        async with self._lock:
            acls = AclCache(self.acls.bindings())
            for binding in bindings:
                acls.add(binding)
            await self._write(self.users, list(acls.bindings()))
            self.acls = acls

    async def delete_acls(self, filters: Sequence[AclBindingFilter]
                          ) -> list[list[AclBinding]]:
        async with self._lock:
            removed = self.acls.deletions(filters)
            acls = AclCache(self.acls.bindings())
            for binding in {b for group in removed for b in group}:
                acls.remove(binding)
            await self._write(self.users, list(acls.bindings()))
            self.acls = acls
            return removed

    async def _write(self, users: Mapping[str, Mapping[str, ScramCredential]],
                     acls: list[AclBinding]) -> None:
        doc = {"users": {u: {m: c.to_kafka_string() for m, c in creds.items()}
                         for u, creds in users.items()},
               "acls": [_doc(b) for b in acls]}
        data = json.dumps(doc, indent=1).encode()
        await trio.to_thread.run_sync(self._write_file, data)

    def _write_file(self, data: bytes) -> None:
        write_atomic(self.path, data)
        os.chmod(self.path, 0o600)


def _doc(binding: AclBinding) -> dict[str, Any]:
    p, e = binding.pattern, binding.entry
    return {"resourceType": p.resource_type.name, "name": p.name,
            "patternType": p.pattern_type.name, "principal": e.principal, "host": e.host,
            "operation": e.operation.name, "permissionType": e.permission.name}


def _binding(doc: Mapping[str, Any]) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType[doc["resourceType"]], doc["name"],
                        PatternType[doc["patternType"]]),
        AccessControlEntry(doc["principal"], doc["host"], AclOperation[doc["operation"]],
                           AclPermissionType[doc["permissionType"]]))
