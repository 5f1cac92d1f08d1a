"""Incremental fetch sessions (KIP-227): the leader's cache and the follower's handler."""

from __future__ import annotations

import pytest
import trio

from josefk.protocol.error_codes import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
from josefk.server.purgatory import Purgatory, follower_key
from josefk.server.replication.session_handler import FetchSessionHandler, FetchState
from josefk.server.replication.sessions import (
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
    # Past its slots the least recently used session goes.
    second = cache.create(replica=3, partitions={})
    cache.lookup(session.session_id, 2, replica=2)
    third = cache.create(replica=1, partitions={})
    assert second is not None and third is not None and len(cache) == 2
    with pytest.raises(SessionError):
        cache.lookup(second.session_id, 1, replica=3)
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
    assert session.take_dirty() == {A0, A1}  # new: read at the first fetch
    assert session.take_dirty() == set()  # nothing changed since
    purgatory.notify(A1)  # a high watermark move: read at the next fetch, no wake-up
    with trio.move_on_after(0.05) as waited:
        await session.wait_for_records(1.0)
    assert waited.cancelled_caught
    purgatory.notify(follower_key(*A0))  # new records: the long poll reads them now
    assert await session.wait_for_records(1.0) == {A0}
    assert session.take_dirty() == {A1}
    assert session.forget(A0) and not session.forget(A0)
    purgatory.notify(follower_key(*A0))  # forgotten: no longer watched
    assert session.take_dirty() == set()
    # Evicted or removed, a session watches nothing.
    cache.remove(session.session_id)
    purgatory.notify(A1)
    assert session.dirty == set() and purgatory._subscribers == {}


def test_a_session_unused_for_two_minutes_goes_when_another_is_created() -> None:
    purgatory = Purgatory()
    cache = FetchSessionCache(slots=10, purgatory=purgatory)
    old = cache.create(replica=2, partitions={A0: CachedPartition(0, 100, 1, 1)})
    assert old is not None
    old.last_used -= IDLE_EVICTION_S + 1  # its follower restarted and started another
    new = cache.create(replica=2, partitions={A0: CachedPartition(0, 100, 1, 1)})
    assert new is not None and len(cache) == 1
    with pytest.raises(SessionError):
        cache.lookup(old.session_id, 1, replica=2)
    assert old.partitions == {}  # it stopped watching its partitions
