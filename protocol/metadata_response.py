"""A hand-written encoder for MetadataResponse v0-13, byte for byte what kafka-python's
generic encoder produces, but in pieces: each topic is encoded on its own, so a caller
can keep a topic's bytes and reuse them until the topic or its partitions change.

Fields by version (Kafka's MetadataResponse.json): throttle time v3+, broker rack v1+,
cluster id v2+, controller id v1+, topic is_internal v1+, topic id v10+, leader epoch
v7+, offline replicas v5+, topic authorized operations v8+, cluster authorized
operations v8-10, top-level error code v13+; flexible (compact strings and arrays,
tagged fields, response header v1) from v9.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from josefk.protocol.primitives import I16, I32, NO_TAGS, array_len, string

FLEXIBLE_VERSION = 9
MAX_VERSION = 13
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)

_ERROR_INDEX_LEADER = struct.Struct(">hii")
_ERROR_INDEX_LEADER_EPOCH = struct.Struct(">hiii")


@dataclass(frozen=True, slots=True)
class BrokerEntry:
    node_id: int
    host: str
    port: int
    rack: str | None = None


def _int32s(values: Sequence[int], flexible: bool) -> bytes:
    return array_len(len(values), flexible) + struct.pack(f">{len(values)}i", *values)


def encode_partition(version: int, error_code: int, index: int, leader: int,
                     leader_epoch: int, replicas: Sequence[int], isr: Sequence[int],
                     offline: Sequence[int]) -> bytes:
    """One MetadataResponsePartition."""
    flexible = version >= FLEXIBLE_VERSION
    if version >= 7:
        head = _ERROR_INDEX_LEADER_EPOCH.pack(error_code, index, leader, leader_epoch)
    else:
        head = _ERROR_INDEX_LEADER.pack(error_code, index, leader)
    body = head + _int32s(replicas, flexible) + _int32s(isr, flexible)
    if version >= 5:
        body += _int32s(offline, flexible)
    return body + NO_TAGS if flexible else body


def encode_topic(version: int, error_code: int, name: str | None, topic_id: uuid.UUID,
                 is_internal: bool, partitions: Sequence[bytes]) -> bytes:
    """One MetadataResponseTopic around its already encoded ``partitions``."""
    flexible = version >= FLEXIBLE_VERSION
    out = [I16.pack(error_code), string(name, flexible)]
    if version >= 10:
        out.append(topic_id.bytes)
    if version >= 1:
        out.append(b"\x01" if is_internal else b"\x00")
    out.append(array_len(len(partitions), flexible))
    out.extend(partitions)
    if version >= 8:
        out.append(I32.pack(AUTHORIZED_OPERATIONS_OMITTED))
    if flexible:
        out.append(NO_TAGS)
    return b"".join(out)


def encode_response(version: int, correlation_id: int, brokers: Iterable[BrokerEntry],
                    cluster_id: str | None, controller_id: int, topics: Sequence[bytes],
                    throttle_time_ms: int = 0, error_code: int = 0) -> bytes:
    """The whole frame (size, response header, body) around encoded ``topics``."""
    if not 0 <= version <= MAX_VERSION:
        raise ValueError(f"MetadataResponse v{version} is not supported")
    flexible = version >= FLEXIBLE_VERSION
    out = [b"", I32.pack(correlation_id)]
    if flexible:
        out.append(NO_TAGS)
    if version >= 3:
        out.append(I32.pack(throttle_time_ms))
    brokers = list(brokers)
    out.append(array_len(len(brokers), flexible))
    for b in brokers:
        out += [I32.pack(b.node_id), string(b.host, flexible), I32.pack(b.port)]
        if version >= 1:
            out.append(string(b.rack, flexible))
        if flexible:
            out.append(NO_TAGS)
    if version >= 2:
        out.append(string(cluster_id, flexible))
    if version >= 1:
        out.append(I32.pack(controller_id))
    out.append(array_len(len(topics), flexible))
    out.extend(topics)
    if 8 <= version <= 10:
        out.append(I32.pack(AUTHORIZED_OPERATIONS_OMITTED))
    if version >= 13:
        out.append(I16.pack(error_code))
    if flexible:
        out.append(NO_TAGS)
    size = sum(map(len, out))
    out[0] = I32.pack(size)
    return b"".join(out)
