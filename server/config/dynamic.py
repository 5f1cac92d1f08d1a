"""Dynamic broker configs: what Kafka's ``DynamicBrokerConfig`` checks before it stores
a change to a broker's settings (the ``brokers`` entities ``<id>`` and ``<default>``),
and what it drops when it reads them back.

The checks, in Kafka's order and with its messages: keys Kafka cannot change at
runtime; key and trust store keys without a listener prefix; each value's type and
range; per-broker keys set as the cluster-wide default. Then the whole configuration
that would result must hold (``check_update``), and thread counts may change by at
most a factor of two, as Kafka's thread pools and log cleaner require.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

from josefk.server.config.broker import BrokerConfig
from josefk.server.config.keys import BROKER_KEYS, LISTENER_ONLY_KEYS, PER_BROKER_KEYS
from josefk.server.config.passwords import PasswordCodec
from josefk.server.config.values import ConfigError, ConfigType, parse_value

logger = logging.getLogger(__name__)

BROKERS = "brokers"
DEFAULT = "<default>"

#: Kafka's ClusterLevelListenerConfigs: listener keys a cluster-wide default may set.
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"})
#: Dynamic in Kafka, but josefk reads them once at start-up: it cannot add or remove
#: listeners while it runs, and its group coordinator keeps its assignment interval.
RESTART_ONLY_KEYS = frozenset({"listeners", "listener.security.protocol.map",
                               "group.consumer.assignment.interval.ms"})
#: DynamicThreadPool and the log cleaner: a count may change by at most a factor of two.
_THREAD_POOL_KEYS = ("num.io.threads", "num.replica.fetchers",
                     "num.recovery.threads.per.data.dir", "background.threads")
_LISTENER_KEY = re.compile(r"listener\.name\.[^.]*\.(.*)")


def _base_name(name: str) -> str:
    match = _LISTENER_KEY.fullmatch(name)
    return match.group(1) if match else name


def _names(names: Iterable[str]) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def non_dynamic(props: Iterable[str]) -> set[str]:
    """The keys Kafka cannot change at runtime (``DynamicConfig.Broker.nonDynamicProps``)."""
    return {n for n in props if n in BROKER_KEYS and not BROKER_KEYS[n].dynamic}


def _listener_only(props: Iterable[str]) -> set[str]:
    return {n for n in props if n in LISTENER_ONLY_KEYS}


def _per_broker(props: Iterable[str]) -> set[str]:
    return {n for n in props if n not in _CLUSTER_LEVEL_LISTENER_KEYS and (
        n in PER_BROKER_KEYS or _base_name(n) not in _CLUSTER_LEVEL_LISTENER_KEYS
        and _LISTENER_KEY.fullmatch(n))}


def validate(props: Mapping[str, str], per_broker: bool) -> None:
    """``DynamicBrokerConfig.validateConfigs``: ConfigError (Kafka answers
    INVALID_REQUEST) with Kafka's message if ``props`` may not be stored."""
    refused = non_dynamic(props)
    if refused:
        raise ConfigError(f"Cannot update these configs dynamically: {_names(refused)}")
    refused = _listener_only(props)
    if refused:
        raise ConfigError("These security configs can be dynamically updated only "
                          f"per-listener using the listener prefix: {_names(refused)}")
    for name, raw in props.items():
        spec = BROKER_KEYS.get(_base_name(name))
        if spec is not None:
            parse_value(_base_name(name), raw, spec.type, spec.validator)
    if not per_broker:
        refused = _per_broker(props)
        if refused:
            raise ConfigError("Cannot update these configs at default cluster level, broker "
                              f"id must be specified: {_names(refused)}")
    refused = {n for n in props if _base_name(n) in RESTART_ONLY_KEYS}
    if refused:
        raise ConfigError(f"josefk cannot update these configs without a restart: "
                          f"{_names(refused)}")


def to_persistent(props: Mapping[str, str], per_broker: bool, passwords: PasswordCodec
                  ) -> dict[str, str]:
    """``toPersistentProps``: ``props`` with each password encoded for the store."""
    stored = dict(props)
    for name in (n for n in props if is_password(n)):
        if not per_broker:
            raise ConfigError("Password config can be defined only at broker level")
        stored[name] = passwords.encode(props[name])
    return stored


def from_persistent(props: Mapping[str, str], per_broker: bool, entity: str,
                    passwords: PasswordCodec) -> dict[str, str]:
    """``fromPersistentProps``: the stored settings less those that may not be set
    there, each dropped with an error naming it (never its value); passwords decoded."""
    kept = dict(props)
    for refused, reason in (
            (non_dynamic(kept) | {n for n in kept if _base_name(n) in RESTART_ONLY_KEYS},
             "Non-dynamic configs will be ignored"),
            (_listener_only(kept), "Security configs can be dynamically updated only using "
             "listener prefix, base configs will be ignored"),
            (set() if per_broker else _per_broker(kept),
             "Per-broker configs defined at default cluster level will be ignored")):
        if refused:
            logger.error("brokers/%s: %s: %s", entity, reason, _names(refused))
            for name in refused:
                kept.pop(name, None)
    for name in [n for n in kept if is_password(n)]:
        try:
            kept[name] = passwords.decode(kept[name])
        except ConfigError:
            logger.error("brokers/%s: dynamic password config %s could not be decoded, "
                         "ignoring", entity, name)
            del kept[name]
    for name in list(kept):
        spec = BROKER_KEYS.get(_base_name(name))
        if spec is None:
            continue
        try:
            parse_value(_base_name(name), kept[name], spec.type, spec.validator)
        except ConfigError:
            logger.error("brokers/%s: invalid value of %s ignored", entity, name)
            del kept[name]
    return kept


def check_update(current: BrokerConfig, default: Mapping[str, str],
                 broker: Mapping[str, str]) -> BrokerConfig:
    """The configuration the new dynamic settings give, checked as Kafka's reconfigurables
    check it; ConfigError if it does not hold."""
    updated = current.with_dynamic(default, broker)
    for name in _THREAD_POOL_KEYS:
        old, new = current.values[name], updated.values[name]
        if new != old:
            prefix = f"Dynamic thread count update validation failed for {name}={new}"
            if new <= 0:
                raise ConfigError(f"{prefix}, value should be at least 1")
            if new < old // 2:
                raise ConfigError(f"{prefix}, value should be at least half the current "
                                  f"value {old}")
            if new > old * 2:
                raise ConfigError(f"{prefix}, value should not be greater than double the "
                                  f"current value {old}")
    old, new = current.values["log.cleaner.threads"], updated.values["log.cleaner.threads"]
    if new != old:
        if new < 1:
            raise ConfigError("Log cleaner threads should be at least 1")
        if new < old // 2:
            raise ConfigError("Log cleaner threads cannot be reduced to less than half the "
                              f"current value {old}")
        if new > old * 2:
            raise ConfigError("Log cleaner threads cannot be increased to more than double "
                              f"the current value {old}")
    return updated


def loggable(props: Mapping[str, str]) -> dict[str, str]:
    """``KafkaConfig.loggableValue``: passwords and keys of unknown type hidden."""
    def shown(name: str) -> bool:
        spec = BROKER_KEYS.get(_base_name(name))
        return spec is not None and spec.type != ConfigType.PASSWORD
    return {n: v if shown(n) else "[hidden]" for n, v in props.items()}


def is_password(name: str) -> bool:
    """``DynamicBrokerConfig.isPasswordConfig``: a password key, listener prefixed or not."""
    spec = BROKER_KEYS.get(_base_name(name))
    return spec is not None and spec.type == ConfigType.PASSWORD
