"""SCRAM credentials and ACLs in ZooKeeper, as Kafka 3.9's brokers keep them, so that a
user or an ACL created through any broker (josefk or Kafka) holds on every broker.

- Credentials: ``/config/users/<sanitized user>`` (``{"version":1,"config":{...}}``, beside
  any quota keys), announced by a ``/config/changes/config_change_`` notification whose
  ``users/<user>`` entity every broker's config-change listener reloads.
- ACLs: ``/kafka-acl/<Type>/<name>`` (literal) and ``/kafka-acl-extended/prefixed/...``,
  written conditionally on the znode's version (AclAuthorizer's read-modify-write), each
  change announced under ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``; every
  broker watches those and reloads the resource named.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import trio

from josefk.cluster.metadata.security_store import Deletion, SecurityStore, Upsertion
from josefk.cluster.security import acl_znodes as az
from josefk.cluster.security import scram_znodes as sz
from josefk.cluster.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
)
from josefk.cluster.security.authorizer import AclCache
from josefk.cluster.security.credentials import ScramCredential
from josefk.cluster.zk.client import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZkError,
    ZooKeeper,
)
from josefk.cluster.zk.znodes import decode_config

logger = logging.getLogger(__name__)

RETRY_S = 1.0
PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
_Change = Callable[[tuple[AccessControlEntry, ...]], tuple[AccessControlEntry, ...]]


class ZkSecurityStore(SecurityStore):
    """The cluster's: ZooKeeper holds the truth, memory a cache kept by notifications."""

    def __init__(self, zk: ZooKeeper) -> None:
        super().__init__()
        self.zk = zk
        self._seen: dict[str, set[str]] = {}

    # --- loading ------------------------------------------------------------------------

    async def load(self, acl_paths: bool) -> None:
        """Every user's credentials and every ACL, at start-up (``loadCache``); with an
        authorizer, the ACL paths are made first, as AclAuthorizer makes them."""
        if acl_paths:
            for path in az.acl_paths():
                await self.zk.ensure_path(path)
        await self.zk.ensure_path(sz.USERS_CONFIG)
        for sanitized in await self.zk.get_children(sz.USERS_CONFIG):
            await self.reload_user(sz.desanitize(sanitized))
        acls = AclCache()
        for pattern_type in PATTERN_TYPES:
            try:
                folders = await self.zk.get_children(az.acl_root(pattern_type))
            except NoNodeError:
                continue
            for folder in folders:
                try:
                    names = await self.zk.get_children(f"{az.acl_root(pattern_type)}/{folder}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = az.pattern_at(pattern_type, folder, name)
                    if pattern is not None:
                        acls.set_acls(pattern, (await self._read_acls(pattern))[0])
        self.acls = acls

    async def reload_sanitized_user(self, sanitized: str) -> None:
        """The ``users/<sanitized>`` change notification of a user."""
        await self.reload_user(sz.desanitize(sanitized))

    async def reload_user(self, user: str) -> None:
        """A user's credentials again."""
        configs = await self._user_config(user)
        try:
            credentials = sz.scram_credentials(configs)
        except ValueError:
            logger.warning("unreadable SCRAM credential of user %r in ZooKeeper; ignored",
                           user)
            credentials = {}
        users = dict(self.users)
        if credentials:
            users[user] = credentials
        else:
            users.pop(user, None)
        self.users = users

    async def _user_config(self, user: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(sz.user_config_path(user))
        except NoNodeError:
            return {}
        return decode_config(data)

    async def _read_acls(self, pattern: ResourcePattern
                         ) -> tuple[tuple[AccessControlEntry, ...], int]:
        """The resource's ACLs and its znode version (-1: no znode)."""
        try:
            data, stat = await self.zk.get(az.resource_path(pattern))
        except NoNodeError:
            return (), -1
        return az.decode_acls(data), stat.version

    # --- notifications --------------------------------------------------------------------

    async def watch_acl_changes(self) -> None:
        """Follow both ACL change roots for the broker's life
        (ZkNodeChangeNotificationListener); the first pass only marks what is there."""
        async with trio.open_nursery() as nursery:
            for pattern_type in PATTERN_TYPES:
                nursery.start_soon(self._watch, az.acl_change_root(pattern_type))

    async def _watch(self, root: str) -> None:
        seen = self._seen.setdefault(root, set())
        changed, first = trio.Event(), True
        while True:
            try:
                children = await self.zk.get_children(root, changed.set)
                for child in sorted(set(children) - seen):
                    if not first:
                        await self._apply_acl_change(root, child)
                    seen.add(child)
            except NoNodeError:
                await self.zk.ensure_path(root)
                continue
            except ZkError as e:
                logger.warning("ACL change notifications under %s: %s; retrying", root, e)
                await trio.sleep(RETRY_S)
                continue
            first = False
            await changed.wait()
            changed = trio.Event()

    async def _apply_acl_change(self, root: str, child: str) -> None:
        try:
            data, _ = await self.zk.get(f"{root}/{child}")
            pattern = az.decode_acl_change(root, data)
        except (NoNodeError, ValueError) as e:
            logger.warning("ignoring ACL change %s/%s: %s", root, child, e)
            return
        entries, _ = await self._read_acls(pattern)
        acls = AclCache(self.acls.bindings())
        acls.set_acls(pattern, entries)
        self.acls = acls

    # --- changes ------------------------------------------------------------------------

    async def alter_scram(self, upsertions: Sequence[Upsertion],
                          deletions: Sequence[Deletion]) -> None:
        changes: dict[str, list[tuple[str, ScramCredential | None]]] = {}
        for user, mechanism in deletions:
            changes.setdefault(user, []).append((mechanism, None))
        for user, mechanism, credential in upsertions:
            changes.setdefault(user, []).append((mechanism, credential))
        for user, user_changes in changes.items():
            configs = await self._user_config(user)
            for mechanism, credential in user_changes:
                configs = (sz.without_scram_credential(configs, mechanism) if credential is None
                           else sz.with_scram_credential(configs, mechanism, credential))
            await self._write_user(user, configs)
            await self.zk.create(sz.CONFIG_CHANGE_PATH, sz.encode_user_config_change(user),
                                 sequence=True, makepath=True)
            await self.reload_user(user)

    async def _write_user(self, user: str, configs: dict[str, str]) -> None:
        path, data = sz.user_config_path(user), sz.encode_user_config(configs)
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            await self.zk.create(path, data, makepath=True)

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        for pattern, entries in by_pattern.items():
            await self._update_acls(pattern, lambda old, new=entries: (*old, *new))

    async def delete_acls(self, filters: Sequence[AclBindingFilter]
                          ) -> list[list[AclBinding]]:
        removed = self.acls.deletions(filters)
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in (b for group in removed for b in group):
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, gone in by_pattern.items():
            await self._update_acls(
                pattern, lambda old, gone=gone: tuple(e for e in old if e not in gone))
        return removed

    async def _update_acls(self, pattern: ResourcePattern, change: _Change) -> None:
        """Read-modify-write of the resource's znode, retried when another broker wrote it
        meanwhile (``AclAuthorizer.updateResourceAcls``), then the change notification."""
        while True:
            old, version = await self._read_acls(pattern)
            new = tuple(dict.fromkeys(change(old)))
            try:
                await self._write_acls(pattern, new, version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue
        await self.zk.create(az.acl_change_path(pattern.pattern_type),
                             az.encode_acl_change(pattern), sequence=True, makepath=True)
        acls = AclCache(self.acls.bindings())
        acls.set_acls(pattern, new)
        self.acls = acls

    async def _write_acls(self, pattern: ResourcePattern,
                          entries: tuple[AccessControlEntry, ...], version: int) -> None:
        path = az.resource_path(pattern)
        if not entries:
            if version >= 0:
                await self.zk.delete(path, version)
        elif version < 0:
            await self.zk.create(path, az.encode_acls(entries), makepath=True)
        else:
            await self.zk.set(path, az.encode_acls(entries), version)

