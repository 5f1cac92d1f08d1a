"""A listener's security from ``server.properties``: the ``listener.name.<l>.`` prefix,
SASL mechanisms and their JAAS entries, and the errors a bad configuration stops at."""

from __future__ import annotations

from pathlib import Path

import pytest

from josefk.server.config.broker import BrokerConfig
from josefk.server.config.values import ConfigError
from josefk.server.security.client import inter_broker_listener, peer_security
from josefk.server.security.listener import listener_security, tls_settings

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" user_bob="b0b";')


def config(tmp_path: Path, **props: str) -> BrokerConfig:
    base = {"log.dirs": str(tmp_path),
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}
    return BrokerConfig.from_properties({**base, **props})


def no_credentials(mechanism: str, user: str) -> None:
    return None


def test_listener_prefix_wins_over_the_broker_value(tmp_path: Path) -> None:
    c = config(tmp_path, **{"ssl.client.auth": "none",
                            "listener.name.sasl_plaintext.ssl.client.auth": "required",
                            "listener.name.sasl_plaintext.ssl.keystore.type": "PEM"})
    assert tls_settings(c, "SASL_PLAINTEXT").get("ssl.client.auth") == "required"
    assert tls_settings(c, "PLAINTEXT").get("ssl.client.auth") == "none"
    assert c.listener_value("SASL_PLAINTEXT", "ssl.keystore.type") == "PEM"


def test_prefixed_value_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        config(tmp_path, **{"listener.name.sasl_plaintext.ssl.client.auth": "sometimes"})


def test_plain_users_from_the_listener_jaas(tmp_path: Path) -> None:
    c = config(tmp_path, **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    listener = next(x for x in c.listeners if x.name == "SASL_PLAINTEXT")
    security = listener_security(c, listener, no_credentials)
    assert security.sasl is not None and security.tls is None
    assert security.sasl.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert security.sasl.plain_users == {"admin": "admin-secret", "bob": "b0b"}


def test_kafkas_default_gssapi_is_refused_clearly(tmp_path: Path) -> None:
    c = config(tmp_path)
    listener = next(x for x in c.listeners if x.name == "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="GSSAPI"):
        listener_security(c, listener, no_credentials)


def test_plain_without_jaas_names_the_key_and_hides_nothing(tmp_path: Path) -> None:
    c = config(tmp_path, **{"sasl.enabled.mechanisms": "PLAIN"})
    listener = next(x for x in c.listeners if x.name == "SASL_PLAINTEXT")
    with pytest.raises(ConfigError,
                       match="listener.name.sasl_plaintext.plain.sasl.jaas.config"):
        listener_security(c, listener, no_credentials)


def test_bad_jaas_does_not_echo_the_password(tmp_path: Path) -> None:
    broken = JAAS.replace("required", "sufficient-ish")
    c = config(tmp_path, **{"sasl.enabled.mechanisms": "PLAIN",
                            "listener.name.sasl_plaintext.plain.sasl.jaas.config": broken})
    listener = next(x for x in c.listeners if x.name == "SASL_PLAINTEXT")
    with pytest.raises(ConfigError) as info:
        listener_security(c, listener, no_credentials)
    assert "admin-secret" not in str(info.value)


def test_tls_listener_without_a_key_store_is_refused(tmp_path: Path) -> None:
    c = BrokerConfig.from_properties({"log.dirs": str(tmp_path),
                                      "listeners": "SSL://127.0.0.1:0"})
    with pytest.raises(ConfigError, match="key store"):
        listener_security(c, c.listeners[0], no_credentials)


def test_inter_broker_login_from_the_listener_jaas(tmp_path: Path) -> None:
    c = BrokerConfig.from_properties({
        "log.dirs": str(tmp_path),
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": JAAS})
    assert inter_broker_listener(c) == "INTERNAL"
    peers = peer_security(c)
    assert (peers.listener, peers.mechanism, peers.username) == ("INTERNAL", "PLAIN", "admin")
    assert peers.tls is None and "admin-secret" not in repr(peers)
    client = peers.sasl_client()
    assert client is not None and client.evaluate(b"") == b"\0admin\0admin-secret"


def test_inter_broker_listener_defaults_as_kafka(tmp_path: Path) -> None:
    c = config(tmp_path)
    assert inter_broker_listener(c) == "PLAINTEXT"  # security.inter.broker.protocol
    assert peer_security(c).sasl_client() is None
    scram = config(tmp_path, **{"inter.broker.listener.name": "SASL_PLAINTEXT",
                                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    with pytest.raises(ConfigError, match="scram-sha-512.sasl.jaas.config"):
        peer_security(scram)
