"""Online migration of a group with members between the classic and the consumer
protocol, as Kafka 4's GroupMetadataManager does it (``convertToConsumerGroup``,
``convertToClassicGroup``), and the embedded ConsumerProtocol both sides speak.

Upgrade: the first ConsumerGroupHeartbeat to a classic group whose protocol type is
"consumer" turns it into a consumer group: the classic group's tombstone, then each
member's metadata (with its classic session timeout and protocols), the group epoch (the
classic generation), the target assignment (each member's last assignment), its epoch
and the members' current assignments at that epoch. Downgrade: when the last member
speaking the consumer protocol leaves or is fenced, the consumer group's tombstones and
one GroupMetadata record (the classic group at the group epoch, each member given its
target assignment) make it classic again, and a classic rebalance follows.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter

from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from josefk.cluster.coordinator.group.api import Error, JoinResult, SyncResult
from josefk.cluster.coordinator.group.consumer.api import (
    ConsumerGroupConfig,
    Refused,
    TopicImage,
)
from josefk.cluster.coordinator.group.consumer.group import ConsumerGroup
from josefk.cluster.coordinator.group.consumer.member import ConsumerMember
from josefk.cluster.coordinator.group.consumer.records import (
    CURRENT_ASSIGNMENT,
    MEMBER_METADATA,
    METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    TARGET_MEMBER,
    TARGET_METADATA,
    Assignment,
    AssignmentEpochValue,
    ClassicMetadata,
    ConsumerKey,
    GroupEpochValue,
    TargetMemberValue,
)
from josefk.cluster.coordinator.group.consumer.subscriptions import (
    group_hash,
    subscription_metadata,
)
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    Record,
)
from josefk.cluster.coordinator.group.state import CONSUMER_PROTOCOL_TYPE, Group

logger = logging.getLogger(__name__)
MAX_EMBEDDED_VERSION = 3  # ConsumerProtocolSubscription / Assignment


class Malformed(ValueError):
    """An embedded ConsumerProtocol subscription or assignment that cannot be read."""


# --- the embedded ConsumerProtocol ----------------------------------------------------------


def subscription(metadata: bytes) -> ConsumerProtocolSubscription:
    """A classic member's ConsumerProtocolSubscription."""
    try:
        return ConsumerProtocolSubscription.decode(metadata)
    except Exception as e:  # kafka-python raises several kinds on bad input
        raise Malformed(f"bad subscription: {e}") from e


def embedded_version(metadata: bytes) -> int:
    """The version a member's protocol metadata speaks, capped at the newest known
    (Kafka's ConsumerProtocol.deserializeVersion)."""
    if len(metadata) < 2:
        raise Malformed("no version")
    version = struct.unpack_from(">h", metadata)[0]
    if version < 0:
        raise Malformed(f"unsupported version {version}")
    return min(version, MAX_EMBEDDED_VERSION)


def encode_assignment(assigned: Assignment, image: TopicImage, metadata: bytes) -> bytes:
    """``assigned`` as a ConsumerProtocolAssignment in the version of ``metadata``."""
    topics = []
    for topic_id, parts in assigned.items():
        topic = image.get_by_id(topic_id)
        if topic is not None and parts:
            topics.append(ConsumerProtocolAssignment.TopicPartition(
                topic=topic.name, partitions=sorted(parts)))
    topics.sort(key=lambda t: t.topic)
    return bytes(ConsumerProtocolAssignment(
        version=embedded_version(metadata), assigned_partitions=topics,
        user_data=None).encode())


def decode_assignment(data: bytes, image: TopicImage) -> Assignment:
    """A classic member's assignment by topic id (topics unknown here are left out)."""
    if not data:
        return {}
    try:
        decoded = ConsumerProtocolAssignment.decode(data)
    except Exception as e:  # kafka-python raises several kinds on bad input
        raise Malformed(f"bad assignment: {e}") from e
    return by_topic_id(((t.topic, t.partitions) for t in decoded.assigned_partitions), image)


def by_topic_id(partitions: object, image: TopicImage) -> Assignment:
    """(topic name, partitions) pairs as an Assignment by topic id."""
    result: Assignment = {}
    for name, parts in partitions:  # type: ignore[attr-defined]
        topic = image.get(name)
        if topic is not None and parts:
            result[topic.topic_id] = result.get(topic.topic_id, frozenset()) | frozenset(parts)
    return result


# --- upgrade ------------------------------------------------------------------------------


def upgrade_refusal(classic: Group, config: ConsumerGroupConfig) -> str | None:
    """Why a classic group with members cannot become a consumer group (Kafka's
    validateOnlineUpgrade), or None."""
    reason = None
    if not config.upgrade_enabled:
        reason = "the online upgrade is disabled"
    elif not classic.uses_consumer_protocol:
        reason = "the group does not use the consumer embedded protocol"
    elif len(classic.members) > config.max_size:
        reason = "the group size exceeds the consumer group maximum size"
    if reason is None:
        return None
    return f"Cannot upgrade classic group {classic.group_id} to consumer group because {reason}."


def upgrade(classic: Group, member_epoch: int, config: ConsumerGroupConfig,
            image: TopicImage) -> list[Record]:
    """The records turning a classic group with members into a consumer group, at the
    first ConsumerGroupHeartbeat of a member (Refused when it cannot be). Its parked
    JoinGroup and SyncGroup requests are answered REBALANCE_IN_PROGRESS: they rejoin."""
    group_id = classic.group_id
    refusal = upgrade_refusal(classic, config)
    if member_epoch != 0 or refusal is not None:
        if refusal is not None:
            logger.info(refusal)
        raise Refused(Error.GROUP_ID_NOT_FOUND,
                      refusal or f"Group {group_id} is not a consumer group.")
    records = upgrade_records(classic, image)
    logger.info("classic group %s becomes a consumer group with its %d members",
                group_id, len(classic.members))
    for member in classic.members.values():
        classic.complete_join(member, JoinResult(Error.REBALANCE_IN_PROGRESS,
                                                 member.member_id))
        classic.complete_sync(member, SyncResult(Error.REBALANCE_IN_PROGRESS))
    return records


def upgrade_records(classic: Group, image: TopicImage) -> list[Record]:
    """The records that turn ``classic`` into a consumer group (Kafka's
    createGroupTombstoneRecords, then createConsumerGroupRecords)."""
    group_id, epoch = classic.group_id, classic.generation
    members: list[ConsumerMember] = []
    try:
        for m in classic.members.values():
            sub = subscription(m.metadata(classic.protocol_name))
            members.append(ConsumerMember(
                m.member_id, instance_id=m.group_instance_id,
                rack_id=getattr(sub, "rack_id", None), client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=tuple(sorted(sub.topics)),
                rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=epoch,
                previous_member_epoch=epoch,
                assigned=decode_assignment(m.assignment, image),
                classic=ClassicMetadata(m.session_timeout_ms, m.protocols)))
    except (Malformed, KeyError) as e:
        raise Refused(Error.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to "
                      "consumer group because the embedded consumer protocol is "
                      "malformed.") from e
    records: list[Record] = [(GroupMetadataKey(group_id), None)]
    records += [(ConsumerKey(MEMBER_METADATA, group_id, m.member_id), m.metadata_value())
                for m in members]
    metadata_hash = group_hash(subscription_metadata(members, image, {}).values())
    records.append((ConsumerKey(METADATA, group_id), GroupEpochValue(epoch, metadata_hash)))
    records += [(ConsumerKey(TARGET_MEMBER, group_id, m.member_id),
                 TargetMemberValue(m.assigned)) for m in members]
    records.append((ConsumerKey(TARGET_METADATA, group_id), AssignmentEpochValue(epoch)))
    records += [(ConsumerKey(CURRENT_ASSIGNMENT, group_id, m.member_id), m.assignment_value())
                for m in members]
    return records


def converted(group_id: str, records: list[Record]) -> ConsumerGroup:
    """The consumer group ``records`` (of `upgrade_records`) describe, not yet stored."""
    group = ConsumerGroup(group_id)
    for key, value in records:
        if isinstance(key, ConsumerKey):
            group.replay(key, value)  # type: ignore[arg-type]
    return group


# --- downgrade ----------------------------------------------------------------------------


def may_downgrade(group: ConsumerGroup, leaving: str, config: ConsumerGroupConfig) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember: the leaving member is the last one
    speaking the consumer protocol, others remain, and the policy allows it."""
    leaver = group.members.get(leaving)
    if leaver is None or leaver.classic is not None:
        return False
    if any(m.classic is None for m in group.members.values() if m.member_id != leaving):
        return False
    return len(group.members) > 1 and config.downgrade_enabled and \
        len(group.members) - 1 <= config.classic_max_size


def downgrade_records(group: ConsumerGroup, leaving: str, image: TopicImage, now: int
                      ) -> list[Record]:
    """The consumer group's tombstones, then the classic group without ``leaving``
    (Kafka's convertToClassicGroup)."""
    group_id = group.group_id
    ids = list(group.members)
    records: list[Record] = [(ConsumerKey(CURRENT_ASSIGNMENT, group_id, m), None) for m in ids]
    records += [(ConsumerKey(TARGET_MEMBER, group_id, m), None) for m in ids]
    records.append((ConsumerKey(TARGET_METADATA, group_id), None))
    records += [(ConsumerKey(MEMBER_METADATA, group_id, m), None) for m in ids]
    records += [(ConsumerKey(REGULAR_EXPRESSION, group_id, regex=r), None)
                for r in sorted(group.regexes)]
    records += [(ConsumerKey(t, group_id), None) for t in (PARTITION_METADATA, METADATA)]
    remaining = [m for m in group.members.values() if m.member_id != leaving]
    protocol = _select_protocol(remaining)
    members = []
    for m in remaining:
        assert m.classic is not None
        metadata = dict(m.classic.protocols)[protocol]
        members.append(MemberMetadata(
            m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.classic.session_timeout_ms, metadata,
            encode_assignment(group.target.get(m.member_id, {}), image, metadata)))
    records.append((GroupMetadataKey(group_id), GroupMetadataValue(
        CONSUMER_PROTOCOL_TYPE, group.group_epoch, protocol, remaining[0].member_id, now,
        tuple(members))))
    return records


def _select_protocol(members: list[ConsumerMember]) -> str:
    """The protocol all members support that most of them prefer (ClassicGroup's
    selectProtocol)."""
    supported = [[name for name, _ in m.classic.protocols] for m in members if m.classic]
    common = set(supported[0]).intersection(*supported[1:])
    votes = Counter(next((n for n in names if n in common), names[0]) for names in supported)
    return max(votes, key=lambda name: votes[name])

