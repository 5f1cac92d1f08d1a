"""A consumer group member as the coordinator knows it (Kafka's ``ConsumerGroupMember``)."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from josefk.cluster.coordinator.group.consumer.records import (
    Assignment,
    AssignmentEpochs,
    ClassicMetadata,
    CurrentAssignmentValue,
    MemberMetadataValue,
)

LEAVE_EPOCH = -1  # a member leaving the group
STATIC_LEAVE_EPOCH = -2  # a static member leaving for a while (it keeps its place)


class MemberState(IntEnum):
    """Where a member is in reconciling its assignment with its target (the record's
    ``State`` byte)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # it must give up partitions first
    UNRELEASED_PARTITIONS = 2  # partitions it is due are still another member's
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """One member: its subscription (MemberMetadata) and its current assignment
    (CurrentMemberAssignment). Immutable: requests build changed copies."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # The epoch each owned partition was assigned at; missing: the member epoch.
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)
    classic: ClassicMetadata | None = None  # set while it speaks the classic protocol

    def replace(self, **changes: object) -> ConsumerMember:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def with_epoch(self, epoch: int) -> ConsumerMember:
        """The member at ``epoch``, remembering the one it leaves (Kafka's updateMemberEpoch)."""
        return self.replace(member_epoch=epoch, previous_member_epoch=self.member_epoch)

    def metadata_value(self) -> MemberMetadataValue:
        return MemberMetadataValue(self.instance_id, self.rack_id, self.client_id,
                                   self.client_host, self.subscribed_topic_names,
                                   self.subscribed_topic_regex, self.rebalance_timeout_ms,
                                   self.server_assignor, self.classic)

    def assignment_value(self) -> CurrentAssignmentValue:
        return CurrentAssignmentValue(self.member_epoch, self.previous_member_epoch,
                                      int(self.state), self.assigned, self.pending_revocation,
                                      self.owned_epochs())

    def epoch_of(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch a partition it owns was assigned at (Kafka's default: its epoch)."""
        return self.assignment_epochs.get((topic_id, partition), max(self.member_epoch, 0))

    def owned_epochs(self) -> dict[tuple[uuid.UUID, int], int]:
        """The assignment epoch of every partition it owns (assigned or revoking)."""
        return {(t, p): self.epoch_of(t, p)
                for t, parts in self.owned_partitions().items() for p in parts}

    def with_metadata(self, v: MemberMetadataValue) -> ConsumerMember:
        return self.replace(instance_id=v.instance_id, rack_id=v.rack_id,
                            client_id=v.client_id, client_host=v.client_host,
                            subscribed_topic_names=v.subscribed_topic_names,
                            subscribed_topic_regex=v.subscribed_topic_regex,
                            rebalance_timeout_ms=v.rebalance_timeout_ms,
                            server_assignor=v.server_assignor, classic=v.classic)

    def with_assignment(self, v: CurrentAssignmentValue) -> ConsumerMember:
        try:
            state = MemberState(v.state)
        except ValueError:
            state = MemberState.UNKNOWN
        return self.replace(member_epoch=v.member_epoch,
                            previous_member_epoch=v.previous_member_epoch, state=state,
                            assigned=v.assigned, pending_revocation=v.pending_revocation,
                            assignment_epochs=v.epochs)

    def owned_partitions(self) -> Assignment:
        """Assigned and pending revocation: what no other member may be given yet."""
        result = dict(self.assigned)
        for topic_id, parts in self.pending_revocation.items():
            result[topic_id] = result.get(topic_id, frozenset()) | parts
        return result
