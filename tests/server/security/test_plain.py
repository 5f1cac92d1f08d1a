"""SASL/PLAIN's server (RFC 4616) as Kafka's PlainSaslServer, and the mechanism factory."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.net.sasl.plain import SaslMechanismPlain

from josefk.server.security.errors import (
    AuthenticationError,
    IllegalSaslStateError,
    UnsupportedSaslMechanismError,
)
from josefk.server.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    parse_listener_jaas_config,
)
from josefk.server.security.mechanisms import MECHANISMS, SaslServer, create_server
from josefk.server.security.plain import PlainServer, plain_users
from josefk.server.security.scram import ScramServer

JAAS = (f'{PLAIN_LOGIN_MODULE} required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')


def server() -> PlainServer:
    return PlainServer.from_jaas(parse_listener_jaas_config(JAAS))


def test_users_are_the_user_options_of_the_login_module() -> None:
    options = parse_listener_jaas_config(JAAS).options
    assert plain_users(options) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert plain_users({"user_": "x", "username": "y"}) == {}


@pytest.mark.parametrize("authzid", ["", "alice"])
def test_authenticates_a_user_of_the_jaas_config(authzid: str) -> None:
    plain = server()
    assert not plain.complete
    assert plain.evaluate(f"{authzid}\0alice\0alice-secret".encode()) == b""
    assert plain.complete
    assert plain.authorization_id == "alice"


def test_kafka_python_client_authenticates() -> None:
    client = SaslMechanismPlain(sasl_plain_username="admin", sasl_plain_password="admin-secret")
    plain = server()
    client.receive(plain.evaluate(client.auth_bytes()))
    assert client.is_authenticated() and plain.authorization_id == "admin"


@pytest.mark.parametrize(("response", "message"), [
    (b"\0alice\0wrong-secret", "Invalid username or password"),
    (b"\0mallory\0alice-secret", "Invalid username or password"),
    (b"\0alice\0alice-secre", "Invalid username or password"),
    (b"admin\0alice\0alice-secret", "authorization id that is different from username"),
    (b"\0\0alice-secret", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"alice-secret", "expected 3 tokens, got 1"),
    (b"\0alice-secret", "expected 3 tokens, got 2"),
    (b"\0alice\0alice-secret\0", "expected 3 tokens, got 4"),
    (b"\0alice\0alice-secret\0\0\0", "expected 3 tokens, got 4"),
    (b"\0alice\0alice-secret\xff", "not valid UTF-8"),
])
def test_failures_say_why_but_never_the_password(response: bytes, message: str) -> None:
    plain = server()
    with pytest.raises(AuthenticationError, match=message) as info:
        plain.evaluate(response)
    assert "secret" not in str(info.value) and "secret" not in info.value.message
    assert not plain.complete
    with pytest.raises(IllegalSaslStateError):
        plain.authorization_id  # noqa: B018
    with pytest.raises(IllegalSaslStateError):
        plain.evaluate(b"\0alice\0alice-secret")


def test_one_response_only() -> None:
    plain = server()
    plain.evaluate(b"\0alice\0alice-secret")
    with pytest.raises(IllegalSaslStateError):
        plain.evaluate(b"\0alice\0alice-secret")


def test_non_ascii_names_and_passwords() -> None:
    plain = PlainServer({"zoë": "pässwörd"})
    assert plain.evaluate("\0zoë\0pässwörd".encode()) == b""
    assert plain.authorization_id == "zoë"


def test_from_jaas_wants_the_plain_login_module() -> None:
    entry = parse_listener_jaas_config(f'{SCRAM_LOGIN_MODULE} required user_a="b";')
    with pytest.raises(JaasConfigError, match="PlainLoginModule"):
        PlainServer.from_jaas(entry)


@given(st.binary(max_size=300) | st.text(max_size=100).map(str.encode))
def test_any_response_authenticates_or_raises_authentication_error(response: bytes) -> None:
    with contextlib.suppress(AuthenticationError):
        assert server().evaluate(response) == b""


def test_factory_makes_each_mechanism() -> None:
    users = {"alice": "alice-secret"}
    made = {mechanism: create_server(mechanism, plain_users=users,
                                     scram_credentials=lambda _m, _u: None)
            for mechanism in MECHANISMS}
    assert isinstance(made["PLAIN"], PlainServer)
    assert isinstance(made["SCRAM-SHA-256"], ScramServer)
    assert made["SCRAM-SHA-512"].mechanism_name == "SCRAM-SHA-512"
    plain: SaslServer = made["PLAIN"]
    plain.evaluate(b"\0alice\0alice-secret")
    assert plain.complete and plain.authorization_id == "alice"


def test_factory_refuses_unknown_or_unconfigured_mechanisms() -> None:
    with pytest.raises(UnsupportedSaslMechanismError, match="GSSAPI"):
        create_server("GSSAPI", plain_users={})
    with pytest.raises(ValueError, match="PLAIN"):
        create_server("PLAIN")
    with pytest.raises(ValueError, match="credential lookup"):
        create_server("SCRAM-SHA-256", plain_users={})
