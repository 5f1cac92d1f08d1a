"""Fetch: read partitions up to the high watermark, long-poll for ``min_bytes``.

Record bytes are not read into Python: each partition's slice of a segment
file becomes a FileRegion sent with sendfile after the encoded response parts.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchResponse

from josefk.cluster.partition import PartitionError
from josefk.log.log import OffsetOutOfRangeError
from josefk.protocol.error_codes import (
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.header import is_flexible
from josefk.protocol.messages import Request, encode_response
from josefk.server.handlers import Response
from josefk.server.zero_copy import FileRegion, new_sentinel, splice

if TYPE_CHECKING:
    from josefk.server.broker import Broker

FETCH = 1
READ_COMMITTED = 1

TopicResp = FetchResponse.FetchableTopicResponse
PartitionResp = TopicResp.PartitionData


@dataclass
class PartitionRead:
    """One requested partition and what reading it found."""

    topic: str | None
    topic_id: uuid.UUID | None
    index: int
    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    region: FileRegion | None = None
    keys: list[Any] = field(default_factory=list)

    def release(self) -> None:
        if self.region is not None:
            self.region.close()
            self.region = None


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
    read_committed = version >= 4 and body.isolation_level == READ_COMMITTED
    max_bytes = body.max_bytes if version >= 3 else 1 << 31
    while True:
        reads = _requested(broker, body, version)
        total = _read_all(broker, reads, max_bytes, read_committed)
        errors = any(r.error_code for r in reads)
        remaining = deadline - trio.current_time()
        if total >= body.min_bytes or errors or remaining <= 0 or not reads:
            break
        for r in reads:
            r.release()
        keys = [(r.topic, r.index) for r in reads]
        if not await broker.purgatory.wait_any(keys, remaining):
            reads = _requested(broker, body, version)
            _read_all(broker, reads, max_bytes, read_committed)
            break
    return _encode(request, reads)


def _requested(broker: Broker, body: Any, version: int) -> list[PartitionRead]:
    reads = []
    for topic in body.topics:
        if version >= 13:
            topic_id = topic.topic_id
            name = broker.topic_name_for_id(topic_id)
        else:
            topic_id, name = None, topic.topic
        for p in topic.partitions:
            reads.append(PartitionRead(
                topic=name, topic_id=topic_id, index=p.partition, fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                leader_epoch=p.current_leader_epoch if version >= 9 else -1))
    return reads


def _read_all(broker: Broker, reads: list[PartitionRead], max_bytes: int,
              read_committed: bool) -> int:
    """Read every partition in order; the first non-empty one may exceed the limits."""
    total = 0
    for r in reads:
        limit = min(r.max_bytes, max_bytes - total)
        total += _read_one(broker, r, max(limit, 0), min_one=(total == 0), read_committed=
                           read_committed)
    return total


def _read_one(broker: Broker, r: PartitionRead, limit: int, min_one: bool,
              read_committed: bool) -> int:
    if r.topic is None:
        r.error_code = UNKNOWN_TOPIC_ID
        return 0
    partition = broker.partition(r.topic, r.index)
    if partition is None:
        r.error_code = UNKNOWN_TOPIC_OR_PARTITION
        return 0
    if not partition.is_leader:
        r.error_code = NOT_LEADER_OR_FOLLOWER
        return 0
    try:
        partition.check_leader_epoch(r.leader_epoch)
    except PartitionError as e:
        r.error_code = e.error_code
        return 0
    log = partition.log
    r.high_watermark = log.high_watermark
    r.last_stable_offset = partition.last_stable_offset
    r.log_start_offset = log.log_start_offset
    upper = r.last_stable_offset if read_committed else r.high_watermark
    try:
        piece = log.read(r.fetch_offset, limit, max_offset=upper, min_one_message=min_one)
    except OffsetOutOfRangeError:
        r.error_code = OFFSET_OUT_OF_RANGE
        return 0
    if piece.length == 0:
        return 0
    # A private descriptor: the segment may roll or be deleted while we send.
    r.region = FileRegion(os.dup(piece.fd), piece.position, piece.length)
    return piece.length


def _encode(request: Request, reads: list[PartitionRead]) -> Response:
    version = request.api_version
    regions: dict[bytes, FileRegion] = {}
    topics: list[Any] = []
    current: tuple[Any, Any] | None = None
    for r in reads:
        records = b""
        if r.region is not None:
            records = new_sentinel()
            regions[records] = r.region
        part = PartitionResp(
            partition_index=r.index, error_code=r.error_code, high_watermark=r.high_watermark,
            last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
            aborted_transactions=None, preferred_read_replica=-1, records=records)
        key = (r.topic_id, r.topic) if version >= 13 else (None, r.topic)
        if current is None or current[0] != key:
            topic = TopicResp(topic=r.topic or "", topic_id=r.topic_id or uuid.UUID(int=0),
                              partitions=[])
            topics.append(topic)
            current = (key, topic)
        current[1].partitions.append(part)
    fields = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}
    frame = encode_response(FETCH, version, request.correlation_id, fields)
    try:
        return splice(frame, regions, is_flexible(FETCH, version))
    except Exception:
        for region in regions.values():
            region.close()
        raise


HANDLERS = {ApiKey.Fetch: handle}
