"""One consumer group's durable state, changed only by replaying its records (Kafka's
``ConsumerGroup``): the group epoch, the subscribed topics' metadata, the members, the
target assignment and its epoch, and who owns each partition."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from josefk.cluster.coordinator.group.consumer.member import ConsumerMember, MemberState
from josefk.cluster.coordinator.group.consumer.records import (
    REGULAR_EXPRESSION,
    Assignment,
    AssignmentEpochValue,
    ConsumerKey,
    ConsumerValue,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    ResolvedRegexValue,
    TargetMemberValue,
    TopicMetadata,
)


class ConsumerGroupState(Enum):
    """The states Kafka reports for a consumer group (ListGroups, ConsumerGroupDescribe)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class Deadlines:
    """A member's timers: its session and, while it revokes partitions, its rebalance
    timeout (with the epoch it was set at)."""

    session: int | None = None
    revocation: tuple[int, int] | None = None  # (deadline, member epoch)
    # A member speaking the classic protocol: told to rejoin, it must within its
    # rebalance timeout (join); having joined, it must sync within it (sync).
    join: int | None = None
    sync: int | None = None

    def due(self) -> list[int]:
        return [d for d in (self.session, self.revocation and self.revocation[0], self.join,
                            self.sync) if d is not None]


@dataclass
class ConsumerGroup:
    """A consumer group as its records left it."""

    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0  # of the subscribed topics when the group epoch was bumped
    partition_metadata_record: bool = False  # a type 4 record (Kafka 4.0) is live
    assignment_epoch: int = 0
    assignment_timestamp: int = -1
    # The subscribed topics' metadata the target assignment was computed on; None when
    # not known (loaded from the log: Kafka 4.3 keeps only a hash of it).
    topics: dict[str, TopicMetadata] | None = None
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # (topic id, partition) -> epoch of the member that owns it (assigned or revoking).
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    deadlines: dict[str, Deadlines] = field(default_factory=dict)
    created: bool = False  # a ConsumerGroupMetadata record was replayed
    # The members' regular expressions as last resolved (ConsumerGroupRegularExpression).
    regexes: dict[str, ResolvedRegexValue] = field(default_factory=dict)
    # Not in records: when the regexes are to be resolved again, and the topic names
    # they were last resolved against (None: not since this coordinator loaded them).
    regex_refresh_due: int | None = None
    regex_names_seen: frozenset[str] | None = None

    # --- reads -------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def regex_subscribers(self, regex: str) -> int:
        return sum(m.subscribed_topic_regex == regex for m in self.members.values())

    @property
    def last_regex_refresh(self) -> int:
        return max((v.timestamp for v in self.regexes.values()), default=0)

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a member due partitions still owned by others must wait for them."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, parts in self.target.get(member.member_id, {}).items():
            assigned = member.assigned.get(topic_id, frozenset())
            if any(p not in assigned and self.partition_epoch(topic_id, p) != -1
                   for p in parts):
                return True
        return False

    def supports_classic(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's supportsClassicProtocols: a "consumer" member with a protocol every
        classic member supports (any protocol in a group without classic members)."""
        if protocol_type != "consumer":
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        if not self.members or not classic:
            return bool(names)
        return any(all(n in {p for p, _ in c.protocols} for c in classic) for n in names)

    def subscribed_topic_names(self, replacing: ConsumerMember | None = None,
                               removing: str | None = None) -> set[str]:
        """The topics any member subscribes to, with ``replacing`` in place of its old
        self and without member ``removing``."""
        names: set[str] = set()
        for m in self.members.values():
            if m.member_id not in (removing, replacing and replacing.member_id):
                names.update(m.subscribed_topic_names)
        if replacing is not None:
            names.update(replacing.subscribed_topic_names)
        return names

    def is_subscribed_to(self, topic: str) -> bool:
        """By name, or by a regular expression that matched it at the last heartbeat."""
        return topic in self.subscribed_topic_names() or topic in (self.topics or {})

    # --- replay -----------------------------------------------------------------------

    def replay(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        """Apply one of the group's records (None: a tombstone)."""
        member_id = key.member_id or ""
        match value:
            case GroupEpochValue(epoch, metadata_hash):
                self.group_epoch = epoch
                self.metadata_hash = metadata_hash
                self.created = True
            case PartitionMetadataValue(topics):
                self.topics = {t.name: t for t in topics}
                self.partition_metadata_record = True
            case MemberMetadataValue():
                old = self.members.get(member_id, ConsumerMember(member_id))
                self.members[member_id] = old.with_metadata(value)
            case AssignmentEpochValue(epoch, timestamp):
                self.assignment_epoch = epoch
                self.assignment_timestamp = timestamp
            case TargetMemberValue(partitions):
                self.target[member_id] = partitions
            case ResolvedRegexValue():
                self.regexes[key.regex or ""] = value
            case CurrentAssignmentValue():
                old = self.members.get(member_id, ConsumerMember(member_id))
                self._set_owner(old, None)
                new = old.with_assignment(value)
                self.members[member_id] = new
                self._set_owner(None, new)
            case None if key.type == REGULAR_EXPRESSION:
                self.regexes.pop(key.regex or "", None)
            case None:
                self._replay_tombstone(key.type, member_id)

    def _replay_tombstone(self, key_type: int, member_id: str) -> None:
        if key_type == 5:
            member = self.members.pop(member_id, None)
            if member is not None:
                self._set_owner(member, None)
            self.deadlines.pop(member_id, None)
        elif key_type == 7:
            self.target.pop(member_id, None)
        elif key_type == 8 and member_id in self.members:
            member = self.members[member_id]
            self._set_owner(member, None)
            self.members[member_id] = member.replace(
                member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                assigned={}, pending_revocation={})
        elif key_type == 4:
            self.partition_metadata_record = False

    def _set_owner(self, old: ConsumerMember | None, new: ConsumerMember | None) -> None:
        if old is not None:
            for tp in _pairs(old.owned_partitions().items()):
                if self.partition_epochs.get(tp) == old.member_epoch:
                    del self.partition_epochs[tp]
        if new is not None:
            for tp in _pairs(new.owned_partitions().items()):
                self.partition_epochs[tp] = new.member_epoch


def _pairs(items: Iterable[tuple[uuid.UUID, frozenset[int]]]) -> Iterable[tuple[uuid.UUID, int]]:
    return ((topic_id, p) for topic_id, parts in items for p in parts)
