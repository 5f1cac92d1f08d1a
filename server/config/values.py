"""Config values: Kafka's ``ConfigDef`` types, their parsing and string forms, and the
DescribeConfigs result types (``ConfigEntry``, ``ConfigSynonym``, ``ConfigSource``)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from typing import Any

INT16_MAX = (1 << 15) - 1
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
_INT_BOUNDS = {"SHORT": (-(1 << 15), INT16_MAX), "INT": (-(1 << 31), INT32_MAX),
               "LONG": (-(1 << 63), INT64_MAX)}


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


Validator = Callable[[Any], "str | None"]  # None if valid, else Kafka's reason

INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SEP = re.compile(r"\s*,\s*")


def jtrim(s: str) -> str:
    """Java's ``String.trim()``: strip every character <= U+0020."""
    start, end = 0, len(s)
    while start < end and s[start] <= " ":
        start += 1
    while end > start and s[end - 1] <= " ":
        end -= 1
    return s[start:end]


def parse_java_int(s: str, low: int, high: int) -> int | None:
    """``s`` as Java's ``Short``/``Integer``/``Long.parseXxx`` read it (an optional sign
    and ASCII digits, in ``low..high``), or None where they throw. Digits beyond what
    any bound needs are refused before ``int()``, which would raise past Python's
    limit on digits (and take time quadratic in them below it)."""
    if not INTEGER.fullmatch(s):
        return None
    digits = s.lstrip("+-").lstrip("0") or "0"
    if len(digits) > len(str(max(-low, high))):
        return None
    value = -int(digits) if s[0] == "-" else int(digits)
    return value if low <= value <= high else None


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
    s = jtrim(raw)

    def bad(reason: str) -> ConfigError:
        return ConfigError(f"Invalid value {raw} for configuration {name}: {reason}", name, raw)

    value: Any
    if kind == ConfigType.BOOLEAN:
        if s.lower() not in ("true", "false"):
            raise bad("Expected value to be either true or false")
        value = s.lower() == "true"
    elif kind in (ConfigType.SHORT, ConfigType.INT, ConfigType.LONG):
        value = parse_java_int(s, *_INT_BOUNDS[kind.name])
        if value is None:
            raise bad(f"Not a number of type {kind.name}")
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


def to_string(value: Any, kind: ConfigType) -> str | None:
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
