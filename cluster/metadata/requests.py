"""What the controller tells brokers, in the controller's terms.

LeaderAndIsr, UpdateMetadata and StopReplica as plain values: the controller builds
them, the broker applies them, and ``josefk.server.control.wire`` converts them to
and from Kafka's wire messages (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4 for
Kafka 3.9 peers). ``ControllerChannel`` is how the controller reaches brokers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from josefk.cluster.zk.znodes import BrokerRegistration

LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete
EPOCH_DURING_DELETE = -2


@dataclass(frozen=True)
class PartitionInfo:
    """One partition's leadership as LeaderAndIsr and UpdateMetadata carry it."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int  # the state znode's version
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    offline: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class LeaderAndIsr:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[PartitionInfo, ...]
    topic_ids: dict[str, uuid.UUID]
    live_leaders: tuple[BrokerRegistration, ...]
    full: bool = False


@dataclass(frozen=True)
class UpdateMetadata:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[PartitionInfo, ...]
    topic_ids: dict[str, uuid.UUID]
    live_brokers: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int
    delete: bool


@dataclass(frozen=True)
class StopReplica:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[StopReplicaPartition, ...]
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)


ControllerRequest = LeaderAndIsr | UpdateMetadata | StopReplica


@dataclass(frozen=True)
class ControllerResponse:
    """A broker's answer: a top-level error and per-partition errors."""

    error_code: int
    partition_errors: dict[tuple[str, int], int] = field(default_factory=dict)


class ControllerChannel(Protocol):
    """The controller's connections to the brokers (Kafka's ControllerChannelManager):
    one queue per broker, sent in order, retried while the broker is registered."""

    async def run(self, *, task_status: Any = ...) -> None:
        """Serve the connections until cancelled (as long as the controller acts)."""

    def add_broker(self, broker: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def send(self, broker_id: int, request: ControllerRequest,
             on_response: Callable[[ControllerResponse], None] | None = None) -> None:
        """Queue ``request``; ``on_response`` runs on the trio thread when it is answered
        (never, if the broker goes away first)."""
