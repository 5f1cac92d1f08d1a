"""Incremental fetch sessions (KIP-227): the leader's cache and the follower's handler."""

from __future__ import annotations

import pytest
import trio

from josefk.protocol.error_codes import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
from josefk.server.purgatory import Purgatory, follower_key
from josefk.server.replication.session_handler import FetchSessionHandler, FetchState
from josefk.server.replication.sessions import (
    FETCH_SESSION_TOPIC_ID_ERROR,
    IDLE_EVICTION_S,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSessionCache,
    SessionError,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def state(offset: int, epoch: int = 3) -> FetchState:
    return FetchState(offset, epoch, epoch, 0)


def wanting(handler: FetchSessionHandler, wanted: dict) -> FetchSessionHandler:
    for tp in list(handler.wanted):
        if tp not in wanted:
            handler.drop(tp)
    for tp, st in wanted.items():
        handler.want(tp, st)
    return handler


def test_the_follower_sends_only_what_changed_and_forgets_what_it_dropped() -> None:
    handler = FetchSessionHandler()
    wanted = {A0: state(10), A1: state(20), B0: state(30)}
    assert wanting(handler, wanted).build() == (wanted, [])  # no session yet: everything
    assert (handler.session_id, handler.epoch) == (0, INITIAL_EPOCH)
    assert handler.on_response(0, 77)
    assert (handler.session_id, handler.epoch) == (77, 1)

    assert wanting(handler, wanted).build() == ({}, [])  # nothing changed: an empty request
    assert handler.on_response(0, 77)
    assert handler.epoch == 2

    moved = {A0: state(15), A1: state(20)}  # a0 fetched records, b0 backs off
    assert wanting(handler, moved).build() == ({A0: state(15)}, [B0])
    assert handler.on_response(0, 77)
    assert wanting(handler, {**moved, B0: state(30)}).build() == ({B0: state(30)}, [])
    assert handler.on_response(0, 77)

    # A change undone before the next request sends nothing.
    handler.want(A1, state(21))
    handler.want(A1, state(20))
    assert handler.build() == ({}, [])

    # The leader lost the session: a full request starts a new one.
    assert not handler.on_response(FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (handler.session_id, handler.epoch) == (0, INITIAL_EPOCH)
    assert wanting(handler, moved).build() == (moved, [])


def test_changes_made_while_a_request_is_in_flight_go_in_the_next() -> None:
    handler = FetchSessionHandler()
    wanting(handler, {A0: state(1), A1: state(1)}).build()
    handler.want(A0, state(5))  # appended while the first request was out
    handler.drop(A1)
    assert handler.on_response(0, 9)
    assert handler.build() == ({A0: state(5)}, [A1])


def test_a_leader_without_a_slot_is_asked_again_next_time() -> None:
    handler = FetchSessionHandler()
    wanting(handler, {A0: state(1)}).build()
    assert handler.on_response(0, 0)
    assert (handler.session_id, handler.epoch) == (0, INITIAL_EPOCH)
    assert handler.build() == ({A0: state(1)}, [])


def test_the_leader_checks_session_ids_epochs_and_replicas() -> None:
    cache = FetchSessionCache(slots=2)
    session = cache.create(replica=2, partitions={A0: CachedPartition(0, 100, 1, 1)})
    assert session is not None and session.epoch == 1
    assert cache.lookup(session.session_id, 1, replica=2) is session
    assert session.epoch == 2
    with pytest.raises(SessionError) as stale:
        cache.lookup(session.session_id, 1, replica=2)
    assert stale.value.error_code == INVALID_FETCH_SESSION_EPOCH
    for wrong in ((session.session_id + 1, 2, 2), (session.session_id, 2, 3)):
        with pytest.raises(SessionError) as unknown:
            cache.lookup(*wrong[:2], replica=wrong[2])
        assert unknown.value.error_code == FETCH_SESSION_ID_NOT_FOUND
    # A session made with topic names is not continued with topic ids, nor the reverse.
    with pytest.raises(SessionError) as switched:
        cache.lookup(session.session_id, 2, replica=2, uses_topic_ids=True)
    assert switched.value.error_code == FETCH_SESSION_TOPIC_ID_ERROR
    # A consumer cannot continue a follower's session.
    with pytest.raises(SessionError):
        cache.lookup(session.session_id, 2, replica=-1)
    assert FetchSessionCache(slots=0).create(replica=1, partitions={}) is None


def test_an_answer_carries_a_partition_again_only_when_its_offsets_move() -> None:
    cached = CachedPartition(0, 100, 1, 1)
    assert cached.changed(5, 5, 0)  # never answered
    assert not cached.changed(5, 5, 0)
    assert cached.changed(6, 5, 0)
    assert cached.changed(6, 5, 2)


async def test_a_session_reads_what_was_named_or_changed_and_wakes_on_records() -> None:
    purgatory = Purgatory()
    cache = FetchSessionCache(slots=2, purgatory=purgatory)
    session = cache.create(replica=2, partitions={A0: CachedPartition(0, 100, 1, 1),
                                                   A1: CachedPartition(0, 100, 1, 1)})
    assert session is not None
    assert session.take_dirty() == [A0, A1]  # new: read at the first fetch
    assert session.take_dirty() == []  # nothing changed since
    purgatory.notify(A1)  # a high watermark move: read at the next fetch, no wake-up
    with trio.move_on_after(0.05) as waited:
        await session.wait_for_records(1.0)
    assert waited.cancelled_caught
    purgatory.notify(follower_key(*A0))  # new records: the long poll reads them now
    assert await session.wait_for_records(1.0) == {A0}
    assert session.take_dirty() == [A1]
    assert session.forget(A0) and not session.forget(A0)
    purgatory.notify(follower_key(*A0))  # forgotten: no longer watched
    assert session.take_dirty() == []
    # Evicted or removed, a session watches nothing.
    cache.remove(session.session_id)
    purgatory.notify(A1)
    assert session.dirty == set() and purgatory._subscribers == {}


def test_a_stale_session_goes_first_when_the_cache_is_full() -> None:
    purgatory = Purgatory()
    cache = FetchSessionCache(slots=3, purgatory=purgatory)
    old = cache.create(replica=2, partitions={A0: CachedPartition(0, 100, 1, 1)}, now=0)
    other = cache.create(replica=3, partitions={A0: CachedPartition(0, 100, 1, 1)}, now=0)
    assert old is not None and other is not None
    later = IDLE_EVICTION_S + 200
    cache.lookup(other.session_id, 1, replica=3, now=later)
    # With room nothing goes, however long unused (Kafka evicts only to make room).
    assert cache.create(replica=-1, size=1, now=later) is not None
    assert len(cache) == 3 and cache.get(old.session_id) is old
    # Full: the session unused for two minutes (its fetcher went away) makes room,
    # follower's or not, whatever the newcomer is worth, and stops watching.
    assert cache.create(replica=-1, size=0, now=later) is not None
    assert cache.get(old.session_id) is None and len(cache) == 3
    assert old.partitions == {} and cache.evictions == 1


def _full_cache(sessions: list[tuple[int, int]], now: float = 0.0) -> FetchSessionCache:
    """A full cache of sessions (replica, partitions), made at ``now`` and used since."""
    cache = FetchSessionCache(slots=len(sessions))
    for replica, size in sessions:
        parts = {("t", i): CachedPartition(0, 100, 1, 1) for i in range(size)}
        made = cache.create(replica=replica, partitions=parts, now=now)
        assert made is not None
    return cache


def _kinds(cache: FetchSessionCache) -> list[tuple[int, int]]:
    return sorted((s.replica, s.size) for s in cache._sessions.values())


@pytest.mark.parametrize(
    ("sessions", "new", "created_ago", "after"),
    [
        # Young sessions: only a follower's session evicts, and only a consumer's, the
        # one with the fewest partitions.
        ([(-1, 5), (-1, 3)], (1, 1), 10, [(-1, 5), (1, 1)]),
        ([(-1, 5), (-1, 3)], (-1, 9), 10, None),
        ([(1, 5), (2, 3)], (3, 9), 10, None),
        # Old enough (but used lately): a newcomer worth more evicts the least valuable.
        ([(-1, 5), (-1, 3)], (-1, 4), 200, [(-1, 4), (-1, 5)]),
        ([(-1, 5), (-1, 3)], (-1, 3), 200, None),  # worth as much: not evicted
        ([(1, 5), (-1, 30)], (-1, 99), 200, [(-1, 99), (1, 5)]),  # followers' stay
        ([(1, 5), (-1, 30)], (2, 1), 200, [(1, 5), (2, 1)]),
        ([(1, 5), (2, 3)], (3, 4), 200, [(1, 5), (3, 4)]),
    ],
)
def test_a_full_cache_evicts_as_kafka(sessions, new, created_ago, after) -> None:
    cache = _full_cache(sessions)
    now = created_ago + 0.0
    for s in list(cache._sessions.values()):  # in use until now: none is stale
        cache.lookup(s.session_id, s.epoch, s.replica, now=now)
    made = cache.create(replica=new[0], size=new[1], now=now)
    if after is None:
        assert made is None and _kinds(cache) == sorted(sessions)
    else:
        assert made is not None
        made.partitions = {("t", i): CachedPartition(0, 100, 1, 1) for i in range(new[1])}
        assert _kinds(cache) == after


async def test_a_consumer_session_wakes_on_the_high_watermark_only() -> None:
    purgatory = Purgatory()
    cache = FetchSessionCache(slots=2, purgatory=purgatory)
    session = cache.create(replica=-1, partitions={A0: CachedPartition(0, 100, 1, 1),
                                                    A1: CachedPartition(0, 100, 1, 1)})
    assert session is not None and not session.privileged
    assert session.take_dirty() == [A0, A1]
    purgatory.notify(follower_key(*A0))  # records not yet below the high watermark
    assert session.dirty == set()
    purgatory.notify(A1)  # the high watermark moved: the long poll reads it now
    assert await session.wait_for_records(1.0) == {A1}
    # A partition that returned records is read after the others next time.
    session.answered_records(A0)
    session.dirty.update({A0, A1})
    assert session.take_dirty() == [A1, A0]
