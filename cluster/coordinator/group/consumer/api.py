"""The consumer group coordinator's vocabulary: its settings, the heartbeat it is asked
and what it answers, the group descriptions it gives."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from josefk.cluster.coordinator.group.api import Error, GroupError
from josefk.cluster.coordinator.group.consumer.assignors import ASSIGNORS, Assignor
from josefk.cluster.coordinator.group.consumer.records import Assignment, ClassicMetadata
from josefk.cluster.metadata.store import Topic


class TopicImage(Protocol):
    """The topics of the cluster, as the metadata store knows them."""

    def get(self, name: str) -> Topic | None: ...

    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None: ...

    def topics(self) -> list[Topic]: ...


class NoTopics:
    """A `TopicImage` of a cluster without topics."""

    def get(self, name: str) -> Topic | None:
        return None

    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return None

    def topics(self) -> list[Topic]:
        return []


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """The ``group.consumer.*`` settings (Kafka's defaults)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = (1 << 31) - 1
    assignment_interval_ms: int = 1000
    assignors: Mapping[str, Assignor] = field(default_factory=lambda: dict(ASSIGNORS))
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    classic_max_size: int = (1 << 31) - 1  # group.max.size
    regex_refresh_interval_ms: int = 600_000  # group.consumer.regex.refresh.interval.ms

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy.lower() in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy.lower() in ("downgrade", "bidirectional")

    @property
    def default_assignor(self) -> Assignor:
        return next(iter(self.assignors.values()))


class Refused(GroupError):
    """A request refused with an error code and Kafka's message for it."""

    def __init__(self, code: Error, message: str | None = None) -> None:
        super().__init__(code)
        self.message = message


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat's fields (None: unchanged since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    classic: ClassicMetadata | None = None  # a JoinGroup of a classic member


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: Error = Error.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    # (topic id, topic name, partitions)
    assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
    target_assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
    classic: bool = False  # it speaks the classic protocol


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedConsumerMember, ...]
