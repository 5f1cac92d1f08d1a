"""The committed offsets of a coordinator's groups: OffsetCommit, OffsetFetch,
OffsetDelete and expiry, as Apache Kafka's ``OffsetMetadataManager`` answers them.
:class:`~josefk.cluster.coordinator.group.groups.Groups` inherits :class:`GroupOffsets`; as there, a
request returns the records to write and offsets change only when they are replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from josefk.cluster.coordinator.group.api import (
    Clock,
    Error,
    FetchedOffset,
    GroupConfig,
    GroupError,
    OffsetAndMetadata,
    PartitionCommit,
    Result,
)
from josefk.cluster.coordinator.group.consumer.manager import ConsumerGroups
from josefk.cluster.coordinator.group.pending_offsets import PendingTxnOffsets
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from josefk.cluster.coordinator.group.state import Group, GroupState

Offsets = dict[tuple[str, int], OffsetAndMetadata]


class GroupOffsets:
    """Committed offsets of a coordinator's groups: committing, fetching, deleting and
    expiring them (the offset requests of :class:`~.groups.Groups`)."""

    config: GroupConfig
    clock: Clock
    groups: dict[str, Group]
    consumer: ConsumerGroups
    offsets: dict[str, Offsets]
    pending_txn: PendingTxnOffsets

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, retention_ms: int,
                       topics: Sequence[tuple[str, Sequence[PartitionCommit]]],
                       api_version: int = 9) -> Result[dict[tuple[str, int], Error]]:
        """OffsetCommit: records for each partition, or GroupError for the whole request."""
        group = self.groups.get(group_id)
        if group_id in self.consumer.groups:
            error = self.consumer.validate_offset_commit(group_id, member_id, generation_id,
                                                         api_version)
            if error is not Error.NONE:
                raise GroupError(error)
        elif group is None:
            if generation_id >= 0:
                # A "simple" group is created only by commits without a generation.
                raise GroupError(Error.GROUP_ID_NOT_FOUND if api_version >= 9
                                 else Error.ILLEGAL_GENERATION)
        else:
            group.validate_offset_commit(member_id, group_instance_id, generation_id,
                                         transactional=False)
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
                if metadata_too_large(metadata, self.config.offset_metadata_max_bytes):
                    errors[(topic, p.partition)] = Error.OFFSET_METADATA_TOO_LARGE
                    continue
                errors[(topic, p.partition)] = Error.NONE
                records.append((OffsetCommitKey(group_id, topic, p.partition),
                                OffsetCommitValue(p.offset, metadata, now, p.leader_epoch,
                                                  expire)))
        return Result(records, errors)

    def fetch_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
                      ) -> list[tuple[str, list[FetchedOffset]]]:
        """OffsetFetch for some partitions, or all the group has (``topics`` None)."""
        known = group_id in self.groups or group_id in self.consumer.groups
        offsets = self.offsets.get(group_id, {}) if known else {}
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
        group = self.groups.get(group_id) or self.consumer.get(group_id)
        if group is None or (isinstance(group, Group) and group.is_in(GroupState.DEAD)):
            raise GroupError(Error.GROUP_ID_NOT_FOUND)
        if isinstance(group, Group) and not group.is_in(GroupState.EMPTY) and \
                not group.uses_consumer_protocol:
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
            # Kafka tombstones a pending transactional offset as well as a committed one.
            records += [(OffsetCommitKey(group_id, topic, p), None) for p in partitions
                        if (topic, p) in offsets
                        or self.pending_txn.is_pending(group_id, topic, p)]
        return Result(records, response)

    def delete_topic_offsets(self, topic: str) -> list[Record]:
        """Tombstones for every group's offsets of a deleted topic, committed or pending
        in a transaction."""
        return [(OffsetCommitKey(group_id, t, p), None)
                for group_id in dict.fromkeys([*self.offsets, *self.groups])
                for t, p in self.offset_partitions(group_id) if t == topic]

    def offset_partitions(self, group_id: str) -> list[tuple[str, int]]:
        """The partitions the group has an offset of: committed, or pending in an open
        transaction (what deleting the group or a topic tombstones)."""
        committed = list(self.offsets.get(group_id, {}))
        pending = self.pending_txn.partitions(group_id).difference(committed)
        return committed + sorted(pending)

    def expire_offsets(self, group_ids: Iterable[str] | None = None) -> list[Record]:
        """Tombstones for offsets past ``offsets.retention.minutes``, and for empty groups
        left with no offsets (Kafka's periodic group metadata cleanup). An offset an open
        transaction will commit again does not expire yet, and a group with open
        transactions stays."""
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
                if expired and not self.pending_txn.is_pending(group_id, topic, partition):
                    records.append((OffsetCommitKey(group_id, topic, partition), None))
                else:
                    all_expired = False
            if all_expired and group.is_in(GroupState.EMPTY) and \
                    not self.pending_txn.has_open(group_id):
                records.append((GroupMetadataKey(group_id), None))
        if group_ids is None:
            records += self._expire_consumer_offsets(now, retention)
        return records

    def _expire_consumer_offsets(self, now: int, retention: int) -> list[Record]:
        """Consumer groups (KIP-848): an offset of a topic no member subscribes to expires
        ``offsets.retention.minutes`` after its commit; an empty group left without offsets
        is deleted."""
        records: list[Record] = []
        for group_id, group in list(self.consumer.groups.items()):
            all_expired = True
            for (topic, partition), o in self.offsets.get(group_id, {}).items():
                expired = now >= o.expire_timestamp if o.expire_timestamp >= 0 else \
                    now - o.commit_timestamp >= retention
                if expired and not group.is_subscribed_to(topic) and \
                        not self.pending_txn.is_pending(group_id, topic, partition):
                    records.append((OffsetCommitKey(group_id, topic, partition), None))
                else:
                    all_expired = False
            if all_expired and not group.members and not self.pending_txn.has_open(group_id):
                records += self.consumer.tombstones(group_id)
        return records


def metadata_too_large(metadata: str | None, limit: int) -> bool:
    """Whether commit metadata is over ``offset.metadata.max.bytes``: Kafka compares
    Java's ``String.length()``, in UTF-16 code units."""
    return metadata is not None and len(metadata.encode("utf-16-le", "surrogatepass")) // 2 \
        > limit


def _fetched(partition: int, o: OffsetAndMetadata | None) -> FetchedOffset:
    if o is None:
        return FetchedOffset(partition)
    return FetchedOffset(partition, o.offset, o.leader_epoch, o.metadata)

