"""DescribeConfigs answers for BROKER and TOPIC resources, as Kafka's ``ConfigHelper``.

A value comes from the first of four layers that sets it: the dynamic per-broker
settings (DYNAMIC_BROKER_CONFIG), the dynamic cluster-wide defaults
(DYNAMIC_DEFAULT_BROKER_CONFIG), server.properties and ``--override``
(STATIC_BROKER_CONFIG), Kafka's defaults (DEFAULT_CONFIG). A key's synonyms list every
layer's setting of the key and of the keys that stand in for it (``log.retention.ms``,
``.minutes``, ``.hours``), layer by layer, dropping those before the key itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from josefk.server.config.keys import BROKER_KEYS, TOPIC_KEYS, ConfigKey, broker_synonyms
from josefk.server.config.listener_overrides import PREFIX as LISTENER_PREFIX
from josefk.server.config.values import (
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    parse_value,
    to_string,
)

# ListenerMechanismConfigs: listener.name.<l>.<mechanism>.<key> stands in for <key>.
_MECHANISM_KEYS = ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                   "sasl.server.callback.handler.class", "connections.max.reauth.ms")


class Layers(Protocol):
    """The configured layers of a broker (``BrokerConfig``)."""

    node_id: int
    static_props: Mapping[str, str]
    dynamic_default: Mapping[str, str]
    dynamic_broker: Mapping[str, str]
    values: Mapping[str, Any]


def synonym_names(name: str) -> tuple[str, ...]:
    """``DynamicBrokerConfig.brokerConfigSynonyms(name, matchListenerOverride=true)``."""
    if name.startswith(LISTENER_PREFIX):
        _, _, base = name[len(LISTENER_PREFIX):].partition(".")
        if base:
            return name, next((k for k in _MECHANISM_KEYS if base.endswith(k)), base)
    return broker_synonyms(name)


def key_type(name: str) -> ConfigType:
    """``KafkaConfig.configType``: a listener override has its base key's type."""
    for candidate in (name, *synonym_names(name)):
        spec = BROKER_KEYS.get(candidate)
        if spec is not None:
            return spec.type
    return ConfigType.UNKNOWN


def is_sensitive(kind: ConfigType) -> bool:
    """``KafkaConfig.maybeSensitive``: passwords, and keys of unknown type."""
    return kind in (ConfigType.PASSWORD, ConfigType.UNKNOWN)


def _static_strings(config: Layers) -> Mapping[str, str]:
    props = dict(config.static_props)
    if "node.id" in props or "broker.id" in props:  # KafkaConfig.populateSynonyms
        props["node.id"] = props["broker.id"] = str(config.node_id)
    return props


def _default_string(name: str) -> str | None:
    spec = BROKER_KEYS.get(name)
    return None if spec is None else to_string(spec.default, spec.type)


def config_synonyms(config: Layers, name: str, names: tuple[str, ...], sensitive: bool
                    ) -> list[ConfigSynonym]:
    """``ConfigHelper.configSynonyms``: each layer's settings of ``names``, in order of
    precedence, from ``name``'s first on."""
    static = _static_strings(config)
    found = []
    for layer, source in ((config.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                          (config.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                          (static, ConfigSource.STATIC_BROKER_CONFIG)):
        found += [ConfigSynonym(n, None if sensitive else layer[n], source)
                  for n in names if n in layer]
    for n in names:
        default = _default_string(n)
        if default is not None:
            found.append(ConfigSynonym(n, None if sensitive else default,
                                       ConfigSource.DEFAULT_CONFIG))
    while found and found[0].name != name:
        found.pop(0)
    return found


def _broker_entry(config: Layers, name: str, value: str | None, per_broker: bool) -> ConfigEntry:
    kind = key_type(name)
    sensitive = is_sensitive(kind)
    synonyms = [s for s in config_synonyms(config, name, synonym_names(name), sensitive)
                if per_broker or s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    spec = BROKER_KEYS.get(name)
    return ConfigEntry(
        name=name, value=None if sensitive else value,
        source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
        read_only=spec is None or not spec.dynamic, is_sensitive=sensitive, config_type=kind,
        documentation=None if spec is None else spec.doc, synonyms=tuple(synonyms))


def describe_broker(config: Layers, per_broker: bool = True) -> list[ConfigEntry]:
    """DescribeConfigs(BROKER), sorted by name: with ``per_broker`` every known key and
    every key set (unknown ones and listener overrides too); else (the cluster-wide
    default resource, an empty name) the dynamic cluster-wide defaults only."""
    if not per_broker:
        return [_broker_entry(config, n, v, False) for n, v in sorted(
            config.dynamic_default.items())]
    given = {**config.static_props, **config.dynamic_default, **config.dynamic_broker}
    given.update({n: to_string(config.values[n], spec.type) for n, spec in BROKER_KEYS.items()})
    return [_broker_entry(config, n, v, True) for n, v in sorted(given.items())]


def describe_topic(config: Layers, overrides: Mapping[str, str],
                   broker_default: Callable[[ConfigKey], Any]) -> list[ConfigEntry]:
    """DescribeConfigs(TOPIC): every topic config, sorted by name. ``broker_default``
    gives a config's value where the topic does not override it."""
    entries = []
    for name, spec in sorted(TOPIC_KEYS.items()):
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            try:
                value = to_string(parse_value(name, overrides[name], spec.type), spec.type)
            except ConfigError:
                value = overrides[name]
            synonyms.append(ConfigSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        else:
            value = to_string(broker_default(spec), spec.type)
        if spec.synonyms:
            primary = spec.synonyms[0]
            synonyms += config_synonyms(config, primary, broker_synonyms(primary), False)
        entries.append(ConfigEntry(
            name=name, value=value,
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=False, is_sensitive=False, config_type=spec.type,
            documentation=spec.doc, synonyms=tuple(synonyms)))
    return entries
