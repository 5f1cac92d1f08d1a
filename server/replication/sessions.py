"""Incremental fetch sessions (KIP-227), served to followers and consumers alike.

A fetcher of thousands of partitions would otherwise send all of them in every request
and get all of them back, most with nothing new. In a session the leader keeps each
partition's fetch state; a request names only the partitions whose state changed (and
those to forget), and the answer holds only the partitions with records, an error, or
a new high watermark, last stable offset or log start offset.

The cache keeps ``max.incremental.fetch.session.cache.slots`` sessions and, when full,
makes room as Kafka's ``FetchSessionCacheShard.tryEvict`` does: a session unused for
two minutes goes first; else the least valuable one goes if the new one is worth more
(followers' sessions over consumers', then more partitions over fewer), and a session
younger than two minutes can be pushed out only by a follower's, and only if it is a
consumer's. Sessions belong to no connection: a client that reconnects continues its
session, as with Kafka.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import trio

from josefk.cluster.partition import FetchClock
from josefk.protocol.error_codes import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
from josefk.server.metrics.recorder import wait_ended, wait_started
from josefk.server.purgatory import Purgatory, follower_key

#: Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: a session unused this long is stale
#: (its fetcher restarted or went away) and the first to go when a new one needs room;
#: a session younger than this can be evicted only by a follower's.
IDLE_EVICTION_S = 120.0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = (1 << 31) - 1
#: An incremental request whose version says topic ids (v13+) when its session was made
#: with names, or the other way round (Kafka's Errors.FETCH_SESSION_TOPIC_ID_ERROR).
FETCH_SESSION_TOPIC_ID_ERROR = 106

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
    order: int = 0  # reads go in this order; a partition that returned records goes last

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

    A partition is read when the request names it, when it changed since (the purgatory
    reports new records, a high watermark move or a leadership change to the session),
    or when its last read left something to say; a fetcher that has everything is
    otherwise left alone. A follower's long poll wakes on new records, a consumer's on
    a high watermark move (records below it are what a consumer may read).
    """

    session_id: int
    replica: int  # the follower's broker id, or -1: a consumer
    uses_topic_ids: bool = False
    epoch: int = 1  # the epoch the next incremental request must carry
    partitions: dict[TP, CachedPartition] = field(default_factory=dict)
    # Partitions named by a topic id this broker does not know (yet): answered
    # UNKNOWN_TOPIC_ID until the id resolves, as Kafka keeps them in the session.
    unresolved: dict[tuple[uuid.UUID, int], CachedPartition] = field(default_factory=dict)
    purgatory: Purgatory | None = None
    dirty: set[TP] = field(default_factory=set)  # what the next fetch reads
    clock: FetchClock = field(default_factory=FetchClock)
    isolation_level: int = 0
    _woken: set[TP] = field(default_factory=set)  # woken since the last look
    _records: trio.Event = field(default_factory=trio.Event)
    _order: int = 0
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)

    @property
    def privileged(self) -> bool:
        """A follower's session (Kafka's ``privileged``): kept over consumers' ones."""
        return self.replica >= 0

    @property
    def size(self) -> int:
        return len(self.partitions) + len(self.unresolved)

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch == INT32_MAX else self.epoch + 1

    def put(self, tp: TP, cached: CachedPartition) -> None:
        if tp not in self.partitions:
            if self.purgatory is not None:
                self.purgatory.subscribe(self._keys(tp), self._notified)
            cached.order = self._next_order()
        self.partitions[tp] = cached
        self.dirty.add(tp)

    def forget(self, tp: TP) -> bool:
        if self.partitions.pop(tp, None) is None:
            return False
        if self.purgatory is not None:
            self.purgatory.unsubscribe(self._keys(tp), self._notified)
        self.dirty.discard(tp)
        self._woken.discard(tp)
        return True

    def answered_records(self, tp: TP) -> None:
        """``tp`` returned records: it is read after the others next time, so a fetch
        limited by its max bytes does not serve the same partitions first every time
        (Kafka moves it to the end of the session's partitions)."""
        cached = self.partitions.get(tp)
        if cached is not None:
            cached.order = self._next_order()

    def close(self) -> None:
        for tp in list(self.partitions):
            self.forget(tp)
        self.unresolved.clear()

    def _next_order(self) -> int:
        self._order += 1
        return self._order

    def _keys(self, tp: TP) -> tuple[Hashable, ...]:
        return (tp, follower_key(*tp)) if self.privileged else (tp,)

    def _notified(self, key: Hashable) -> None:
        if len(key) == 3:  # type: ignore[arg-type]  # follower_key: new records
            tp: TP = key[1:]  # type: ignore[index]
            wakes = True
        else:
            tp = key  # type: ignore[assignment]  # (topic, index): the high watermark
            wakes = not self.privileged
        self.dirty.add(tp)
        if wakes:
            self._woken.add(tp)
            self._records.set()

    def take_dirty(self) -> list[TP]:
        """What a new fetch reads, in the session's order; from now on changes collect
        for the next."""
        dirty, self.dirty = self.dirty, set()
        self._woken.clear()
        self._records = trio.Event()
        return self.ordered(dirty)

    def ordered(self, tps: Iterable[TP]) -> list[TP]:
        partitions = self.partitions
        return sorted((tp for tp in tps if tp in partitions),
                      key=lambda tp: partitions[tp].order)

    async def wait_for_records(self, timeout_s: float) -> set[TP]:
        """Partitions woken (new records for a follower, a new high watermark for a
        consumer, or a new leadership) since the last look, waiting up to ``timeout_s``
        for one; they are read now, not at the next fetch."""
        if not self._woken:
            started = wait_started()
            with trio.move_on_after(timeout_s):
                await self._records.wait()
            wait_ended(started)  # the request's remote time (its metrics)
        woken, self._woken = self._woken, set()
        self._records = trio.Event()
        self.dirty -= woken
        return woken


class SessionError(Exception):
    """An incremental fetch whose session is unknown or out of step."""

    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


class FetchSessionCache:
    """At most ``slots`` sessions (``max.incremental.fetch.session.cache.slots``; 0 turns
    sessions off), evicted by Kafka's rules (the module's docstring)."""

    def __init__(self, slots: int, purgatory: Purgatory | None = None,
                 eviction_s: float = IDLE_EVICTION_S) -> None:
        self.slots = slots
        self.purgatory = purgatory
        self.eviction_s = eviction_s
        self.evictions = 0
        self._sessions: dict[int, FetchSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def create(self, replica: int, partitions: dict[TP, CachedPartition] | None = None,
               *, size: int | None = None, uses_topic_ids: bool = False,
               now: float | None = None) -> FetchSession | None:
        """A new session, or None when there is no room for one of ``size`` partitions
        (the fetch is then answered without a session, session id 0)."""
        partitions = partitions or {}
        now = time.monotonic() if now is None else now
        size = len(partitions) if size is None else size
        if len(self._sessions) >= self.slots and not self._evict_one(replica >= 0, size, now):
            return None
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = random.randint(1, INT32_MAX)
        session = FetchSession(session_id, replica, uses_topic_ids, purgatory=self.purgatory,
                               created=now, last_used=now)
        for tp, cached in partitions.items():
            session.put(tp, cached)
        self._sessions[session_id] = session
        return session

    def _evict_one(self, privileged: bool, size: int, now: float) -> bool:
        """Kafka's ``tryEvict``: the stalest session if it is stale, else the least
        valuable evictable one if the new session is worth at least as much."""
        if not self._sessions:
            return False
        stalest = min(self._sessions.values(), key=lambda s: (s.last_used, s.session_id))
        if now - stalest.last_used > self.eviction_s:
            self._evict(stalest)
            return True
        # As Kafka decides it when a session is used: old enough to be evicted by any
        # new session, or only by a follower's (a consumer's session, at any age).
        evictable = [s for s in self._sessions.values()
                     if s.last_used - s.created > self.eviction_s
                     or (privileged and not s.privileged)]
        if not evictable:
            return False
        cheapest = min(evictable, key=lambda s: (s.privileged, s.size, s.session_id))
        if (privileged, size) <= (cheapest.privileged, cheapest.size):
            return False  # not worth more than the least valuable session
        self._evict(cheapest)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.evictions += 1
        self.remove(session.session_id)

    def lookup(self, session_id: int, epoch: int, replica: int, uses_topic_ids: bool = False,
               now: float | None = None) -> FetchSession:
        """The session an incremental request continues, its epoch advanced.

        A session is found only by the kind of fetcher that made it: a consumer cannot
        continue (and so move the fetch state of) a follower's session."""
        session = self._sessions.get(session_id)
        if session is None or session.replica != replica:
            raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(INVALID_FETCH_SESSION_EPOCH)
        if uses_topic_ids != session.uses_topic_ids:
            raise SessionError(FETCH_SESSION_TOPIC_ID_ERROR)
        session.last_used = time.monotonic() if now is None else now
        session.next_epoch()
        return session

    def remove(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()
