"""DescribeConfigs and (Incremental)AlterConfigs of BROKER resources (a broker's id, or
"" for the cluster-wide default) and BROKER_LOGGER resources (log levels).

BROKER changes are checked as Kafka's ConfigAdminManager and DynamicBrokerConfig check
them (``config.dynamic``), stored in the entity config store (entity type "brokers",
"<id>" or "<default>"), and applied by every broker when the store tells it of the
change (``server.reconfiguration``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from josefk.protocol.error_codes import INVALID_CONFIG, INVALID_REQUEST
from josefk.server.config.dynamic import (
    BROKERS,
    DEFAULT,
    check_update,
    from_persistent,
    loggable,
    to_persistent,
    validate,
)
from josefk.server.config.keys import BROKER_KEYS
from josefk.server.config.values import ConfigEntry, ConfigError, ConfigSource, ConfigType
from josefk.server.handlers.admin import broker_loggers
from josefk.server.handlers.admin.config_changes import (
    APPEND,
    BROKER,
    DELETE,
    OP_NAMES,
    SET,
    SUBTRACT,
    Change,
    ResourceError,
    append_items,
    broker_id,
    subtract_items,
)
from josefk.server.reconfiguration import check_listeners

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)


def describe_broker_resource(broker: Broker, resource_type: int, name: str
                             ) -> list[ConfigEntry]:
    """ConfigHelper.describeConfigs of a BROKER or BROKER_LOGGER resource."""
    if resource_type == BROKER:
        if not name:  # the cluster-wide default: its dynamic settings only
            return broker.config.describe(per_broker=False)
        if broker_id(name) != broker.node_id:
            raise ResourceError(INVALID_REQUEST, f"Unexpected broker id, expected "
                                f"{broker.node_id} or empty string, but received {name}")
        return broker.config.describe()
    if not name:  # BROKER_LOGGER
        raise ResourceError(INVALID_REQUEST, "Broker id must not be empty")
    if broker_id(name) != broker.node_id:
        raise ResourceError(INVALID_REQUEST, f"Unexpected broker id, expected "
                            f"{broker.node_id} but received {name}")
    return [ConfigEntry(name=n, value=level, source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                        read_only=False, is_sensitive=False, config_type=ConfigType.UNKNOWN)
            for n, level in broker_loggers.loggers().items()]


async def alter_broker(broker: Broker, name: str, changes: Sequence[Change],
                       incremental: bool, validate_only: bool) -> None:
    """A broker's (``name``) or the cluster-wide default's (``""``) dynamic configs, as
    Kafka's ConfigAdminManager checks them and DynamicBrokerConfig validates them;
    stored in the entity config store, whose change every broker then applies."""
    if name and broker_id(name, "Node id") != broker.node_id:
        raise ResourceError(INVALID_REQUEST, f"Unexpected broker id, expected "
                            f"{broker.node_id}, but received {name}")
    per_broker = bool(name)
    entity = str(broker.node_id) if per_broker else DEFAULT
    stored = broker.entity_configs.get(BROKERS, entity)
    config = broker.config
    try:
        passwords = broker.reconfiguration.passwords()
        if incremental:
            props = _apply_broker_ops(from_persistent(stored, per_broker, entity, passwords),
                                      changes)
        else:
            props = {key: value for key, _, value in changes if value is not None}
        validate(props, per_broker)
        persistent = to_persistent(props, per_broker, passwords)
        updated = check_update(config, config.dynamic_default if per_broker else props,
                               props if per_broker else config.dynamic_broker)
        check_listeners(broker, updated)
    except ConfigError as e:
        raise ResourceError(INVALID_REQUEST, str(e)) from e
    if validate_only:
        return
    await broker.entity_configs.alter(
        BROKERS, entity, {k: v for k, v in persistent.items() if stored.get(k) != v},
        [k for k in stored if k not in persistent])
    logger.info("dynamic configs of brokers/%s: %s", entity, loggable(props))


def alter_loggers(broker: Broker, name: str, changes: Sequence[Change],
                  validate_only: bool) -> None:
    """Log levels at runtime, as Kafka's RuntimeLoggerManager."""
    node_id = broker_id(name, "Node id")
    if node_id != broker.node_id:
        # Kafka's message names its own id twice.
        raise ResourceError(INVALID_REQUEST, f"Unexpected node id. Expected {broker.node_id}, "
                            f"but received {broker.node_id}")
    try:
        broker_loggers.validate(changes)
    except broker_loggers.LoggerError as e:
        raise ResourceError(INVALID_REQUEST if e.invalid_request else INVALID_CONFIG,
                            str(e)) from e
    if not validate_only:
        broker_loggers.apply(changes, logger)


def _apply_broker_ops(props: dict[str, str], changes: Sequence[Change]) -> dict[str, str]:
    """Kafka's ``ConfigAdminManager.prepareIncrementalConfigs`` on broker keys."""
    for key, op, value in changes:
        if op == SET:
            assert value is not None
            props[key] = value
        elif op == DELETE:
            props.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            assert value is not None
            spec = BROKER_KEYS.get(key)
            if spec is None:
                raise ResourceError(INVALID_CONFIG, f"Unknown config name: {key}")
            if spec.type != ConfigType.LIST:
                raise ResourceError(INVALID_CONFIG, f"Config value {OP_NAMES[op].lower()} is "
                                    f"not allowed for config key: {key}")
            old = props.get(key)
            if old is None:
                old = ",".join(spec.default or [])
            parts = old.split(",") if old or op == SUBTRACT else []
            items = value.split(",")
            props[key] = ",".join(append_items(parts, items) if op == APPEND
                                  else subtract_items(parts, items))
        else:
            raise ResourceError(INVALID_REQUEST, f"Unknown operations type {op}")
    return props


