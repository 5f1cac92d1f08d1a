"""Dynamic broker configs in the config layer (``server.config.dynamic`` and
``server.config.describe``): Kafka's checks and messages, the four sources, synonyms in
Kafka's order, sensitive values, documentation (josefk's own). The messages and answers
are Kafka 4.3.1's, as its kafka-configs.sh printed them."""

from __future__ import annotations

import logging

import pytest

from josefk.server.config.broker import BrokerConfig, load_config, topic_config_entries
from josefk.server.config.dynamic import check_update, from_persistent, loggable, validate
from josefk.server.config.keys import BROKER_KEYS, TOPIC_KEYS
from josefk.server.config.passwords import Plain
from josefk.server.config.values import ConfigError, ConfigSource, ConfigType

DYN_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG
DYN_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC, DEFAULT = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG


def static(**settings: str) -> BrokerConfig:
    return load_config(None, {k.replace("_", "."): v for k, v in settings.items()})


@pytest.mark.parametrize(("props", "per_broker", "message"), [
    ({"log.retention.hours": "2"}, True,
     "Cannot update these configs dynamically: [log.retention.hours]"),
    ({"ssl.keystore.location": "/x"}, False,
     "These security configs can be dynamically updated only per-listener using the "
     "listener prefix: [ssl.keystore.location]"),
    ({"listener.name.plaintext.ssl.keystore.type": "PKCS12"}, False,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "[listener.name.plaintext.ssl.keystore.type]"),
    ({"log.cleaner.threads": "abc"}, False,
     "Invalid value abc for configuration log.cleaner.threads: Not a number of type INT"),
    ({"ssl.client.auth": "required"}, False,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "[ssl.client.auth]"),
])
def test_refused_as_kafka_refuses(props: dict[str, str], per_broker: bool, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        validate(props, per_broker)
    assert str(e.value) == message


@pytest.mark.parametrize(("props", "per_broker"), [
    ({"log.retention.ms": "3600000", "max.connections": "1000", "foo.bar": "1"}, False),
    ({"listener.name.plaintext.max.connections": "5"}, False),
    ({"listener.name.plaintext.ssl.keystore.password": "secret",
      "log.cleaner.threads": "2"}, True),
])
def test_accepted_as_kafka_accepts(props: dict[str, str], per_broker: bool) -> None:
    validate(props, per_broker)


def test_whole_config_and_thread_counts_are_checked() -> None:
    current = static(num_io_threads="4")
    with pytest.raises(ConfigError, match="max.connections.per.ip can be set to zero only"):
        check_update(current, {"max.connections.per.ip": "0"}, {})
    with pytest.raises(ConfigError) as e:
        check_update(current, {}, {"num.io.threads": "9"})
    assert str(e.value) == ("Dynamic thread count update validation failed for "
                            "num.io.threads=9, value should not be greater than double the "
                            "current value 4")
    with pytest.raises(ConfigError, match="cannot be increased to more than double the "
                                          "current value 1"):
        check_update(current, {"log.cleaner.threads": "3"}, {})
    assert check_update(current, {"log.cleaner.threads": "2"}, {}).values[
        "log.cleaner.threads"] == 2


def test_stored_settings_that_may_not_be_there_are_dropped_without_their_values(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    kept = from_persistent({"log.dirs": "/x", "ssl.keystore.password": "hunter2",
                            "listener.name.ssl.ssl.key.password": "hunter3",
                            "log.retention.ms": "x", "message.max.bytes": "5"},
                           per_broker=False, entity="<default>", passwords=Plain())
    assert kept == {"message.max.bytes": "5"}
    assert "hunter" not in caplog.text and "log.dirs" in caplog.text


def test_secrets_are_hidden_in_log_lines() -> None:
    assert loggable({"listener.name.ssl.ssl.keystore.password": "p", "foo": "x",
                     "log.retention.ms": "5"}) == {
        "listener.name.ssl.ssl.keystore.password": "[hidden]", "foo": "[hidden]",
        "log.retention.ms": "5"}


def test_dynamic_layers_win_in_kafkas_order() -> None:
    c = static(log_retention_hours="24").with_dynamic(
        {"log.retention.ms": "3600000", "max.connections": "1000"},
        {"log.retention.ms": "7200000", "log.cleaner.threads": "2"})
    assert c.log_retention_ms == 7200000 and c.max_connections == 1000
    entries = {e.name: e for e in c.describe()}

    def view(name: str) -> tuple[object, ...]:
        e = entries[name]
        return e.value, e.source, [(s.name, s.value, s.source) for s in e.synonyms]

    assert view("log.retention.ms") == ("7200000", DYN_BROKER, [
        ("log.retention.ms", "7200000", DYN_BROKER),
        ("log.retention.ms", "3600000", DYN_DEFAULT),
        ("log.retention.hours", "24", STATIC), ("log.retention.hours", "168", DEFAULT)])
    assert view("max.connections") == ("1000", DYN_DEFAULT, [
        ("max.connections", "1000", DYN_DEFAULT), ("max.connections", "2147483647", DEFAULT)])
    assert view("log.cleaner.threads") == ("2", DYN_BROKER, [
        ("log.cleaner.threads", "2", DYN_BROKER), ("log.cleaner.threads", "1", DEFAULT)])
    topic = {e.name: e for e in topic_config_entries({}, c)}
    assert (topic["retention.ms"].value, topic["retention.ms"].source) == ("7200000", DYN_BROKER)
    assert [(s.name, s.source) for s in topic["retention.ms"].synonyms] == [
        ("log.retention.ms", DYN_BROKER), ("log.retention.ms", DYN_DEFAULT),
        ("log.retention.hours", STATIC), ("log.retention.hours", DEFAULT)]
    assert c.default_log_config().retention_ms == 7200000


def test_listener_overrides_and_unknown_keys_are_listed_sensitive() -> None:
    c = static().with_dynamic({"foo.bar": "1"},
                              {"listener.name.plaintext.ssl.keystore.password": "secret"})
    entries = {e.name: e for e in c.describe()}
    password = entries["listener.name.plaintext.ssl.keystore.password"]
    assert (password.value, password.is_sensitive, password.config_type, password.read_only) \
        == (None, True, ConfigType.PASSWORD, True)
    assert [(s.name, s.value, s.source) for s in password.synonyms] == [
        ("listener.name.plaintext.ssl.keystore.password", None, DYN_BROKER)]
    assert (entries["foo.bar"].value, entries["foo.bar"].source) == (None, DYN_DEFAULT)
    assert [e.name for e in c.describe(per_broker=False)] == ["foo.bar"]


def test_documentation_is_the_tables() -> None:
    entries = {e.name: e for e in static().describe()}
    assert entries["log.cleaner.threads"].documentation == (
        BROKER_KEYS["log.cleaner.threads"].doc)
    assert "josefk" in entries["num.io.threads"].documentation  # a key it does not act on
    topic = {e.name: e for e in topic_config_entries({}, static())}
    assert topic["retention.ms"].documentation == TOPIC_KEYS["retention.ms"].doc
