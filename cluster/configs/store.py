"""The entity config store: its interface, the cache and listeners both kinds share, and
the single broker's, a JSON file in the first log dir."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Protocol

logger = logging.getLogger(__name__)

ENTITY_TYPES = ("brokers", "clients", "users", "ips")
#: Kafka's ``ConfigEntityName.DEFAULT``: the entity every broker, client or user inherits.
DEFAULT_ENTITY = "<default>"
FILE_NAME = "entity-configs.json"

Listener = Callable[[str, str], None]


class EntityConfigStore(Protocol):
    """Configs per (entity type, name); ``name`` of a user's client id entity is
    ``<user>/clients/<client>``."""

    def get(self, entity_type: str, name: str) -> Mapping[str, str]: ...

    def names(self, entity_type: str) -> list[str]: ...

    async def alter(self, entity_type: str, name: str, set: Mapping[str, str],
                    delete: Collection[str]) -> None: ...

    def subscribe(self, listener: Listener) -> None: ...


def check_entity_type(entity_type: str) -> None:
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"unknown entity type {entity_type!r}")


def altered(current: Mapping[str, str], set: Mapping[str, str],
            delete: Collection[str]) -> dict[str, str]:
    """``current`` with ``set`` applied and ``delete`` removed."""
    configs = {k: v for k, v in current.items() if k not in delete}
    configs.update(set)
    return configs


class CachedEntityConfigs:
    """The in-memory view both stores keep, and the listeners told of every change."""

    def __init__(self) -> None:
        self._configs: dict[str, dict[str, dict[str, str]]] = {t: {} for t in ENTITY_TYPES}
        self._listeners: list[Listener] = []

    def get(self, entity_type: str, name: str) -> Mapping[str, str]:
        check_entity_type(entity_type)
        return dict(self._configs[entity_type].get(name, {}))

    def names(self, entity_type: str) -> list[str]:
        check_entity_type(entity_type)
        return sorted(self._configs[entity_type])

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _put(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """Cache an entity's configs (none: forget it) and tell the listeners if changed."""
        entities = self._configs[entity_type]
        if entities.get(name, {}) == dict(configs):
            return
        if configs:
            entities[name] = dict(configs)
        else:
            entities.pop(name, None)
        for listener in self._listeners:
            try:
                listener(entity_type, name)
            except Exception:
                logger.exception("entity config listener failed for %s %s", entity_type,
                                 name)


class LocalEntityConfigStore(CachedEntityConfigs):
    """A single broker's entity configs, in ``entity-configs.json`` of its first log dir
    (written to a temporary file, synced, then renamed over the old one)."""

    def __init__(self, log_dir: str | Path) -> None:
        super().__init__()
        self._path = Path(log_dir) / FILE_NAME
        if self._path.exists():
            self._load()

    def _load(self) -> None:
        try:
            document = json.loads(self._path.read_text())
            for entity_type, entities in document.items():
                check_entity_type(entity_type)
                for name, configs in entities.items():
                    self._configs[entity_type][str(name)] = {
                        str(k): str(v) for k, v in configs.items()}
        except (OSError, ValueError, AttributeError) as e:
            raise ValueError(f"{self._path} is not a valid entity config file: {e}") from e

    async def alter(self, entity_type: str, name: str, set: Mapping[str, str],
                    delete: Collection[str]) -> None:
        check_entity_type(entity_type)
        configs = altered(self._configs[entity_type].get(name, {}), set, delete)
        document = {t: dict(e) for t, e in self._configs.items()}
        if configs:
            document[entity_type][name] = configs
        else:
            document[entity_type].pop(name, None)
        self._write(document)
        self._put(entity_type, name, configs)

    def _write(self, document: Mapping[str, object]) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._path.with_suffix(".tmp")
        with open(temporary, "w") as f:
            json.dump(document, f, sort_keys=True, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, self._path)
