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
* Accepted and reported by DescribeConfigs but without effect (their documentation
  says so): the thread counts (``num.network.threads``, ``num.io.threads``,
  ``background.threads``, ``num.replica.fetchers``) since josefk serves everything
  from one trio thread (``num.recovery.threads.per.data.dir`` does set how many logs
  are flushed and closed at once at shutdown),
  the purgatory purge intervals, and the KRaft and share coordinator keys
  (``process.roles``, ``controller.*``, ``metadata.log.dir``,
  ``share.coordinator.state.topic.*``).

Unknown keys are kept in ``BrokerConfig.unknown`` with a warning, as Kafka does.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import re
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from decimal import Decimal
from enum import IntEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from josefk.log.config import InvalidConfigError, LogConfig

logger = logging.getLogger(__name__)

INT16_MAX = (1 << 15) - 1
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
_INT_BOUNDS = {"SHORT": (-(1 << 15), INT16_MAX), "INT": (-(1 << 31), INT32_MAX),
               "LONG": (-(1 << 63), INT64_MAX)}

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092
DEFAULT_LOG_DIR = "./josefk-data"
DEFAULT_LISTENERS = f"PLAINTEXT://{DEFAULT_HOST}:{DEFAULT_PORT}"
DEFAULT_SECURITY_PROTOCOL_MAP = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT",)
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
NO_EFFECT = "Accepted for compatibility; josefk ignores it."


class ConfigError(ValueError):
    """A configuration Kafka would refuse (INVALID_CONFIG, error code 40, for topics)."""

    error_code = 40

    def __init__(self, message: str, name: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.name = name
        self.value = value


class ConfigSource(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource``."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigType`` (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigs result: what the response's config entry carries."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: ConfigType
    documentation: str | None = None
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0's ``is_default``."""
        return self.source == ConfigSource.DEFAULT_CONFIG


# --- Java properties ---------------------------------------------------------------------

_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``text`` as ``java.util.Properties.load`` does (later keys win).

    Comment lines start with ``#`` or ``!``; a key ends at the first unescaped ``=``,
    ``:`` or blank; an odd number of trailing backslashes continues the line;
    ``\\t \\n \\r \\f \\uXXXX`` are escapes and any other escaped character stands
    for itself. Raises ConfigError for a malformed ``\\uXXXX``.
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key_end, value_start, has_sep, escaped = len(line), len(line), False, False
        for i, c in enumerate(line):
            if not escaped and c in "=:":
                key_end, value_start, has_sep = i, i + 1, True
                break
            if not escaped and c in _BLANK:
                key_end, value_start = i, i + 1
                break
            escaped = not escaped if c == "\\" else False
        while value_start < len(line):
            c = line[value_start]
            if c not in _BLANK:
                if has_sep or c not in "=:":
                    break
                has_sep = True
            value_start += 1
        props[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return props


def load_properties(path: Path) -> dict[str, str]:
    """Read and parse a properties file (UTF-8, or ISO-8859-1 as Java reads it, if not UTF-8)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


def _logical_lines(text: str) -> Iterator[str]:
    lines = _NATURAL_LINE.split(text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i == len(lines):
                break
            more = lines[i].lstrip(_BLANK)
            i += 1
            if not more:  # after a continuation a blank line ends the logical line
                break
            line += more
        if line:  # a lone continuation followed by a blank line is no entry
            yield line


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\" or i == len(s):
            if c != "\\":
                out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


# --- values ------------------------------------------------------------------------------

Validator = Callable[[Any], "str | None"]  # None if valid, else Kafka's reason

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SEP = re.compile(r"\s*,\s*")


def _jtrim(s: str) -> str:
    """Java's ``String.trim()``: strip every character <= U+0020."""
    start, end = 0, len(s)
    while start < end and s[start] <= " ":
        start += 1
    while end > start and s[end - 1] <= " ":
        end -= 1
    return s[start:end]


def parse_value(name: str, raw: object, kind: ConfigType,
                validator: Validator | None = None) -> Any:
    """Kafka's ``ConfigDef.parseType`` plus the key's validator; ConfigError if invalid."""
    if raw is None:
        raise ConfigError(f"Invalid value null for configuration {name}: null is not allowed",
                          name, raw)
    if isinstance(raw, bool):
        raw = "true" if raw else "false"
    elif isinstance(raw, (list, tuple)):
        raw = ",".join(map(str, raw))
    elif not isinstance(raw, str):
        raw = str(raw)
    s = _jtrim(raw)

    def bad(reason: str) -> ConfigError:
        return ConfigError(f"Invalid value {raw} for configuration {name}: {reason}", name, raw)

    value: Any
    if kind == ConfigType.BOOLEAN:
        if s.lower() not in ("true", "false"):
            raise bad("Expected value to be either true or false")
        value = s.lower() == "true"
    elif kind in (ConfigType.SHORT, ConfigType.INT, ConfigType.LONG):
        low, high = _INT_BOUNDS[kind.name]
        if not _INTEGER.fullmatch(s) or not low <= int(s) <= high:
            raise bad(f"Not a number of type {kind.name}")
        value = int(s)
    elif kind == ConfigType.DOUBLE:
        if not _DOUBLE.fullmatch(s):
            raise bad("Not a number of type DOUBLE")
        value = float(s.rstrip("fFdD").replace("Infinity", "inf"))
    elif kind == ConfigType.LIST:
        value = [] if not s else _LIST_SEP.split(s)
    else:
        value = s
    if validator is not None:
        reason = validator(value)
        if reason is not None:
            raise bad(reason)
    return value


def _to_string(value: Any, kind: ConfigType) -> str | None:
    """Kafka's ``ConfigDef.convertToString``."""
    if value is None:
        return None
    if kind == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if kind == ConfigType.LIST:
        return ",".join(str(v) for v in value)
    if kind == ConfigType.DOUBLE:
        return _java_double(float(value))
    return str(value)


def _java_double(d: float) -> str:
    """Java's ``Double.toString``."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    if 1e-3 <= abs(d) < 1e7:
        return repr(d)
    t = Decimal(repr(abs(d))).normalize().as_tuple()
    digits = "".join(str(x) for x in t.digits)
    assert isinstance(t.exponent, int)
    exponent = len(digits) - 1 + t.exponent
    return f"{'-' if d < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _at_least(low: float) -> Validator:
    return lambda v: None if v >= low else f"Value must be at least {low}"


def _between(low: float, high: float) -> Validator:
    def check(v: Any) -> str | None:
        if v < low:
            return f"Value must be at least {low}"
        return f"Value must be no more than {high}" if v > high else None
    return check


def _one_of(*options: str) -> Validator:
    return lambda v: None if v in options else f"String must be one of: {', '.join(options)}"


def _each_one_of(*options: str) -> Validator:
    one = _one_of(*options)

    def check(values: list[str]) -> str | None:
        return next((r for r in map(one, values) if r is not None), None)
    return check


def _non_empty(v: list[str]) -> str | None:
    return None if v and all(v) else "must be a non-empty list of non-empty values"


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9 or equal to -1"


def _throttled_replicas(name: str) -> Validator:
    def check(v: list[str]) -> str | None:
        ok = v == ["*"] or all(re.fullmatch(r"\s*[0-9]+\s*:\s*[0-9]+\s*", x) for x in v)
        return None if ok else (f"{name} must be the literal '*' or a list of replicas in the "
                                "following format: [partitionId]:[brokerId],"
                                "[partitionId]:[brokerId],...")
    return check


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One known config: its Kafka type, default (parsed), validator and update mode."""

    name: str
    type: ConfigType
    default: Any
    validator: Validator | None = None
    dynamic: bool = False  # Kafka can change it at runtime (read_only=False in DescribeConfigs)
    doc: str | None = None
    synonyms: tuple[str, ...] = ()  # topic configs: the broker keys that give the default


BOOL, STR, INT, SHORT, LONG, DBL, LIST = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG,
    ConfigType.DOUBLE, ConfigType.LIST)
_DYN = True


def _table(*keys: ConfigKey) -> Mapping[str, ConfigKey]:
    return MappingProxyType({k.name: k for k in keys})


K = ConfigKey
#: Every broker key josefk knows, with Kafka 4.3's type, default and validator.
BROKER_KEYS: Mapping[str, ConfigKey] = _table(
    # identity, listeners, network
    K("node.id", INT, 0, _at_least(0), doc="josefk defaults it to 0; Kafka requires it."),
    K("broker.id", INT, 0, _at_least(0), doc="Synonym of node.id."),
    K("cluster.id", STR, None, doc="josefk only: the cluster id to report."),
    K("process.roles", LIST, None, _each_one_of("broker", "controller"), doc=NO_EFFECT),
    K("listeners", LIST, [DEFAULT_LISTENERS], _non_empty, _DYN),
    K("advertised.listeners", LIST, None),
    K("listener.security.protocol.map", STR, DEFAULT_SECURITY_PROTOCOL_MAP, dynamic=_DYN),
    K("controller.listener.names", LIST, None, doc=NO_EFFECT),
    K("controller.quorum.voters", LIST, [], doc=NO_EFFECT),
    K("controller.quorum.bootstrap.servers", LIST, [], doc=NO_EFFECT),
    K("metadata.log.dir", STR, None, doc=NO_EFFECT),
    K("inter.broker.listener.name", STR, None),
    K("security.inter.broker.protocol", STR, "PLAINTEXT", _one_of(*SECURITY_PROTOCOLS)),
    K("broker.rack", STR, None),
    K("zookeeper.connect", STR, None,
      doc="Kafka 3.9: host:port[,host:port]/chroot; set, it turns cluster mode on."),
    K("zookeeper.session.timeout.ms", INT, 18000, _at_least(1), doc="Kafka 3.9."),
    K("zookeeper.connection.timeout.ms", INT, None, doc="Kafka 3.9: default the session "
      "timeout."),
    K("controlled.shutdown.enable", BOOL, True, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("controlled.shutdown.max.retries", INT, 3, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("controlled.shutdown.retry.backoff.ms", LONG, 5000, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("controller.socket.timeout.ms", INT, 30000, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("inter.broker.protocol.version", STR, "3.9", doc="Kafka 3.9 (ZooKeeper mode); josefk "
      "speaks 3.9's inter-broker protocol whatever it says."),
    K("num.network.threads", INT, 3, _at_least(1), _DYN, NO_EFFECT),
    K("num.io.threads", INT, 8, _at_least(1), _DYN, NO_EFFECT),
    K("background.threads", INT, 10, _at_least(1), _DYN, NO_EFFECT),
    K("num.recovery.threads.per.data.dir", INT, 2, _at_least(1), _DYN,
      "Logs flushed and closed at once per log dir at shutdown."),
    K("num.replica.fetchers", INT, 1, _at_least(1), _DYN, NO_EFFECT),
    K("socket.send.buffer.bytes", INT, 102400),
    K("socket.receive.buffer.bytes", INT, 102400),
    K("socket.request.max.bytes", INT, 104857600, _at_least(1)),
    K("socket.listen.backlog.size", INT, 50, _at_least(1)),
    K("max.connections", INT, INT32_MAX, _at_least(0), _DYN),
    K("max.connections.per.ip", INT, INT32_MAX, _at_least(0), _DYN),
    K("max.connections.per.ip.overrides", STR, "", dynamic=_DYN),
    K("max.connection.creation.rate", INT, INT32_MAX, _at_least(0), _DYN),
    K("connections.max.idle.ms", LONG, 600000),
    K("queued.max.requests", INT, 500, _at_least(1)),
    K("queued.max.request.bytes", LONG, -1),
    K("request.timeout.ms", INT, 30000),
    K("message.max.bytes", INT, 1048588, _at_least(0), _DYN),
    K("fetch.max.bytes", INT, 57671680, _at_least(1024)),
    K("max.incremental.fetch.session.cache.slots", INT, 1000, _at_least(0)),
    K("fetch.purgatory.purge.interval.requests", INT, 1000, doc=NO_EFFECT),
    K("producer.purgatory.purge.interval.requests", INT, 1000, doc=NO_EFFECT),
    K("delete.records.purgatory.purge.interval.requests", INT, 1, doc=NO_EFFECT),
    # topics
    K("auto.create.topics.enable", BOOL, True),
    K("delete.topic.enable", BOOL, True),
    K("num.partitions", INT, 1, _at_least(1)),
    K("default.replication.factor", INT, 1, _at_least(1)),
    K("min.insync.replicas", INT, 1, _at_least(1), _DYN),
    K("unclean.leader.election.enable", BOOL, False, dynamic=_DYN),
    K("auto.leader.rebalance.enable", BOOL, True),
    K("leader.imbalance.check.interval.seconds", LONG, 300, _at_least(1)),
    K("leader.imbalance.per.broker.percentage", INT, 10, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("compression.type", STR, "producer", _one_of(*COMPRESSION_TYPES), _DYN),
    K("compression.gzip.level", INT, -1, _gzip_level, _DYN),
    K("compression.lz4.level", INT, 9, _between(1, 17), _DYN),
    K("compression.zstd.level", INT, 3, _between(-131072, 22), _DYN),
    # replication
    K("replica.lag.time.max.ms", LONG, 30000),
    K("replica.fetch.max.bytes", INT, 1048576, _at_least(0)),
    K("replica.fetch.min.bytes", INT, 1),
    K("replica.fetch.wait.max.ms", INT, 500),
    K("replica.fetch.backoff.ms", INT, 1000, _at_least(0)),
    K("replica.fetch.response.max.bytes", INT, 10485760, _at_least(0)),
    K("replica.socket.timeout.ms", INT, 30000),
    K("replica.socket.receive.buffer.bytes", INT, 65536),
    K("replica.high.watermark.checkpoint.interval.ms", LONG, 5000),
    # log
    K("log.dir", LIST, [DEFAULT_LOG_DIR], _non_empty),
    K("log.dirs", LIST, None, _non_empty),
    K("log.segment.bytes", INT, 1 << 30, _at_least(1 << 20), _DYN),
    K("log.roll.ms", LONG, None, dynamic=_DYN),
    K("log.roll.hours", INT, 168, _at_least(1)),
    K("log.roll.jitter.ms", LONG, None, dynamic=_DYN),
    K("log.roll.jitter.hours", INT, 0, _at_least(0)),
    K("log.retention.ms", LONG, None, dynamic=_DYN),
    K("log.retention.minutes", INT, None),
    K("log.retention.hours", INT, 168),
    K("log.retention.bytes", LONG, -1, dynamic=_DYN),
    K("log.retention.check.interval.ms", LONG, 300000, _at_least(1)),
    K("log.cleanup.policy", LIST, ["delete"], _each_one_of("compact", "delete"), _DYN),
    K("log.index.size.max.bytes", INT, 10485760, _at_least(4), _DYN),
    K("log.index.interval.bytes", INT, 4096, _at_least(0), _DYN),
    K("log.flush.interval.messages", LONG, INT64_MAX, _at_least(1), _DYN),
    K("log.flush.interval.ms", LONG, None, dynamic=_DYN),
    K("log.flush.scheduler.interval.ms", LONG, INT64_MAX),
    K("log.flush.offset.checkpoint.interval.ms", INT, 60000, _at_least(0)),
    K("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, _at_least(0)),
    K("log.segment.delete.delay.ms", LONG, 60000, _at_least(0), _DYN),
    K("log.preallocate", BOOL, False, dynamic=_DYN),
    K("log.message.timestamp.type", STR, "CreateTime", _one_of(*TIMESTAMP_TYPES), _DYN),
    K("log.message.timestamp.before.max.ms", LONG, INT64_MAX, _at_least(0), _DYN),
    K("log.message.timestamp.after.max.ms", LONG, 3600000, _at_least(0), _DYN),
    K("log.local.retention.ms", LONG, -2, _at_least(-2), _DYN),
    K("log.local.retention.bytes", LONG, -2, _at_least(-2), _DYN),
    K("log.dir.failure.timeout.ms", LONG, 30000, _at_least(1)),
    K("log.cleaner.enable", BOOL, True),
    K("log.cleaner.threads", INT, 1, _at_least(0), _DYN),
    K("log.cleaner.dedupe.buffer.size", LONG, 134217728, dynamic=_DYN),
    K("log.cleaner.io.buffer.size", INT, 524288, _at_least(0), _DYN),
    K("log.cleaner.io.buffer.load.factor", DBL, 0.9, dynamic=_DYN),
    K("log.cleaner.io.max.bytes.per.second", DBL, 1.7976931348623157e308, dynamic=_DYN),
    K("log.cleaner.backoff.ms", LONG, 15000, _at_least(0), _DYN),
    K("log.cleaner.min.cleanable.ratio", DBL, 0.5, _between(0, 1), _DYN),
    K("log.cleaner.delete.retention.ms", LONG, 86400000, _at_least(0), _DYN),
    K("log.cleaner.min.compaction.lag.ms", LONG, 0, _at_least(0), _DYN),
    K("log.cleaner.max.compaction.lag.ms", LONG, INT64_MAX, _at_least(1), _DYN),
    # group coordinator
    K("offsets.topic.num.partitions", INT, 50, _at_least(1)),
    K("offsets.topic.replication.factor", SHORT, 3, _at_least(1)),
    K("offsets.topic.segment.bytes", INT, 104857600, _at_least(1)),
    K("offsets.topic.compression.codec", INT, 0),
    K("offsets.retention.minutes", INT, 10080, _at_least(1)),
    K("offsets.retention.check.interval.ms", LONG, 600000, _at_least(1)),
    K("offsets.commit.timeout.ms", INT, 5000, _at_least(1)),
    K("offsets.load.buffer.size", INT, 5242880, _at_least(1)),
    K("offset.metadata.max.bytes", INT, 4096),
    K("group.initial.rebalance.delay.ms", INT, 3000),
    K("group.min.session.timeout.ms", INT, 6000),
    K("group.max.session.timeout.ms", INT, 1800000),
    K("group.max.size", INT, INT32_MAX, _at_least(1)),
    # transactions
    K("transaction.state.log.num.partitions", INT, 50, _at_least(1)),
    K("transaction.state.log.replication.factor", SHORT, 3, _at_least(1)),
    K("transaction.state.log.min.isr", INT, 2, _at_least(1)),
    K("transaction.state.log.segment.bytes", INT, 104857600, _at_least(1)),
    K("transaction.state.log.load.buffer.size", INT, 5242880, _at_least(1)),
    K("transactional.id.expiration.ms", INT, 604800000, _at_least(1)),
    K("transaction.max.timeout.ms", INT, 900000, _at_least(1)),
    K("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, _at_least(1)),
    K("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, _at_least(1)),
    K("transaction.partition.verification.enable", BOOL, True, dynamic=_DYN),
    K("producer.id.expiration.ms", INT, 86400000, _at_least(1), _DYN),
    K("producer.id.expiration.check.interval.ms", INT, 600000, _at_least(1)),
    K("share.coordinator.state.topic.replication.factor", SHORT, 3, _at_least(1), doc=NO_EFFECT),
    K("share.coordinator.state.topic.min.isr", SHORT, 2, _at_least(1), doc=NO_EFFECT),
)

#: Every topic config Kafka 4.3 lists for DescribeConfigs(TOPIC), with the broker keys
#: (in priority order) that supply its default (``ServerTopicConfigSynonyms``).
TOPIC_KEYS: Mapping[str, ConfigKey] = _table(
    K("cleanup.policy", LIST, ["delete"], _each_one_of("compact", "delete"),
      synonyms=("log.cleanup.policy",)),
    K("compression.gzip.level", INT, -1, _gzip_level, synonyms=("compression.gzip.level",)),
    K("compression.lz4.level", INT, 9, _between(1, 17), synonyms=("compression.lz4.level",)),
    K("compression.type", STR, "producer", _one_of(*COMPRESSION_TYPES),
      synonyms=("compression.type",)),
    K("compression.zstd.level", INT, 3, _between(-131072, 22),
      synonyms=("compression.zstd.level",)),
    K("delete.retention.ms", LONG, 86400000, _at_least(0),
      synonyms=("log.cleaner.delete.retention.ms",)),
    K("file.delete.delay.ms", LONG, 60000, _at_least(0), synonyms=("log.segment.delete.delay.ms",)),
    K("flush.messages", LONG, INT64_MAX, _at_least(1), synonyms=("log.flush.interval.messages",)),
    K("flush.ms", LONG, INT64_MAX, _at_least(0),
      synonyms=("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    K("follower.replication.throttled.replicas", LIST, [],
      _throttled_replicas("follower.replication.throttled.replicas")),
    K("index.interval.bytes", INT, 4096, _at_least(0), synonyms=("log.index.interval.bytes",)),
    K("leader.replication.throttled.replicas", LIST, [],
      _throttled_replicas("leader.replication.throttled.replicas")),
    K("local.retention.bytes", LONG, -2, _at_least(-2), synonyms=("log.local.retention.bytes",)),
    K("local.retention.ms", LONG, -2, _at_least(-2), synonyms=("log.local.retention.ms",)),
    K("max.compaction.lag.ms", LONG, INT64_MAX, _at_least(1),
      synonyms=("log.cleaner.max.compaction.lag.ms",)),
    K("max.message.bytes", INT, 1048588, _at_least(0), synonyms=("message.max.bytes",)),
    K("message.timestamp.after.max.ms", LONG, 3600000, _at_least(0),
      synonyms=("log.message.timestamp.after.max.ms",)),
    K("message.timestamp.before.max.ms", LONG, INT64_MAX, _at_least(0),
      synonyms=("log.message.timestamp.before.max.ms",)),
    K("message.timestamp.type", STR, "CreateTime", _one_of(*TIMESTAMP_TYPES),
      synonyms=("log.message.timestamp.type",)),
    K("min.cleanable.dirty.ratio", DBL, 0.5, _between(0, 1),
      synonyms=("log.cleaner.min.cleanable.ratio",)),
    K("min.compaction.lag.ms", LONG, 0, _at_least(0),
      synonyms=("log.cleaner.min.compaction.lag.ms",)),
    K("min.insync.replicas", INT, 1, _at_least(1), synonyms=("min.insync.replicas",)),
    K("preallocate", BOOL, False, synonyms=("log.preallocate",)),
    K("remote.log.copy.disable", BOOL, False),
    K("remote.log.delete.on.disable", BOOL, False),
    K("remote.storage.enable", BOOL, False),
    K("retention.bytes", LONG, -1, synonyms=("log.retention.bytes",)),
    K("retention.ms", LONG, 604800000, _at_least(-1),
      synonyms=("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    K("segment.bytes", INT, 1 << 30, _at_least(1 << 20), synonyms=("log.segment.bytes",)),
    K("segment.index.bytes", INT, 10485760, _at_least(4), synonyms=("log.index.size.max.bytes",)),
    K("segment.jitter.ms", LONG, 0, _at_least(0),
      synonyms=("log.roll.jitter.ms", "log.roll.jitter.hours")),
    K("segment.ms", LONG, 604800000, _at_least(1), synonyms=("log.roll.ms", "log.roll.hours")),
    K("unclean.leader.election.enable", BOOL, False, synonyms=("unclean.leader.election.enable",)),
)
del K

# DynamicBrokerConfig.brokerConfigSynonyms: keys that stand in for one another.
_BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def _broker_synonyms(name: str) -> tuple[str, ...]:
    if name == "log.flush.scheduler.interval.ms":
        return (name,)
    return next((g for g in _BROKER_SYNONYM_GROUPS if name in g), (name,))


# --- listeners ---------------------------------------------------------------------------

_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)]?:(-?[0-9]+)")


@dataclass(frozen=True, slots=True)
class Listener:
    """A ``NAME://host:port`` endpoint; ``host`` None means every interface."""

    name: str
    security_protocol: str
    host: str | None
    port: int

    @property
    def bind_host(self) -> str:
        return self.host or "0.0.0.0"

    def __str__(self) -> str:
        host = self.host or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{self.name}://{host}:{self.port}"


def _local_hostname() -> str:
    """What Kafka's ``InetAddress.getLocalHost().getCanonicalHostName()`` gives."""
    return socket.getfqdn()


def _protocol_map(raw: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for entry in filter(None, (_jtrim(e) for e in raw.split(","))):
        name, sep, protocol = entry.partition(":")
        protocol = _jtrim(protocol).upper()
        if not sep or not _jtrim(name) or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {raw} for configuration "
                              f"listener.security.protocol.map: bad entry {entry!r}",
                              "listener.security.protocol.map", raw)
        result[_jtrim(name).upper()] = protocol
    return result


def _parse_listeners(key: str, entries: list[str], protocols: dict[str, str]) -> list[Listener]:
    listeners: list[Listener] = []
    for entry in entries:
        m = _LISTENER.fullmatch(entry)
        if not m:
            raise ConfigError(f"Invalid value {','.join(entries)} for configuration {key}: "
                              f"Unable to parse {entry} to a broker endpoint", key, entry)
        name, host, port = m.group(1).upper(), m.group(2) or None, int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {entry} for configuration {key}: "
                              f"port {port} is not in 0-65535", key, entry)
        if name not in protocols:
            raise ConfigError(f"Invalid value {entry} for configuration {key}: "
                              f"No security protocol defined for listener {name}", key, entry)
        protocol = protocols[name]
        if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {entry} for configuration {key}: security "
                              f"protocol {protocol} is not supported (only PLAINTEXT)", key, entry)
        listeners.append(Listener(name, protocol, host, port))
    names = [x.name for x in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"Invalid value {','.join(entries)} for configuration {key}: "
                          "Each listener must have a different name", key, entries)
    return listeners


def _check_distinct_ports(listeners: list[Listener]) -> None:
    by_port: dict[int, list[Listener]] = {}
    for x in listeners:
        if x.port != 0:
            by_port.setdefault(x.port, []).append(x)
    for port, group in by_port.items():
        if len(group) > 1 and not _ipv4_and_ipv6(group):
            raise ConfigError(f"Invalid value {','.join(map(str, listeners))} for configuration "
                              f"listeners: Each listener must have a different port unless "
                              f"exactly one has an IPv4 and the other an IPv6 address "
                              f"(port {port})", "listeners", port)


def _ipv4_and_ipv6(group: list[Listener]) -> bool:
    try:
        versions = sorted(ipaddress.ip_address(x.host or "").version for x in group)
    except ValueError:
        return False
    return versions == [4, 6]


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
        host, count = _jtrim(entry[:colon]), _jtrim(entry[colon + 1:])
        if not _INTEGER.fullmatch(count) or not -(1 << 31) <= int(count) <= INT32_MAX:
            raise ConfigError(f"Invalid value {raw} for configuration {key}: "
                              f'For input string: "{count}"', key, raw)
        result[host] = int(count)
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

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Parse and validate ``props`` (server.properties keys); ConfigError if invalid."""
        props = dict(props)
        values: dict[str, Any] = {}
        unknown: dict[str, str] = {}
        for key, raw in props.items():
            spec = BROKER_KEYS.get(key)
            if spec is None:
                logger.warning("The configuration '%s' was supplied but isn't a known config.",
                               key)
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
            "values": MappingProxyType(values), "originals": MappingProxyType(props),
            "unknown": MappingProxyType(unknown), **derived, **limits,
        }
        kwargs = {f.name: special[f.name] if f.name in special else values[f.name.replace("_", ".")]
                  for f in fields(cls)}
        return cls(**kwargs)

    def __hash__(self) -> int:
        return hash((self.node_id, tuple(sorted(self.originals.items()))))

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
        """DescribeConfigs(BROKER) for every known broker key, sorted by name.

        ``per_broker`` False describes the cluster-wide default resource (empty name),
        whose static settings Kafka does not report.
        """
        entries = []
        for name, spec in sorted(BROKER_KEYS.items()):
            value = _to_string(self.values[name], spec.type)
            synonyms = self._synonyms(name) if per_broker else []
            entries.append(ConfigEntry(
                name=name, value=value,
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=not spec.dynamic, is_sensitive=spec.type == ConfigType.PASSWORD,
                config_type=spec.type, documentation=spec.doc, synonyms=tuple(synonyms)))
        return entries

    def _synonyms(self, name: str) -> list[ConfigSynonym]:
        """Kafka's ``ConfigHelper.configSynonyms``: static settings, then defaults."""
        names = _broker_synonyms(name)
        found = [ConfigSynonym(n, self._original_string(n), ConfigSource.STATIC_BROKER_CONFIG)
                 for n in names if self.is_set(n)]
        for n in names:
            default = BROKER_KEYS[n].default
            if default is not None:
                found.append(ConfigSynonym(n, _to_string(default, BROKER_KEYS[n].type),
                                           ConfigSource.DEFAULT_CONFIG))
        while found and found[0].name != name:
            found.pop(0)
        return found

    def _original_string(self, key: str) -> str | None:
        if key in ("node.id", "broker.id"):
            return str(self.node_id)
        return self.originals.get(key)


def _node_id(props: Mapping[str, str], values: dict[str, Any]) -> int:
    given = [k for k in ("node.id", "broker.id") if k in props]
    if len(given) == 2 and values["node.id"] != values["broker.id"]:
        raise ConfigError("You must set `node.id` to the same value as `broker.id`.",
                          "node.id", props["node.id"])
    return int(values[given[0]]) if given else int(BROKER_KEYS["node.id"].default)


def _listeners(values: dict[str, Any]) -> tuple[tuple[Listener, ...], tuple[Listener, ...]]:
    protocols = _protocol_map(values["listener.security.protocol.map"])
    controller = {n.upper() for n in values["controller.listener.names"] or []}
    bound = _parse_listeners("listeners", values["listeners"], protocols)
    _check_distinct_ports(bound)
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
        advertised = [x for x in _parse_listeners("advertised.listeners",
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
    kafka = {n: _to_string(v, TOPIC_KEYS[n].type) for n, v in values.items() if n in names}
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
    """DescribeConfigs(TOPIC): every topic config, sorted by name.

    Source is DYNAMIC_TOPIC_CONFIG for an override, STATIC_BROKER_CONFIG when a broker
    synonym is set in server.properties (or an override flag), else DEFAULT_CONFIG;
    synonyms list the override, the static broker settings, then the defaults.
    """
    entries = []
    for name, spec in sorted(TOPIC_KEYS.items()):
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            try:
                value = _to_string(parse_value(name, overrides[name], spec.type), spec.type)
            except ConfigError:
                value = overrides[name]
            synonyms.append(ConfigSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        else:
            value = _to_string(_broker_topic_default(spec, broker), spec.type)
        synonyms += [ConfigSynonym(n, broker.originals[n], ConfigSource.STATIC_BROKER_CONFIG)
                     for n in spec.synonyms if broker.is_set(n)]
        synonyms += [ConfigSynonym(n, _to_string(BROKER_KEYS[n].default, BROKER_KEYS[n].type),
                                   ConfigSource.DEFAULT_CONFIG)
                     for n in spec.synonyms if BROKER_KEYS[n].default is not None]
        entries.append(ConfigEntry(
            name=name, value=value,
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=False, is_sensitive=False, config_type=spec.type,
            documentation=spec.doc, synonyms=tuple(synonyms)))
    return entries
