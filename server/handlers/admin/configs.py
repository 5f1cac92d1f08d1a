"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

TOPIC resources are described, validated and altered as Kafka 4.x's broker and
controller do (ConfigHelper, ConfigAdminManager, ConfigurationControlManager).
BROKER resources (the node id, or "" for the cluster-wide dynamic defaults) are
described with each value's source, and altered as Kafka's dynamic broker configs:
checked (``config.dynamic``), stored in the entity config store, and applied by every
broker when the store tells it of the change (``server.reconfiguration``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
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
from josefk.server.config.values import ConfigEntry, ConfigError
from josefk.server.handlers import Response
from josefk.server.handlers.admin.broker_configs import (
    alter_broker,
    alter_loggers,
    describe_broker_resource,
)
from josefk.server.handlers.admin.config_changes import (
    BROKER,
    BROKER_LOGGER,
    CLIENT_METRICS,
    DELETE,
    GROUP,
    RESOURCE_TYPES,
    SET,
    TOPIC,
    Change,
    ResourceError,
    apply_incremental,
    broker_id,
)
from josefk.server.security.checks import ERROR_MESSAGES, config_denied

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)


DescribeResult = DescribeConfigsResponse.DescribeConfigsResult
DescribeEntry = DescribeResult.DescribeConfigsResourceResult
DescribeSynonym = DescribeEntry.DescribeConfigsSynonym
AlterResult = AlterConfigsResponse.AlterConfigsResourceResponse
IncrementalResult = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse

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
    if resource_type in (BROKER, BROKER_LOGGER):
        return describe_broker_resource(broker, resource_type, name)
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
    if rtype == BROKER and name and broker_id(name, "Node id") != broker.node_id:
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
        await alter_broker(broker, name, changes, incremental, validate_only)
    elif rtype == BROKER_LOGGER and incremental:
        alter_loggers(broker, name, changes, validate_only)
    elif rtype in (CLIENT_METRICS, GROUP):
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


def _check_topic_name(name: str) -> None:
    try:
        validate_topic_name(name)
    except InvalidTopicError as e:
        raise ResourceError(INVALID_TOPIC_EXCEPTION, str(e)) from e


HANDLERS = {
    ApiKey.DescribeConfigs: handle_describe,
    ApiKey.AlterConfigs: handle_alter,
    ApiKey.IncrementalAlterConfigs: handle_incremental_alter,
}
