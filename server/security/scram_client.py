"""The client side of SCRAM-SHA-256/512, as Kafka's ``ScramSaslClient``: what a broker runs
towards another broker when ``sasl.mechanism.inter.broker.protocol`` is a SCRAM mechanism."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from enum import Enum, auto

from josefk.server.security import rfc5802 as msg
from josefk.server.security.errors import AuthenticationError, IllegalSaslStateError
from josefk.server.security.rfc5802 import MAX_ITERATIONS, MIN_ITERATIONS


class ScramClientState(Enum):
    SEND_CLIENT_FIRST = auto()
    RECEIVE_SERVER_FIRST = auto()
    RECEIVE_SERVER_FINAL = auto()
    COMPLETE = auto()
    FAILED = auto()


class _Event(Enum):
    START = "empty challenge"
    SERVER_FIRST = "server first message"
    SERVER_FINAL = "server final message"
    FAILURE = "failure"


_S, _E = ScramClientState, _Event
_TRANSITIONS: dict[ScramClientState, dict[_Event, ScramClientState]] = {
    _S.SEND_CLIENT_FIRST: {_E.START: _S.RECEIVE_SERVER_FIRST, _E.FAILURE: _S.FAILED},
    _S.RECEIVE_SERVER_FIRST: {_E.SERVER_FIRST: _S.RECEIVE_SERVER_FINAL, _E.FAILURE: _S.FAILED},
    _S.RECEIVE_SERVER_FINAL: {_E.SERVER_FINAL: _S.COMPLETE, _E.FAILURE: _S.FAILED},
    _S.COMPLETE: {_E.FAILURE: _S.FAILED},
    _S.FAILED: {_E.FAILURE: _S.FAILED},
}
_EXPECTED = {_S.SEND_CLIENT_FIRST: _E.START, _S.RECEIVE_SERVER_FIRST: _E.SERVER_FIRST,
             _S.RECEIVE_SERVER_FINAL: _E.SERVER_FINAL}


class ScramClient:
    """Client side of one SCRAM exchange, driven like Kafka's: ``evaluate(b"")`` gives the
    client first message, the server first message gives the client final one, and the
    server final message gives ``b""`` once the server's signature is verified."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 extensions: Mapping[str, str] | None = None, nonce: str | None = None) -> None:
        msg.check_mechanism(mechanism)
        self.mechanism_name = mechanism
        self._username = username
        self._password = password
        self._extensions = "".join(msg.check_extension(key, value)
                                   for key, value in (extensions or {}).items())
        self._nonce = msg.check_nonce(msg.random_string() if nonce is None else nonce)
        self._state = _S.SEND_CLIENT_FIRST
        self._client_first_bare = ""
        self._server_signature = b""

    @property
    def state(self) -> ScramClientState:
        return self._state

    @property
    def complete(self) -> bool:
        return self._state is _S.COMPLETE

    def evaluate(self, challenge: bytes) -> bytes:
        """The response to the server's ``challenge``; ``AuthenticationError`` fails the
        exchange for good."""
        if not challenge:
            event = _E.START
        elif challenge.startswith(b"r="):
            event = _E.SERVER_FIRST
        elif challenge[:2] in (b"v=", b"e="):
            event = _E.SERVER_FINAL
        else:  # unrecognizable: let the parser of the expected message say what is wrong
            event = _EXPECTED.get(self._state, _E.SERVER_FIRST)
        try:
            next_state = _TRANSITIONS[self._state].get(event)
            if next_state is None:
                raise IllegalSaslStateError(
                    f"Unexpected SCRAM {event.value} in SCRAM client state {self._state.name}")
            if event is _E.START:
                response = self._client_first()
            elif event is _E.SERVER_FIRST:
                response = self._on_server_first(msg.parse_server_first(challenge))
            else:
                response = self._on_server_final(msg.parse_server_final(challenge))
        except AuthenticationError:
            self._password = ""
            self._state = _TRANSITIONS[self._state][_E.FAILURE]
            raise
        self._state = next_state
        return response

    def _client_first(self) -> bytes:
        self._client_first_bare = (f"n={msg.saslname_encode(self._username)},r={self._nonce}"
                                   f"{self._extensions}")
        return f"n,,{self._client_first_bare}".encode()

    def _on_server_first(self, first: msg.ServerFirst) -> bytes:
        if not first.nonce.startswith(self._nonce) or first.nonce == self._nonce:
            raise AuthenticationError("Invalid server nonce: does not start with client nonce")
        if first.iterations < MIN_ITERATIONS:
            raise AuthenticationError(f"Requested iterations {first.iterations} is less than "
                                      f"the minimum {MIN_ITERATIONS} for {self.mechanism_name}")
        if first.iterations > MAX_ITERATIONS:
            # The hashing cost is the server's number: a bound keeps a rogue server from
            # tying the broker up.
            raise AuthenticationError(f"Requested iterations {first.iterations} is more than "
                                      f"the maximum {MAX_ITERATIONS} for {self.mechanism_name}")
        mechanism = self.mechanism_name
        salted = msg.salted_password(mechanism, self._password, first.salt, first.iterations)
        self._password = ""
        client_key = msg.hmac_digest(mechanism, salted, b"Client Key")
        stored_key = msg.digest(mechanism, client_key)
        without_proof = f"c={msg.b64encode(b'n,,')},r={first.nonce}"
        auth_message = f"{self._client_first_bare},{first.text},{without_proof}".encode()
        proof = msg.xor(client_key, msg.hmac_digest(mechanism, stored_key, auth_message))
        server_key = msg.hmac_digest(mechanism, salted, b"Server Key")
        self._server_signature = msg.hmac_digest(mechanism, server_key, auth_message)
        return f"{without_proof},p={msg.b64encode(proof)}".encode()

    def _on_server_final(self, final: msg.ServerFinal) -> bytes:
        if final.error is not None:
            raise AuthenticationError(
                f"Sasl authentication using {self.mechanism_name} failed with error: "
                f"{final.error}")
        if final.signature is None or not hmac.compare_digest(final.signature,
                                                              self._server_signature):
            raise AuthenticationError("Invalid server signature in server final message")
        return b""
