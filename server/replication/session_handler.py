"""The follower's side of an incremental fetch session (KIP-227) with one leader.

The leader keeps each partition's fetch state; a request carries only the partitions
whose state changed since the leader last heard of them, and the partitions to forget.
Any error about the session itself starts a new one with a full request.
"""

from __future__ import annotations

from typing import NamedTuple

from josefk.protocol.error_codes import NONE
from josefk.server.replication.sessions import INITIAL_EPOCH, INT32_MAX, TP


class FetchState(NamedTuple):
    """What a fetch request says about one partition."""

    fetch_offset: int
    leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int


class FetchSessionHandler:
    """Builds session-aware fetch requests and follows the leader's answers.

    The fetcher says what it wants as it changes (`want`, `drop`), so building a
    request costs time in proportion to the changes, not to the partitions followed.
    """

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.wanted: dict[TP, FetchState] = {}
        self.partitions: dict[TP, FetchState] = {}  # as the leader's session holds them
        self.in_flight: dict[TP, FetchState] = {}  # what the request in flight fetches
        self._changed: set[TP] = set()

    def want(self, tp: TP, state: FetchState) -> None:
        if self.wanted.get(tp) != state:
            self.wanted[tp] = state
            self._changed.add(tp)

    def drop(self, tp: TP) -> None:
        if self.wanted.pop(tp, None) is not None:
            self._changed.add(tp)

    def build(self) -> tuple[dict[TP, FetchState], list[TP]]:
        """The partitions to send and those to forget, for fetching what is wanted."""
        self.in_flight = dict(self.wanted)
        changed, self._changed = self._changed, set()
        if self.epoch == INITIAL_EPOCH:
            return dict(self.wanted), []
        send = {tp: self.wanted[tp] for tp in changed
                if tp in self.wanted and self.partitions.get(tp) != self.wanted[tp]}
        forget = [tp for tp in changed if tp not in self.wanted and tp in self.partitions]
        return send, forget

    def on_response(self, error_code: int, session_id: int) -> bool:
        """Follow the answer's session fields; False (and a full fetch next) if the
        session is gone or out of step."""
        if error_code != NONE:
            self.reset()
            return False
        if self.epoch == INITIAL_EPOCH:
            self.session_id = session_id
            # A leader without a slot answers session 0: ask for one again next time.
            self.epoch = 1 if session_id else INITIAL_EPOCH
        else:
            self.epoch = 1 if self.epoch == INT32_MAX else self.epoch + 1
        self.partitions = self.in_flight
        return True

    def reset(self) -> None:
        """Forget the session: the next request is a full one."""
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
