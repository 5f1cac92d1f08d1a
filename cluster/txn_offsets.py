"""Offsets committed inside a transaction (TxnOffsetCommit), pending until its marker.

Kafka's ``GroupMetadata.prepareTxnOffsetCommit`` / ``completePendingTxnOffsetCommit``:
the offset records are appended to ``__consumer_offsets`` in a transactional batch of
the producer, but a group's committed offsets change only when the COMMIT marker for
that producer reaches the partition; an ABORT drops them. The same holds when a
partition is loaded: records of a transaction still open at the log end stay pending.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.cluster.group_records import OffsetCommitKey, OffsetCommitValue, Record
from josefk.cluster.group_state import Group, GroupState
from josefk.cluster.group_types import Error, GroupError

NO_SEQUENCE = -1  # the coordinator's own batch: no producer sequence to check


class PendingTxnOffsets:
    """Per producer id, the offset records of its open transaction, by group."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[tuple[str, int], Record]]] = {}

    def add(self, producer_id: int, records: Iterable[Record]) -> None:
        groups = self._by_producer.setdefault(producer_id, {})
        for key, value in records:
            assert isinstance(key, OffsetCommitKey)
            groups.setdefault(key.group, {})[(key.topic, key.partition)] = (key, value)

    def complete(self, producer_id: int, in_partition: Callable[[str], bool]
                 ) -> list[Record]:
        """The producer's transaction ended on a partition: remove the records of the
        groups ``in_partition`` selects and return them (to replay if it committed)."""
        groups = self._by_producer.get(producer_id)
        if not groups:
            return []
        done = [g for g in groups if in_partition(g)]
        records = [record for g in done for record in groups.pop(g).values()]
        if not groups:
            del self._by_producer[producer_id]
        return records

    def drop(self, in_partition: Callable[[str], bool]) -> None:
        """Forget the groups of a partition this broker no longer leads."""
        for producer_id in list(self._by_producer):
            self.complete(producer_id, in_partition)

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
    """Kafka's ``doTxnCommitOffsets`` checks: a group need not exist, but a member or a
    generation that is named must match it."""
    if group is None:
        return Error.NONE
    if group.is_in(GroupState.DEAD):
        return Error.COORDINATOR_NOT_AVAILABLE
    if member_id or group_instance_id is not None:
        try:
            group.validate_member(member_id, group_instance_id)
        except GroupError as e:
            return e.code
    if generation_id >= 0 and generation_id != group.generation:
        return Error.ILLEGAL_GENERATION
    return Error.NONE
