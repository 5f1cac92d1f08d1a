"""Entity configs in ZooKeeper as Kafka 3.9 keeps them (``AdminZkClient.changeEntityConfig``,
``ZkConfigManager``), so brokers of either kind agree:

=============================================  =============================================
znode                                          data
=============================================  =============================================
/config/brokers/<id> or /config/brokers/       {"version":1,"config":{...}}
<default>
/config/clients/<client id>                    the same
/config/users/<user>[/clients/<client id>]     the same (a user's node also holds its SCRAM
                                               credentials: kept as they are)
/config/changes/config_change_<10 digits>      {"version":2,"entity_path":"<type>/<name>"}
=============================================  =============================================

Names are sanitized with Kafka's ``Sanitizer`` except ``<default>``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from josefk.cluster.configs.store import (
    DEFAULT_ENTITY,
    ENTITY_TYPES,
    CachedEntityConfigs,
    altered,
    check_entity_type,
)
from josefk.cluster.security.scram_znodes import desanitize, sanitize
from josefk.cluster.zk.client import BadVersionError, NodeExistsError, NoNodeError, ZooKeeper
from josefk.cluster.zk.znodes import (
    CONFIG,
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES,
    ZnodeFormatError,
    decode_config,
    encode_config,
    encode_config_change,
)

logger = logging.getLogger(__name__)

USER_CLIENTS = "/clients/"


def _sanitize(name: str) -> str:
    return name if name == DEFAULT_ENTITY else sanitize(name)


def _desanitize(name: str) -> str:
    return name if name == DEFAULT_ENTITY else desanitize(name)


def entity_path(entity_type: str, name: str) -> str:
    """``users/alice/clients/app`` for the user alice's client id app (sanitized)."""
    if entity_type == "users" and USER_CLIENTS in name:
        user, _, client = name.partition(USER_CLIENTS)
        return f"users/{_sanitize(user)}/clients/{_sanitize(client)}"
    return f"{entity_type}/{_sanitize(name)}"


def entity_of(path: str) -> tuple[str, str]:
    """The (entity type, name) of a notification's ``entity_path``."""
    entity_type, _, rest = path.partition("/")
    check_entity_type(entity_type)
    if entity_type == "users" and "/clients/" in rest:
        user, _, client = rest.partition("/clients/")
        return entity_type, f"{_desanitize(user)}{USER_CLIENTS}{_desanitize(client)}"
    if not rest or "/" in rest:
        raise ValueError(f"bad entity path {path!r}")
    return entity_type, _desanitize(rest)


class ZkEntityConfigStore(CachedEntityConfigs):
    """The cluster's entity configs: ZooKeeper holds them, memory a cache kept current by
    the ``/config/changes`` notifications (`on_change`)."""

    def __init__(self, zk: ZooKeeper) -> None:
        super().__init__()
        self.zk = zk

    async def load(self) -> None:
        """Every entity's configs, at start-up."""
        for entity_type in ENTITY_TYPES:
            for child in await self._children(f"{CONFIG}/{entity_type}"):
                await self._reload(f"{entity_type}/{child}")
                if entity_type == "users":
                    for client in await self._children(f"{CONFIG}/users/{child}/clients"):
                        await self._reload(f"users/{child}/clients/{client}")

    async def _children(self, path: str) -> list[str]:
        try:
            return sorted(await self.zk.get_children(path))
        except NoNodeError:
            return []

    async def on_change(self, path: str) -> None:
        """A ``/config/changes`` notification for ``path`` (``clients/app``...)."""
        await self._reload(path)

    async def _reload(self, path: str) -> None:
        try:
            entity_type, name = entity_of(path)
        except ValueError as e:
            logger.warning("ignoring config entity %r: %s", path, e)
            return
        configs, _ = await self._read(path)
        self._put(entity_type, name, configs)

    async def _read(self, path: str) -> tuple[dict[str, str], int]:
        """The entity's configs and znode version (-1: no znode)."""
        try:
            data, stat = await self.zk.get(f"{CONFIG}/{path}")
        except NoNodeError:
            return {}, -1
        try:
            return decode_config(data), stat.version
        except ZnodeFormatError as e:
            logger.warning("unreadable configs of %s in ZooKeeper: %s", path, e)
            return {}, stat.version

    async def alter(self, entity_type: str, name: str, set: Mapping[str, str],
                    delete: Collection[str]) -> None:
        check_entity_type(entity_type)
        path = entity_path(entity_type, name)
        while True:  # read, change, write if nobody wrote meanwhile
            current, version = await self._read(path)
            configs = altered(current, set, delete)
            data = encode_config(configs)
            try:
                if version < 0:
                    await self.zk.create(f"{CONFIG}/{path}", data, makepath=True)
                else:
                    await self.zk.set(f"{CONFIG}/{path}", data, version)
                break
            except (BadVersionError, NodeExistsError):
                continue
        await self.zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}",
                             encode_config_change(path), sequence=True, makepath=True)
        self._put(entity_type, name, configs)
