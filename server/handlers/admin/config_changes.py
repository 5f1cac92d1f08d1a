"""What the config handlers share: resource and operation ids, the error a resource
is answered with, broker ids, and Kafka's APPEND/SUBTRACT on list values."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from josefk.protocol.error_codes import INVALID_CONFIG, INVALID_REQUEST
from josefk.server.config.keys import TOPIC_KEYS
from josefk.server.config.values import INT32_MAX, ConfigType, parse_java_int

# ConfigResource.Type ids.
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
RESOURCE_TYPES = {TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER",
                  CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}
# AlterConfigOp.OpType ids.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

Change = tuple[str, int, "str | None"]  # (config name, AlterConfigOp id, value)


class ResourceError(Exception):
    """A config resource Kafka answers with ``code`` (and ``message``)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message



def broker_id(name: str, what: str = "Broker id") -> int:
    """The node id a BROKER resource names (Java's ``Integer.parseInt``)."""
    node_id = parse_java_int(name, -(1 << 31), INT32_MAX)
    if node_id is None:
        raise ResourceError(INVALID_REQUEST, f"{what} must be an integer, but it is: {name}")
    return node_id


def apply_incremental(current: dict[str, str], changes: Iterable[Change]) -> dict[str, str]:
    """A topic's overrides after SET/DELETE/APPEND/SUBTRACT (ConfigurationControlManager).

    APPEND and SUBTRACT work on LIST configs only, starting from the override or else
    the config's default; they split the given value at commas.
    """
    result = dict(current)
    for key, op, value in changes:
        if op == SET:
            assert value is not None
            result[key] = value
        elif op == DELETE:
            result.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            assert value is not None
            spec = TOPIC_KEYS.get(key)
            if spec is None or spec.type != ConfigType.LIST:
                raise ResourceError(INVALID_CONFIG, f"Can't {OP_NAMES[op]} to key {key} "
                                    "because its type is not LIST.")
            old = result.get(key)
            if old is None:
                old = ",".join(spec.default or [])
            parts = [p for p in old.split(",") if p]
            items = java_split(value)
            result[key] = ",".join(append_items(parts, items) if op == APPEND
                                   else subtract_items(parts, items))
        else:
            raise ResourceError(INVALID_REQUEST, f"Unknown operations type {op}")
    return result


def append_items(parts: list[str], items: Iterable[str]) -> list[str]:
    """``parts`` and then each item not yet among them (duplicates ``parts`` already
    had stay), as Kafka's ``if (!list.contains(v)) list.add(v)``, in linear time."""
    present = set(parts)
    result = list(parts)
    for item in items:
        if item not in present:
            present.add(item)
            result.append(item)
    return result


def subtract_items(parts: list[str], items: Iterable[str]) -> list[str]:
    """``parts`` less one occurrence, the first, per item (Kafka's ``list.remove(v)``
    for each), in linear time."""
    remove = Counter(items)
    result = []
    for part in parts:
        if remove[part] > 0:
            remove[part] -= 1
        else:
            result.append(part)
    return result


def java_split(value: str) -> list[str]:
    """Java's ``value.split(",")``: trailing empty strings dropped, unless nothing
    was split."""
    parts = value.split(",")
    if len(parts) > 1:
        while parts and not parts[-1]:
            parts.pop()
    return parts


