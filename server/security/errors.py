"""Errors of SASL authentication whose messages are safe to send to the client and to log."""

from __future__ import annotations


class AuthenticationError(Exception):
    """Authentication failed; ``message`` carries no secret (no password, key or proof)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class IllegalSaslStateError(AuthenticationError):
    """A message arrived that the exchange does not accept in its state (Kafka's
    ``IllegalSaslStateException``)."""


class UnsupportedSaslMechanismError(AuthenticationError):
    """The client asked for a mechanism the broker does not offer."""
