"""Fetch: read partitions up to the high watermark, long-poll for ``min_bytes``.

A read_committed consumer (isolation_level 1) reads up to the last stable offset and
gets the aborted transactions overlapping what it reads, to drop their records.

A follower's fetch (a replica id >= 0) reads up to the log end offset instead, tells
the leader how far the follower has got (which moves the high watermark and may
bring it back into the ISR), and gets the diverging epoch when its last fetched
epoch does not match the leader's log (KIP-320 truncation on fetch).

Record bytes of a large slice are not read into Python: the slice of a segment
file becomes a FileRegion, a part of the response of its own that the connection
sends with sendfile (protocol/fetch_response.py encodes around it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from kafka.protocol.api_key import ApiKey

from josefk.cluster.partition import FetchClock, PartitionError
from josefk.log.clock import now_ms
from josefk.log.errors import StorageError
from josefk.log.log import OffsetOutOfRangeError
from josefk.protocol.error_codes import (
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.fetch_response import FetchedTopic, encode_fetch_response
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.network.zero_copy import FileRegion
from josefk.server.purgatory import follower_key
from josefk.server.replication.sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    TP,
    CachedPartition,
    FetchSession,
    SessionError,
)
from josefk.server.security.checks import refuse_fetch

if TYPE_CHECKING:
    from josefk.server.broker import Broker
    from josefk.server.metrics.recorder import Recorder

#: Record slices up to this size are read into the response, larger ones sent with sendfile.
COPY_MAX = 64 * 1024
READ_COMMITTED = 1


@dataclass
class PartitionRead:
    """One requested partition and what reading it found."""

    topic: str | None
    topic_id: uuid.UUID | None
    index: int
    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    last_fetched_epoch: int = -1
    error_code: int = 0
    diverging_epoch: tuple[int, int] | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    region: FileRegion | None = None
    records: bytes = b""
    aborted: list[tuple[int, int]] | None = None  # (producer id, first offset)
    keys: list[Any] = field(default_factory=list)

    def again(self) -> PartitionRead:
        """The same partition asked the same way, not read yet."""
        return PartitionRead(topic=self.topic, topic_id=self.topic_id, index=self.index,
                             fetch_offset=self.fetch_offset, max_bytes=self.max_bytes,
                             leader_epoch=self.leader_epoch,
                             last_fetched_epoch=self.last_fetched_epoch)

    def release(self) -> None:
        if self.region is not None:
            self.region.close()
            self.region = None


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
    read_committed = version >= 4 and body.isolation_level == READ_COMMITTED
    # As Kafka: never more than fetch.max.bytes, and min_bytes within that.
    max_bytes = min(body.max_bytes, broker.config.values["fetch.max.bytes"])
    min_bytes = min(body.min_bytes, max_bytes)
    replica = _replica_id(body, version)
    refused: list[PartitionRead] = []
    if broker.authorizer.enabled:
        refused = refuse_fetch(broker.authorizer, _requested(broker, body, version), replica)
        if replica >= 0 and refused:
            return _encode(request, refused)
    try:
        session = _session(broker, body, version, replica)
    except SessionError as e:
        return _encode(request, [], error_code=e.error_code)
    if session is not None:
        return await _fetch_in_session(broker, request, session, replica, deadline, max_bytes,
                                       min_bytes)

    def read_all() -> tuple[list[PartitionRead], int]:
        reads = _requested(broker, body, version)
        if refused:
            refuse_fetch(broker.authorizer, reads, replica)
        return reads, _read_all(broker, reads, max_bytes, read_committed, replica)

    reads, total = read_all()
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
            reads, total = read_all()
            if not fired:
                break
    if broker.metrics is not None:
        _measure(broker.metrics, request, reads + refused)
    return _encode(request, reads + refused if refused else reads)


def _wait_key(r: PartitionRead, replica: int) -> Any:
    """Consumers wait for the high watermark to move, followers for new records."""
    return (r.topic, r.index) if replica < 0 else follower_key(r.topic or "", r.index)


def _read_again(broker: Broker, reads: list[PartitionRead], fired: set[Any], replica: int,
                max_bytes: int, read_committed: bool) -> int:
    """Read anew, in place, the partitions whose key was notified."""
    positions = [i for i, r in enumerate(reads) if _wait_key(r, replica) in fired]
    fresh = [reads[i].again() for i in positions]
    total = _read_all(broker, fresh, max_bytes, read_committed, replica)
    for i, r in zip(positions, fresh, strict=True):
        reads[i] = r
    return total


# --- a follower's fetch session (KIP-227) -----------------------------------------------


def _session(broker: Broker, body: Any, version: int, replica: int) -> FetchSession | None:
    """The fetch session this request starts or continues (followers only; KIP-227)."""
    if version < 7 or replica < 0:
        return None
    sessions = broker.fetch_sessions
    if body.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if body.session_id:
            sessions.remove(body.session_id)
        if body.session_epoch == FINAL_EPOCH:
            return None
        session = sessions.create(replica, {})
    else:
        session = sessions.lookup(body.session_id, body.session_epoch, replica)
    if session is not None:
        _update_session(broker, session, _requested(broker, body, version),
                        _forgotten(broker, body, version))
    return session


def _update_session(broker: Broker, session: FetchSession, reads: list[PartitionRead],
                    forgotten: list[TP]) -> None:
    for r in reads:
        if r.topic is None:
            continue  # an unknown topic id cannot be followed
        tp = (r.topic, r.index)
        cached = session.partitions.get(tp)
        if cached is None:
            cached = CachedPartition(r.fetch_offset, r.max_bytes, r.leader_epoch,
                                     r.last_fetched_epoch, r.topic_id)
        else:
            cached.fetch_offset, cached.max_bytes = r.fetch_offset, r.max_bytes
            cached.leader_epoch, cached.last_fetched_epoch = r.leader_epoch, r.last_fetched_epoch
        session.put(tp, cached)
    for tp in forgotten:
        if session.forget(tp):
            _settle(broker, tp, session.replica)


def _settle(broker: Broker, tp: TP, replica: int) -> None:
    partition = broker.partitions.get(tp)
    if partition is not None:
        partition.settle_follower(replica)


def _forgotten(broker: Broker, body: Any, version: int) -> list[TP]:
    forgotten = []
    for topic in body.forgotten_topics_data or ():
        name = broker.topic_name_for_id(topic.topic_id) if version >= 13 else topic.topic
        forgotten += [(name, p) for p in topic.partitions] if name is not None else []
    return forgotten


async def _fetch_in_session(broker: Broker, request: Request, session: FetchSession,
                            replica: int, deadline: float, max_bytes: int, min_bytes: int
                            ) -> Response:
    """Read what changed in the session's partitions; long-poll for new records."""
    tps = session.take_dirty()
    # Their followers' standing state ends at the session's previous fetch...
    for tp in tps:
        _settle(broker, tp, replica)
    session.clock.ms = now_ms()  # ...and at this one, for every partition left alone.
    reads = _session_reads(session, tps)
    total = _read_all(broker, reads, max_bytes, False, replica)
    while total < min_bytes and session.partitions and not any(r.error_code for r in reads):
        remaining = deadline - trio.current_time()
        if remaining <= 0:
            break
        woken = await session.wait_for_records(remaining)
        if not woken:
            break
        if total:  # more to read than what was read: read it all again
            for r in reads:
                r.release()
            woken |= {(r.topic, r.index) for r in reads}  # type: ignore[misc]
            reads, total = [], 0
        fresh = _session_reads(session, woken)
        total += _read_all(broker, fresh, max_bytes - total, False, replica)
        by_tp = {(r.topic, r.index): r for r in reads}
        by_tp.update({(r.topic, r.index): r for r in fresh})
        reads = list(by_tp.values())
    answer = _answer_in_session(broker, session, reads, replica)
    if broker.metrics is not None:
        _measure(broker.metrics, request, answer)
    return _encode(request, answer, session.session_id)


def _measure(metrics: Recorder, request: Request, reads: list[PartitionRead]) -> None:
    """Bytes out per topic (to consumers; to followers apart, as Kafka's replication
    bytes out) and error codes, for the broker's metrics."""
    name = metrics.name(request)
    follower = name == "FetchFollower"
    for r in reads:
        if r.error_code:
            metrics.error(name, r.error_code)
        size = r.region.length if r.region is not None else len(r.records or b"")
        if size and r.topic is not None:
            metrics.fetched(r.topic, size, follower)


def _session_reads(session: FetchSession, tps: set[TP]) -> list[PartitionRead]:
    reads = []
    for tp in tps:
        c = session.partitions.get(tp)
        if c is not None:
            reads.append(PartitionRead(
                topic=tp[0], topic_id=c.topic_id, index=tp[1], fetch_offset=c.fetch_offset,
                max_bytes=c.max_bytes, leader_epoch=c.leader_epoch,
                last_fetched_epoch=c.last_fetched_epoch))
    return reads


def _answer_in_session(broker: Broker, session: FetchSession, reads: list[PartitionRead],
                       replica: int) -> list[PartitionRead]:
    """What an answer in a session carries: partitions with records, an error, a
    diverging epoch, or offsets the fetcher has not been told yet. Those with more to
    say stay to be read at the next fetch."""
    answer = []
    for r in reads:
        tp: TP = (r.topic, r.index)  # type: ignore[assignment]
        cached = session.partitions.get(tp)
        if cached is None:
            continue
        changed = cached.changed(r.high_watermark, r.last_stable_offset, r.log_start_offset)
        quiet = (r.region is None and not r.records and not r.error_code
                 and r.diverging_epoch is None)
        if changed or not quiet:
            answer.append(r)
        if not (quiet and _stays_at_end(broker, tp, r, replica, session.clock)):
            session.dirty.add(tp)
    return answer


def _stays_at_end(broker: Broker, tp: TP, r: PartitionRead, replica: int,
                  clock: FetchClock) -> bool:
    """Nothing more to read for this follower: it is in the ISR and fetched from our
    log end offset (the answer tells it our offsets). Until the partition changes, its
    session's clock stands for its fetches. The last stable offset needs no watch: it
    moves only with the log end offset, the high watermark or the log start offset."""
    partition = broker.partitions.get(tp)
    return (partition is not None and partition.is_leader and replica in partition.isr
            and r.fetch_offset == partition.log.log_end_offset
            and partition.follower_stays_at_end(replica, clock))


def _replica_id(body: Any, version: int) -> int:
    """The fetching follower's broker id, or -1 for a consumer (v15+: a tagged field)."""
    if version < 15:
        return body.replica_id
    state = body.replica_state
    return state.replica_id if state is not None else -1


def _requested(broker: Broker, body: Any, version: int) -> list[PartitionRead]:
    """The partitions asked for, each once: a partition named again replaces the earlier
    ask in its place (Kafka reads the request into a map)."""
    reads: dict[tuple[Any, int], PartitionRead] = {}
    for topic in body.topics:
        if version >= 13:
            topic_id = topic.topic_id
            name = broker.topic_name_for_id(topic_id)
        else:
            topic_id, name = None, topic.topic
        for p in topic.partitions:
            reads[(topic_id or name, p.partition)] = PartitionRead(
                topic=name, topic_id=topic_id, index=p.partition, fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                leader_epoch=p.current_leader_epoch if version >= 9 else -1,
                last_fetched_epoch=p.last_fetched_epoch if version >= 12 else -1)
    return list(reads.values())


def _read_all(broker: Broker, reads: list[PartitionRead], max_bytes: int,
              read_committed: bool, replica: int = -1) -> int:
    """Read every partition in order; the first non-empty one may exceed the limits."""
    total = 0
    for r in reads:
        limit = min(r.max_bytes, max_bytes - total)
        try:
            total += _read_one(broker, r, max(limit, 0), min_one=(total == 0),
                               read_committed=read_committed, replica=replica)
        except StorageError as e:
            # Logged where it happened; this partition answers with the error, the others go on.
            r.release()
            r.records = b""
            r.error_code = e.error_code
    return total


def _read_one(broker: Broker, r: PartitionRead, limit: int, min_one: bool,
              read_committed: bool, replica: int = -1) -> int:
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
    upper = log.high_watermark
    if replica >= 0:
        if replica not in partition.replicas:
            r.error_code = NOT_LEADER_OR_FOLLOWER
            return 0
        if _diverging(partition, r):
            return 0
        upper = log.log_end_offset
    r.high_watermark = log.high_watermark
    r.last_stable_offset = partition.last_stable_offset
    r.log_start_offset = log.log_start_offset
    read_committed = read_committed and replica < 0
    if read_committed:
        upper = r.last_stable_offset
        r.aborted = []
    try:
        piece = log.read(r.fetch_offset, limit, max_offset=upper, min_one_message=min_one)
    except OffsetOutOfRangeError:
        r.error_code = OFFSET_OUT_OF_RANGE
        return 0
    if replica >= 0:
        broker.on_follower_fetch(partition, replica, r.fetch_offset)
        r.high_watermark = log.high_watermark
    if piece.length == 0:
        return 0
    if read_committed:
        r.aborted = log.aborted_transactions_in(piece, r.fetch_offset, upper)
    if piece.length <= COPY_MAX:
        # Copied: no descriptor stays pinned for the many small reads of a wide fetch.
        r.records = piece.read_bytes()
    else:
        # Pinned: the segment may roll or be deleted while we send; its file stays open.
        r.region = FileRegion(piece.pin(), piece.position, piece.length, piece.unpin)
    return piece.length


def _diverging(partition: Any, r: PartitionRead) -> bool:
    """KIP-320: does the follower's log diverge from ours at its last fetched epoch?
    If so, answer with the largest epoch we share and where it ends."""
    if r.last_fetched_epoch < 0:
        return False
    log = partition.log
    epoch, end = log.leader_epochs.end_offset_for(r.last_fetched_epoch, log.log_end_offset)
    if epoch == r.last_fetched_epoch and end >= r.fetch_offset:
        return False
    r.diverging_epoch = (epoch, end)
    r.high_watermark = log.high_watermark
    r.log_start_offset = log.log_start_offset
    r.last_stable_offset = partition.last_stable_offset
    return True


def _encode(request: Request, reads: list[PartitionRead], session_id: int = 0,
            error_code: int = 0) -> Response:
    topics: list[FetchedTopic] = []
    current: tuple[Any, list[PartitionRead]] | None = None
    v13 = request.api_version >= 13
    for r in reads:
        key = (r.topic_id, r.topic) if v13 else r.topic
        if current is None or current[0] != key:
            current = (key, [])
            topics.append((r.topic, r.topic_id, current[1]))
        current[1].append(r)
    try:
        return encode_fetch_response(request.api_version, request.correlation_id, topics,
                                     error_code, session_id)
    except Exception:
        for r in reads:
            r.release()
        raise


HANDLERS = {ApiKey.Fetch: handle}
