"""Offsets committed in transactions (TxnOffsetCommit): appended to the group's
``__consumer_offsets`` partition in the producer's transaction, the group's once its
COMMIT marker is written there, dropped at ABORT."""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence

from josefk.cluster.coordinator.group.api import (
    Error,
    GroupConfig,
    append_error_to_response_error,
)
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.offsets import metadata_too_large
from josefk.cluster.coordinator.group.partitions import OffsetsPartitions
from josefk.cluster.coordinator.group.pending_offsets import (
    build_txn_batch,
    offset_records,
    validate_txn_commit,
)
from josefk.cluster.coordinator.group.records import encode_record
from josefk.cluster.coordinator.records import OFFSETS_TOPIC, RecordFormatError
from josefk.cluster.partition import PartitionError
from josefk.protocol.record_batch import RecordBatchError

logger = logging.getLogger(__name__)


class TxnOffsetCommits:
    """TxnOffsetCommit over the partitions and groups of a coordinator."""

    def __init__(self, partitions: OffsetsPartitions, groups: Groups, config: GroupConfig,
                 clock: Callable[[], int]) -> None:
        self.partitions = partitions
        self.groups = groups
        self.config = config
        self.clock = clock

    # --- TxnOffsetCommit and markers ----------------------------------------------------

    def commit(self, group_id: str, producer_id: int, producer_epoch: int,
                           member_id: str, group_instance_id: str | None, generation_id: int,
                           topics: Sequence[tuple[str, Sequence[tuple[int, int, int,
                                                                      str | None]]]]) -> int:
        """TxnOffsetCommit: append the offsets in the producer's transaction; they are
        the group's once its COMMIT marker arrives (`complete`). Partitions
        whose metadata is too large are left out (see `oversized_metadata`)."""
        error = self.partitions.check(group_id) if group_id else Error.INVALID_GROUP_ID
        if error is Error.NONE and self.groups.consumer.get(group_id) is not None:
            # A member of a consumer group commits at its member epoch.
            error = self.groups.consumer.validate_offset_commit(group_id, member_id,
                                                                generation_id, api_version=9)
            if error is Error.STALE_MEMBER_EPOCH:
                error = Error.ILLEGAL_GENERATION
        elif error is Error.NONE:
            error = validate_txn_commit(self.groups.get(group_id), member_id,
                                        group_instance_id, generation_id)
        if error is not Error.NONE:
            return error
        oversized = self.oversized_metadata(topics)
        records = offset_records(group_id, [
            (name, [p for p in parts if (name, p[0]) not in oversized])
            for name, parts in topics], self.clock())
        partition = self.partitions.broker.partition(
            OFFSETS_TOPIC, self.partitions.partition_for(group_id))
        if partition is None or not partition.is_leader:
            return Error.NOT_COORDINATOR
        if not records:
            return Error.NONE  # every partition's metadata was too large
        try:
            batch = build_txn_batch([encode_record(r) for r in records], producer_id,
                                    producer_epoch, self.clock())
        except (RecordFormatError, struct.error) as e:
            logger.error("cannot write the TxnOffsetCommit of %s: %s", group_id, e)
            return Error.UNKNOWN_SERVER_ERROR
        try:
            info = partition.append_records(batch, required_acks=-1)
        except (RecordBatchError, PartitionError) as e:
            logger.info("TxnOffsetCommit of %s refused: %s", group_id, e)
            return append_error_to_response_error(e.error_code)
        except OSError as e:
            logger.error("writing to %s-%d failed: %s", OFFSETS_TOPIC, partition.index, e)
            return Error.NOT_COORDINATOR
        for i, record in enumerate(records):
            self.groups.replay(record, info.first_offset + i, producer_id)
        return Error.NONE

    def oversized_metadata(self, topics: Sequence[tuple[str, Sequence[tuple[int, int, int,
                                                                          str | None]]]]
                           ) -> set[tuple[str, int]]:
        """The partitions whose metadata is over ``offset.metadata.max.bytes``: Kafka
        answers each OFFSET_METADATA_TOO_LARGE and commits the others."""
        limit = self.config.offset_metadata_max_bytes
        return {(name, p) for name, parts in topics for p, _, _, m in parts
                if metadata_too_large(m, limit)}

    def complete(self, producer_id: int, partition: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` was written to ``partition``: its
        pending offsets there become the groups' (commit) or are dropped (abort)."""
        if partition in self.partitions.loading:
            return  # the load reads the marker from the log
        self.groups.replay_txn_marker(producer_id, commit, self.partitions.in_partition(partition))
