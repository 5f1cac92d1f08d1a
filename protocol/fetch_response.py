"""A hand-written encoder for FetchResponse v4-v18, byte for byte what kafka-python's
generic encoder produces, whose records can stay in their files.

A partition's records are bytes, or any object with a ``length`` (a region of a
segment file that the connection sends with sendfile): the encoded response is a
list of parts, bytes between such regions, and its size prefix counts the regions'
lengths. Encoding kafka-python's objects and then cutting the frame at sentinels
cost a consumer's broker as much as reading the partition.

Fields by version (Kafka's FetchResponse.json): flexible from v12 (compact arrays and
strings, tagged fields, response header v1), with the diverging epoch as the
partition's tag 0 and the current leader (KIP-951, set with NOT_LEADER_OR_FOLLOWER
and FENCED_LEADER_EPOCH) as its tag 1; topic ids instead of names from v13; the
leaders' endpoints as the response's tag 0 from v16. The snapshot id (KRaft's
controllers) is left out, as it is at its default.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Sequence
from typing import Protocol

from josefk.protocol.primitives import I32, I64, NO_TAGS, array_len, string
from josefk.protocol.varint import uvarint

__all__ = ["FetchedPartition", "FetchedTopic", "NodeEndpoint", "encode_fetch_response"]

FLEXIBLE_VERSION = 12
_PARTITION = struct.Struct(">ihq")
_ABORTED = struct.Struct(">qq")
_TOP = struct.Struct(">ihi")  # throttle time, error code, session id
# The partition's tagged fields: the diverging epoch is tag 0, 13 bytes (epoch, end
# offset, the struct's own empty tags).
_DIVERGING = struct.Struct(">BBiqB")
# The current leader: tag 1, 9 bytes (leader id, leader epoch, the struct's empty tags).
_LEADER = struct.Struct(">BBiiB")
NODE_ENDPOINTS_VERSION = 16
# A null array or records: length -1, or compact length 0 when flexible.
_NULL = {False: I32.pack(-1), True: b"\x00"}
_ZERO_UUID = bytes(16)


class Region(Protocol):
    """Records left in their file: only their length is encoded here."""

    length: int


class FetchedPartition(Protocol):
    """What the encoder reads of one partition's answer."""

    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None  # (producer id, first offset)
    diverging_epoch: tuple[int, int] | None  # (epoch, end offset)
    current_leader: tuple[int, int] | None  # (leader id, leader epoch)
    records: bytes | None
    region: Region | None


#: (topic name, topic id, partitions); v13+ encodes the id, earlier versions the name.
FetchedTopic = tuple[str | None, uuid.UUID | None, Sequence[FetchedPartition]]
#: (node id, host, port, rack): a leader named by a partition's current leader (v16+).
NodeEndpoint = tuple[int, str, int, str | None]


def encode_fetch_response(version: int, correlation_id: int, topics: Sequence[FetchedTopic],
                          error_code: int = 0, session_id: int = 0, throttle_time_ms: int = 0,
                          node_endpoints: Sequence[NodeEndpoint] = ()
                          ) -> list[bytes | Region]:
    """The whole frame as parts: size and header first; regions where records go."""
    if not 4 <= version <= 18:
        raise ValueError(f"FetchResponse v{version} is not supported")
    flexible = version >= FLEXIBLE_VERSION
    parts: list[bytes | Region] = []
    out = [I32.pack(correlation_id)]
    if flexible:
        out.append(NO_TAGS)
    if version >= 7:
        out.append(_TOP.pack(throttle_time_ms, error_code, session_id))
    else:
        out.append(I32.pack(throttle_time_ms))
    out.append(array_len(len(topics), flexible))
    empty, empty_tail = _empty_partition(version)
    total = 0
    for name, topic_id, partitions in topics:
        if version >= 13:
            out.append(topic_id.bytes if topic_id is not None else _ZERO_UUID)
        else:
            out.append(string(name or "", flexible))
        out.append(array_len(len(partitions), flexible))
        for p in partitions:
            region = p.region
            records = p.records
            if (region is None and records is not None and not records and not p.aborted
                    and p.diverging_epoch is None and p.current_leader is None):
                # Nothing to say but offsets, the common case of a wide fetch: one pack.
                out.append(empty.pack(p.index, p.error_code, p.high_watermark,
                                      p.last_stable_offset, p.log_start_offset)
                           if version >= 5 else
                           empty.pack(p.index, p.error_code, p.high_watermark,
                                      p.last_stable_offset))
                out.append(empty_tail[p.aborted is None])
                continue
            _partition(out, p, version, flexible)
            if region is not None:
                # Records are sized as an array is: int32, or compact (+1) when flexible.
                out.append(array_len(region.length, flexible))
                chunk = b"".join(out)
                parts += [chunk, region]
                total += len(chunk) + region.length
                out = []
            else:
                _records(out, p.records, flexible)
            if flexible:
                out.append(_partition_tags(p))
        if flexible:
            out.append(NO_TAGS)
    if flexible:
        out.append(_top_tags(node_endpoints) if version >= NODE_ENDPOINTS_VERSION else NO_TAGS)
    chunk = b"".join(out)
    if chunk:  # nothing follows the last records before v12
        parts.append(chunk)
        total += len(chunk)
    parts.insert(0, I32.pack(total))
    return parts


@functools.cache
def _empty_partition(version: int) -> tuple[struct.Struct, dict[bool, bytes]]:
    """A partition with no records, no aborted transactions and no tagged fields: the
    struct of its offsets, and what follows them by whether its aborted list is null."""
    flexible = version >= FLEXIBLE_VERSION
    head = struct.Struct(">ihqqq" if version >= 5 else ">ihqq")
    rest = ((b"\xff\xff\xff\xff" if version >= 11 else b"")  # preferred read replica
            + array_len(0, flexible) + (NO_TAGS if flexible else b""))  # records, tags
    return head, {True: _NULL[flexible] + rest, False: array_len(0, flexible) + rest}


def _partition(out: list[bytes], p: FetchedPartition, version: int, flexible: bool) -> None:
    out.append(_PARTITION.pack(p.index, p.error_code, p.high_watermark))
    out.append(I64.pack(p.last_stable_offset))
    if version >= 5:
        out.append(I64.pack(p.log_start_offset))
    aborted = p.aborted
    if aborted is None:
        out.append(_NULL[flexible])
    else:
        out.append(array_len(len(aborted), flexible))
        for producer_id, first_offset in aborted:
            out.append(_ABORTED.pack(producer_id, first_offset))
            if flexible:
                out.append(NO_TAGS)
    if version >= 11:
        out.append(b"\xff\xff\xff\xff")  # preferred read replica: none (-1)


def _records(out: list[bytes], records: bytes | None, flexible: bool) -> None:
    if records is None:
        out.append(_NULL[flexible])
        return
    out.append(array_len(len(records), flexible))
    out.append(records)


def _partition_tags(p: FetchedPartition) -> bytes:
    diverging, leader = p.diverging_epoch, p.current_leader
    if diverging is None and leader is None:
        return NO_TAGS
    tags = [bytes([(diverging is not None) + (leader is not None)])]
    if diverging is not None:
        tags.append(_DIVERGING.pack(0, 13, diverging[0], diverging[1], 0))
    if leader is not None:
        tags.append(_LEADER.pack(1, 9, leader[0], leader[1], 0))
    return b"".join(tags)


def _top_tags(endpoints: Sequence[NodeEndpoint]) -> bytes:
    """The response's tagged fields: the leaders' endpoints (tag 0) when there are any."""
    if not endpoints:
        return NO_TAGS
    field = [array_len(len(endpoints), True)]
    for node_id, host, port, rack in endpoints:
        field += [I32.pack(node_id), string(host, True), I32.pack(port), string(rack, True),
                  NO_TAGS]
    value = b"".join(field)
    return b"\x01\x00" + uvarint(len(value)) + value
