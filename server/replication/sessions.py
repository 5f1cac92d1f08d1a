"""Incremental fetch sessions (KIP-227), served to followers.

A follower fetching thousands of partitions from a leader would otherwise send all of
them in every request and get all of them back, most with nothing new. In a session
the leader keeps each partition's fetch state; a request names only the partitions
whose state changed (and those to forget), and the answer holds only the partitions
with records, an error, or a new high watermark, last stable offset or log start
offset.

Consumers are answered without a session (session id 0), as Kafka answers when its
cache has no slot for them: they fetch every partition each time, as before.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field

import trio

from josefk.cluster.partition import FetchClock
from josefk.protocol.error_codes import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
from josefk.server.metrics.recorder import wait_ended, wait_started
from josefk.server.purgatory import Purgatory, follower_key

#: A session unused this long belongs to a follower that restarted or moved away (Kafka's
#: min.incremental.fetch.session.eviction.ms); it goes when a new session is created.
IDLE_EVICTION_S = 120.0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = (1 << 31) - 1

TP = tuple[str, int]


@dataclass(slots=True)
class CachedPartition:
    """A partition's fetch state in a session, and what its last answer said."""

    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    last_fetched_epoch: int
    topic_id: uuid.UUID | None = None  # requests by topic id (v13+) are answered so
    high_watermark: int = -2  # -2: never answered, so the first answer includes it
    last_stable_offset: int = -2
    log_start_offset: int = -2

    def changed(self, high_watermark: int, last_stable_offset: int,
                log_start_offset: int) -> bool:
        """Whether an answer must carry this partition; remembers what it carries."""
        if (high_watermark, last_stable_offset, log_start_offset) == (
                self.high_watermark, self.last_stable_offset, self.log_start_offset):
            return False
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        return True


@dataclass(eq=False)
class FetchSession:
    """One fetcher's session: its partitions, and which of them the next fetch reads.

    A partition is read when the request names it, when it changed since (new records,
    a new high watermark or leadership, which the purgatory reports to the session), or
    when its last read left something to say; a follower that has everything is
    otherwise left alone. With thousands of partitions per follower, reading each at
    every fetch cost each replication round time in proportion to every partition the
    broker leads, changed or not.
    """

    session_id: int
    replica: int
    epoch: int = 1  # the epoch the next incremental request must carry
    partitions: dict[TP, CachedPartition] = field(default_factory=dict)
    purgatory: Purgatory | None = None
    dirty: set[TP] = field(default_factory=set)  # what the next fetch reads
    clock: FetchClock = field(default_factory=FetchClock)
    _woken: set[TP] = field(default_factory=set)  # new records since the last look
    _records: trio.Event = field(default_factory=trio.Event)
    last_used: float = field(default_factory=time.monotonic)

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch == INT32_MAX else self.epoch + 1

    def put(self, tp: TP, cached: CachedPartition) -> None:
        if tp not in self.partitions and self.purgatory is not None:
            self.purgatory.subscribe(_keys(tp), self._notified)
        self.partitions[tp] = cached
        self.dirty.add(tp)

    def forget(self, tp: TP) -> bool:
        if self.partitions.pop(tp, None) is None:
            return False
        if self.purgatory is not None:
            self.purgatory.unsubscribe(_keys(tp), self._notified)
        self.dirty.discard(tp)
        return True

    def close(self) -> None:
        for tp in list(self.partitions):
            self.forget(tp)

    def _notified(self, key: Hashable) -> None:
        if len(key) == 3:  # type: ignore[arg-type]  # follower_key: new records
            tp: TP = key[1:]  # type: ignore[index]
            self._woken.add(tp)
            self._records.set()
        else:
            tp = key  # type: ignore[assignment]  # (topic, index): the high watermark
        self.dirty.add(tp)

    def take_dirty(self) -> set[TP]:
        """What a new fetch reads; from now on changes collect for the next."""
        dirty, self.dirty = self.dirty, set()
        self._woken.clear()
        self._records = trio.Event()
        return dirty

    async def wait_for_records(self, timeout_s: float) -> set[TP]:
        """Partitions with new records (or a new leadership) since the last look, waiting
        up to ``timeout_s`` for one; they are read now, not at the next fetch."""
        if not self._woken:
            started = wait_started()
            with trio.move_on_after(timeout_s):
                await self._records.wait()
            wait_ended(started)  # the request's remote time (its metrics)
        woken, self._woken = self._woken, set()
        self._records = trio.Event()
        self.dirty -= woken
        return woken


def _keys(tp: TP) -> tuple[Hashable, Hashable]:
    return (tp, follower_key(*tp))


class SessionError(Exception):
    """An incremental fetch whose session is unknown or out of step."""

    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


class FetchSessionCache:
    """At most ``slots`` sessions (``max.incremental.fetch.session.cache.slots``); the
    least recently used one goes when a new one needs room."""

    def __init__(self, slots: int, purgatory: Purgatory | None = None) -> None:
        self.slots = slots
        self.purgatory = purgatory
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, replica: int, partitions: dict[TP, CachedPartition]
               ) -> FetchSession | None:
        """A new session, or None when sessions are disabled (0 slots)."""
        if self.slots <= 0:
            return None
        self._evict_idle()
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)[1].close()
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = random.randint(1, INT32_MAX)
        session = FetchSession(session_id, replica, purgatory=self.purgatory)
        for tp, cached in partitions.items():
            session.put(tp, cached)
        self._sessions[session_id] = session
        return session

    def _evict_idle(self) -> None:
        """Close the sessions no one used for IDLE_EVICTION_S: they would go on
        collecting changes for a follower that left them."""
        oldest_allowed = time.monotonic() - IDLE_EVICTION_S
        while self._sessions and next(iter(self._sessions.values())).last_used < oldest_allowed:
            self._sessions.popitem(last=False)[1].close()

    def lookup(self, session_id: int, epoch: int, replica: int) -> FetchSession:
        """The session an incremental request continues, its epoch advanced."""
        self._evict_idle()
        session = self._sessions.get(session_id)
        if session is None or session.replica != replica:
            raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(INVALID_FETCH_SESSION_EPOCH)
        self._sessions.move_to_end(session_id)
        session.last_used = time.monotonic()
        session.next_epoch()
        return session

    def remove(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()
