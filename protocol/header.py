"""Read the request header (v1, or v2 for flexible api versions) at the start of a frame.

ControlledShutdown v0 alone uses header v0, which has no client id.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType

from kafka.protocol.api_key import ApiKey
from kafka.protocol.schemas import BaseField, load_json

from .exceptions import ProtocolError

__all__ = ["RequestHeader", "is_flexible", "parse_request_header", "read_uvarint"]

Buffer = bytes | bytearray | memoryview

_NO_TAGS: Mapping[int, bytes] = MappingProxyType({})
# api_key, api_version, correlation_id, then the client id's int16 length.
_FIXED_PART = struct.Struct(">hhih")
# Header v0 (ControlledShutdown v0 only): api_key, api_version, correlation_id.
_V0_PART = struct.Struct(">hhi")
_CONTROLLED_SHUTDOWN = int(ApiKey.ControlledShutdown)
# Our JSON specs of the apis kafka-python has none for (controller_messages.py).
_OWN_SCHEMAS = f"{__package__}.schemas"


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The fields of a request header plus where the body starts in the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    flexible: bool
    body_offset: int
    tagged_fields: Mapping[int, bytes] = field(default_factory=lambda: _NO_TAGS)


@cache
def _flexible_range(api_key: int) -> tuple[int, int] | None:
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return None
    for package in (_OWN_SCHEMAS, None):  # None: kafka-python's own schemas
        try:
            with warnings.catch_warnings():  # kafka-python uses deprecated importlib calls
                warnings.simplefilter("ignore", DeprecationWarning)
                schema = load_json(name + "Request", package=package)
        except FileNotFoundError:
            continue
        return BaseField.parse_versions(schema.get("flexibleVersions"))
    return None


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether `api_key` at `api_version` uses flexible encoding (and header v2).

    Taken from kafka-python's copy of Kafka's JSON schema, so it also answers for
    versions above the ones we accept (e.g. a future ApiVersions request). Unknown
    api keys are treated as not flexible.
    """
    versions = _flexible_range(api_key)
    return versions is not None and versions[0] <= api_version <= versions[1]


def read_uvarint(data: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint at `pos` (before `end`); return (value, new pos).

    Like Kafka, at most 5 bytes; values of 2**31 and up are rejected too, as Java
    would read them as negative ints.
    """
    value = 0
    for shift in range(0, 35, 7):
        if pos >= end:
            raise ProtocolError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value > 0x7FFFFFFF:
                raise ProtocolError(f"varint out of range: {value}")
            return value, pos
    raise ProtocolError("varint longer than 5 bytes")


def parse_request_header(frame: Buffer) -> RequestHeader:
    """Parse the header of a request frame (payload without its size prefix).

    The client id is always a classic int16-length nullable string, even in
    header v2. It is decoded leniently (bad UTF-8 becomes U+FFFD) as Java does.
    Header v2 tagged fields are returned raw; RequestHeader defines none.
    ControlledShutdown v0's header v0 has no client id (None here).
    """
    end = len(frame)
    if end < _V0_PART.size:
        raise ProtocolError(f"request header truncated: {end} bytes")
    api_key, api_version, correlation_id = _V0_PART.unpack_from(frame)
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        # Kafka's only header v0 (ApiMessageType.requestHeaderVersion): no client id.
        return RequestHeader(api_key, api_version, correlation_id, None, False, _V0_PART.size)
    if end < _FIXED_PART.size:
        raise ProtocolError(f"request header truncated: {end} bytes")
    length = _FIXED_PART.unpack_from(frame)[3]
    pos = _FIXED_PART.size
    client_id: str | None = None
    if length >= 0:  # Kafka reads any negative length of a nullable string as null
        if pos + length > end:
            raise ProtocolError(f"client id of {length} bytes overruns the frame")
        client_id = bytes(frame[pos : pos + length]).decode("utf-8", errors="replace")
        pos += length
    flexible = is_flexible(api_key, api_version)
    tags = _NO_TAGS
    if flexible:
        tags, pos = _read_raw_tags(frame, pos, end)
    return RequestHeader(
        api_key, api_version, correlation_id, client_id, flexible, pos, tags
    )


def _read_raw_tags(frame: Buffer, pos: int, end: int) -> tuple[Mapping[int, bytes], int]:
    if pos < end and frame[pos] == 0:  # no tagged fields, the usual case
        return _NO_TAGS, pos + 1
    count, pos = read_uvarint(frame, pos, end)
    if count == 0:
        return _NO_TAGS, pos
    tags: dict[int, bytes] = {}
    for _ in range(count):
        tag, pos = read_uvarint(frame, pos, end)
        size, pos = read_uvarint(frame, pos, end)
        if pos + size > end:
            raise ProtocolError(f"header tagged field {tag} overruns the frame")
        tags[tag] = bytes(frame[pos : pos + size])
        pos += size
    return MappingProxyType(tags), pos
