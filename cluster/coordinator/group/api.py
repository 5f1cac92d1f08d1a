"""The classic group coordinator's vocabulary: its error codes, the requests it is
asked, the results it answers with, and :class:`Reply`, a response that completes
later (JoinGroup and SyncGroup park until the rebalance moves on).

The state machine of one group is in :mod:`josefk.cluster.coordinator.group.state`, the
coordinator's groups and offsets in :mod:`josefk.cluster.coordinator.group.groups`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Generic, TypeVar

from josefk.cluster.coordinator.group.records import OffsetCommitValue, Record

T = TypeVar("T")
Clock = Callable[[], int]

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's group.coordinator new-member join timeout


class Error(IntEnum):
    """The Kafka error codes the group coordinator answers with."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_REQUEST = 42
    KAFKA_STORAGE_ERROR = 56
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    UNSTABLE_OFFSET_COMMIT = 88
    UNSUPPORTED_VERSION = 35
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128


def append_error_to_response_error(code: int) -> Error:
    """What a client is told when writing to ``__consumer_offsets`` failed (Kafka's mapping)."""
    if code in (Error.UNKNOWN_TOPIC_OR_PARTITION, Error.NOT_ENOUGH_REPLICAS,
                Error.REQUEST_TIMED_OUT):
        return Error.COORDINATOR_NOT_AVAILABLE
    if code in (Error.NOT_LEADER_OR_FOLLOWER, Error.KAFKA_STORAGE_ERROR):
        return Error.NOT_COORDINATOR
    if code in (Error.MESSAGE_TOO_LARGE, Error.RECORD_LIST_TOO_LARGE, Error.INVALID_FETCH_SIZE):
        return Error.UNKNOWN_SERVER_ERROR
    try:
        return Error(code)
    except ValueError:
        return Error.UNKNOWN_SERVER_ERROR


class GroupError(Exception):
    """A request refused with ``code``."""

    def __init__(self, code: Error) -> None:
        super().__init__(code.name)
        self.code = code


# --- replies ---------------------------------------------------------------------------------


class Reply(Generic[T]):
    """A response that may come later: set once, then its callbacks run."""

    __slots__ = ("_callbacks", "value")

    def __init__(self, value: T | None = None) -> None:
        self.value = value
        self._callbacks: list[Callable[[T], None]] = []

    @property
    def done(self) -> bool:
        return self.value is not None

    def set(self, value: T) -> bool:
        """Complete the reply; False (and nothing happens) if it already was."""
        if self.value is not None:
            return False
        self.value = value
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(value)
        return True

    def on_done(self, callback: Callable[[T], None]) -> None:
        if self.value is not None:
            callback(self.value)
        else:
            self._callbacks.append(callback)


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: Error
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: Error
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Result(Generic[T]):
    """Records to write, then the response (or a Reply to wait on).

    ``on_success`` runs after the records were written and replayed;
    ``on_failure`` gets the error to report when writing failed and may return
    records of its own (best effort).
    """

    records: list[Record]
    response: T
    on_success: Callable[[], None] | None = None
    on_failure: Callable[[Error], list[Record]] | None = None


# --- requests --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    api_version: int = 9


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as the coordinator holds it, with the log offset of its record
    (Kafka's ``recordOffset``: of a regular and a transactional commit, the later
    record wins; -1 where unknown)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    record_offset: int = -1

    @classmethod
    def from_value(cls, value: OffsetCommitValue, record_offset: int = -1
                   ) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                   value.expire_timestamp, record_offset)


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: Error = Error.NONE


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker settings the coordinator follows (Kafka's names in the comments)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    max_size: int = (1 << 31) - 1  # group.max.size
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
