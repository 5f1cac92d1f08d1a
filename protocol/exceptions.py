"""Exceptions of the protocol layer.

Everything a peer can make the decoders raise is a `ProtocolError`; on any of
them the broker logs a line and closes the connection (as Kafka does with
InvalidRequestException). Kafka error *codes* sent back in responses come from
`kafka.errors` instead.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Bytes from the peer that do not form a valid request."""


class FramingError(ProtocolError):
    """A frame size prefix that is negative, too small or too large."""


class RequestError(ProtocolError):
    """A rejection made after the request header was read."""

    def __init__(
        self,
        message: str,
        *,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class UnknownApiError(RequestError):
    """An api key we do not know, or that this listener does not enable."""


class UnsupportedVersionError(RequestError):
    """A known api key at a version outside the range we accept.

    For ApiVersions (key 18) the caller must not close the connection but answer
    with `messages.api_versions_unsupported_frame(err.correlation_id)`.
    """


class MalformedRequestError(RequestError):
    """A supported api/version whose body does not decode."""
