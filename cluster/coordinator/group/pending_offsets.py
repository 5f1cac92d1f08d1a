"""Offsets committed inside a transaction (TxnOffsetCommit), pending until its marker.

Kafka's ``OffsetMetadataManager`` (``pendingTransactionalOffsets``, ``openTransactions``):
the offset records are appended to ``__consumer_offsets`` in a transactional batch of
the producer, but a group's committed offsets change only when the COMMIT marker for
that producer reaches the partition; an ABORT drops them. The same holds when a
partition is loaded: records of a transaction still open at the log end stay pending.
A tombstone of a partition's offset drops the pending offsets of that partition too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.cluster.coordinator.group.api import Error, GroupError, OffsetAndMetadata
from josefk.cluster.coordinator.group.records import OffsetCommitKey, OffsetCommitValue, Record
from josefk.cluster.coordinator.group.state import Group

NO_SEQUENCE = -1  # the coordinator's own batch: no producer sequence to check

TopicPartition = tuple[str, int]


class PendingTxnOffsets:
    """Per producer id, the offsets of its open transaction, by group and partition."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}

    def add(self, producer_id: int, group_id: str, tp: TopicPartition,
            offset: OffsetAndMetadata) -> None:
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = offset

    def complete(self, producer_id: int, in_partition: Callable[[str], bool]
                 ) -> list[tuple[str, TopicPartition, OffsetAndMetadata]]:
        """The producer's transaction ended on a partition: remove the offsets of the
        groups ``in_partition`` selects and return them (to commit if it committed)."""
        groups = self._by_producer.get(producer_id)
        if not groups:
            return []
        done = [g for g in groups if in_partition(g)]
        offsets = [(g, tp, o) for g in done for tp, o in groups.pop(g).items()]
        if not groups:
            del self._by_producer[producer_id]
        return offsets

    def drop(self, in_partition: Callable[[str], bool]) -> None:
        """Forget the groups of a partition this broker no longer leads."""
        for producer_id in list(self._by_producer):
            self.complete(producer_id, in_partition)

    def discard(self, group_id: str, tp: TopicPartition) -> None:
        """A tombstone of the group's offset of ``tp``: no open transaction commits it."""
        for producer_id, groups in list(self._by_producer.items()):
            partitions = groups.get(group_id)
            if partitions is None or partitions.pop(tp, None) is None:
                continue
            if not partitions:
                del groups[group_id]
            if not groups:
                del self._by_producer[producer_id]

    def partitions(self, group_id: str) -> set[TopicPartition]:
        """The partitions of ``group_id`` an open transaction holds an offset of."""
        return {tp for groups in self._by_producer.values() for tp in groups.get(group_id, {})}

    def has_open(self, group_id: str) -> bool:
        """Whether an open transaction holds offsets of ``group_id``."""
        return any(group_id in groups for groups in self._by_producer.values())

    def is_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of ``group_id`` for the partition
        (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        return any((topic, partition) in groups.get(group_id, {})
                   for groups in self._by_producer.values())


def offset_records(group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int, int,
                                                                             str | None]]]],
                   now: int) -> list[Record]:
    """OffsetCommit records for (topic, [(partition, offset, leader epoch, metadata)])."""
    return [(OffsetCommitKey(group_id, topic, p),
             OffsetCommitValue(offset, metadata or "", now, leader_epoch, -1))
            for topic, partitions in topics for p, offset, leader_epoch, metadata in partitions]


def build_txn_batch(entries: Iterable[tuple[bytes, bytes | None]], producer_id: int,
                    producer_epoch: int, timestamp: int) -> bytearray:
    """One uncompressed transactional v2 batch of the producer's encoded records."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                        producer_id=producer_id,
                                        producer_epoch=producer_epoch,
                                        base_sequence=NO_SEQUENCE, batch_size=1 << 31)
    for i, (key, value) in enumerate(entries):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return builder.build()


def validate_txn_commit(group: Group | None, member_id: str, group_instance_id: str | None,
                        generation_id: int) -> Error:
    """Kafka's ``validateTransactionalOffsetCommit``: without a group only a commit
    without a generation is accepted (it makes a "simple" group); with one, the
    classic group's offset commit checks, as for a transaction."""
    if group is None:
        return Error.NONE if generation_id < 0 else Error.ILLEGAL_GENERATION
    try:
        group.validate_offset_commit(member_id, group_instance_id, generation_id,
                                     transactional=True)
    except GroupError as e:
        return e.code
    return Error.NONE
