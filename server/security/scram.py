"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): the stored credential and the server
side of the exchange, as Kafka's ``ScramCredential``, ``ScramCredentialUtils`` and
``ScramSaslServer``. The client, for broker-to-broker connections, is in ``scram_client``."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from enum import Enum, auto

from josefk.cluster.security.credentials import ScramCredential
from josefk.server.security import rfc5802 as msg
from josefk.server.security.errors import AuthenticationError, IllegalSaslStateError
from josefk.server.security.rfc5802 import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
)

__all__ = ["MAX_ITERATIONS", "MIN_ITERATIONS", "SCRAM_SHA_256", "SCRAM_SHA_512",
           "CredentialLookup", "ScramCredential", "ScramServer", "ScramServerState",
           "TokenLookup", "credential_from_password", "credential_from_salted_password"]

_INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"
# Per process: the fake salts of unknown users are stable while the broker runs, unguessable.
_FAKE_SALT_KEY = secrets.token_bytes(32)


def credential_from_salted_password(mechanism: str, salted_password: bytes, salt: bytes,
                                    iterations: int) -> ScramCredential:
    """The credential of a salted password (an ``AlterUserScramCredentials`` upsertion):
    Kafka's ``ScramFormatter``; the password itself never reaches the broker."""
    _check_iterations(mechanism, iterations)
    client_key = msg.hmac_digest(mechanism, salted_password, b"Client Key")
    return ScramCredential(salt, msg.digest(mechanism, client_key),
                           msg.hmac_digest(mechanism, salted_password, b"Server Key"), iterations)


def credential_from_password(mechanism: str, password: str, salt: bytes | None = None,
                             iterations: int = MIN_ITERATIONS) -> ScramCredential:
    """Kafka's ``ScramFormatter.generateCredential``; a random salt by default."""
    _check_iterations(mechanism, iterations)  # before the hashing, whose cost they are
    salt = msg.random_string().encode() if salt is None else salt
    salted = msg.salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salted, salt, iterations)


def _check_iterations(mechanism: str, iterations: int) -> None:
    msg.check_mechanism(mechanism)
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"Iterations {iterations} is less than the minimum "
                         f"{MIN_ITERATIONS} for {mechanism}")
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"Iterations {iterations} is more than the maximum "
                         f"{MAX_ITERATIONS} for {mechanism}")


CredentialLookup = Callable[[str, str], ScramCredential | None]
"""``(mechanism, username) -> credential``, None for an unknown user."""
TokenLookup = Callable[[str, str], tuple[ScramCredential, str] | None]
"""``(mechanism, token id) -> (credential, token owner)`` of a delegation token."""


class ScramServerState(Enum):
    RECEIVE_CLIENT_FIRST = auto()
    RECEIVE_CLIENT_FINAL = auto()
    COMPLETE = auto()
    FAILED = auto()


class _Event(Enum):
    CLIENT_FIRST = "client first message"
    CLIENT_FINAL = "client final message"
    FAILURE = "failure"


_S, _E = ScramServerState, _Event
_TRANSITIONS: dict[ScramServerState, dict[_Event, ScramServerState]] = {
    _S.RECEIVE_CLIENT_FIRST: {_E.CLIENT_FIRST: _S.RECEIVE_CLIENT_FINAL, _E.FAILURE: _S.FAILED},
    _S.RECEIVE_CLIENT_FINAL: {_E.CLIENT_FINAL: _S.COMPLETE, _E.FAILURE: _S.FAILED},
    # As Kafka: a message after the end is an error, which fails a completed exchange too.
    _S.COMPLETE: {_E.FAILURE: _S.FAILED},
    _S.FAILED: {_E.FAILURE: _S.FAILED},
}
_EXPECTED = {_S.RECEIVE_CLIENT_FIRST: _E.CLIENT_FIRST, _S.RECEIVE_CLIENT_FINAL: _E.CLIENT_FINAL}


class ScramServer:
    """Server side of one SCRAM exchange: client first -> server first, client final ->
    server final. An unknown user gets a server first message made from a fake credential
    and fails at the final step like a wrong password, so that users cannot be enumerated."""

    def __init__(self, mechanism: str, credentials: CredentialLookup, *,
                 tokens: TokenLookup | None = None, server_nonce: str | None = None,
                 fake_salt_key: bytes | None = None) -> None:
        msg.check_mechanism(mechanism)
        self.mechanism_name = mechanism
        self._credentials = credentials
        self._tokens = tokens
        self._server_nonce = msg.random_string() if server_nonce is None else server_nonce
        msg.check_nonce(self._server_nonce)
        self._fake_salt_key = _FAKE_SALT_KEY if fake_salt_key is None else fake_salt_key
        self._state = _S.RECEIVE_CLIENT_FIRST
        self._credential: ScramCredential | None = None
        self._known = False
        self._client_first: msg.ClientFirst | None = None
        self._server_first = ""
        self._authorization_id: str | None = None
        self.extensions: dict[str, str] = {}
        self.token_authenticated = False

    @property
    def state(self) -> ScramServerState:
        return self._state

    @property
    def complete(self) -> bool:
        return self._state is _S.COMPLETE

    @property
    def authorization_id(self) -> str:
        """The authenticated user (a delegation token's owner); only once complete."""
        if not self.complete or self._authorization_id is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate(self, response: bytes) -> bytes:
        """The challenge answering the client's ``response``; ``AuthenticationError`` fails
        the exchange for good."""
        if response.startswith(b"c="):
            event = _E.CLIENT_FINAL
        elif response[:2] in (b"n,", b"y,", b"p,"):
            event = _E.CLIENT_FIRST
        else:  # unrecognizable: let the parser of the expected message say what is wrong
            event = _EXPECTED.get(self._state, _E.CLIENT_FIRST)
        try:
            next_state = _TRANSITIONS[self._state].get(event)
            if next_state is None:
                raise IllegalSaslStateError(
                    f"Unexpected SCRAM {event.value} in SCRAM server state {self._state.name}")
            if event is _E.CLIENT_FIRST:
                challenge = self._on_client_first(msg.parse_client_first(response))
            else:
                challenge = self._on_client_final(msg.parse_client_final(response))
        except AuthenticationError:
            self._credential = self._client_first = None
            self._state = _TRANSITIONS[self._state][_E.FAILURE]
            raise
        self._state = next_state
        return challenge

    def _lookup(self, first: msg.ClientFirst) -> tuple[ScramCredential, str] | None:
        self.token_authenticated = first.extensions.get("tokenauth", "").lower() == "true"
        try:
            if self.token_authenticated:
                return None if self._tokens is None else self._tokens(self.mechanism_name,
                                                                      first.username)
            credential = self._credentials(self.mechanism_name, first.username)
        except Exception as e:
            raise AuthenticationError(
                "Authentication failed: Credentials could not be obtained") from e
        return None if credential is None else (credential, first.username)

    def _fake_credential(self, username: str) -> ScramCredential:
        seed = hmac.digest(self._fake_salt_key, f"{self.mechanism_name}\0{username}".encode(),
                           "sha256")
        salt = msg.base36(int.from_bytes(seed) >> 126).encode()  # 130 bits, as a real salt
        size = len(msg.digest(self.mechanism_name, b""))
        return ScramCredential(salt, secrets.token_bytes(size), secrets.token_bytes(size),
                               MIN_ITERATIONS)

    def _on_client_first(self, first: msg.ClientFirst) -> bytes:
        self.extensions = first.extensions
        found = self._lookup(first)
        self._known = found is not None
        if found is None:
            credential, self._authorization_id = self._fake_credential(first.username), None
        else:
            credential, self._authorization_id = found
        if first.authzid and first.authzid != first.username:
            raise AuthenticationError("Authentication failed: Client requested an authorization "
                                      "id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise AuthenticationError(f"Iterations {credential.iterations} is less than the "
                                      f"minimum {MIN_ITERATIONS} for {self.mechanism_name}")
        self._credential, self._client_first = credential, first
        self._server_first = (f"r={first.nonce}{self._server_nonce},"
                              f"s={msg.b64encode(credential.salt)},i={credential.iterations}")
        return self._server_first.encode()

    def _on_client_final(self, final: msg.ClientFinal) -> bytes:
        first, credential = self._client_first, self._credential
        assert first is not None and credential is not None  # set with RECEIVE_CLIENT_FINAL
        if final.channel_binding != first.gs2_header.encode():
            raise AuthenticationError(
                "Authentication failed: Invalid channel binding in the final client message")
        if final.nonce != first.nonce + self._server_nonce:
            raise AuthenticationError(
                "Authentication failed: Invalid client nonce in the final client message")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        signature = msg.hmac_digest(self.mechanism_name, credential.stored_key, auth_message)
        valid = False
        if len(final.proof) == len(signature):
            client_key = msg.xor(final.proof, signature)
            computed = msg.digest(self.mechanism_name, client_key)
            valid = hmac.compare_digest(computed, credential.stored_key)
        if not (valid and self._known):
            raise AuthenticationError(_INVALID_CREDENTIALS)
        server_signature = msg.hmac_digest(self.mechanism_name, credential.server_key,
                                           auth_message)
        self._credential = self._client_first = None
        return f"v={msg.b64encode(server_signature)}".encode()
