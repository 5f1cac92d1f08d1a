"""The SASL connection state machine: its table, what it lets through before
authentication, failures, and re-authentication (KIP-368) with an injected clock."""

from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey

from josefk.protocol.error_codes import (
    ILLEGAL_SASL_STATE,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
)
from josefk.server.security.authentication import (
    TRANSITIONS,
    Authenticator,
    Event,
    SaslConfig,
    SaslStateError,
    State,
)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
GOOD = b"\0alice\0alice-secret"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(reauth_ms: int = 0, clock: Clock | None = None) -> Authenticator:
    config = SaslConfig(("PLAIN",), USERS, None, reauth_ms=reauth_ms, failed_delay_ms=100)
    return Authenticator(config, "127.0.0.1:1", clock=clock or Clock())


def test_the_table_lets_only_the_handshake_through_before_authentication() -> None:
    before = [s for s in State if s not in (State.AUTHENTICATED, State.FAILED)]
    for state in before:
        assert (state, Event.REQUEST) not in TRANSITIONS
    assert all((s, Event.FAIL) in TRANSITIONS for s in State)
    assert {e for (s, e) in TRANSITIONS if s is State.HANDSHAKE} == {
        Event.API_VERSIONS, Event.HANDSHAKE_V0, Event.HANDSHAKE_V1, Event.FAIL}


@pytest.mark.parametrize("api_key", [ApiKey.Metadata, ApiKey.Produce, ApiKey.CreateTopics])
def test_a_request_before_authentication_is_refused(api_key: int) -> None:
    auth = make()
    auth.admit(ApiKey.ApiVersions)
    with pytest.raises(SaslStateError):
        auth.admit(api_key)


def test_plain_exchange_v1() -> None:
    auth = make()
    assert auth.intercepts(ApiKey.SaslHandshake)
    assert auth.handshake(1, "PLAIN").body == {"error_code": NONE, "mechanisms": ["PLAIN"]}
    assert auth.state is State.AUTHENTICATE
    answer = auth.authenticate(1, GOOD)
    assert answer.body is not None and answer.body["error_code"] == NONE and not answer.close
    assert auth.authenticated and auth.principal == "User:alice"
    auth.admit(ApiKey.Metadata)
    assert not auth.intercepts(ApiKey.SaslHandshake)  # no re-authentication configured


def test_plain_exchange_v0_raw_tokens() -> None:
    auth = make()
    auth.handshake(0, "PLAIN")
    assert auth.expects_raw_token
    assert auth.raw_token(GOOD).raw == b""
    assert auth.principal == "User:alice"


def test_wrong_password_fails_after_the_delay_and_closes() -> None:
    auth = make()
    auth.handshake(1, "PLAIN")
    answer = auth.authenticate(1, b"\0alice\0guess")
    assert answer.close and answer.delay_s == pytest.approx(0.1)
    assert answer.body is not None and answer.body["error_code"] == SASL_AUTHENTICATION_FAILED
    assert "guess" not in str(answer.body["error_message"]) and "guess" not in answer.reason
    assert auth.state is State.FAILED
    with pytest.raises(SaslStateError):
        auth.admit(ApiKey.Metadata)


def test_unsupported_mechanism_lists_the_enabled_ones_and_closes() -> None:
    answer = make().handshake(1, "GSSAPI")
    assert answer.close
    assert answer.body == {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["PLAIN"]}


def test_authenticate_before_handshake_is_illegal() -> None:
    answer = make().authenticate(1, GOOD)
    assert answer.close and answer.body is not None
    assert answer.body["error_code"] == ILLEGAL_SASL_STATE


def test_reauthentication_extends_the_session_and_keeps_the_principal() -> None:
    clock = Clock()
    auth = make(reauth_ms=10_000, clock=clock)
    auth.handshake(1, "PLAIN")
    first = auth.authenticate(1, GOOD)
    assert first.body is not None and first.body["session_lifetime_ms"] == 10_000
    clock.now += 9
    auth.admit(ApiKey.Metadata)
    assert auth.intercepts(ApiKey.SaslHandshake)
    auth.handshake(1, "PLAIN")
    assert auth.state is State.REAUTHENTICATE
    assert auth.authenticate(1, GOOD).close is False
    clock.now += 9  # past the first session's end, within the second
    auth.admit(ApiKey.Metadata)


def test_an_expired_session_closes_on_the_next_request() -> None:
    clock = Clock()
    auth = make(reauth_ms=1_000, clock=clock)
    auth.handshake(1, "PLAIN")
    auth.authenticate(1, GOOD)
    clock.now += 2
    with pytest.raises(SaslStateError, match="expired"):
        auth.admit(ApiKey.Metadata)


def test_reauthentication_cannot_change_the_principal() -> None:
    auth = make(reauth_ms=10_000)
    auth.handshake(1, "PLAIN")
    auth.authenticate(1, GOOD)
    auth.handshake(1, "PLAIN")
    answer = auth.authenticate(1, b"\0bob\0bob-secret")
    assert answer.close and auth.state is State.FAILED
    assert answer.body is not None and answer.body["error_code"] == SASL_AUTHENTICATION_FAILED
