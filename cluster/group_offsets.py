"""The committed offsets of a coordinator's groups: OffsetCommit, OffsetFetch,
OffsetDelete and expiry, as Apache Kafka's ``OffsetMetadataManager`` answers them.
:class:`~josefk.cluster.groups.Groups` inherits :class:`GroupOffsets`; as there, a
request returns the records to write and offsets change only when they are replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from josefk.cluster.group_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from josefk.cluster.group_state import Group, GroupState
from josefk.cluster.group_types import (
    Clock,
    Error,
    FetchedOffset,
    GroupConfig,
    GroupError,
    OffsetAndMetadata,
    PartitionCommit,
    Result,
)

Offsets = dict[tuple[str, int], OffsetAndMetadata]


class GroupOffsets:
    """Committed offsets of a coordinator's groups: committing, fetching, deleting and
    expiring them (the offset requests of :class:`~josefk.cluster.groups.Groups`)."""

    config: GroupConfig
    clock: Clock
    groups: dict[str, Group]
    offsets: dict[str, Offsets]

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

    def delete_topic_offsets(self, topic: str) -> list[Record]:
        """Tombstones for every group's offsets of a deleted topic."""
        return [(OffsetCommitKey(group_id, t, p), None)
                for group_id, offsets in self.offsets.items() for t, p in offsets if t == topic]

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


def _fetched(partition: int, o: OffsetAndMetadata | None) -> FetchedOffset:
    if o is None:
        return FetchedOffset(partition)
    return FetchedOffset(partition, o.offset, o.leader_epoch, o.metadata)

