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
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from josefk.protocol.error_codes import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH

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


@dataclass
class FetchSession:
    """One fetcher's session: its partitions in the order they were added."""

    session_id: int
    replica: int
    epoch: int = 1  # the epoch the next incremental request must carry
    partitions: dict[TP, CachedPartition] = field(default_factory=dict)

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch == INT32_MAX else self.epoch + 1


class SessionError(Exception):
    """An incremental fetch whose session is unknown or out of step."""

    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


class FetchSessionCache:
    """At most ``slots`` sessions (``max.incremental.fetch.session.cache.slots``); the
    least recently used one goes when a new one needs room."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, replica: int, partitions: dict[TP, CachedPartition]
               ) -> FetchSession | None:
        """A new session, or None when sessions are disabled (0 slots)."""
        if self.slots <= 0:
            return None
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = random.randint(1, INT32_MAX)
        session = FetchSession(session_id, replica, partitions=partitions)
        self._sessions[session_id] = session
        return session

    def lookup(self, session_id: int, epoch: int, replica: int) -> FetchSession:
        """The session an incremental request continues, its epoch advanced."""
        session = self._sessions.get(session_id)
        if session is None or session.replica != replica:
            raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(INVALID_FETCH_SESSION_EPOCH)
        self._sessions.move_to_end(session_id)
        session.next_epoch()
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)
