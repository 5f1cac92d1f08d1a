"""Fetch in an incremental fetch session (KIP-227), for followers and consumers.

As Kafka's ``FetchManager.newContext``: a request with session epoch 0 (or -1) is a
full one; it closes the session it names, and epoch 0 asks for a new session (the
answer's session id, or 0 when the cache has no room), epoch -1 for none. A request
with another epoch continues its session: FETCH_SESSION_ID_NOT_FOUND (70) if the
session is gone, INVALID_FETCH_SESSION_EPOCH (71) if the epoch is not the next,
FETCH_SESSION_TOPIC_ID_ERROR (106) if the request version switched between topic names
and topic ids. An incremental request that forgets the session's last partition
closes it and is answered without a session.

Within a session, only the partitions named or changed since are read, and the answer
holds only those with records, an error, a diverging epoch or offsets the fetcher has
not been told yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from josefk.cluster.partition import FetchClock
from josefk.log.clock import now_ms
from josefk.protocol.error_codes import UNKNOWN_TOPIC_ID
from josefk.server.handlers.partition_reads import PartitionRead, read_all
from josefk.server.replication.sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    TP,
    CachedPartition,
    FetchSession,
)
from josefk.server.security.checks import refuse_fetch

if TYPE_CHECKING:
    from josefk.server.broker import Broker

READ_COMMITTED = 1


def open_session(broker: Broker, body: Any, version: int, replica: int,
                 reads: list[PartitionRead]) -> FetchSession | None:
    """The session this request (asking for ``reads``) starts or continues, updated
    with what the request says; None for a fetch answered without one. Raises
    SessionError."""
    if version < 7:
        return None
    sessions = broker.fetch_sessions
    if body.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if body.session_id:
            sessions.remove(body.session_id)
        if body.session_epoch == FINAL_EPOCH:
            return None
        session = sessions.create(replica, size=len(reads), uses_topic_ids=version >= 13)
        if session is None:
            return None
    else:
        session = sessions.lookup(body.session_id, body.session_epoch, replica,
                                  uses_topic_ids=version >= 13)
    _update(broker, session, reads, _forgotten(broker, body, version))
    if not session.size and body.session_epoch != INITIAL_EPOCH:
        sessions.remove(session.session_id)  # an incremental fetch that forgot everything
        return None
    isolation = body.isolation_level if version >= 4 else 0
    if isolation != session.isolation_level:
        session.isolation_level = isolation
        session.dirty.update(session.partitions)  # where reading stops has moved
    return session


def _update(broker: Broker, session: FetchSession, reads: list[PartitionRead],
            forgotten: list[tuple[Any, int]]) -> None:
    for r in reads:
        cached = (session.unresolved.get((r.topic_id, r.index)) if r.topic_id is not None
                  else None) or session.partitions.get((r.topic, r.index))  # type: ignore[arg-type]
        if cached is None:
            cached = CachedPartition(r.fetch_offset, r.max_bytes, r.leader_epoch,
                                     r.last_fetched_epoch, r.topic_id)
        else:
            cached.fetch_offset, cached.max_bytes = r.fetch_offset, r.max_bytes
            cached.leader_epoch, cached.last_fetched_epoch = r.leader_epoch, r.last_fetched_epoch
        if r.topic is None:
            session.unresolved[(r.topic_id, r.index)] = cached  # type: ignore[index]
        else:
            session.put((r.topic, r.index), cached)
    for key in forgotten:
        if session.unresolved.pop(key, None) is None and session.forget(key):
            _settle(broker, key, session.replica)


def _forgotten(broker: Broker, body: Any, version: int) -> list[tuple[Any, int]]:
    """Partitions to forget: by name, or by topic id while the id is unknown here."""
    forgotten: list[tuple[Any, int]] = []
    for topic in body.forgotten_topics_data or ():
        if version >= 13:
            name = broker.topic_name_for_id(topic.topic_id)
            forgotten += [(topic.topic_id, p) for p in topic.partitions]
            if name is None:
                continue
        else:
            name = topic.topic
        forgotten += [(name, p) for p in topic.partitions]
    return forgotten


def _settle(broker: Broker, tp: TP, replica: int) -> None:
    partition = broker.partitions.get(tp)
    if partition is not None and replica >= 0:
        partition.settle_follower(replica)


def _resolve(broker: Broker, session: FetchSession) -> list[PartitionRead]:
    """Partitions of topic ids that have since become known join the session; the others
    are answered UNKNOWN_TOPIC_ID again, as every fetch answers an error."""
    unknown = []
    for (topic_id, index), cached in list(session.unresolved.items()):
        name = broker.topic_name_for_id(topic_id)
        if name is not None:
            del session.unresolved[(topic_id, index)]
            session.put((name, index), cached)
        else:
            unknown.append(PartitionRead(topic=None, topic_id=topic_id, index=index,
                                         fetch_offset=cached.fetch_offset,
                                         max_bytes=cached.max_bytes,
                                         leader_epoch=cached.leader_epoch,
                                         error_code=UNKNOWN_TOPIC_ID))
    return unknown


async def fetch_in_session(broker: Broker, session: FetchSession, replica: int,
                           deadline: float, max_bytes: int, min_bytes: int
                           ) -> list[PartitionRead]:
    """Read what changed in the session's partitions, long-polling for more; what the
    answer carries."""
    unknown = _resolve(broker, session) if session.unresolved else []
    read_committed = replica < 0 and session.isolation_level == READ_COMMITTED
    refused: list[PartitionRead] = []
    if broker.authorizer.enabled and replica < 0:
        session.dirty.update(session.partitions)  # every partition's ACLs, every time
    tps = session.take_dirty()
    # Their followers' standing state ends at the session's previous fetch...
    for tp in tps:
        _settle(broker, tp, replica)
    session.clock.ms = now_ms()  # ...and at this one, for every partition left alone.
    reads = _session_reads(session, tps)
    if broker.authorizer.enabled and replica < 0:
        refused = refuse_fetch(broker.authorizer, reads, replica)
        for r in refused:
            session.dirty.add((r.topic, r.index))  # type: ignore[arg-type]
    total = read_all(broker, reads, max_bytes, read_committed, replica)
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
        fresh = _session_reads(session, session.ordered(woken))
        total += read_all(broker, fresh, max_bytes - total, read_committed, replica)
        by_tp = {(r.topic, r.index): r for r in reads}
        by_tp.update({(r.topic, r.index): r for r in fresh})
        reads = list(by_tp.values())
    return _answer(broker, session, reads, replica) + refused + unknown


def _session_reads(session: FetchSession, tps: list[TP]) -> list[PartitionRead]:
    reads = []
    for tp in tps:
        c = session.partitions.get(tp)
        if c is not None:
            reads.append(PartitionRead(
                topic=tp[0], topic_id=c.topic_id, index=tp[1], fetch_offset=c.fetch_offset,
                max_bytes=c.max_bytes, leader_epoch=c.leader_epoch,
                last_fetched_epoch=c.last_fetched_epoch))
    return reads


def _answer(broker: Broker, session: FetchSession, reads: list[PartitionRead],
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
        if r.error_code:
            cached.high_watermark = -1  # as Kafka: answered again once the error clears
        quiet = (not r.size and not r.error_code and r.diverging_epoch is None)
        if changed or not quiet:
            answer.append(r)
        if r.size:
            session.answered_records(tp)
        at_end = (_stays_at_end(broker, tp, r, replica, session.clock) if replica >= 0
                  else r.upper >= 0 and r.fetch_offset >= r.upper)
        if not (quiet and at_end):
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
