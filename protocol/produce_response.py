"""A hand-written encoder for ProduceResponse v3-v13, byte for byte what kafka-python's
generic encoder produces: Produce is answered thousands of times a second, and building
kafka-python's response objects cost more than the append itself.

Fields by version (Kafka's ProduceResponse.json): log start offset v5+, record errors
and error message v8+; flexible (compact strings and arrays, tagged fields, response
header v1) from v9; topic ids instead of names from v13. The v10+ tagged fields
(current leader, node endpoints) are left out, as they are when at their defaults.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from josefk.protocol.primitives import I32, I64, NO_TAGS, array_len, string

__all__ = ["PartitionResult", "encode_produce_response"]

FLEXIBLE_VERSION = 9
TOPIC_ID_VERSION = 13
_PARTITION = struct.Struct(">ihqq")


@dataclass(slots=True)
class PartitionResult:
    """One partition's answer; acks=all waits may still change its error code."""

    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    error_message: str | None = None


def encode_produce_response(version: int, correlation_id: int,
                            topics: Sequence[tuple[str | uuid.UUID, Sequence[PartitionResult]]],
                            throttle_time_ms: int = 0) -> bytes:
    """The whole frame: size, response header, body. Topics are named by name, or from
    v13 by topic id."""
    if not 3 <= version <= 13:
        raise ValueError(f"ProduceResponse v{version} is not supported")
    flexible = version >= FLEXIBLE_VERSION
    out = [b"", I32.pack(correlation_id)]
    if flexible:
        out.append(NO_TAGS)
    out.append(array_len(len(topics), flexible))
    for topic, partitions in topics:
        if version >= TOPIC_ID_VERSION:
            assert isinstance(topic, uuid.UUID)
            out.append(topic.bytes)
        else:
            assert isinstance(topic, str)
            out.append(string(topic, flexible))
        out.append(array_len(len(partitions), flexible))
        for p in partitions:
            out.append(_PARTITION.pack(p.index, p.error_code, p.base_offset,
                                       p.log_append_time_ms))
            if version >= 5:
                out.append(I64.pack(p.log_start_offset))
            if version >= 8:
                out.append(array_len(len(p.record_errors), flexible))
                for batch_index, message in p.record_errors:
                    out += [I32.pack(batch_index), string(message, flexible)]
                    if flexible:
                        out.append(NO_TAGS)
                out.append(string(p.error_message, flexible))
            if flexible:
                out.append(NO_TAGS)
        if flexible:
            out.append(NO_TAGS)
    out.append(I32.pack(throttle_time_ms))
    if flexible:
        out.append(NO_TAGS)
    out[0] = I32.pack(sum(map(len, out)))
    return b"".join(out)
