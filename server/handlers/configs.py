"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

TOPIC resources are described, validated and altered as Kafka 4.x's broker and
controller do (ConfigHelper, ConfigAdminManager, ConfigurationControlManager).
BROKER resources are described (the node id, or "" for the cluster-wide dynamic
defaults); josefk has no dynamic broker configs, so altering one is refused with
INVALID_REQUEST, as Kafka refuses a static-only key ("Cannot update these configs
dynamically"), and deleting one is a no-op.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.configs import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.api_key import ApiKey

from josefk.cluster.metadata.errors import ClusterError, InvalidTopicError
from josefk.cluster.metadata.store import validate_topic_name
from josefk.cluster.security.acls import AclOperation
from josefk.protocol.error_codes import (
    INVALID_CONFIG,
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.messages import Request
from josefk.server.config.broker import validate_topic_configs
from josefk.server.config.keys import BROKER_KEYS, TOPIC_KEYS
from josefk.server.config.values import (
    INT32_MAX,
    ConfigEntry,
    ConfigError,
    ConfigType,
    parse_java_int,
    parse_value,
)
from josefk.server.handlers import Response
from josefk.server.security.checks import ERROR_MESSAGES, config_denied

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)


# ConfigResource.Type ids.
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
RESOURCE_TYPES = {TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER",
                  CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}
# AlterConfigOp.OpType ids.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

DescribeResult = DescribeConfigsResponse.DescribeConfigsResult
DescribeEntry = DescribeResult.DescribeConfigsResourceResult
DescribeSynonym = DescribeEntry.DescribeConfigsSynonym
AlterResult = AlterConfigsResponse.AlterConfigsResourceResponse
IncrementalResult = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse

Change = tuple[str, int, "str | None"]  # (config name, AlterConfigOp id, value)


class ResourceError(Exception):
    """A config resource Kafka answers with ``code`` (and ``message``)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- DescribeConfigs ---------------------------------------------------------------------


async def handle_describe(broker: Broker, request: Request) -> Response:
    """DescribeConfigs v1-4: topic and broker configs, with synonyms and documentation
    when asked for, filtered by ``configuration_keys`` (null or empty: all)."""
    body = request.body
    include_docs = request.api_version >= 3 and body.include_documentation
    results, refused = [], []
    for r in body.resources:
        denied = config_denied(broker.authorizer, AclOperation.DESCRIBE_CONFIGS,
                               r.resource_type, r.resource_name)
        if denied is not None:  # answered last, as Kafka's ConfigHelper does
            refused.append(DescribeResult(
                error_code=denied, error_message=ERROR_MESSAGES[denied],
                resource_type=r.resource_type, resource_name=r.resource_name, configs=[]))
            continue
        try:
            entries = describe_resource(broker, r.resource_type, r.resource_name)
        except ResourceError as e:
            logger.info("DescribeConfigs %s %r: error %d %s", RESOURCE_TYPES.get(
                r.resource_type, r.resource_type), r.resource_name, e.code, e.message or "")
            results.append(DescribeResult(
                error_code=e.code, error_message=e.message or "", resource_type=r.resource_type,
                resource_name=r.resource_name, configs=[]))
            continue
        if r.configuration_keys:
            keys = set(r.configuration_keys)
            entries = [e for e in entries if e.name in keys]
        results.append(DescribeResult(
            error_code=NONE, error_message="", resource_type=r.resource_type,
            resource_name=r.resource_name,
            configs=[_describe_entry(e, body.include_synonyms, include_docs) for e in entries]))
    return {"throttle_time_ms": 0, "results": results + refused}


def describe_resource(broker: Broker, resource_type: int, name: str) -> list[ConfigEntry]:
    """Every config of one resource (Kafka's ConfigHelper.describeConfigs)."""
    if resource_type == TOPIC:
        _check_topic_name(name)
        topic = broker.store.get(name)
        if topic is None:
            raise ResourceError(UNKNOWN_TOPIC_OR_PARTITION)
        return list(broker.describe_topic_configs(topic.name, topic.configs))
    if resource_type == BROKER:
        if not name:
            # Kafka lists the dynamic cluster-wide defaults only; josefk has none.
            return []
        if _broker_id(name) != broker.node_id:
            raise ResourceError(INVALID_REQUEST, f"Unexpected broker id, expected "
                                f"{broker.node_id} or empty string, but received {name}")
        return broker.config.describe()
    if resource_type in RESOURCE_TYPES:
        raise ResourceError(INVALID_REQUEST, f"josefk does not support "
                            f"{RESOURCE_TYPES[resource_type]} config resources")
    raise ResourceError(INVALID_REQUEST, f"Unsupported resource type: {resource_type}")


def _describe_entry(entry: ConfigEntry, include_synonyms: bool, include_docs: bool) -> Any:
    sensitive = entry.is_sensitive
    synonyms = [DescribeSynonym(name=s.name, value=None if sensitive else s.value,
                                source=int(s.source))
                for s in entry.synonyms] if include_synonyms else []
    return DescribeEntry(
        name=entry.name, value=None if sensitive else entry.value, read_only=entry.read_only,
        config_source=int(entry.source), is_default=entry.is_default,
        is_sensitive=sensitive, synonyms=synonyms, config_type=int(entry.config_type),
        documentation=entry.documentation if include_docs else None)


# --- AlterConfigs and IncrementalAlterConfigs --------------------------------------------


async def handle_alter(broker: Broker, request: Request) -> Response:
    """AlterConfigs v0-2: replace a resource's whole set of overrides."""
    body = request.body
    results = await _alter(broker, [(r.resource_type, r.resource_name,
                               [(c.name, SET, c.value) for c in r.configs])
                              for r in body.resources],
                     incremental=False, validate_only=body.validate_only)
    return {"throttle_time_ms": 0,
            "responses": [AlterResult(**fields) for fields in results]}


async def handle_incremental_alter(broker: Broker, request: Request) -> Response:
    """IncrementalAlterConfigs v0-1: SET, DELETE, APPEND and SUBTRACT single keys."""
    body = request.body
    results = await _alter(broker, [(r.resource_type, r.resource_name,
                               [(c.name, c.config_operation, c.value) for c in r.configs])
                              for r in body.resources],
                     incremental=True, validate_only=body.validate_only)
    return {"throttle_time_ms": 0,
            "responses": [IncrementalResult(**fields) for fields in results]}


async def _alter(broker: Broker, resources: list[tuple[int, str, list[Change]]], *,
           incremental: bool, validate_only: bool) -> list[dict[str, Any]]:
    counts = Counter((rtype, name) for rtype, name, _ in resources)
    results = []
    for rtype, name, changes in resources:
        code, message = NONE, None
        try:
            if counts[(rtype, name)] > 1:
                raise ResourceError(INVALID_REQUEST, "Each resource must appear at most once.")
            _check_alter_allowed(broker, rtype, name, changes, incremental)
            await alter_resource(broker, rtype, name, changes, incremental=incremental,
                           validate_only=validate_only)
        except ResourceError as e:
            code, message = e.code, e.message
            logger.info("%sAlterConfigs %s %r refused: error %d %s",
                        "Incremental" if incremental else "", RESOURCE_TYPES.get(rtype, rtype),
                        name, code, message or "")
        results.append({"error_code": code, "error_message": message,
                        "resource_type": rtype, "resource_name": name})
    return results


def _check_alter_allowed(broker: Broker, rtype: int, name: str, changes: Sequence[Change],
                         incremental: bool) -> None:
    """ALTER_CONFIGS on the resource, checked as Kafka does: after the checks of the
    request itself (the broker's ConfigAdminManager.preprocess)."""
    if not broker.authorizer.enabled or (rtype == BROKER_LOGGER and not incremental):
        return
    _check_changes(changes)
    if rtype == BROKER and name and _broker_id(name, "Node id") != broker.node_id:
        return  # alter_resource refuses it
    denied = config_denied(broker.authorizer, AclOperation.ALTER_CONFIGS, rtype, name)
    if denied is not None:
        raise ResourceError(denied, ERROR_MESSAGES[denied])


def _check_changes(changes: Sequence[Change]) -> None:
    keys = Counter(key for key, _, _ in changes)
    if any(n > 1 for n in keys.values()):
        raise ResourceError(INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [key for key, op, value in changes if value is None and op != DELETE]
    if nulls:
        raise ResourceError(INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))


async def alter_resource(broker: Broker, rtype: int, name: str, changes: Sequence[Change], *,
                   incremental: bool, validate_only: bool) -> None:
    """Apply (or with ``validate_only`` check) one resource's changes; ResourceError if
    refused. Without ``incremental`` the changes (all SET) replace every override."""
    _check_changes(changes)
    if rtype == TOPIC:
        await _alter_topic(broker, name, changes, incremental, validate_only)
    elif rtype == BROKER:
        _alter_broker(broker, name, changes, incremental)
    elif rtype in (CLIENT_METRICS, GROUP) or (rtype == BROKER_LOGGER and incremental):
        raise ResourceError(INVALID_REQUEST, f"josefk does not support altering "
                            f"{RESOURCE_TYPES[rtype]} config resources")
    else:
        raise ResourceError(INVALID_REQUEST, f"Unknown resource type {rtype}")


async def _alter_topic(broker: Broker, name: str, changes: Sequence[Change], incremental: bool,
                 validate_only: bool) -> None:
    if not name:
        raise ResourceError(INVALID_REQUEST, "Default topic resources are not allowed.")
    _check_topic_name(name)
    topic = broker.store.get(name)
    current = dict(topic.configs) if topic is not None else {}
    if incremental:
        wanted = apply_incremental(current, changes)
    else:
        wanted = {key: value for key, _, value in changes if value is not None}
    # As the controller: validate the resulting overrides, then check the topic exists.
    try:
        validate_topic_configs(wanted, broker=broker.config)
    except ConfigError as e:
        raise ResourceError(INVALID_CONFIG, str(e)) from e
    if topic is None:
        raise ResourceError(UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    try:
        await broker.alter_topic_configs(
            name, {k: v for k, v in wanted.items() if current.get(k) != v},
            [k for k in current if k not in wanted], validate_only=validate_only)
    except ClusterError as e:
        raise ResourceError(e.error_code, str(e)) from e
    if not validate_only:
        logger.info("topic %s configs: %s", name, wanted)


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
            items = _java_split(value)
            result[key] = ",".join(_append(parts, items) if op == APPEND
                                   else _subtract(parts, items))
        else:
            raise ResourceError(INVALID_REQUEST, f"Unknown operations type {op}")
    return result


def _append(parts: list[str], items: Iterable[str]) -> list[str]:
    """``parts`` and then each item not yet among them (duplicates ``parts`` already
    had stay), as Kafka's ``if (!list.contains(v)) list.add(v)``, in linear time."""
    present = set(parts)
    result = list(parts)
    for item in items:
        if item not in present:
            present.add(item)
            result.append(item)
    return result


def _subtract(parts: list[str], items: Iterable[str]) -> list[str]:
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


def _java_split(value: str) -> list[str]:
    """Java's ``value.split(",")``: trailing empty strings dropped, unless nothing
    was split."""
    parts = value.split(",")
    if len(parts) > 1:
        while parts and not parts[-1]:
            parts.pop()
    return parts


def _alter_broker(broker: Broker, name: str, changes: Sequence[Change],
                  incremental: bool) -> None:
    """Kafka's ConfigAdminManager checks for BROKER resources, then josefk's refusal.

    The dynamic set starts empty (josefk has none), so DELETEs leave nothing to change.
    """
    if name and _broker_id(name, "Node id") != broker.node_id:
        raise ResourceError(INVALID_REQUEST, f"Unexpected broker id, expected "
                            f"{broker.node_id}, but received {name}")
    props: dict[str, str] = {}
    for key, op, value in changes:
        if op == SET:
            assert value is not None
            props[key] = value
        elif op == DELETE:
            props.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            spec = BROKER_KEYS.get(key)
            if spec is None:
                raise ResourceError(INVALID_CONFIG, f"Unknown config name: {key}")
            if spec.type != ConfigType.LIST:
                raise ResourceError(INVALID_CONFIG, f"Config value {OP_NAMES[op].lower()} is "
                                    f"not allowed for config key: {key}")
            props[key] = value or ""
        else:
            raise ResourceError(INVALID_REQUEST, f"Unknown operations type {op}")
    static = [key for key in props if key in BROKER_KEYS and not BROKER_KEYS[key].dynamic]
    if static:
        raise ResourceError(INVALID_REQUEST, "Cannot update these configs dynamically: "
                            f"[{', '.join(static)}]")
    for key, value in props.items():
        spec = BROKER_KEYS.get(key)
        if spec is not None:
            try:
                parse_value(key, value, spec.type, spec.validator)
            except ConfigError as e:
                raise ResourceError(INVALID_REQUEST, str(e)) from e
    if props:
        raise ResourceError(INVALID_REQUEST, "josefk does not support dynamic broker configs "
                            f"(set them in server.properties): {', '.join(props)}")


def _check_topic_name(name: str) -> None:
    try:
        validate_topic_name(name)
    except InvalidTopicError as e:
        raise ResourceError(INVALID_TOPIC_EXCEPTION, str(e)) from e


def _broker_id(name: str, what: str = "Broker id") -> int:
    """The node id a BROKER resource names (Java's ``Integer.parseInt``)."""
    node_id = parse_java_int(name, -(1 << 31), INT32_MAX)
    if node_id is None:
        raise ResourceError(INVALID_REQUEST, f"{what} must be an integer, but it is: {name}")
    return node_id


HANDLERS = {
    ApiKey.DescribeConfigs: handle_describe,
    ApiKey.AlterConfigs: handle_alter,
    ApiKey.IncrementalAlterConfigs: handle_incremental_alter,
}
