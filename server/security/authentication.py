"""A SASL connection's authentication (Kafka's SaslServerAuthenticator), as a table of
transitions in h11's shape: a request the table does not list for the state closes the
connection, so before authentication only ApiVersions and the SASL requests are served.

The exchange: ApiVersions (any number), SaslHandshake naming a mechanism, then the
mechanism's tokens in SaslAuthenticate requests (after SaslHandshake v1) or as bare
size-prefixed frames (after v0, as old clients send them) until the mechanism completes.
With ``connections.max.reauth.ms`` set, the answer tells the client how long its session
lasts; it re-authenticates with the same exchange before then (KIP-368), and a request
after the session expired closes the connection.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.api_key import ApiKey

from josefk.protocol.error_codes import (
    ILLEGAL_SASL_STATE,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
)
from josefk.server.security.errors import AuthenticationError
from josefk.server.security.mechanisms import SaslServer, create_server
from josefk.server.security.principal import USER
from josefk.server.security.scram import CredentialLookup

logger = logging.getLogger(__name__)


class State(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "waiting for SaslAuthenticate"
    RAW_TOKENS = "waiting for SASL tokens"
    AUTHENTICATED = "authenticated"
    REAUTHENTICATE = "re-authenticating"
    FAILED = "failed"


class Event(enum.Enum):
    API_VERSIONS = "ApiVersions"
    HANDSHAKE_V0 = "SaslHandshake v0"
    HANDSHAKE_V1 = "SaslHandshake v1"
    TOKEN = "a SASL token"
    COMPLETE = "the mechanism's completion"
    REQUEST = "a request"
    FAIL = "a failure"


S, E = State, Event
TRANSITIONS: Mapping[tuple[State, Event], State] = {
    (S.HANDSHAKE, E.API_VERSIONS): S.HANDSHAKE,
    (S.HANDSHAKE, E.HANDSHAKE_V0): S.RAW_TOKENS,
    (S.HANDSHAKE, E.HANDSHAKE_V1): S.AUTHENTICATE,
    (S.AUTHENTICATE, E.TOKEN): S.AUTHENTICATE,
    (S.AUTHENTICATE, E.COMPLETE): S.AUTHENTICATED,
    (S.RAW_TOKENS, E.TOKEN): S.RAW_TOKENS,
    (S.RAW_TOKENS, E.COMPLETE): S.AUTHENTICATED,
    (S.AUTHENTICATED, E.REQUEST): S.AUTHENTICATED,
    (S.AUTHENTICATED, E.API_VERSIONS): S.AUTHENTICATED,
    (S.AUTHENTICATED, E.HANDSHAKE_V1): S.REAUTHENTICATE,
    (S.REAUTHENTICATE, E.TOKEN): S.REAUTHENTICATE,
    (S.REAUTHENTICATE, E.COMPLETE): S.AUTHENTICATED,
    **{(s, E.FAIL): S.FAILED for s in State},
}


class SaslStateError(Exception):
    """A request the authentication state does not accept: the connection closes."""


@dataclass(frozen=True)
class SaslConfig:
    """One SASL listener's settings."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] | None = None
    scram_credentials: CredentialLookup | None = None
    reauth_ms: int = 0  # connections.max.reauth.ms; 0: sessions never expire
    failed_delay_ms: int = 100  # connection.failed.authentication.delay.ms


@dataclass
class Answer:
    """What the connection sends back: a response body (a mapping for kafka-python's
    response class), or a raw token for the v0 exchange; ``close`` after sending it,
    ``delay_s`` before (a failed authentication)."""

    body: Mapping[str, Any] | None = None
    raw: bytes | None = None
    close: bool = False
    delay_s: float = 0.0
    reason: str = ""  # why it closes, safe to log (no secret)


@dataclass
class Authenticator:
    """The authentication state of one SASL connection."""

    config: SaslConfig
    peer: str
    clock: Callable[[], float] = time.monotonic
    state: State = State.HANDSHAKE
    principal: str | None = None
    _server: SaslServer | None = field(default=None, repr=False)
    _mechanism: str | None = None
    _expires_at: float | None = None

    def _to(self, event: Event) -> None:
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            raise SaslStateError(f"unexpected {event.value} while {self.state.value}")
        self.state = new

    @property
    def authenticated(self) -> bool:
        return self.state is State.AUTHENTICATED

    @property
    def expects_raw_token(self) -> bool:
        return self.state is State.RAW_TOKENS

    def intercepts(self, api_key: int) -> bool:
        """Whether this request is the authenticator's to answer (the SASL requests while
        authenticating, and a re-authentication when sessions expire)."""
        if api_key not in (ApiKey.SaslHandshake, ApiKey.SaslAuthenticate):
            return False
        if self.state is State.AUTHENTICATED:
            return api_key == ApiKey.SaslHandshake and self.config.reauth_ms > 0
        return True

    def admit(self, api_key: int) -> None:
        """Check a request the broker is to serve; SaslStateError closes the connection."""
        if api_key == ApiKey.ApiVersions:
            self._to(Event.API_VERSIONS)
            return
        if self.state is State.AUTHENTICATED and self._expired():
            self._to(Event.FAIL)
            raise SaslStateError("the SASL session expired (connections.max.reauth.ms) "
                                 "without re-authentication")
        self._to(Event.REQUEST)

    def _expired(self) -> bool:
        return self._expires_at is not None and self.clock() >= self._expires_at

    def handshake(self, version: int, mechanism: str) -> Answer:
        reauth = self.state is State.AUTHENTICATED
        self._to(Event.HANDSHAKE_V0 if version == 0 else Event.HANDSHAKE_V1)
        body = {"error_code": NONE, "mechanisms": list(self.config.mechanisms)}
        if reauth and mechanism != self._mechanism:
            self._to(Event.FAIL)
            return Answer({**body, "error_code": ILLEGAL_SASL_STATE}, close=True,
                          reason=f"re-authentication with {mechanism[:64]!r}, not "
                                 f"{self._mechanism}")
        if mechanism not in self.config.mechanisms:
            self._to(Event.FAIL)
            return Answer({**body, "error_code": UNSUPPORTED_SASL_MECHANISM}, close=True,
                          reason=f"unsupported SASL mechanism {mechanism[:64]!r}")
        self._server = create_server(mechanism, plain_users=self.config.plain_users,
                                     scram_credentials=self.config.scram_credentials)
        self._mechanism = mechanism
        return Answer(body)

    def authenticate(self, version: int, token: bytes) -> Answer:
        """A SaslAuthenticate request's token."""
        if self.state not in (State.AUTHENTICATE, State.REAUTHENTICATE):
            self._to(Event.FAIL)
            return Answer(self._failure_body("Unexpected SaslAuthenticate request",
                                             ILLEGAL_SASL_STATE), close=True,
                          reason="SaslAuthenticate before SaslHandshake")
        try:
            challenge = self._evaluate(token)
        except AuthenticationError as e:
            return Answer(self._failure_body(e.message, SASL_AUTHENTICATION_FAILED),
                          close=True, delay_s=self.config.failed_delay_ms / 1000,
                          reason=f"{self._mechanism}: {e.message}")
        body = {"error_code": NONE, "error_message": None, "auth_bytes": challenge,
                "session_lifetime_ms": self._lifetime_ms() if self.authenticated else 0}
        return Answer(body)

    def raw_token(self, token: bytes) -> Answer:
        """A bare token of the v0 exchange; a failure closes without an answer."""
        try:
            return Answer(raw=self._evaluate(token))
        except AuthenticationError as e:
            return Answer(close=True, delay_s=self.config.failed_delay_ms / 1000,
                          reason=f"{self._mechanism}: {e.message}")

    def _evaluate(self, token: bytes) -> bytes:
        assert self._server is not None
        self._to(Event.TOKEN)
        try:
            challenge = self._server.evaluate(token)
        except AuthenticationError:
            self._to(Event.FAIL)
            raise
        if self._server.complete:
            self._complete(USER + self._server.authorization_id)
        return challenge

    def _complete(self, principal: str) -> None:
        if self.state is State.REAUTHENTICATE and principal != self.principal:
            self._to(Event.FAIL)
            raise AuthenticationError(f"Cannot change principals during re-authentication "
                                      f"from {self.principal} to {principal}")
        self._to(Event.COMPLETE)
        self.principal = principal
        if self.config.reauth_ms > 0:
            self._expires_at = self.clock() + self.config.reauth_ms / 1000

    def _lifetime_ms(self) -> int:
        return self.config.reauth_ms if self.config.reauth_ms > 0 else 0

    @staticmethod
    def _failure_body(message: str, error_code: int) -> dict[str, Any]:
        return {"error_code": error_code, "error_message": message, "auth_bytes": b"",
                "session_lifetime_ms": 0}
