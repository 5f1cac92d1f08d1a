"""JAAS configuration strings as Kafka's JaasConfig parses them (sasl.jaas.config)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.server.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    ControlFlag,
    JaasConfigError,
    parse_jaas_config,
    parse_listener_jaas_config,
)

PLAIN_CONFIG = (f'{PLAIN_LOGIN_MODULE} required username="admin" password="admin-secret" '
                'user_admin="admin-secret" user_alice="alice-secret";')


def test_plain_login_module_of_kafka_docs() -> None:
    entry = parse_listener_jaas_config(PLAIN_CONFIG)
    assert entry.login_module == PLAIN_LOGIN_MODULE
    assert entry.control_flag is ControlFlag.REQUIRED
    assert dict(entry.options) == {"username": "admin", "password": "admin-secret",
                                   "user_admin": "admin-secret", "user_alice": "alice-secret"}


def test_scram_login_module_over_several_lines() -> None:
    entry = parse_listener_jaas_config(
        f'{SCRAM_LOGIN_MODULE} required\n    username="broker"\n    password="b-secret";\n')
    assert entry.login_module == SCRAM_LOGIN_MODULE
    assert dict(entry.options) == {"username": "broker", "password": "b-secret"}


@pytest.mark.parametrize("flag", ["required", "REQUISITE", "Sufficient", "optional"])
def test_control_flags_are_case_insensitive(flag: str) -> None:
    entry = parse_listener_jaas_config(f"a.b.C {flag};")
    assert entry.control_flag == flag.lower()
    assert entry.options == {}


def test_quoted_values_take_java_escapes_and_either_quote() -> None:
    config = (r"""M required a="x\"y\\z" b='single' c="tab\there\nnl" d="\101\477\8" """
              r"""e="un;quoted=,{}" f='"';""")
    options = parse_listener_jaas_config(config).options
    assert options["a"] == 'x"y\\z'
    assert options["b"] == "single"
    assert options["c"] == "tab\there\nnl"
    assert options["d"] == "A'78"  # octal: up to 3 digits from 0-3, 2 from 4-7
    assert options["e"] == "un;quoted=,{}"
    assert options["f"] == '"'


def test_unquoted_words_but_not_numbers() -> None:
    options = parse_listener_jaas_config("M required user=admin path=a.b-c_d$e9;").options
    assert dict(options) == {"user": "admin", "path": "a.b-c_d$e9"}
    with pytest.raises(JaasConfigError, match="must be quoted"):
        parse_listener_jaas_config("M required iterations=4096;")
    assert parse_listener_jaas_config('M required iterations="4096";').options == {
        "iterations": "4096"}


def test_comments_are_skipped() -> None:
    config = f"// the broker's users\n{PLAIN_LOGIN_MODULE} /* flag: */ required\n" \
             '  user_a="x" / a comment to the line end, as StreamTokenizer\n  user_b="y";'
    assert dict(parse_listener_jaas_config(config).options) == {"user_a": "x", "user_b": "y"}


def test_a_later_duplicate_option_wins() -> None:
    assert parse_listener_jaas_config('M required a="1" a="2";').options == {"a": "2"}


def test_several_entries_but_a_listener_property_holds_one() -> None:
    config = f'{PLAIN_CONFIG}\n{SCRAM_LOGIN_MODULE} optional username="u" password="p";'
    entries = parse_jaas_config(config)
    assert [e.login_module for e in entries] == [PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE]
    with pytest.raises(JaasConfigError, match="contains 2 login modules, should be 1 module"):
        parse_listener_jaas_config(config)


@pytest.mark.parametrize(("config", "message"), [
    ("", "Login module not specified"),
    ("  /* only a comment */ ", "Login module not specified"),
    ("M", "control flag not specified"),
    ("M ;", "control flag is not available"),
    ('M "x" required;', "Invalid login module control flag"),
    ('M required password="s3cret"', "not terminated by semi-colon"),
    ('M required password="s3cret" user_x=;', "Value not specified"),
    ('M required password="s3cret" user_x;', "Value not specified"),
    ('M required password="s3cret" = "v";', "Option name expected"),
    ('M required password="s3cret\n";', "Unterminated quoted value"),
    ('M required password="s3cret', "Unterminated quoted value"),
    ('"" required;', "Login module name expected"),
])
def test_errors_are_clear_and_never_show_a_value(config: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message) as info:
        parse_listener_jaas_config(config)
    assert isinstance(info.value, ValueError)
    assert "s3cret" not in str(info.value)


def test_an_invalid_flag_is_not_echoed() -> None:
    with pytest.raises(JaasConfigError) as info:
        parse_listener_jaas_config('M hunter2 password="x";')
    assert "hunter2" not in str(info.value)


def test_repr_and_options_keep_secrets_in() -> None:
    entry = parse_listener_jaas_config(PLAIN_CONFIG)
    assert "secret" not in repr(entry)
    with pytest.raises(TypeError):
        entry.options["user_eve"] = "x"  # type: ignore[index]


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r") + '"'


@given(st.dictionaries(st.from_regex(r"[A-Za-z_$][A-Za-z0-9_$.\-]{0,20}", fullmatch=True),
                       st.text(max_size=40), max_size=6))
def test_quoted_options_round_trip(options: dict[str, str]) -> None:
    text = " ".join(f"{key}={_quote(value)}" for key, value in options.items())
    entry = parse_listener_jaas_config(f"{PLAIN_LOGIN_MODULE} sufficient {text};")
    assert dict(entry.options) == options


@given(st.text(alphabet=st.sampled_from('ab1.-_$;="\'\\/* \n{}') | st.characters(), max_size=80))
def test_any_text_parses_or_raises_config_error(text: str) -> None:
    try:
        entries = parse_jaas_config(text)
    except JaasConfigError:
        return
    assert entries and all(entry.login_module for entry in entries)
