"""The classic consumer-group protocol as a state machine, without I/O.

One :class:`Group` per group id, in one of five states; the legal moves are the
table :data:`TRANSITIONS` (event → next state, per state), in the manner of
h11's ``_state.py``: every change of state goes through :meth:`Group.transition`,
which refuses anything the table does not list.

:class:`Groups` holds the groups and the committed offsets and answers the
requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, ...) the
way Apache Kafka's classic group coordinator does (``GroupMetadataManager`` and
``OffsetMetadataManager`` of its ``group-coordinator`` module). A request
returns a :class:`Result`: the ``__consumer_offsets`` records to write and the
response, or a :class:`Reply` that completes later (JoinGroup and SyncGroup
park until the rebalance moves on).

Durable state changes only through :meth:`Groups.replay`, the same function that
loads a partition at start-up: offsets and tombstones take effect when their
record is replayed, and the leader's assignment when its GroupMetadata record
is (CompletingRebalance → Stable). Membership during a rebalance is transient,
as in Kafka: it lives in memory and its GroupMetadata records, replayed on a
group already past them, change nothing.

Time is an int of milliseconds from ``clock``; deadlines (session, rebalance,
sync and initial-delay timers) are fields of the groups, and
:meth:`Groups.next_deadline` / :meth:`Groups.on_timer` let a caller sleep until
the earliest and fire what is due.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Generic, TypeVar

from josefk.cluster.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

T = TypeVar("T")
Clock = Callable[[], int]
logger = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
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


# --- states and the transition table --------------------------------------------------------


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Event(Enum):
    REBALANCE = "a member joined, changed, left or failed"
    JOIN_COMPLETE = "the join phase ended with members: next generation"
    JOIN_COMPLETE_EMPTY = "the join phase ended with no members: next generation"
    ASSIGNMENT_STORED = "the leader's assignment was written"
    DELETE = "the group was deleted"


_S, _E = GroupState, Event
TRANSITIONS: dict[GroupState, dict[Event, GroupState]] = {
    _S.EMPTY: {
        _E.REBALANCE: _S.PREPARING_REBALANCE,
        _E.DELETE: _S.DEAD,
    },
    _S.PREPARING_REBALANCE: {
        _E.JOIN_COMPLETE: _S.COMPLETING_REBALANCE,
        _E.JOIN_COMPLETE_EMPTY: _S.EMPTY,
        _E.DELETE: _S.DEAD,
    },
    _S.COMPLETING_REBALANCE: {
        _E.REBALANCE: _S.PREPARING_REBALANCE,
        _E.ASSIGNMENT_STORED: _S.STABLE,
        _E.DELETE: _S.DEAD,
    },
    _S.STABLE: {
        _E.REBALANCE: _S.PREPARING_REBALANCE,
        _E.DELETE: _S.DEAD,
    },
    _S.DEAD: {
        _E.DELETE: _S.DEAD,
    },
}
"""Event → next state, per state. A group loaded from its record starts Stable
(members) or Empty (none); a new group starts Empty."""


class IllegalTransition(RuntimeError):
    """An event the transition table does not allow in the group's state."""


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
    """A committed offset as the coordinator holds it."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1

    @classmethod
    def from_value(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                   value.expire_timestamp)


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


# --- members ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_reply: Reply[JoinResult] | None = None
    sync_reply: Reply[SyncResult] | None = None
    is_new: bool = False
    heartbeat_deadline: int | None = None

    @property
    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """Members waiting for a rebalance to move on need no heartbeat; new ones do."""
        if self.is_new:
            return False
        return self.join_reply is not None or self.sync_reply is not None


def subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (its v0 prefix, as Kafka reads it)."""
    pos = 2  # version
    (count,) = struct.unpack_from(">i", metadata, pos)
    pos += 4
    if count < 0 or count > len(metadata):
        raise ValueError("bad topic count")
    topics = set()
    for _ in range(count):
        (n,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        if n < 0 or pos + n > len(metadata):
            raise ValueError("bad topic name")
        topics.add(metadata[pos:pos + n].decode())
        pos += n
    return topics


# --- one group ---------------------------------------------------------------------------------


class Group:
    """One classic group: its state, generation, members and timers."""

    def __init__(self, group_id: str, clock: Clock, state: GroupState = GroupState.EMPTY
                 ) -> None:
        self.group_id = group_id
        self.clock = clock
        self.state = state
        self.previous_state = GroupState.DEAD
        self.state_timestamp: int | None = clock()
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, int] = {}  # member id -> join deadline (KIP-394)
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        # Timers: the join phase (with the initial delay's (delay, remaining) while the
        # group is new) and the sync phase (for the generation it was set in).
        self.join_deadline: int | None = None
        self.initial_join: tuple[int, int] | None = None
        self.sync_deadline: int | None = None
        self.sync_generation = -1

    def __repr__(self) -> str:
        return (f"<Group {self.group_id} {self.state.value} generation {self.generation} "
                f"members {list(self.members)}>")

    # --- the state machine ---------------------------------------------------------------

    def transition(self, event: Event) -> None:
        try:
            new = TRANSITIONS[self.state][event]
        except KeyError:
            raise IllegalTransition(f"group {self.group_id}: {event.name} is not allowed in "
                                    f"{self.state.value}") from None
        self.previous_state, self.state = self.state, new
        self.state_timestamp = self.clock()
        logger.info("group %s: %s -> %s (generation %d, %d members)", self.group_id,
                    self.previous_state.value, new.value, self.generation, len(self.members))

    def can_rebalance(self) -> bool:
        return Event.REBALANCE in TRANSITIONS[self.state]

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    # --- members -------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add_member(self, member: Member, reply: Reply[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already in "
                                 f"group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError("the group and member protocol types differ")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_reply = reply
        self.pending_members.pop(member.member_id, None)

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
            # A request parked for a member that is gone is answered, never left hanging.
            if member.join_reply is not None:
                member.join_reply.set(JoinResult(Error.UNKNOWN_MEMBER_ID))
                member.join_reply = None
            if member.sync_reply is not None:
                member.sync_reply.set(SyncResult(Error.UNKNOWN_MEMBER_ID))
                member.sync_reply = None
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> Member:
        """The member, or GroupError UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID (KIP-345)."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise GroupError(Error.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise GroupError(Error.FENCED_INSTANCE_ID)
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(Error.UNKNOWN_MEMBER_ID)
        return member

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_reply is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.join_reply is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].join_reply is not None:
            return True
        for member in self.members.values():
            if member.join_reply is not None:
                self.leader_id = member.member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id; requests of the old one are fenced."""
        old = self.members.pop(old_id)
        if old.join_reply is not None:
            old.join_reply.set(JoinResult(Error.FENCED_INSTANCE_ID, old_id))
        if old.sync_reply is not None:
            old.sync_reply.set(SyncResult(Error.FENCED_INSTANCE_ID))
        new = Member(new_id, old.group_instance_id, old.client_id, old.client_host,
                     old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                     old.protocols, old.assignment)
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        self.pending_sync.discard(old_id)
        return new

    def update_member(self, member: Member, protocols: tuple[tuple[str, bytes], ...],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      reply: Reply[JoinResult] | None) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if reply is not None and member.join_reply is not None:
            # A JoinGroup sent again (another connection): the older one rejoins too.
            member.join_reply.set(JoinResult(Error.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_reply = reply

    # --- protocols -----------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        sets = [m.protocol_names for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its preferred common protocol; the most votes wins."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=lambda name: votes[name])

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscription_topics(member.metadata(self.protocol_name))
        except (ValueError, KeyError, struct.error, UnicodeDecodeError):
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol
        return topic in self.subscribed_topics

    def init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(Event.JOIN_COMPLETE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(Event.JOIN_COMPLETE_EMPTY)
        self.pending_sync.clear()

    # --- replies -------------------------------------------------------------------------

    def joined_members(self) -> tuple[JoinedMember, ...]:
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def join_result(self, member: Member, *, skip_assignment: bool = False,
                    leader: str | None = None, with_members: bool | None = None) -> JoinResult:
        if with_members is None:
            with_members = self.is_leader(member.member_id)
        return JoinResult(
            Error.NONE, member.member_id, self.generation, self.protocol_type, self.protocol_name,
            (self.leader_id if leader is None else leader) or "", skip_assignment,
            self.joined_members() if with_members else ())

    def complete_join(self, member: Member, result: JoinResult) -> bool:
        if member.join_reply is None:
            return False
        reply, member.join_reply = member.join_reply, None
        reply.set(result)
        return True

    def complete_sync(self, member: Member, result: SyncResult) -> bool:
        if member.sync_reply is None:
            return False
        reply, member.sync_reply = member.sync_reply, None
        reply.set(result)
        return True

    def is_busy(self) -> bool:
        """Whether a rebalance is under way or requests are parked (live state ahead of records)."""
        return (self.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
                or bool(self.pending_members)
                or any(m.join_reply or m.sync_reply for m in self.members.values()))

    # --- records -------------------------------------------------------------------------

    def metadata_value(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadataValue Kafka writes for this group and ``assignment``."""
        members = tuple(MemberMetadata(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(self.protocol_name),
            assignment[m.member_id]) for m in self.members.values())
        return GroupMetadataValue(self.protocol_type or "", self.generation, self.protocol_name,
                                  self.leader_id, self.state_timestamp or -1, members)

    @classmethod
    def from_value(cls, group_id: str, value: GroupMetadataValue, clock: Clock) -> Group:
        """A group as its latest GroupMetadata record describes it (Stable or Empty)."""
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        group = cls(group_id, clock, state)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp = (value.current_state_timestamp
                                 if value.current_state_timestamp >= 0 else None)
        now = clock()
        for m in value.members:
            rebalance_timeout = m.session_timeout if m.rebalance_timeout == -1 else \
                m.rebalance_timeout
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            rebalance_timeout, m.session_timeout, value.protocol_type,
                            ((value.protocol or "", m.subscription),), m.assignment,
                            heartbeat_deadline=now + m.session_timeout)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    # --- timers --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (self.join_deadline, self.sync_deadline) if d is not None]
        deadlines += self.pending_members.values()
        deadlines += [m.heartbeat_deadline for m in self.members.values()
                      if m.heartbeat_deadline is not None]
        return min(deadlines, default=None)

    def reschedule_heartbeat(self, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_deadline = self.clock() + timeout

    # --- offsets rules ------------------------------------------------------------------

    def offset_expiry_base(self) -> Callable[[OffsetAndMetadata], int] | None:
        """From when an offset's retention counts, or None when offsets cannot expire now."""
        if self.protocol_type is None:
            return lambda o: o.commit_timestamp  # a "simple" group: offsets only
        if self.state is GroupState.EMPTY:
            since = self.state_timestamp
            return lambda o: since if since is not None else o.commit_timestamp
        if (self.uses_consumer_protocol and self.subscribed_topics is not None
                and self.state is GroupState.STABLE):
            return lambda o: o.commit_timestamp
        return None

    def describe(self) -> GroupDescription:
        stable = self.state is GroupState.STABLE
        members = tuple(DescribedMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata(self.protocol_name) if stable else b"", m.assignment)
            for m in self.members.values())
        return GroupDescription(self.group_id, self.state.value, self.protocol_type or "",
                                (self.protocol_name or "") if stable else "", members)


# --- all groups of a coordinator --------------------------------------------------------------


Offsets = dict[tuple[str, int], OffsetAndMetadata]


class Groups:
    """The groups and committed offsets of the partitions a coordinator leads."""

    def __init__(self, config: GroupConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, Offsets] = {}

    def get(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def __iter__(self) -> Iterator[Group]:
        return iter(list(self.groups.values()))

    def _create(self, group_id: str) -> Group:
        group = self.groups[group_id] = Group(group_id, self.clock)
        return group

    # --- replay: the only way records change durable state ------------------------------

    def replay(self, record: Record) -> None:
        """Apply one ``__consumer_offsets`` record (load, or after writing it)."""
        key, value = record
        if isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self._replay_offset(key, value)
        else:
            assert value is None or isinstance(value, GroupMetadataValue)
            self._replay_group(key.group, value)

    def _replay_offset(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            offsets = self.offsets.get(key.group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self.offsets[key.group]
            return
        if key.group not in self.groups:
            self._create(key.group)  # a "simple" group: committed offsets, no members
        self.offsets.setdefault(key.group, {})[tp] = OffsetAndMetadata.from_value(value)

    def _replay_group(self, group_id: str, value: GroupMetadataValue | None) -> None:
        group = self.groups.get(group_id)
        if value is None:
            if group is not None:
                for member in list(group.members.values()):
                    group.remove_member(member.member_id)
                group.transition(Event.DELETE)
                del self.groups[group_id]
            return
        if group is not None:
            if group.is_in(GroupState.COMPLETING_REBALANCE) and \
                    value.generation == group.generation:
                self._store_assignment(group, {m.member_id: m.assignment for m in value.members})
                return
            if group.is_busy() or value.generation < group.generation:
                return  # written by this live group, which is already past it
        self.groups[group_id] = Group.from_value(group_id, value, self.clock)

    def _store_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, Error.NONE)
        group.transition(Event.ASSIGNMENT_STORED)

    # --- JoinGroup ---------------------------------------------------------------------

    def join(self, req: JoinRequest) -> Result[Reply[JoinResult]]:
        reply: Reply[JoinResult] = Reply()
        group = self.groups.get(req.group_id)
        unknown = req.member_id == ""
        new_group = group is None
        if group is None:
            if not unknown:
                reply.set(JoinResult(Error.UNKNOWN_MEMBER_ID, req.member_id))
                return Result([], reply)
            group = self._create(req.group_id)
        if not self._accept_joining_member(group, req.member_id):
            group.remove_member(req.member_id)
            reply.set(JoinResult(Error.GROUP_MAX_SIZE_REACHED))
            return Result([], reply)
        if unknown:
            result = self._join_new_member(group, req, reply)
        else:
            result = self._join_existing_member(group, req, reply)
        if new_group and not result.records:
            # Kafka writes a new group's (empty) metadata at once.
            result.records = [(GroupMetadataKey(group.group_id), GroupMetadataValue(
                "", 0, None, None, group.state_timestamp or -1, ()))]
            result.on_failure = lambda error: _fail_join(reply, error)
        return result

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.join_reply is not None) or \
                group.num_awaiting_join() < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, group: Group, req: JoinRequest, reply: Reply[JoinResult]
                         ) -> Result[Reply[JoinResult]]:
        if group.is_in(GroupState.DEAD):
            reply.set(JoinResult(Error.COORDINATOR_NOT_AVAILABLE))
            return Result([], reply)
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            reply.set(JoinResult(Error.INCONSISTENT_GROUP_PROTOCOL))
            return Result([], reply)
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                return self._update_static_member(group, req, existing, new_id, reply)
            return Result(self._add_member_and_rebalance(group, req, new_id, reply), reply)
        if req.api_version >= 4:
            # KIP-394: the member learns its id first and joins again with it.
            group.pending_members[new_id] = self.clock() + req.session_timeout_ms
            reply.set(JoinResult(Error.MEMBER_ID_REQUIRED, new_id))
            return Result([], reply)
        return Result(self._add_member_and_rebalance(group, req, new_id, reply), reply)

    def _join_existing_member(self, group: Group, req: JoinRequest, reply: Reply[JoinResult]
                              ) -> Result[Reply[JoinResult]]:
        mid = req.member_id
        if group.is_in(GroupState.DEAD):
            reply.set(JoinResult(Error.COORDINATOR_NOT_AVAILABLE, mid))
            return Result([], reply)
        if not group.supports_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            reply.set(JoinResult(Error.INCONSISTENT_GROUP_PROTOCOL, mid))
            return Result([], reply)
        if mid in group.pending_members:
            return Result(self._add_member_and_rebalance(group, req, mid, reply), reply)
        try:
            member = group.validate_member(mid, req.group_instance_id)
        except GroupError as e:
            reply.set(JoinResult(e.code, mid))
            return Result([], reply)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return Result(self._update_member_and_rebalance(group, member, req, reply), reply)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.protocols == req.protocols:
                # It missed the JoinGroup response: the same answer again.
                reply.set(group.join_result(member))
                return Result([], reply)
            return Result(self._update_member_and_rebalance(group, member, req, reply), reply)
        if group.is_in(GroupState.STABLE):
            if group.is_leader(mid) or member.protocols != req.protocols:
                # The leader rejoins to rebalance (e.g. new partitions); others on change.
                return Result(self._update_member_and_rebalance(group, member, req, reply),
                              reply)
            reply.set(group.join_result(member, with_members=False))
            return Result([], reply)
        reply.set(JoinResult(Error.UNKNOWN_MEMBER_ID, mid))
        return Result([], reply)

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str,
                                  reply: Reply[JoinResult]) -> list[Record]:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        req.protocols, is_new=True)
        if group.is_in(GroupState.PREPARING_REBALANCE) and \
                group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add_member(member, reply)
        # A parked JoinGroup cannot heartbeat: new members get a join timeout instead.
        group.reschedule_heartbeat(member, self.config.new_member_join_timeout_ms)
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest,
                                     reply: Reply[JoinResult]) -> list[Record]:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, reply)
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(self, group: Group, req: JoinRequest, old_id: str, new_id: str,
                              reply: Reply[JoinResult]) -> Result[Reply[JoinResult]]:
        """KIP-345: a static member back with a new member id takes its old place."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        old_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        group.reschedule_heartbeat(member)
        old_settings = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, reply)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name != group.select_protocol():
                return Result(self._maybe_prepare_rebalance_or_complete_join(group), reply)
            # Same protocol: no rebalance, the new id is written and the member rejoins
            # the current generation.
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            records: list[Record] = [(GroupMetadataKey(group.group_id),
                                      group.metadata_value(assignment))]

            def success() -> None:
                if req.api_version >= 9:
                    leader = group.is_leader(new_id)
                    result = group.join_result(member, skip_assignment=leader)
                else:
                    result = group.join_result(member, leader=old_leader, with_members=False)
                group.complete_join(member, result)

            def failure(error: Error) -> list[Record]:
                group.update_member(member, *old_settings, None)
                restored = group.replace_static_member(instance_id, new_id, old_id)
                group.reschedule_heartbeat(restored)
                reply.set(JoinResult(error, "", group.generation, group.protocol_type,
                                     group.protocol_name, old_leader or ""))
                return []

            return Result(records, reply, success, failure)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may already hold the old id: rebalance so the new one gets assigned.
            return Result(self._prepare_rebalance(group), reply)
        return Result(self._maybe_complete_join_phase(group), reply)

    # --- the rebalance --------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group) -> list[Record]:
        if group.can_rebalance():
            return self._prepare_rebalance(group)
        return self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: Group) -> list[Record]:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, Error.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        group.sync_deadline = None
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            # A new group: give more members time to join (group.initial.rebalance.delay.ms).
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline = self.clock() + delay
            group.initial_join = (delay, remaining)
        group.transition(Event.REBALANCE)
        return [] if initial else self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: Group) -> list[Record]:
        if group.has_all_members_joined():
            return self._complete_join(group)
        group.join_deadline = self.clock() + group.rebalance_timeout_ms()
        group.initial_join = None
        return []

    def _maybe_complete_join_phase(self, group: Group) -> list[Record]:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return []
        if group.previous_state is GroupState.EMPTY:
            return []  # the initial rebalance ends only when its delay runs out
        if not group.has_all_members_joined():
            return []
        return self._complete_join(group)

    def _complete_join(self, group: Group) -> list[Record]:
        group.join_deadline = None
        group.initial_join = None
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                group.remove_member(member.member_id)
        if group.is_in(GroupState.DEAD):
            return []
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            group.join_deadline = self.clock() + group.rebalance_timeout_ms()
            return []
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            return [(GroupMetadataKey(group.group_id), group.metadata_value({}))]
        for member in group.members.values():
            group.complete_join(member, group.join_result(member))
            group.reschedule_heartbeat(member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline = self.clock() + group.rebalance_timeout_ms()
        group.sync_generation = group.generation
        return []

    def _reset_and_propagate_assignment_error(self, group: Group, error: Error) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: Error) -> None:
        ok = error is Error.NONE
        for member in group.members.values():
            result = SyncResult(error, group.protocol_type if ok else None,
                                group.protocol_name if ok else None, member.assignment)
            if group.complete_sync(member, result):
                group.reschedule_heartbeat(member)

    def _remove_member_and_update(self, group: Group, member: Member) -> list[Record]:
        group.complete_join(member, JoinResult(Error.UNKNOWN_MEMBER_ID))
        group.remove_member(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self._maybe_prepare_rebalance_or_complete_join(group)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            return self._complete_join(group)
        return []

    # --- timers ----------------------------------------------------------------------------

    def next_deadline(self, group_id: str) -> int | None:
        group = self.groups.get(group_id)
        return None if group is None else group.next_deadline()

    def on_timer(self, group_id: str) -> list[Record]:
        """Fire the group's due timers once each; returns the records to write."""
        group = self.groups.get(group_id)
        if group is None:
            return []
        now = self.clock()
        records: list[Record] = []
        if group.join_deadline is not None and group.join_deadline <= now:
            records += self._join_timer(group)
        if group.sync_deadline is not None and group.sync_deadline <= now:
            group.sync_deadline = None
            records += self._expire_pending_sync(group, group.sync_generation)
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now and member_id in group.pending_members:
                group.remove_member(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                    records += self._complete_join(group)
        for member in list(group.members.values()):
            deadline = member.heartbeat_deadline
            if deadline is None or deadline > now or member.member_id not in group.members:
                continue
            member.heartbeat_deadline = None
            if not member.has_satisfied_heartbeat:
                records += self._remove_member_and_update(group, member)
        return records

    def _join_timer(self, group: Group) -> list[Record]:
        if group.initial_join is None:
            return self._complete_join(group)
        delay, remaining = group.initial_join
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.join_deadline = self.clock() + new_delay
            group.initial_join = (new_delay, max(remaining - delay, 0))
            return []
        return self._complete_join(group)

    def _expire_pending_sync(self, group: Group, generation: int) -> list[Record]:
        if generation != group.generation or not group.pending_sync:
            return []
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return []
        for member_id in list(group.pending_sync):
            group.remove_member(member_id)
        return self._prepare_rebalance(group)

    # --- SyncGroup ------------------------------------------------------------------------

    def sync(self, req: SyncRequest) -> Result[Reply[SyncResult]]:
        reply: Reply[SyncResult] = Reply()
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(GroupState.EMPTY):
            reply.set(SyncResult(Error.UNKNOWN_MEMBER_ID))
            return Result([], reply)
        error = self._validate_sync(group, req)
        if error is not Error.NONE:
            reply.set(SyncResult(error))
            return Result([], reply)
        member = group.members[req.member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            reply.set(SyncResult(Error.REBALANCE_IN_PROGRESS))
            return Result([], reply)
        if group.is_in(GroupState.STABLE):
            group.pending_sync.discard(member.member_id)
            reply.set(SyncResult(Error.NONE, group.protocol_type, group.protocol_name,
                                 member.assignment))
            return Result([], reply)
        # CompletingRebalance: park until the leader's assignment is written.
        if member.sync_reply is not None:
            member.sync_reply.set(SyncResult(Error.REBALANCE_IN_PROGRESS))
        member.sync_reply = reply
        group.pending_sync.discard(member.member_id)
        if group.pending_sync == set():
            group.sync_deadline = None
        if not group.is_leader(member.member_id):
            return Result([], reply)
        assignment = {m: b"" for m in group.members}
        for member_id, data in req.assignments:
            if member_id in assignment:
                assignment[member_id] = data
        generation = req.generation_id
        records: list[Record] = [(GroupMetadataKey(group.group_id),
                                  group.metadata_value(assignment))]

        def failure(error: Error) -> list[Record]:
            if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
                self._reset_and_propagate_assignment_error(group, error)
                return self._maybe_prepare_rebalance_or_complete_join(group)
            return []

        return Result(records, reply, on_failure=failure)

    @staticmethod
    def _validate_sync(group: Group, req: SyncRequest) -> Error:
        if group.is_in(GroupState.DEAD):
            return Error.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(req.member_id, req.group_instance_id)
        except GroupError as e:
            return e.code
        if req.generation_id != group.generation:
            return Error.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or \
                _inconsistent(req.protocol_name, group.protocol_name):
            return Error.INCONSISTENT_GROUP_PROTOCOL
        return Error.NONE

    # --- Heartbeat, LeaveGroup -----------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Error:
        group = self.groups.get(group_id)
        if group is None:
            return Error.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return Error.COORDINATOR_NOT_AVAILABLE
        try:
            member = group.validate_member(member_id, group_instance_id)
        except GroupError as e:
            return e.code
        if generation_id != group.generation:
            return Error.ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return Error.UNKNOWN_MEMBER_ID
        group.reschedule_heartbeat(member)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return Error.REBALANCE_IN_PROGRESS
        return Error.NONE

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]
              ) -> Result[list[Error]]:
        """Remove members (member id, group instance id); one error per member."""
        group = self.groups.get(group_id)
        if group is None:
            return Result([], [Error.UNKNOWN_MEMBER_ID] * len(members))
        if group.is_in(GroupState.DEAD):
            raise GroupError(Error.COORDINATOR_NOT_AVAILABLE)
        errors: list[Error] = []
        for member_id, instance_id in members:
            if member_id == "":
                # Administrative removal of a static member by its instance id.
                static_id = group.static_members.get(instance_id) if instance_id else None
                if static_id is None:
                    errors.append(Error.UNKNOWN_MEMBER_ID)
                    continue
                self._remove_leaving_member(group, static_id)
            elif member_id in group.pending_members:
                group.remove_member(member_id)
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except GroupError as e:
                    errors.append(e.code)
                    continue
                self._remove_leaving_member(group, member_id)
            errors.append(Error.NONE)
        records: list[Record] = []
        if Error.NONE in errors:
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                records = self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                records = self._maybe_complete_join_phase(group)
        return Result(records, errors)

    @staticmethod
    def _remove_leaving_member(group: Group, member_id: str) -> None:
        member = group.members[member_id]
        group.complete_join(member, JoinResult(Error.UNKNOWN_MEMBER_ID))
        group.remove_member(member_id)

    # --- offsets ------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, retention_ms: int,
                       topics: Sequence[tuple[str, Sequence[PartitionCommit]]],
                       api_version: int = 9) -> Result[dict[tuple[str, int], Error]]:
        """OffsetCommit: records for each partition, or GroupError for the whole request."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A "simple" group is created only by commits without a generation.
                raise GroupError(Error.GROUP_ID_NOT_FOUND if api_version >= 9
                                 else Error.ILLEGAL_GENERATION)
        else:
            self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
            if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
                # Classic members' commits keep their session alive.
                group.reschedule_heartbeat(group.members[member_id])
        now = self.clock()
        expire = now + retention_ms if retention_ms >= 0 else -1
        errors: dict[tuple[str, int], Error] = {}
        records: list[Record] = []
        for topic, partitions in topics:
            for p in partitions:
                metadata = p.metadata or ""
                if len(metadata.encode("utf-16-le")) // 2 > self.config.offset_metadata_max_bytes:
                    errors[(topic, p.partition)] = Error.OFFSET_METADATA_TOO_LARGE
                    continue
                errors[(topic, p.partition)] = Error.NONE
                records.append((OffsetCommitKey(group_id, topic, p.partition),
                                OffsetCommitValue(p.offset, metadata, now, p.leader_epoch,
                                                  expire)))
        return Result(records, errors)

    @staticmethod
    def _validate_offset_commit(group: Group, member_id: str, group_instance_id: str | None,
                                generation_id: int) -> None:
        if group.is_in(GroupState.DEAD):
            raise GroupError(Error.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return  # the admin client or a consumer without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation:
                raise GroupError(Error.ILLEGAL_GENERATION)
        elif not group.is_in(GroupState.EMPTY):
            raise GroupError(Error.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            raise GroupError(Error.REBALANCE_IN_PROGRESS)

    def fetch_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
                      ) -> list[tuple[str, list[FetchedOffset]]]:
        """OffsetFetch for some partitions, or all the group has (``topics`` None)."""
        offsets = self.offsets.get(group_id, {}) if group_id in self.groups else {}
        if topics is None:
            by_topic: dict[str, list[FetchedOffset]] = {}
            for (topic, partition), o in offsets.items():
                by_topic.setdefault(topic, []).append(_fetched(partition, o))
            return list(by_topic.items())
        return [(topic, [_fetched(p, offsets.get((topic, p))) for p in partitions])
                for topic, partitions in topics]

    def delete_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
                       ) -> Result[list[tuple[str, list[tuple[int, Error]]]]]:
        """OffsetDelete: tombstones for offsets of topics the group is not subscribed to."""
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            raise GroupError(Error.GROUP_ID_NOT_FOUND)
        if not group.is_in(GroupState.EMPTY) and not group.uses_consumer_protocol:
            raise GroupError(Error.NON_EMPTY_GROUP)
        offsets = self.offsets.get(group_id, {})
        response: list[tuple[str, list[tuple[int, Error]]]] = []
        records: list[Record] = []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                response.append((topic, [(p, Error.GROUP_SUBSCRIBED_TO_TOPIC)
                                         for p in partitions]))
                continue
            response.append((topic, [(p, Error.NONE) for p in partitions]))
            records += [(OffsetCommitKey(group_id, topic, p), None) for p in partitions
                        if (topic, p) in offsets]
        return Result(records, response)

    def delete_groups(self, group_ids: Iterable[str]) -> Result[dict[str, Error]]:
        """DeleteGroups: tombstones for each empty group's offsets, then for the group."""
        errors: dict[str, Error] = {}
        records: list[Record] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                errors[group_id] = Error.GROUP_ID_NOT_FOUND
                continue
            if not group.is_in(GroupState.EMPTY):
                errors[group_id] = Error.NON_EMPTY_GROUP
                continue
            records += self._group_tombstones(group_id)
            errors[group_id] = Error.NONE
        return Result(records, errors)

    def delete_topic_offsets(self, topic: str) -> list[Record]:
        """Tombstones for every group's offsets of a deleted topic."""
        return [(OffsetCommitKey(group_id, t, p), None)
                for group_id, offsets in self.offsets.items() for t, p in offsets if t == topic]

    def _group_tombstones(self, group_id: str) -> list[Record]:
        records: list[Record] = [(OffsetCommitKey(group_id, t, p), None)
                                 for t, p in self.offsets.get(group_id, {})]
        records.append((GroupMetadataKey(group_id), None))
        return records

    def expire_offsets(self, group_ids: Iterable[str] | None = None) -> list[Record]:
        """Tombstones for offsets past ``offsets.retention.minutes``, and for empty groups
        left with no offsets (Kafka's periodic group metadata cleanup)."""
        now = self.clock()
        retention = self.config.offsets_retention_ms
        records: list[Record] = []
        for group_id in list(self.groups) if group_ids is None else group_ids:
            group = self.groups.get(group_id)
            if group is None:
                continue
            offsets = self.offsets.get(group_id, {})
            all_expired = True
            base = group.offset_expiry_base() if offsets else None
            if offsets and base is None:
                all_expired = False
            for (topic, partition), o in offsets.items() if base is not None else ():
                if group.is_subscribed_to(topic):
                    all_expired = False
                    continue
                expired = now >= o.expire_timestamp if o.expire_timestamp >= 0 else \
                    now - base(o) >= retention
                if expired:
                    records.append((OffsetCommitKey(group_id, topic, partition), None))
                else:
                    all_expired = False
            if all_expired and group.is_in(GroupState.EMPTY):
                records.append((GroupMetadataKey(group_id), None))
        return records

    # --- reads ---------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        return group.describe()

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
             ) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of the groups matching the ListGroups filters."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return []
        return [(g.group_id, g.protocol_type or "", g.state.value) for g in self.groups.values()
                if not wanted_states or g.state.value.lower() in wanted_states]


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _fetched(partition: int, o: OffsetAndMetadata | None) -> FetchedOffset:
    if o is None:
        return FetchedOffset(partition)
    return FetchedOffset(partition, o.offset, o.leader_epoch, o.metadata)


def _fail_join(reply: Reply[JoinResult], error: Error) -> list[Record]:
    reply.set(JoinResult(error))
    return []
