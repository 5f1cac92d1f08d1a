"""Config values at sizes a client can send but Python handles differently from Java:
integers past ``int()``'s 4,300-digit limit, and IncrementalAlterConfigs APPEND and
SUBTRACT on long lists (in linear time, with Kafka's order). The wire answers are in
compat_tests/test_request_checks.py, against Kafka too."""

from __future__ import annotations

import pytest

from josefk.server.config.values import ConfigError, ConfigType, parse_java_int, parse_value
from josefk.server.handlers.admin.config_changes import APPEND, SUBTRACT, apply_incremental

INT32 = (-(1 << 31), (1 << 31) - 1)
THROTTLED = "leader.replication.throttled.replicas"


@pytest.mark.parametrize("kind", [ConfigType.SHORT, ConfigType.INT, ConfigType.LONG])
@pytest.mark.parametrize("raw", ["9" * 5000, "-" + "9" * 5000, "+" + "1" * 4301])
def test_thousands_of_digits_are_a_config_error(kind: ConfigType, raw: str) -> None:
    with pytest.raises(ConfigError, match=f"Not a number of type {kind.name}"):
        parse_value("some.key", raw, kind)


@pytest.mark.parametrize(("raw", "want"), [
    ("0" * 5000 + "42", 42), ("-" + "0" * 5000 + "42", -42), ("+0", 0), ("-0", 0),
    ("2147483647", (1 << 31) - 1), ("-2147483648", -(1 << 31)), ("2147483648", None),
    ("-2147483649", None), ("9" * 11, None), ("", None), ("-", None), ("1e3", None),
    ("--1", None), (" 1", None), ("١", None),  # an Arabic-Indic digit: not Java's
])
def test_parse_java_int(raw: str, want: int | None) -> None:
    assert parse_java_int(raw, *INT32) == want


def test_long_bounds() -> None:
    assert parse_value("k", "9223372036854775807", ConfigType.LONG) == (1 << 63) - 1
    assert parse_value("k", " -9223372036854775808 ", ConfigType.LONG) == -(1 << 63)
    with pytest.raises(ConfigError):
        parse_value("k", "9223372036854775808", ConfigType.LONG)


@pytest.mark.parametrize(("start", "op", "value", "want"), [
    # APPEND adds each item not yet there; duplicates the override had stay.
    ("a,b,a", APPEND, "c,c,a,d", "a,b,a,c,d"),
    # SUBTRACT removes the first occurrence, once per item given.
    ("a,b,a", SUBTRACT, "a", "b,a"),
    ("a,b,a,c", SUBTRACT, "a,a,a,c,z", "b"),
    # Java's split: empty items count, trailing ones are dropped.
    ("a", APPEND, "b,,c,,", "a,b,,c"),
    ("a,,b", APPEND, ",", "a,b"),
    (",a,,b,", SUBTRACT, "", "a,b"),
])
def test_append_and_subtract_order(start: str, op: int, value: str, want: str) -> None:
    assert apply_incremental({THROTTLED: start}, [(THROTTLED, op, value)]) == {THROTTLED: want}


def test_append_and_subtract_on_long_lists() -> None:
    # 30,000 entries: the quadratic version took seconds here, so a regression shows as
    # a slow test (pytest's timeout bounds it) rather than through a timing assert.
    n = 30_000
    current = ",".join(f"{i}:1" for i in range(n))
    given = ",".join(f"{i}:1" for i in range(n // 2, n + n // 2))
    appended = apply_incremental({THROTTLED: current}, [(THROTTLED, APPEND, given)])
    assert appended[THROTTLED].split(",") == [f"{i}:1" for i in range(n + n // 2)]
    subtracted = apply_incremental({THROTTLED: current}, [(THROTTLED, SUBTRACT, given)])
    assert subtracted[THROTTLED].split(",") == [f"{i}:1" for i in range(n // 2)]
