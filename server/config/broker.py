"""Broker configuration: Apache Kafka's ``server.properties`` keys, types and defaults.

The reference is Apache Kafka 4.3 (the jars in ``.cache/kafka/libs``): the key names,
types, defaults and validators of ``KafkaConfig`` and of the topic-level ``LogConfig``,
the topic-to-broker synonyms of ``ServerTopicConfigSynonyms`` and the dynamic
(read-write) set of ``DynamicBrokerConfig``. Where josefk differs it says so:

* With nothing configured josefk is one broker, ``node.id=0``, on
  ``listeners=PLAINTEXT://127.0.0.1:9092`` with data in ``./josefk-data`` (Kafka
  requires ``node.id`` and defaults to ``PLAINTEXT://:9092`` and ``/tmp/kafka-logs``).
* Only the PLAINTEXT security protocol is served; listener ports must be 0-65535.
* A listener bound to the wildcard (empty host or ``0.0.0.0``) with no
  ``advertised.listeners`` is advertised under this machine's canonical host name
  (Kafka does that for an empty host but refuses ``0.0.0.0``). An explicit
  ``advertised.listeners`` entry with ``0.0.0.0`` is refused, as in Kafka.
* The ZooKeeper-mode keys of Kafka 3.9 (``zookeeper.*``, ``controlled.shutdown.*``,
  ``controller.socket.timeout.ms``, ``inter.broker.protocol.version``) and
  ``cluster.id`` are accepted (Kafka 4 has none of them); ``zookeeper.connect`` turns
  cluster mode on. ``default.replication.factor`` must be >= 1.
* Accepted and reported by DescribeConfigs (with their documentation) but without
  effect: the thread counts (``num.network.threads``, ``num.io.threads``,
  ``background.threads``, ``num.replica.fetchers``) since josefk serves everything
  from one trio thread (``num.recovery.threads.per.data.dir`` does set how many logs
  are flushed and closed at once at shutdown),
  the purgatory purge intervals, and the KRaft and share coordinator keys
  (``process.roles``, ``controller.*``, ``metadata.log.dir``,
  ``share.coordinator.state.topic.*``).

Unknown keys are kept in ``BrokerConfig.unknown`` with a warning, as Kafka does.
Dynamic broker configs (``config.dynamic``) are two more layers over the static
settings: ``from_properties``/``with_dynamic`` take the cluster-wide defaults and this
broker's own, and ``values`` and the typed attributes are the result.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from josefk.log.config import InvalidConfigError, LogConfig
from josefk.server.config.describe import describe_broker, describe_topic
from josefk.server.config.keys import BROKER_KEYS, TOPIC_KEYS, ConfigKey
from josefk.server.config.listener_overrides import PREFIX as LISTENER_PREFIX
from josefk.server.config.listener_overrides import ListenerOverrides
from josefk.server.config.listeners import (
    Listener,
    check_distinct_ports,
    parse_listeners,
    protocol_map,
)
from josefk.server.config.properties import load_properties
from josefk.server.config.values import (
    INT32_MAX,
    ConfigEntry,
    ConfigError,
    jtrim,
    parse_java_int,
    parse_value,
    to_string,
)

logger = logging.getLogger(__name__)

# --- connection limits -------------------------------------------------------------------

_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")


def parse_ip_overrides(raw: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (``host:count,...``) as Kafka's ``Csv.parseCsvMap``
    reads it: split at the last colon (IPv6 keeps its colons), later entries win."""
    key = "max.connections.per.ip.overrides"
    entries = re.split(r"\s*,\s*", raw) if raw else []
    while entries and not entries[-1]:
        entries.pop()  # Java's String.split drops trailing empty strings
    result: dict[str, int] = {}
    for entry in entries:
        colon = entry.rfind(":")
        if colon < 0:
            raise ConfigError(f"Error parsing configuration property '{key}': begin 0, "
                              f"end -1, length {len(entry)}", key, raw)
        host, count = jtrim(entry[:colon]), jtrim(entry[colon + 1:])
        limit = parse_java_int(count, -(1 << 31), INT32_MAX)
        if limit is None:
            raise ConfigError(f"Invalid value {raw} for configuration {key}: "
                              f'For input string: "{count}"', key, raw)
        result[host] = limit
    invalid = [host for host in result if not _VALID_HOST.fullmatch(host)]
    if invalid:
        raise ConfigError(f"{key} contains invalid addresses : {','.join(invalid)}", key, raw)
    return result


def _connection_limits(values: Mapping[str, Any]) -> dict[str, Any]:
    """KafkaConfig's checks of ``max.connections.per.ip`` and its overrides."""
    overrides = parse_ip_overrides(values["max.connections.per.ip.overrides"])
    if values["max.connections.per.ip"] == 0 and not overrides:
        raise ConfigError("max.connections.per.ip can be set to zero only if "
                          "max.connections.per.ip.overrides property is set.",
                          "max.connections.per.ip", 0)
    return {"max_connections_per_ip_overrides": MappingProxyType(overrides)}


# --- the broker config -------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerConfig:
    """A broker's parsed configuration.

    Typed attributes hold effective values (``log_retention_ms`` already resolves
    ``log.retention.ms`` > ``.minutes`` > ``.hours``, with -1 for forever); ``values``
    holds every known key's parsed value as Kafka's ``KafkaConfig.values()`` would
    (None for unset keys without a default); ``originals`` is what the properties
    file and overrides set, ``unknown`` the keys josefk does not know.
    """

    node_id: int
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    log_dirs: tuple[Path, ...]
    cluster_id: str | None
    zookeeper_connect: str | None
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: Mapping[str, int]
    connections_max_idle_ms: int
    request_timeout_ms: int
    num_network_threads: int
    num_io_threads: int
    log_segment_bytes: int
    log_roll_ms: int
    log_roll_jitter_ms: int
    log_retention_ms: int
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    log_segment_delete_delay_ms: int
    log_message_timestamp_type: str
    log_cleanup_policy: tuple[str, ...]
    log_preallocate: bool
    log_cleaner_enable: bool
    min_insync_replicas: int
    compression_type: str
    unclean_leader_election_enable: bool
    auto_leader_rebalance_enable: bool
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    transactional_id_expiration_ms: int
    transaction_max_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    producer_id_expiration_ms: int
    values: Mapping[str, Any]
    originals: Mapping[str, str]
    unknown: Mapping[str, str]
    listener_overrides: ListenerOverrides
    static_props: Mapping[str, str]
    dynamic_default: Mapping[str, str]
    dynamic_broker: Mapping[str, str]

    @classmethod
    def from_properties(cls, props: Mapping[str, str],
                        dynamic_default: Mapping[str, str] | None = None,
                        dynamic_broker: Mapping[str, str] | None = None) -> BrokerConfig:
        """Parse and validate ``props`` (server.properties keys) under the dynamic
        cluster-wide defaults and per-broker settings, which win in that order;
        ConfigError if invalid."""
        static = dict(props)
        dynamic_default = dict(dynamic_default or {})
        dynamic_broker = dict(dynamic_broker or {})
        props = {**static, **dynamic_default, **dynamic_broker}
        overrides = ListenerOverrides.take(props)
        values: dict[str, Any] = {}
        unknown: dict[str, str] = {}
        for key, raw in props.items():
            spec = BROKER_KEYS.get(key)
            if spec is None:
                if key in static:
                    logger.warning("The configuration '%s' was supplied but isn't a known "
                                   "config.", key)
                unknown[key] = raw
            else:
                values[key] = parse_value(key, raw, spec.type, spec.validator)
        for key, spec in BROKER_KEYS.items():
            values.setdefault(key, spec.default)

        node_id = _node_id(props, values)
        values["node.id"] = values["broker.id"] = node_id
        listeners, advertised = _listeners(values)
        log_dirs = _log_dirs(values)
        derived = _derived_log_times(values)
        limits = _connection_limits(values)

        special: dict[str, Any] = {
            "node_id": node_id, "listeners": listeners, "advertised_listeners": advertised,
            "log_dirs": log_dirs, "log_cleanup_policy": tuple(values["log.cleanup.policy"]),
            "values": MappingProxyType(values),
            "originals": MappingProxyType({k: v for k, v in static.items()
                                           if not k.startswith(LISTENER_PREFIX)}),
            "unknown": MappingProxyType(unknown), "listener_overrides": overrides,
            "static_props": MappingProxyType(static),
            "dynamic_default": MappingProxyType(dynamic_default),
            "dynamic_broker": MappingProxyType(dynamic_broker),
            **derived, **limits,
        }
        kwargs = {f.name: special[f.name] if f.name in special else values[f.name.replace("_", ".")]
                  for f in fields(cls)}
        return cls(**kwargs)

    def __hash__(self) -> int:
        return hash((self.node_id, *(tuple(sorted(m.items())) for m in (
            self.static_props, self.dynamic_default, self.dynamic_broker))))

    def with_dynamic(self, default: Mapping[str, str], broker: Mapping[str, str]
                     ) -> BrokerConfig:
        """This broker's static config under new dynamic settings; ConfigError if invalid."""
        return BrokerConfig.from_properties(self.static_props, default, broker)

    def listener_value(self, listener: str, key: str) -> Any:
        """``key``'s value for one listener: ``listener.name.<listener>.<key>`` if set."""
        return self.listener_overrides.value(listener, key, self.values[key])

    def is_set(self, key: str) -> bool:
        """Whether ``key`` was given in server.properties or the overrides."""
        if key in ("node.id", "broker.id"):
            return "node.id" in self.originals or "broker.id" in self.originals
        return key in self.originals

    def default_log_config(self) -> LogConfig:
        """The broker-level ``log.*`` defaults as a LogConfig (a topic without overrides)."""
        return self.log_config({})

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """The LogConfig of a topic with these topic-config overrides; ConfigError if invalid."""
        return _log_config(topic_config_values(overrides, self))

    def describe(self, per_broker: bool = True) -> list[ConfigEntry]:
        """DescribeConfigs(BROKER): this broker (``per_broker``), else the cluster-wide
        dynamic defaults (``describe.describe_broker``)."""
        return describe_broker(self, per_broker)


def _node_id(props: Mapping[str, str], values: dict[str, Any]) -> int:
    given = [k for k in ("node.id", "broker.id") if k in props]
    if len(given) == 2 and values["node.id"] != values["broker.id"]:
        raise ConfigError("You must set `node.id` to the same value as `broker.id`.",
                          "node.id", props["node.id"])
    return int(values[given[0]]) if given else int(BROKER_KEYS["node.id"].default)


def _local_hostname() -> str:
    """What Kafka's ``InetAddress.getLocalHost().getCanonicalHostName()`` gives."""
    return socket.getfqdn()


def _listeners(values: dict[str, Any]) -> tuple[tuple[Listener, ...], tuple[Listener, ...]]:
    protocols = protocol_map(values["listener.security.protocol.map"])
    controller = {n.upper() for n in values["controller.listener.names"] or []}
    bound = parse_listeners("listeners", values["listeners"], protocols)
    check_distinct_ports(bound)
    bound = [x for x in bound if x.name not in controller]
    if not bound:
        raise ConfigError("Invalid value for configuration listeners: no broker listener "
                          "(every listener is a controller listener)", "listeners",
                          values["listeners"])
    if values["advertised.listeners"] is None:
        hostname = None
        advertised = []
        for x in bound:
            if x.host in (None, "0.0.0.0"):
                hostname = hostname or _local_hostname()
                x = Listener(x.name, x.security_protocol, hostname, x.port)
            advertised.append(x)
    else:
        advertised = [x for x in parse_listeners("advertised.listeners",
                                                 values["advertised.listeners"], protocols)
                      if x.name not in controller]
        for x in advertised:
            if x.host == "0.0.0.0":
                raise ConfigError("advertised.listeners cannot use the nonroutable meta-address "
                                  "0.0.0.0. Use a routable IP address.", "advertised.listeners",
                                  str(x))
        extra = {x.name for x in advertised} - {x.name for x in bound}
        if extra:
            raise ConfigError("advertised.listeners listener names must be equal to or a subset "
                              f"of the ones defined in listeners; not in listeners: "
                              f"{', '.join(sorted(extra))}", "advertised.listeners", extra)
        advertised = [x if x.host else Listener(x.name, x.security_protocol, _local_hostname(),
                                                x.port) for x in advertised]
    return tuple(bound), tuple(advertised)


def _log_dirs(values: dict[str, Any]) -> tuple[Path, ...]:
    dirs = values["log.dirs"] if values["log.dirs"] is not None else values["log.dir"]
    return tuple(Path(d) for d in dict.fromkeys(dirs))


def _derived_log_times(values: dict[str, Any]) -> dict[str, int]:
    """KafkaConfig's logRollTimeMillis, logRollTimeJitterMillis, logRetentionTimeMillis
    and logFlushIntervalMs, with its checks."""
    hour, minute = 3_600_000, 60_000
    roll = values["log.roll.ms"]
    if roll is None:
        roll = values["log.roll.hours"] * hour
    elif roll < 1:
        raise ConfigError("log.roll.ms must be greater than or equal to 1", "log.roll.ms", roll)
    jitter = values["log.roll.jitter.ms"]
    if jitter is None:
        jitter = values["log.roll.jitter.hours"] * hour
    elif jitter < 0:
        raise ConfigError("Invalid value for configuration log.roll.jitter.ms: "
                          "Value must be at least 0", "log.roll.jitter.ms", jitter)
    if values["log.retention.ms"] is not None:
        key, retention = "log.retention.ms", values["log.retention.ms"]
    elif values["log.retention.minutes"] is not None:
        key, retention = "log.retention.minutes", values["log.retention.minutes"] * minute
    else:
        key, retention = "log.retention.hours", values["log.retention.hours"] * hour
    if retention < 0:
        retention = -1
    elif retention == 0:
        raise ConfigError(f"{key} must be unlimited (-1) or, greater than or equal to 1", key, 0)
    flush = values["log.flush.interval.ms"]
    if flush is None:
        flush = values["log.flush.scheduler.interval.ms"]
    if flush < 0:
        raise ConfigError("Invalid value for configuration log.flush.interval.ms: "
                          "Value must be at least 0", "log.flush.interval.ms", flush)
    return {"log_roll_ms": roll, "log_roll_jitter_ms": jitter, "log_retention_ms": retention,
            "log_flush_interval_ms": flush}


def load_config(path: Path | None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    """The broker config from a ``server.properties`` file (optional) and ``--override``
    settings, which win; ConfigError if the file is unreadable or anything is invalid."""
    props = load_properties(path) if path is not None else {}
    props.update(overrides or {})
    return BrokerConfig.from_properties(props)


# --- topic configs -----------------------------------------------------------------------

_EFFECTIVE_BROKER_TOPIC_DEFAULTS = {
    "segment.ms": "log_roll_ms", "segment.jitter.ms": "log_roll_jitter_ms",
    "retention.ms": "log_retention_ms", "flush.ms": "log_flush_interval_ms",
}


def _broker_topic_default(spec: ConfigKey, broker: BrokerConfig | None) -> Any:
    if broker is None or not spec.synonyms:
        return spec.default
    attribute = _EFFECTIVE_BROKER_TOPIC_DEFAULTS.get(spec.name)
    if attribute is not None:
        return getattr(broker, attribute)
    value = broker.values[spec.synonyms[0]]
    return spec.default if value is None else value


def validate_topic_configs(configs: Mapping[str, str | None], *,
                           broker: BrokerConfig | None = None) -> None:
    """Check topic-config overrides as Kafka's controller does; ConfigError
    (INVALID_CONFIG) for an unknown name, a null or ill-typed value, a value out of
    range, min.compaction.lag.ms above max.compaction.lag.ms, or anything josefk's
    LogConfig cannot hold."""
    parsed: dict[str, Any] = {}
    for name, raw in configs.items():
        spec = TOPIC_KEYS.get(name)
        if spec is None:
            raise ConfigError(f"Unknown topic config name: {name}", name, raw)
        if raw is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}", name, raw)
        parsed[name] = parse_value(name, raw, spec.type, spec.validator)
    merged = {name: parsed.get(name, _broker_topic_default(spec, broker))
              for name, spec in TOPIC_KEYS.items()}
    low, high = merged["min.compaction.lag.ms"], merged["max.compaction.lag.ms"]
    if low > high:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                          f"max.compaction.lag.ms ({high})", "min.compaction.lag.ms", low)
    _log_config(merged)


def _log_config(values: Mapping[str, Any]) -> LogConfig:
    """The LogConfig of these effective topic-config values; ConfigError if it refuses them.

    Kafka reads any negative retention.bytes as "no limit"; LogConfig wants -1.
    """
    names = LogConfig.kafka_names()
    kafka = {n: to_string(v, TOPIC_KEYS[n].type) for n, v in values.items() if n in names}
    if values["retention.bytes"] < 0:
        kafka["retention.bytes"] = "-1"
    try:
        return LogConfig().with_kafka_configs(kafka)
    except InvalidConfigError as e:
        raise ConfigError(str(e)) from e


def topic_config_values(overrides: Mapping[str, str],
                        broker: BrokerConfig | None) -> dict[str, Any]:
    """Every topic config's effective parsed value: override, else the broker's
    ``log.*`` setting, else Kafka's default. Invalid overrides raise ConfigError."""
    values = {}
    for name, spec in TOPIC_KEYS.items():
        if name in overrides:
            values[name] = parse_value(name, overrides[name], spec.type, spec.validator)
        else:
            values[name] = _broker_topic_default(spec, broker)
    return values


def topic_config_entries(overrides: Mapping[str, str], broker: BrokerConfig) -> list[ConfigEntry]:
    """DescribeConfigs(TOPIC): every topic config, sorted by name (``describe_topic``)."""
    return describe_topic(broker, overrides, lambda spec: _broker_topic_default(spec, broker))
