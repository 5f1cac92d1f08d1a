"""A partition replica hosted by this broker: its log, leadership and ISR."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from josefk.log.log import AppendInfo, Log
from josefk.protocol.error_codes import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUIRED_ACKS,
    NOT_ENOUGH_REPLICAS,
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
    leader: int | None = None  # None: this broker (the single-broker default)
    partition_epoch: int = 0

    def __post_init__(self) -> None:
        if self.leader is None:
            self.leader = self.node_id
        if not self.isr and self.leader == self.node_id:
            self.isr = [self.node_id]
        if self.is_leader:
            self._start_leader_epoch()

    def _start_leader_epoch(self) -> None:
        # As Kafka's makeLeader: the new epoch starts at the log end offset, and the
        # high watermark is the minimum log end offset over the ISR.
        self.log.leader_epochs.assign(self.leader_epoch, self.log.log_end_offset)
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
                         replicas: list[int], partition_epoch: int) -> None:
        """Become leader or follower as the controller says (LeaderAndIsr)."""
        was_leader = self.is_leader
        new_epoch = leader_epoch != self.leader_epoch
        self.leader, self.leader_epoch = leader, leader_epoch
        self.isr, self.replicas = list(isr), list(replicas)
        self.partition_epoch = partition_epoch
        if self.is_leader and (new_epoch or not was_leader):
            self._start_leader_epoch()
        self.on_data(self)

    def check_leader_epoch(self, requested: int) -> None:
        """Fence a client with a newer or older view of the leader epoch (KIP-320)."""
        if requested < 0 or requested == self.leader_epoch:
            return
        if requested > self.leader_epoch:
            raise PartitionError(UNKNOWN_LEADER_EPOCH,
                                 f"leader epoch {requested} is newer than {self.leader_epoch}")
        raise PartitionError(FENCED_LEADER_EPOCH,
                             f"leader epoch {requested} is older than {self.leader_epoch}")

    def append_records(self, records: bytes | bytearray, required_acks: int) -> AppendInfo:
        """Append a producer's records as leader; raises RecordBatchError or PartitionError."""
        if required_acks not in (-1, 0, 1):
            raise PartitionError(INVALID_REQUIRED_ACKS, f"acks={required_acks} is not 0, 1 or -1")
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise PartitionError(NOT_ENOUGH_REPLICAS,
                                 f"{len(self.isr)} in-sync replicas, min.insync.replicas="
                                 f"{min_isr}")
        info = self.log.append_as_leader(records, self.leader_epoch, one_batch=True)
        self.maybe_advance_high_watermark()
        return info

    def maybe_advance_high_watermark(self) -> None:
        if self.isr == [self.node_id] and self.log.high_watermark < self.log.log_end_offset:
            self.log.high_watermark = self.log.log_end_offset
            self.on_data(self)

    @property
    def last_stable_offset(self) -> int:
        """The read_committed limit; without open transactions, the high watermark."""
        return self.log.high_watermark
