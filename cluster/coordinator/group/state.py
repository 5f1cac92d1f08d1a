"""The classic consumer-group protocol's state machine for one group, without I/O.

One :class:`Group` per group id, in one of five states; the legal moves are the
table :data:`TRANSITIONS` (event → next state, per state), in the manner of
h11's ``_state.py``: every change of state goes through :meth:`Group.transition`,
which refuses anything the table does not list. :class:`Member` is one member
of a group. The requests and results are in :mod:`josefk.cluster.coordinator.group.api`;
:class:`josefk.cluster.coordinator.group.groups.Groups` answers the requests with these groups.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from josefk.cluster.coordinator.group.api import (
    Clock,
    DescribedMember,
    Error,
    GroupDescription,
    GroupError,
    JoinedMember,
    JoinResult,
    OffsetAndMetadata,
    Reply,
    SyncResult,
)
from josefk.cluster.coordinator.group.records import GroupMetadataValue, MemberMetadata

logger = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"


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
    UNLOAD = "this broker no longer coordinates the group"


_S, _E = GroupState, Event
TRANSITIONS: dict[GroupState, dict[Event, GroupState]] = {
    _S.EMPTY: {
        _E.REBALANCE: _S.PREPARING_REBALANCE,
        _E.DELETE: _S.DEAD,
        _E.UNLOAD: _S.DEAD,
    },
    _S.PREPARING_REBALANCE: {
        _E.JOIN_COMPLETE: _S.COMPLETING_REBALANCE,
        _E.JOIN_COMPLETE_EMPTY: _S.EMPTY,
        _E.DELETE: _S.DEAD,
        _E.UNLOAD: _S.DEAD,
    },
    _S.COMPLETING_REBALANCE: {
        _E.REBALANCE: _S.PREPARING_REBALANCE,
        _E.ASSIGNMENT_STORED: _S.STABLE,
        _E.DELETE: _S.DEAD,
        _E.UNLOAD: _S.DEAD,
    },
    _S.STABLE: {
        _E.REBALANCE: _S.PREPARING_REBALANCE,
        _E.DELETE: _S.DEAD,
        _E.UNLOAD: _S.DEAD,
    },
    _S.DEAD: {
        _E.DELETE: _S.DEAD,
        _E.UNLOAD: _S.DEAD,
    },
}
"""Event → next state, per state. A group loaded from its record starts Stable
(members) or Empty (none); a new group starts Empty."""


class IllegalTransition(RuntimeError):
    """An event the transition table does not allow in the group's state."""


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

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None,
                               generation_id: int, *, transactional: bool) -> None:
        """Kafka's ``ClassicGroup.validateOffsetCommit``: GroupError unless the commit
        (an OffsetCommit, or a TxnOffsetCommit if ``transactional``) may go ahead."""
        if self.state is GroupState.DEAD:
            raise GroupError(Error.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return  # the admin client or a consumer without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            self.validate_member(member_id, group_instance_id)
            if generation_id != self.generation:
                raise GroupError(Error.ILLEGAL_GENERATION)
        elif not transactional:
            # Without member and generation (v0), only an empty group takes commits;
            # old TxnOffsetCommit versions carry neither, so they are let through.
            raise GroupError(Error.UNKNOWN_MEMBER_ID)
        if not transactional and self.state is GroupState.COMPLETING_REBALANCE:
            raise GroupError(Error.REBALANCE_IN_PROGRESS)

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
        """Whether a member of ``protocol_type`` with protocols ``names`` may join: one
        of them must be supported by every member (of none, when all have left during
        a rebalance: Kafka's count of supporting members equals the member count, 0)."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        return bool(names) if not self.members else bool(names & self.candidate_protocols())

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
