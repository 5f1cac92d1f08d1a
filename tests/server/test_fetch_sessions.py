"""Incremental fetch sessions (KIP-227): the leader's cache and the follower's handler."""

from __future__ import annotations

import pytest

from josefk.protocol.error_codes import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
from josefk.server.fetch_session_handler import FetchSessionHandler, FetchState
from josefk.server.fetch_sessions import (
    INITIAL_EPOCH,
    CachedPartition,
    FetchSessionCache,
    SessionError,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def state(offset: int, epoch: int = 3) -> FetchState:
    return FetchState(offset, epoch, epoch, 0)


def test_the_follower_sends_only_what_changed_and_forgets_what_it_dropped() -> None:
    handler = FetchSessionHandler()
    wanted = {A0: state(10), A1: state(20), B0: state(30)}
    assert handler.build(wanted) == (wanted, [])  # no session yet: everything
    assert (handler.session_id, handler.epoch) == (0, INITIAL_EPOCH)
    assert handler.on_response(0, 77)
    assert (handler.session_id, handler.epoch) == (77, 1)

    assert handler.build(wanted) == ({}, [])  # nothing changed: an empty request
    assert handler.on_response(0, 77)
    assert handler.epoch == 2

    moved = {A0: state(15), A1: state(20)}  # a0 fetched records, b0 backs off
    assert handler.build(moved) == ({A0: state(15)}, [B0])
    assert handler.on_response(0, 77)
    assert handler.build({**moved, B0: state(30)}) == ({B0: state(30)}, [])

    # The leader lost the session: a full request starts a new one.
    assert not handler.on_response(FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (handler.session_id, handler.epoch) == (0, INITIAL_EPOCH)
    assert handler.build(moved) == (moved, [])


def test_a_leader_without_a_slot_is_asked_again_next_time() -> None:
    handler = FetchSessionHandler()
    handler.build({A0: state(1)})
    assert handler.on_response(0, 0)
    assert (handler.session_id, handler.epoch) == (0, INITIAL_EPOCH)
    assert handler.build({A0: state(1)}) == ({A0: state(1)}, [])


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
