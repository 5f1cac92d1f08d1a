"""The SASL server mechanisms behind one interface, so that a connection drives any of them the
same way: each ``SaslAuthenticate`` request's bytes go to ``evaluate`` and its result goes back
as the challenge, until ``complete``; an ``AuthenticationError`` ends the exchange."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from josefk.server.security.errors import UnsupportedSaslMechanismError
from josefk.server.security.plain import PLAIN, PlainServer
from josefk.server.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    CredentialLookup,
    ScramServer,
    TokenLookup,
)

MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)


class SaslServer(Protocol):
    """Server side of one SASL exchange (the part of ``javax.security.sasl.SaslServer`` that
    Kafka's ``SaslServerAuthenticator`` uses)."""

    mechanism_name: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user; ``IllegalSaslStateError`` before completion."""
        ...

    def evaluate(self, response: bytes) -> bytes:
        """The challenge for the client's ``response``, or ``AuthenticationError``."""
        ...


def create_server(mechanism: str, *, plain_users: Mapping[str, str] | None = None,
                  scram_credentials: CredentialLookup | None = None,
                  scram_tokens: TokenLookup | None = None) -> SaslServer:
    """A server for ``mechanism``: PLAIN checks ``plain_users`` (``plain_users(jaas.options)``),
    SCRAM looks credentials up with ``scram_credentials``. ``UnsupportedSaslMechanismError`` for
    another mechanism; ``ValueError`` if the mechanism's users are not configured."""
    if mechanism == PLAIN:
        if plain_users is None:
            raise ValueError("SASL/PLAIN needs the users of the listener's PlainLoginModule")
        return PlainServer(plain_users)
    if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        if scram_credentials is None:
            raise ValueError(f"SASL/{mechanism} needs a SCRAM credential lookup")
        return ScramServer(mechanism, scram_credentials, tokens=scram_tokens)
    raise UnsupportedSaslMechanismError(
        f"Unsupported SASL mechanism {mechanism[:64]!r}, expected one of {', '.join(MECHANISMS)}")
