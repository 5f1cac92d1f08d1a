"""A partition replica hosted by this broker: its log, leadership and ISR."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from josefk.log.log import AppendInfo, Log
from josefk.protocol.error_codes import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUIRED_ACKS,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
)


class PartitionError(Exception):
    """A request on a partition that Kafka answers with ``error_code``."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class PartitionView:
    """A partition's leadership as Metadata and DescribeTopicPartitions report it."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


class PartitionMap(dict[tuple[str, int], "Partition"]):
    """The partitions a broker hosts, by (topic, index); ``generation`` grows with every
    change, so cached answers built from them (Metadata) know when they are stale."""

    generation = 0

    def touch(self) -> None:
        """Stale every cached answer (also when a partition's view changes in place)."""
        self.generation += 1

    def __setitem__(self, key: tuple[str, int], value: Partition) -> None:
        self.touch()
        super().__setitem__(key, value)

    def put_same_view(self, key: tuple[str, int], value: Partition,
                      reported: PartitionView | None) -> None:
        """Add ``value`` without a new generation if it says exactly what was
        ``reported`` for ``key`` while it was not here."""
        if value.view() == reported:
            super().__setitem__(key, value)
        else:
            self[key] = value

    def __delitem__(self, key: tuple[str, int]) -> None:
        self.touch()
        super().__delitem__(key)

    def pop(self, *args: Any) -> Any:
        self.touch()
        return super().pop(*args)

    def popitem(self) -> tuple[tuple[str, int], Partition]:
        self.touch()
        return super().popitem()

    def clear(self) -> None:
        self.touch()
        super().clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.touch()
        super().update(*args, **kwargs)

    def setdefault(self, key: tuple[str, int], default: Any = None) -> Any:
        self.touch()
        return super().setdefault(key, default)


@dataclass
class FetchClock:
    """When a follower's fetch session last fetched (see `FollowerState.at_end_of`)."""

    ms: int = 0


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's ``Replica``): its log end offset
    and when it was last caught up to the leader's log end offset.

    A follower at our log end in a fetch session is not looked at again until the
    partition changes; meanwhile it is caught up at every fetch of its session, which
    ``at_end_of`` (the session's clock) stands for until `settle` records it.
    """

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1
    at_end_of: FetchClock | None = None

    def caught_up_ms(self) -> int:
        at_end = self.at_end_of
        return self.last_caught_up_ms if at_end is None else max(self.last_caught_up_ms,
                                                                  at_end.ms)

    def settle(self) -> None:
        """Record the session's last fetch as this follower's, and stop standing for it."""
        at_end = self.at_end_of
        if at_end is not None:
            self.last_caught_up_ms = max(self.last_caught_up_ms, at_end.ms)
            self.last_fetch_ms = max(self.last_fetch_ms, at_end.ms)
            self.at_end_of = None


@dataclass
class Partition:
    """One replica of ``topic``-``index`` on this broker.

    ``leader`` is the leading broker's id (-1 while the partition has none). The high
    watermark is the minimum log end offset over the ISR; with this broker alone in the
    ISR it follows every append. A single broker leads everything it hosts; in a
    cluster the controller's LeaderAndIsr makes a replica leader or follower.
    """

    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    node_id: int
    replicas: list[int]
    isr: list[int] = field(default_factory=list)
    leader_epoch: int = 0
    on_data: Callable[[Partition], None] = lambda _p: None
    # New records (or a leadership change): what followers' long polls wait for; a
    # high watermark move wakes only consumers and acks=all produces (on_data).
    on_append: Callable[[Partition], None] = lambda _p: None
    leader: int | None = None  # None: this broker (the single-broker default)
    partition_epoch: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # An ISR change sent to the controller and not answered yet (KIP-497).
    pending_isr: list[int] | None = None
    leader_epoch_start_offset: int = 0

    def __post_init__(self) -> None:
        if self.leader is None:
            self.leader = self.node_id
        if not self.isr and self.leader == self.node_id:
            self.isr = [self.node_id]
        if self.is_leader:
            self._start_leader_epoch()

    def _start_leader_epoch(self, now_ms: int = 0) -> None:
        # As Kafka's makeLeader: the new epoch starts at the log end offset, followers'
        # offsets are unknown until they fetch (ISR members count as caught up now),
        # and the high watermark is the minimum log end offset over the ISR.
        self.log.leader_epochs.assign(self.leader_epoch, self.log.log_end_offset)
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in self.isr else 0)
                          for r in self.replicas if r != self.node_id}
        self.pending_isr = None
        self.maybe_advance_high_watermark()

    @property
    def is_leader(self) -> bool:
        return bool(self.replicas) and self.leader_id == self.node_id

    @property
    def leader_id(self) -> int:
        return self.leader if self.leader is not None else -1

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def view(self) -> PartitionView:
        return PartitionView(self.leader_id, self.leader_epoch, tuple(self.replicas),
                             tuple(self.isr))

    def apply_leadership(self, leader: int, leader_epoch: int, isr: list[int],
                         replicas: list[int], partition_epoch: int, now_ms: int = 0) -> bool:
        """Become leader or follower as the controller says (LeaderAndIsr); True when
        this replica now follows a new leader or epoch (it must truncate and fetch)."""
        was_leader = self.is_leader
        new_epoch = leader_epoch != self.leader_epoch
        self.leader, self.leader_epoch = leader, leader_epoch
        self.isr, self.replicas = list(isr), list(replicas)
        self.partition_epoch = partition_epoch
        if self.is_leader:
            if new_epoch or not was_leader:
                self._start_leader_epoch(now_ms)
            else:
                for r in self.replicas:
                    if r != self.node_id:
                        self.followers.setdefault(r, FollowerState())
                self.pending_isr = None
                self.maybe_advance_high_watermark()
        self.on_data(self)
        self.on_append(self)
        return not self.is_leader and (new_epoch or was_leader)

    def stop(self) -> None:
        """No longer served here (StopReplica): neither leader nor follower, so nothing
        still in flight for it (an AlterPartition retry) goes on."""
        self.leader = None
        self.pending_isr = None

    # --- the leader's view of its followers -----------------------------------------

    def record_follower_fetch(self, replica: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched from ``fetch_offset``: it has everything below it. Caught
        up means it reached the leader's log end offset, now or as of its previous
        fetch (Kafka's ``Replica.updateFetchState``)."""
        state = self.followers.setdefault(replica, FollowerState())
        state.settle()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_leo >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_leo = leo
        state.last_fetch_ms = now_ms
        self.maybe_advance_high_watermark()

    def follower_stays_at_end(self, replica: int, clock: FetchClock) -> bool:
        """``replica`` has fetched up to our log end offset: let its session's ``clock``
        stand for its fetches until this partition changes. False if it has not."""
        state = self.followers.get(replica)
        if state is None or state.log_end_offset != self.log.log_end_offset:
            return False
        state.at_end_of = clock
        return True

    def settle_follower(self, replica: int) -> None:
        """The partition changed (or left the session): record the fetches its session's
        clock stood for."""
        state = self.followers.get(replica)
        if state is not None:
            state.settle()

    @property
    def maximal_isr(self) -> set[int]:
        """The ISR the high watermark must respect: the committed one plus any member a
        pending change adds (KIP-497)."""
        return set(self.isr) | set(self.pending_isr or ())

    def may_join_isr(self, replica: int) -> bool:
        """A follower out of the ISR that has caught up: at or past the high watermark and
        the start of this leader's epoch (Kafka's ``isFollowerInSync``). Asked only for the
        follower that just fetched: a dead one's last known offset must not bring it back."""
        state = self.followers.get(replica)
        return (state is not None and replica not in self.maximal_isr
                and replica in self.replicas
                and state.log_end_offset >= max(self.log.high_watermark,
                                                self.leader_epoch_start_offset))

    def replicas_out_of_sync(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers not caught up within ``replica.lag.time.max.ms``."""
        return [r for r in self.isr if r != self.node_id
                and now_ms - self.followers.get(r, FollowerState()).caught_up_ms()
                > max_lag_ms]

    # --- a follower's own log ---------------------------------------------------------

    def append_as_follower(self, records: bytes | bytearray, leader_high_watermark: int,
                           leader_log_start_offset: int = -1) -> None:
        """Append what the leader sent, then follow its high watermark (never past our
        own log end) and its log start offset (never past our high watermark), so that
        DeleteRecords and retention reach the followers (Kafka's
        ``maybeIncrementLogStartOffset`` on a fetch answer)."""
        if records:
            self.log.append_as_follower(records)
        self.log.high_watermark = max(0, min(leader_high_watermark, self.log.log_end_offset))
        start = min(leader_log_start_offset, self.log.high_watermark)
        if start > self.log.log_start_offset:
            self.log.delete_records(start)

    def check_leader_epoch(self, requested: int) -> None:
        """Fence a client with a newer or older view of the leader epoch (KIP-320)."""
        if requested < 0 or requested == self.leader_epoch:
            return
        if requested > self.leader_epoch:
            raise PartitionError(UNKNOWN_LEADER_EPOCH,
                                 f"leader epoch {requested} is newer than {self.leader_epoch}")
        raise PartitionError(FENCED_LEADER_EPOCH,
                             f"leader epoch {requested} is older than {self.leader_epoch}")

    def append_records(self, records: bytes | bytearray | memoryview, required_acks: int
                       ) -> AppendInfo:
        """Append a producer's records as leader; raises RecordBatchError or PartitionError."""
        if required_acks not in (-1, 0, 1):
            raise PartitionError(INVALID_REQUIRED_ACKS, f"acks={required_acks} is not 0, 1 or -1")
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise PartitionError(NOT_ENOUGH_REPLICAS,
                                 f"{len(self.isr)} in-sync replicas, min.insync.replicas="
                                 f"{min_isr}")
        info = self.log.append_as_leader(records, self.leader_epoch, one_batch=True)
        self.on_append(self)
        self.maybe_advance_high_watermark()
        return info

    def append_control_batch(self, producer_id: int, producer_epoch: int,
                             coordinator_epoch: int, commit: bool, required_acks: int = -1
                             ) -> AppendInfo:
        """Append a COMMIT or ABORT marker as leader (WriteTxnMarkers appends with acks=all).

        Raises PartitionError (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS) or a
        RecordBatchError: INVALID_PRODUCER_EPOCH (47), TRANSACTION_COORDINATOR_FENCED
        (52). Waiting is the caller's: the marker is replicated once the high watermark
        passes ``info.last_offset`` (the purgatory's produce wait, as for acks=all).
        """
        if not self.is_leader:
            raise PartitionError(NOT_LEADER_OR_FOLLOWER,
                                 f"{self.topic}-{self.index} is not led by {self.node_id}")
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise PartitionError(NOT_ENOUGH_REPLICAS,
                                 f"{len(self.isr)} in-sync replicas, min.insync.replicas="
                                 f"{min_isr}")
        info = self.log.append_control_batch(producer_id, producer_epoch, coordinator_epoch,
                                             commit, self.leader_epoch)
        self.on_append(self)
        self.maybe_advance_high_watermark()
        return info

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the smallest log end offset over the (maximal) ISR; True if it moved.
        It holds while the ISR is below ``min.insync.replicas`` (capped at the replica
        count), as Kafka's ``maybeIncrementLeaderHW`` (KIP-966): acks=1 records written
        then stay unreadable until enough replicas have them."""
        if not self.is_leader:
            return False
        if len(self.isr) < min(self.log.config.min_insync_replicas, len(self.replicas)):
            return False
        hw = self.log.log_end_offset
        for replica in self.maximal_isr:
            if replica != self.node_id:
                hw = min(hw, self.followers.get(replica, FollowerState()).log_end_offset)
        if hw > self.log.high_watermark:
            self.log.high_watermark = hw
            self.on_data(self)
            return True
        return False

    @property
    def last_stable_offset(self) -> int:
        """The read_committed limit: the high watermark, or the first offset of the oldest
        transaction still open (or decided with its marker above the high watermark)."""
        return self.log.last_stable_offset
