"""Decode request frames and encode response frames with kafka-python's message classes.

Server side, kafka-python is used like this (its own client does the reverse):

* requests: we parse the header ourselves (`header.py`), then decode the body
  with `Request[version].decode(body)`; its compiled decoders are fast but trust
  their input, so every body is first checked by `_walk` (below), which follows
  the same schema objects without building anything. Produce is the exception:
  `produce_request.py` decodes it, checking as it goes, and leaves its records
  in the frame.
* responses (but Produce's, Fetch's and Metadata's, encoded by hand in
  `produce_response.py`, `fetch_response.py` and `metadata_response.py`):
  `Response[version](...)`,
  then `with_header(correlation_id=...)`, then `encode(header=True, framed=True)`.
  Calling `encode(version=...)` after `with_header()` fails (it sets
  `request_api_version` on the response header), so the version must be fixed
  first. kafka-python picks response header v1 for flexible versions and v0
  otherwise, except ApiVersionsResponse, which always uses v0 (its
  `encode_header` override), as Kafka requires.
"""

from __future__ import annotations

import functools
import importlib
import io
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from kafka.errors import UnsupportedVersionError as KafkaUnsupportedVersion
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

from .exceptions import (
    MalformedRequestError,
    ProtocolError,
    UnknownApiError,
    UnsupportedVersionError,
)
from .header import Buffer, RequestHeader, parse_request_header, read_uvarint
from .produce_request import decode_produce
from .versions import SUPPORTED_VERSIONS, VersionRange

__all__ = [
    "API_CLASSES",
    "Request",
    "api_versions_response",
    "api_versions_unsupported_frame",
    "decode_request",
    "encode_response",
    "request_class",
    "response_class",
    "walk_body",
]

# The module of each api's kafka-python classes, ``<ApiKey name>Request`` and ``...Response``,
# imported on first use: a broker serving a few apis need not build all their classes. The
# admin apis name their submodule: ``kafka.protocol.admin``'s ``__init__``, which imports
# all eight, runs only when something asks the package itself (kafka_python.py).
_ADMIN, _CONSUMER, _METADATA, _PRODUCER = (f"kafka.protocol.{package}" for package in
                                           ("admin", "consumer", "metadata", "producer"))
# Inter-broker apis of ZooKeeper mode, from our own schemas.
_CONTROLLER = "josefk.protocol.controller_messages"
_MODULES: Mapping[int, str] = {int(key): module for key, module in {
    ApiKey.Produce: _PRODUCER,
    ApiKey.Fetch: _CONSUMER,
    ApiKey.ListOffsets: _CONSUMER,
    ApiKey.Metadata: _METADATA,
    ApiKey.LeaderAndIsr: _CONTROLLER,
    ApiKey.StopReplica: _CONTROLLER,
    ApiKey.UpdateMetadata: _CONTROLLER,
    ApiKey.ControlledShutdown: _CONTROLLER,
    ApiKey.OffsetCommit: _CONSUMER,
    ApiKey.OffsetFetch: _CONSUMER,
    ApiKey.FindCoordinator: _METADATA,
    ApiKey.JoinGroup: _CONSUMER,
    ApiKey.Heartbeat: _CONSUMER,
    ApiKey.LeaveGroup: _CONSUMER,
    ApiKey.SyncGroup: _CONSUMER,
    ApiKey.DescribeGroups: f"{_ADMIN}.groups",
    ApiKey.ListGroups: f"{_ADMIN}.groups",
    ApiKey.SaslHandshake: "kafka.protocol.sasl",
    ApiKey.ApiVersions: _METADATA,
    ApiKey.CreateTopics: f"{_ADMIN}.topics",
    ApiKey.DeleteTopics: f"{_ADMIN}.topics",
    ApiKey.DeleteRecords: f"{_ADMIN}.topics",
    ApiKey.InitProducerId: _PRODUCER,
    ApiKey.OffsetForLeaderEpoch: _CONSUMER,
    ApiKey.AddPartitionsToTxn: _PRODUCER,
    ApiKey.AddOffsetsToTxn: _PRODUCER,
    ApiKey.EndTxn: _PRODUCER,
    ApiKey.WriteTxnMarkers: _PRODUCER,
    ApiKey.TxnOffsetCommit: _PRODUCER,
    ApiKey.DescribeAcls: f"{_ADMIN}.acl",
    ApiKey.CreateAcls: f"{_ADMIN}.acl",
    ApiKey.DeleteAcls: f"{_ADMIN}.acl",
    ApiKey.DescribeConfigs: f"{_ADMIN}.configs",
    ApiKey.AlterConfigs: f"{_ADMIN}.configs",
    ApiKey.AlterReplicaLogDirs: f"{_ADMIN}.cluster",
    ApiKey.DescribeLogDirs: f"{_ADMIN}.cluster",
    ApiKey.CreatePartitions: f"{_ADMIN}.topics",
    ApiKey.DeleteGroups: f"{_ADMIN}.groups",
    ApiKey.SaslAuthenticate: "kafka.protocol.sasl",
    ApiKey.IncrementalAlterConfigs: f"{_ADMIN}.configs",
    ApiKey.ElectLeaders: f"{_ADMIN}.topics",
    ApiKey.AlterPartitionReassignments: f"{_ADMIN}.topics",
    ApiKey.ListPartitionReassignments: f"{_ADMIN}.topics",
    ApiKey.OffsetDelete: _CONSUMER,
    ApiKey.DescribeUserScramCredentials: f"{_ADMIN}.users",
    ApiKey.AlterUserScramCredentials: f"{_ADMIN}.users",
    ApiKey.AlterPartition: _CONTROLLER,
    ApiKey.AllocateProducerIds: _CONTROLLER,
    ApiKey.DescribeCluster: f"{_ADMIN}.cluster",
    ApiKey.DescribeProducers: f"{_ADMIN}.transactions",
    ApiKey.DescribeTransactions: f"{_ADMIN}.transactions",
    ApiKey.ListTransactions: f"{_ADMIN}.transactions",
    ApiKey.DescribeTopicPartitions: f"{_ADMIN}.topics",
    ApiKey.ConsumerGroupHeartbeat: "josefk.protocol.schemas.consumer_groups",
    ApiKey.ConsumerGroupDescribe: "josefk.protocol.schemas.consumer_groups",
    ApiKey.DescribeClientQuotas: f"{_ADMIN}.client_quotas",
    ApiKey.AlterClientQuotas: f"{_ADMIN}.client_quotas",
}.items()}


@functools.cache
def _classes(api_key: int) -> tuple[type[ApiMessage], type[ApiMessage]]:
    module = importlib.import_module(_MODULES[api_key])
    name = ApiKey(api_key).name
    return getattr(module, f"{name}Request"), getattr(module, f"{name}Response")


class _ApiClasses(Mapping[int, tuple[type[ApiMessage], type[ApiMessage]]]):
    """Api key -> kafka-python's (request, response) classes, each api's imported on
    first lookup."""

    def __getitem__(self, api_key: int) -> tuple[type[ApiMessage], type[ApiMessage]]:
        return _classes(api_key)

    def __iter__(self) -> Iterator[int]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)


API_CLASSES: Mapping[int, tuple[type[ApiMessage], type[ApiMessage]]] = _ApiClasses()


def request_class(api_key: int) -> type[ApiMessage]:
    """kafka-python's request class for `api_key` (KeyError if not registered)."""
    return _classes(api_key)[0]


def response_class(api_key: int) -> type[ApiMessage]:
    """kafka-python's response class for `api_key` (KeyError if not registered)."""
    return _classes(api_key)[1]


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: its header and kafka-python's request object (for Produce,
    a `ProduceRequestData` whose records are views into the frame)."""

    header: RequestHeader
    body: Any

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


def decode_request(frame: Buffer, enabled: AbstractSet[int] | None = None) -> Request:
    """Decode one request frame (its payload, without the size prefix).

    Raises `UnknownApiError` for an api key we lack (or not in `enabled`),
    `UnsupportedVersionError` for a version outside `SUPPORTED_VERSIONS` (for
    ApiVersions, answer it with `api_versions_unsupported_frame`), and
    `MalformedRequestError` when the body does not decode. Header problems raise
    plain `ProtocolError`. Bytes after the body are ignored, as Kafka does.
    """
    header = parse_request_header(frame)
    supported = SUPPORTED_VERSIONS.get(header.api_key)
    if supported is None or (enabled is not None and header.api_key not in enabled):
        raise UnknownApiError(f"unknown or disabled api key {header.api_key}", **_ids(header))
    if header.api_version not in supported:
        raise UnsupportedVersionError(
            f"{_api_name(header.api_key)} v{header.api_version} is outside "
            f"{supported.min_version}..{supported.max_version}",
            **_ids(header),
        )
    body = memoryview(frame)[header.body_offset :]
    try:
        if header.api_key == ApiKey.Produce:
            return Request(header, decode_produce(body, header.api_version))
        cls = request_class(header.api_key)
        _, copy_cost = walk_body(cls, header.api_version, body)
        if copy_cost <= _COPY_BUDGET_FACTOR * len(body) + _COPY_BUDGET_MIN:
            message = cls.decode(body, version=header.api_version)
        else:
            message = _decode_streaming(cls, header.api_version, body)
        # The compiled decoder skips __init__, leaving these slots unset, so a
        # decoded object could not even be re-encoded.
        message._header = message._min_version = message._max_version = None
    except ProtocolError as exc:
        raise MalformedRequestError(f"{_api_name(header.api_key)}: {exc}",
                                    **_ids(header)) from exc
    except Exception as exc:  # kafka-python raises whatever its codecs raise
        raise MalformedRequestError(
            f"{_api_name(header.api_key)}: undecodable body: {exc!r}", **_ids(header)
        ) from exc
    return Request(header, message)


def _ids(header: RequestHeader) -> dict[str, Any]:
    """What a request error carries to answer or log the request."""
    return {"api_key": header.api_key, "api_version": header.api_version,
            "correlation_id": header.correlation_id, "client_id": header.client_id}


def encode_response(
    api_key: int,
    api_version: int,
    correlation_id: int,
    response: ApiMessage | Mapping[str, Any],
) -> bytearray:
    """Encode a response as a complete frame (size prefix, header, body).

    `response` is a kafka-python response object of the api (unversioned or at
    `api_version`), or the keyword arguments to build one; nested structs must be
    kafka-python objects (e.g. `MetadataResponse.MetadataResponseTopic(...)`) or
    tuples, not dicts.
    """
    cls = response_class(api_key)
    if isinstance(response, Mapping):
        message = cls[api_version](**response)
    elif isinstance(response, cls):
        message = response
        if message.version != api_version:
            message.API_VERSION = api_version  # before with_header(): see module doc
    else:
        raise TypeError(f"expected a {cls.__name__}, got {type(response).__name__}")
    message.with_header(correlation_id=correlation_id)
    return message.encode(header=True, framed=True)


def api_versions_response(
    api_version: int,
    ranges: Mapping[int, VersionRange],
    *,
    error_code: int = 0,
    throttle_time_ms: int = 0,
) -> ApiMessage:
    """An ApiVersionsResponse object at `api_version` listing `ranges`."""
    response = response_class(ApiKey.ApiVersions)
    entry = response.ApiVersion
    fields: dict[str, Any] = {
        "error_code": error_code,
        "api_keys": [
            entry(api_key=key, min_version=r.min_version, max_version=r.max_version)
            for key, r in sorted(ranges.items())
        ],
    }
    if api_version >= 1:
        fields["throttle_time_ms"] = throttle_time_ms
    return response[api_version](**fields)


def api_versions_unsupported_frame(
    correlation_id: int, ranges: Mapping[int, VersionRange] | None = None
) -> bytearray:
    """The frame answering an ApiVersions request of a version we do not support.

    Body v0 and header v0 with UNSUPPORTED_VERSION (35), listing only our
    ApiVersions range by default, as Kafka does since 2.4 (KIP-511); clients
    retry with the highest version both sides support.
    """
    if ranges is None:
        ranges = {ApiKey.ApiVersions: SUPPORTED_VERSIONS[ApiKey.ApiVersions]}
    message = api_versions_response(0, ranges, error_code=KafkaUnsupportedVersion.errno)
    return encode_response(ApiKey.ApiVersions, 0, correlation_id, message)


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"


# ---------------------------------------------------------------------------
# Body check. kafka-python's compiled decoders loop `range(count)` on whatever
# array count they read, slice strings past the end without noticing, accept
# negative lengths, unbounded varints and known tagged fields of the wrong size,
# and copy the rest of the buffer for every non-empty tagged-field section. So
# before decoding we walk the same schema objects and apply Kafka's own rules:
# varints of at most 5 bytes, array counts no larger than the bytes left, no null
# in non-nullable fields, strings up to 0x7fff bytes, every length within the
# frame, tagged values consuming exactly their size. The walk consumes exactly
# what kafka-python's decoder will, so after it the decoder cannot run off the
# end.

_FIXED, _STRING, _BYTES, _ARRAY, _STRUCT, _TAGS, _EMPTY_TAGS = range(7)
_FIXED_SIZES = {
    "int8": 1, "bool": 1, "int16": 2, "uint16": 2, "int32": 4, "bitfield": 4,
    "int64": 8, "float64": 8, "uuid": 16,
}
# Tagged sections make kafka-python copy the rest of the body (see above); when
# the total copy would exceed this, decode with its linear stream decoder instead.
_COPY_BUDGET_FACTOR = 4
_COPY_BUDGET_MIN = 1 << 20

Plan = tuple[tuple[Any, ...], ...]
_plans: dict[tuple[int, int, bool, bool | None], Plan] = {}


def walk_body(cls: type[ApiMessage], version: int, body: Buffer) -> tuple[int, int]:
    """Check a request/response body; return (end offset, tagged-section copy cost).

    Raises `ProtocolError` if kafka-python would misread or overrun the body.
    """
    flexible = cls.flexible_version_q(version)
    cost = [0]
    end = _walk(_plan(cls.fields, version, flexible, flexible), body, 0, len(body), cost)
    return end, cost[0]


def _decode_streaming(cls: type[ApiMessage], version: int, body: memoryview) -> ApiMessage:
    flexible = cls.flexible_version_q(version)
    stream = io.BytesIO(body)
    # kafka-python has no public entry point to its stream decoder.
    return cls._struct.decode(
        stream, version=version, compact=flexible, tagged=flexible, data_class=cls
    )


def _plan(fields: Mapping[str, Any], version: int, compact: bool, tagged: bool | None) -> Plan:
    """Compile the steps to walk a struct; `tagged` is None inside tagged values."""
    key = (id(fields), version, compact, tagged)
    plan = _plans.get(key)
    if plan is not None:
        return plan
    steps: list[tuple[Any, ...]] = []
    known_tags: dict[int, Plan] = {}
    for f in fields.values():
        if not f.for_version_q(version):
            continue
        if f.tagged_field_q(version):
            # kafka-python decodes tagged values compact, with empty nested tags.
            known_tags[f.tag] = (_field_step(f, version, True, None),)
            continue
        step = _field_step(f, version, compact, tagged)
        if step[0] == _FIXED and steps and steps[-1][0] == _FIXED:
            steps[-1] = (_FIXED, steps[-1][1] + step[1])
        else:
            steps.append(step)
    if tagged:
        steps.append((_TAGS, known_tags))
    elif tagged is None:
        steps.append((_EMPTY_TAGS,))
    plan = _plans[key] = tuple(steps)
    return plan


def _field_step(f: Any, version: int, compact: bool, tagged: bool | None) -> tuple[Any, ...]:
    nullable = f.nullable_for_version_q(version)
    if f.is_struct_array():
        return (_ARRAY, nullable, compact, _plan(f.fields, version, compact, tagged))
    if f.is_array():
        return (_ARRAY, nullable, compact, (_simple_step(f.array_of.type_str, False, compact),))
    if f.is_struct():
        return (_STRUCT, nullable, _plan(f.fields, version, compact, tagged))
    return _simple_step(f.type_str, nullable, compact)


def _simple_step(type_str: str, nullable: bool, compact: bool) -> tuple[Any, ...]:
    if type_str in _FIXED_SIZES:
        return (_FIXED, _FIXED_SIZES[type_str])
    if type_str == "string":
        return (_STRING, nullable, compact)
    if type_str in ("bytes", "records"):
        return (_BYTES, nullable, compact)
    raise TypeError(f"no walk rule for field type {type_str!r}")


def _read_length(data: Buffer, pos: int, end: int, compact: bool, width: int) -> tuple[int, int]:
    if compact:
        if pos < end and data[pos] < 0x80:  # one-byte varint, by far the most common
            return data[pos] - 1, pos + 1
        n, pos = read_uvarint(data, pos, end)
        return n - 1, pos
    if pos + width > end:
        raise ProtocolError("truncated length")
    return int.from_bytes(data[pos : pos + width], "big", signed=True), pos + width


def _walk(plan: Plan, data: Buffer, pos: int, end: int, cost: list[int]) -> int:
    for step in plan:
        kind = step[0]
        if kind == _FIXED:
            pos += step[1]
            if pos > end:
                raise ProtocolError("truncated field")
        elif kind in (_STRING, _BYTES):
            _, nullable, compact = step
            n, pos = _read_length(data, pos, end, compact, 2 if kind == _STRING else 4)
            if n < 0:
                if not nullable:
                    raise ProtocolError("null in a non-nullable field")
            elif kind == _STRING and n > 0x7FFF:
                raise ProtocolError(f"string length {n} over 32767")
            elif pos + n > end:
                raise ProtocolError(f"length {n} overruns the body")
            else:
                pos += n
        elif kind == _ARRAY:
            _, nullable, compact, element = step
            n, pos = _read_length(data, pos, end, compact, 4)
            if n < 0:
                if n != -1 or not nullable:
                    raise ProtocolError(f"invalid array count {n}")
            elif n > end - pos:  # Kafka's own guard: each element takes a byte or more
                raise ProtocolError(f"array count {n} exceeds the {end - pos} bytes left")
            elif len(element) == 1 and element[0][0] == _FIXED:
                pos += n * element[0][1]
                if pos > end:
                    raise ProtocolError("truncated array")
            else:
                for _ in range(n):
                    pos = _walk(element, data, pos, end, cost)
        elif kind == _STRUCT:
            _, nullable, fields = step
            if nullable:
                if pos >= end:
                    raise ProtocolError("truncated struct marker")
                marker = data[pos]
                pos += 1
                if marker == 0xFF:
                    continue
                if marker & 0x80:  # Java reads any negative byte as null, kafka-python not
                    raise ProtocolError(f"ambiguous struct null marker {marker}")
            pos = _walk(fields, data, pos, end, cost)
        elif pos < end and data[pos] == 0:  # _TAGS or _EMPTY_TAGS, no tagged fields
            pos += 1
        elif kind == _TAGS:
            pos = _walk_tags(step[1], data, pos, end, cost)
        else:  # _EMPTY_TAGS
            count, pos = read_uvarint(data, pos, end)
            if count:
                raise ProtocolError("nested tagged fields inside a tagged field")
    return pos


def _walk_tags(known: dict[int, Plan], data: Buffer, pos: int, end: int, cost: list[int]) -> int:
    cost[0] += len(data) - pos  # what kafka-python's compiled decoder will copy
    count, pos = read_uvarint(data, pos, end)
    for _ in range(count):
        tag, pos = read_uvarint(data, pos, end)
        size, pos = read_uvarint(data, pos, end)
        if pos + size > end:
            raise ProtocolError(f"tagged field {tag} overruns the body")
        value_plan = known.get(tag)
        if value_plan is not None and _walk(value_plan, data, pos, pos + size, cost) != pos + size:
            raise ProtocolError(f"tagged field {tag} does not fill its {size} bytes")
        pos += size
    return pos
