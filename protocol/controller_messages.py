"""kafka-python message classes for the ZooKeeper-mode inter-broker apis.

kafka-python 3.0.12 has no schema for LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6), ControlledShutdown (7), AlterPartition (56) or
AllocateProducerIds (67), so we ship
Kafka 3.9.1's definitions of them in Kafka's JSON spec format
(`josefk.protocol.schemas`, package data) and load them with kafka-python's own
machinery (`class X(ApiMessage, load_json=package)`). The classes therefore
behave like every other kafka-python message: `LeaderAndIsrRequest[7](...)`,
nested struct classes as attributes, `.encode(version=..., header=True,
framed=True)` after `with_header()`, `Response.decode(data, version=...)`.

Names follow kafka-python's rule (CamelCase field -> snake_case attribute),
with one exception: Kafka spells the KIP-866 flag `isKRaftController`, which
that rule would turn into `is_k_raft_controller`; it is `is_kraft_controller`
here. The wire format is unaffected.

Where Kafka shares one struct between two fields (`commonStructs`), kafka-python
builds a class per field: LeaderAndIsr v0-1 partitions are
`LeaderAndIsrRequest.LeaderAndIsrPartitionState`, v2+ ones
`LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState`
(likewise UpdateMetadataRequest and LeaderAndIsrResponse). Either encodes,
but decoded objects compare equal only to objects of the field's own class.

Quirks: LeaderAndIsrRequest and UpdateMetadataRequest have a top-level `type`
field, so `LeaderAndIsrRequest.type` is that field's slot, not kafka-python's
"request" class property (read `.json["type"]`); `is_request()` and
`header_class` are restored by `_TypeFieldRequest`. kafka-python decodes the
all-zero uuid (Kafka's "no topic id") as None. ControlledShutdown v0 is the
one api version Kafka sends with request header v0 (no client id);
`ControlledShutdownRequest` encodes and parses that header.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.util import classproperty

__all__ = [
    "SCHEMA_PACKAGE",
    "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "ControlRequestType",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LeaderRecoveryState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
]

#: The package holding our JSON specs, as kafka-python's `load_json` takes it.
SCHEMA_PACKAGE = f"{__package__}.schemas"

# Kafka's spelling of the KIP-866 flag and the one giving `is_kraft_controller`.
_KRAFT_FLAG = "isKRaftController"
_KRAFT_FLAG_PYTHON = "IsKraftController"


class ControlRequestType(IntEnum):
    """`type` of LeaderAndIsr v5+ and UpdateMetadata v8+ (Kafka's AbstractControlRequest.Type)."""

    UNKNOWN = 0
    INCREMENTAL = 1
    FULL = 2


class LeaderRecoveryState(IntEnum):
    """`leader_recovery_state` of LeaderAndIsr v6+ and AlterPartition v1+."""

    RECOVERED = 0
    RECOVERING = 1


def _rename_kraft_flag(cls: type, json: dict[str, Any]) -> dict[str, Any]:
    for field in json["fields"]:
        if field["name"] == _KRAFT_FLAG:
            field["name"] = _KRAFT_FLAG_PYTHON
            return json
    raise ValueError(f"{json['name']} has no {_KRAFT_FLAG} field")


# kafka-python applies a class body's `json_patch` classmethod to the loaded spec.
_KRAFT_FLAG_PATCH = classmethod(_rename_kraft_flag)


class _TypeFieldRequest:
    """For requests with a top-level `type` field, listed before ApiMessage in the bases.

    The field's slot shadows ApiMessage's `type` class property, which
    kafka-python reads to tell requests from responses.
    """

    __slots__ = ()

    @classmethod
    def is_request(cls) -> bool:
        return True

    @classproperty
    def header_class(cls) -> type[RequestHeader]:
        return RequestHeader


class LeaderAndIsrRequest(_TypeFieldRequest, ApiMessage, load_json=SCHEMA_PACKAGE):
    """Controller -> broker: the leader, ISR and replicas of partitions (v0-7, flexible v4+)."""

    json_patch = _KRAFT_FLAG_PATCH


class LeaderAndIsrResponse(ApiMessage, load_json=SCHEMA_PACKAGE):
    """Per-partition results of a LeaderAndIsr request (v0-7; by topic id from v5)."""


class StopReplicaRequest(ApiMessage, load_json=SCHEMA_PACKAGE):
    """Controller -> broker: stop (and maybe delete) replicas (v0-4, flexible v2+)."""

    json_patch = _KRAFT_FLAG_PATCH


class StopReplicaResponse(ApiMessage, load_json=SCHEMA_PACKAGE):
    """Per-partition results of a StopReplica request (v0-4)."""


class UpdateMetadataRequest(_TypeFieldRequest, ApiMessage, load_json=SCHEMA_PACKAGE):
    """Controller -> broker: live brokers and partition states (v0-8, flexible v6+)."""

    json_patch = _KRAFT_FLAG_PATCH


class UpdateMetadataResponse(ApiMessage, load_json=SCHEMA_PACKAGE):
    """The error code answering an UpdateMetadata request (v0-8)."""


class ControlledShutdownRequest(ApiMessage, load_json=SCHEMA_PACKAGE):
    """Broker -> controller: move my leaderships away, I am stopping (v0-3, flexible v3).

    Version 0 uses request header v0, which has no client id.
    """

    def encode_header(self, flexible: bool = False) -> bytes:
        if self.API_VERSION == 0:
            header = self._header
            return header._struct.encode(header, version=0, compact=False, tagged=False)
        return super().encode_header(flexible=flexible)

    @classmethod
    def parse_header(cls, data: Any, version: int | None = None) -> Any:
        if (cls._class_version if version is None else version) != 0:
            return super().parse_header(data, version=version)
        # kafka-python's RequestHeader starts at v1: read v0's fields ourselves.
        header_class = cls.header_class
        fields = header_class._struct.untagged_fields(0)
        values = {f.name: f.decode(data, version=0) for f in fields}
        return header_class(client_id=None, **values)


class ControlledShutdownResponse(ApiMessage, load_json=SCHEMA_PACKAGE):
    """The partitions a shutting-down broker still leads (v0-3)."""


class AlterPartitionRequest(ApiMessage, load_json=SCHEMA_PACKAGE):
    """Leader -> controller: propose a new ISR (v0-3, all flexible; topic ids from v2)."""


class AlterPartitionResponse(ApiMessage, load_json=SCHEMA_PACKAGE):
    """The partition states the controller committed, or errors (v0-3)."""


class AllocateProducerIdsRequest(ApiMessage, load_json=SCHEMA_PACKAGE):
    """Broker -> controller: a block of producer ids to hand out (v0, flexible)."""


class AllocateProducerIdsResponse(ApiMessage, load_json=SCHEMA_PACKAGE):
    """The block: its first id and its length (v0)."""
