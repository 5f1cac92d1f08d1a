"""Fetch: read partitions up to the high watermark, long-poll for ``min_bytes``.

What a partition's read does (consumers, read_committed, followers, sendfile) is in
`partition_reads`; fetch sessions (KIP-227) in `incremental_fetch`. Without a session
(session epoch -1, a full cache, or a version before 7) every partition asked for is
read and answered, here.

From v16 a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries the
leader as this broker knows it, and the answer that leader's endpoint (KIP-951), so a
client moves without a Metadata round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio
from kafka.protocol.api_key import ApiKey

from josefk.protocol.error_codes import (
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    NOT_LEADER_OR_FOLLOWER,
)
from josefk.protocol.fetch_response import FetchedTopic, NodeEndpoint, encode_fetch_response
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.handlers.incremental_fetch import fetch_in_session, open_session
from josefk.server.handlers.partition_reads import PartitionRead, read_all, requested
from josefk.server.purgatory import follower_key
from josefk.server.replication.sessions import SessionError
from josefk.server.security.checks import refuse_fetch

if TYPE_CHECKING:
    from josefk.server.broker import Broker
    from josefk.server.metrics.recorder import Recorder

READ_COMMITTED = 1
NODE_ENDPOINTS_VERSION = 16
_LEADER_MOVED = frozenset((NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH))


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
    read_committed = version >= 4 and body.isolation_level == READ_COMMITTED
    # As Kafka: never more than fetch.max.bytes, and min_bytes within that.
    max_bytes = min(body.max_bytes, broker.config.values["fetch.max.bytes"])
    min_bytes = min(body.min_bytes, max_bytes)
    replica = _replica_id(body, version)
    asked = requested(broker, body, version)
    refused: list[PartitionRead] = []
    if broker.authorizer.enabled:
        refused = refuse_fetch(broker.authorizer, list(asked), replica)
        if replica >= 0 and refused:
            return _encode(broker, request, refused)
    try:
        session = open_session(broker, body, version, replica, asked)
    except SessionError as e:
        return _encode(broker, request, [], error_code=e.error_code)
    if session is not None:
        answer = await fetch_in_session(broker, session, replica, deadline, max_bytes,
                                        min_bytes)
        if broker.metrics is not None:
            _measure(broker.metrics, request, answer)
        return _encode(broker, request, answer, session.session_id)

    def read_everything(reads: list[PartitionRead] | None = None
                        ) -> tuple[list[PartitionRead], int]:
        if reads is None:
            reads = requested(broker, body, version)
        if refused:
            refuse_fetch(broker.authorizer, reads, replica)
        return reads, read_all(broker, reads, max_bytes, read_committed, replica)

    reads, total = read_everything(asked)
    while True:
        errors = any(r.error_code for r in reads)
        remaining = deadline - trio.current_time()
        if total >= min_bytes or errors or remaining <= 0 or not reads:
            break
        for r in reads:
            r.release()
        keys = [_wait_key(r, replica) for r in reads]
        fired = await broker.purgatory.wait_for(keys, remaining)
        if total == 0:
            # Nothing had data: only the partitions notified can have changed.
            if not fired:
                break
            total = _read_again(broker, reads, fired, replica, max_bytes, read_committed)
        else:
            reads, total = read_everything()
            if not fired:
                break
    if broker.metrics is not None:
        _measure(broker.metrics, request, reads + refused)
    return _encode(broker, request, reads + refused if refused else reads)


def _wait_key(r: PartitionRead, replica: int) -> Any:
    """Consumers wait for the high watermark to move, followers for new records."""
    return (r.topic, r.index) if replica < 0 else follower_key(r.topic or "", r.index)


def _read_again(broker: Broker, reads: list[PartitionRead], fired: set[Any], replica: int,
                max_bytes: int, read_committed: bool) -> int:
    """Read anew, in place, the partitions whose key was notified."""
    positions = [i for i, r in enumerate(reads) if _wait_key(r, replica) in fired]
    fresh = [reads[i].again() for i in positions]
    total = read_all(broker, fresh, max_bytes, read_committed, replica)
    for i, r in zip(positions, fresh, strict=True):
        reads[i] = r
    return total


def _measure(metrics: Recorder, request: Request, reads: list[PartitionRead]) -> None:
    """Bytes out per topic (to consumers; to followers apart, as Kafka's replication
    bytes out) and error codes, for the broker's metrics."""
    name = metrics.name(request)
    follower = name == "FetchFollower"
    for r in reads:
        if r.error_code:
            metrics.error(name, r.error_code)
        size = r.size
        if size and r.topic is not None:
            metrics.fetched(r.topic, size, follower)


def _replica_id(body: Any, version: int) -> int:
    """The fetching follower's broker id, or -1 for a consumer (v15+: a tagged field)."""
    if version < 15:
        return body.replica_id
    state = body.replica_state
    return state.replica_id if state is not None else -1


def _leaders(broker: Broker, reads: list[PartitionRead]) -> list[NodeEndpoint]:
    """KIP-951: the current leader of each partition that moved, and its endpoints."""
    wanted: set[int] = set()
    for r in reads:
        if r.error_code in _LEADER_MOVED and r.topic is not None:
            view = broker.partition_view(r.topic, r.index)
            r.current_leader = (view.leader, view.leader_epoch) if view else (-1, -1)
            if view is not None and view.leader >= 0:
                wanted.add(view.leader)
    if not wanted:
        return []
    return sorted((b.node_id, b.host, b.port, b.rack) for b in broker.live_brokers()
                  if b.node_id in wanted)


def _encode(broker: Broker, request: Request, reads: list[PartitionRead], session_id: int = 0,
            error_code: int = 0) -> Response:
    topics: list[FetchedTopic] = []
    current: tuple[Any, list[PartitionRead]] | None = None
    version = request.api_version
    v13 = version >= 13
    for r in reads:
        if r.error_code == KAFKA_STORAGE_ERROR and version <= 5:
            r.error_code = NOT_LEADER_OR_FOLLOWER  # Kafka's answer to clients that predate it
        key = (r.topic_id, r.topic) if v13 else r.topic
        if current is None or current[0] != key:
            current = (key, [])
            topics.append((r.topic, r.topic_id, current[1]))
        current[1].append(r)
    try:
        endpoints = _leaders(broker, reads) if version >= NODE_ENDPOINTS_VERSION else []
        return encode_fetch_response(version, request.correlation_id, topics, error_code,
                                     session_id, node_endpoints=endpoints)
    except Exception:
        for r in reads:
            r.release()
        raise


HANDLERS = {ApiKey.Fetch: handle}
