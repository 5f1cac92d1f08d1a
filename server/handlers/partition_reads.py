"""Reading the partitions of a Fetch: one `PartitionRead` per partition asked for.

A read_committed consumer (isolation_level 1) reads up to the last stable offset and
gets the aborted transactions overlapping what it reads, to drop their records.

A follower's fetch (a replica id >= 0) reads up to the log end offset instead, tells
the leader how far the follower has got (which moves the high watermark and may
bring it back into the ISR), and gets the diverging epoch when its last fetched
epoch does not match the leader's log (KIP-320 truncation on fetch).

Record bytes of a large slice are not read into Python: the slice of a segment
file becomes a FileRegion, a part of the response of its own that the connection
sends with sendfile (protocol/fetch_response.py encodes around it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from josefk.cluster.partition import PartitionError
from josefk.log.errors import StorageError
from josefk.log.log import EMPTY_SLICE, OffsetOutOfRangeError
from josefk.protocol.error_codes import (
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_TOPIC_ID,
)
from josefk.server.handlers import partition_or_error
from josefk.server.network.zero_copy import FileRegion

if TYPE_CHECKING:
    from josefk.server.broker import Broker

#: Record slices up to this size are read into the response, larger ones sent with sendfile.
COPY_MAX = 64 * 1024


@dataclass(slots=True)
class PartitionRead:
    """One requested partition and what reading it found."""

    topic: str | None
    topic_id: uuid.UUID | None
    index: int
    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    last_fetched_epoch: int = -1
    error_code: int = 0
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None  # (id, epoch), v16+ with NOT_LEADER
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    upper: int = -1  # where this fetcher's reading stops (high watermark, LSO or LEO)
    region: FileRegion | None = None
    records: bytes = b""
    aborted: list[tuple[int, int]] | None = None  # (producer id, first offset)

    def again(self) -> PartitionRead:
        """The same partition asked the same way, not read yet."""
        return PartitionRead(topic=self.topic, topic_id=self.topic_id, index=self.index,
                             fetch_offset=self.fetch_offset, max_bytes=self.max_bytes,
                             leader_epoch=self.leader_epoch,
                             last_fetched_epoch=self.last_fetched_epoch)

    @property
    def size(self) -> int:
        return self.region.length if self.region is not None else len(self.records or b"")

    def release(self) -> None:
        if self.region is not None:
            self.region.close()
            self.region = None


def requested(broker: Broker, body: Any, version: int) -> list[PartitionRead]:
    """The partitions asked for, each once: a partition named again replaces the earlier
    ask in its place (Kafka reads the request into a map)."""
    reads: dict[tuple[Any, int], PartitionRead] = {}
    epochs, last_epochs = version >= 9, version >= 12
    for topic in body.topics:
        if version >= 13:
            topic_id = topic.topic_id
            name = broker.topic_name_for_id(topic_id)
        else:
            topic_id, name = None, topic.topic
        key = topic_id or name
        # Positional: ten thousand partitions a request (topic, topic_id, index,
        # fetch_offset, max_bytes, leader_epoch, last_fetched_epoch).
        for p in topic.partitions:
            reads[(key, p.partition)] = PartitionRead(
                name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                p.current_leader_epoch if epochs else -1,
                p.last_fetched_epoch if last_epochs else -1)
    return list(reads.values())


def read_all(broker: Broker, reads: list[PartitionRead], max_bytes: int,
             read_committed: bool, replica: int = -1) -> int:
    """Read every partition in order; the first non-empty one may exceed the limits."""
    total = 0
    for r in reads:
        limit = min(r.max_bytes, max_bytes - total)
        try:
            total += _read_one(broker, r, max(limit, 0), min_one=(total == 0),
                               read_committed=read_committed, replica=replica)
        except StorageError as e:
            # Logged where it happened; this partition answers with the error, the others go on.
            r.release()
            r.records = b""
            r.error_code = e.error_code
    return total


def _read_one(broker: Broker, r: PartitionRead, limit: int, min_one: bool,
              read_committed: bool, replica: int = -1) -> int:
    if r.topic is None:
        r.error_code = UNKNOWN_TOPIC_ID
        return 0
    partition = partition_or_error(broker, r.topic, r.index)
    if isinstance(partition, int):
        r.error_code = partition
        return 0
    if r.topic_id is not None and (partition.topic_id is None
                                   or r.topic_id.int != partition.topic_id.int):
        # Named by the id of a topic since deleted and made again under its name.
        # (Compared as ints: UUID.__eq__ is a Python call, once per partition.)
        r.error_code = UNKNOWN_TOPIC_ID
        return 0
    if not partition.is_leader:
        r.error_code = NOT_LEADER_OR_FOLLOWER
        return 0
    try:
        partition.check_leader_epoch(r.leader_epoch)
    except PartitionError as e:
        r.error_code = e.error_code
        return 0
    log = partition.log
    upper = log.high_watermark
    if replica >= 0:
        if replica not in partition.replicas:
            r.error_code = NOT_LEADER_OR_FOLLOWER
            return 0
        if _diverging(partition, r):
            return 0
        upper = log.log_end_offset
    r.high_watermark = log.high_watermark
    r.last_stable_offset = partition.last_stable_offset
    r.log_start_offset = log.log_start_offset
    read_committed = read_committed and replica < 0
    if read_committed:
        upper = r.last_stable_offset
        r.aborted = []
    r.upper = upper
    if r.log_start_offset <= r.fetch_offset and upper <= r.fetch_offset <= log.log_end_offset:
        # Nothing past where this fetcher may read: what log.read answers, without
        # looking at a file (most partitions of a wide fetch, most of the time).
        piece = EMPTY_SLICE
    else:
        try:
            # Whole first batch: when it does not fit the limit (and need not), nothing is
            # sent, not its first bytes, as Kafka replaces an incomplete first entry with an
            # empty one (a consumer given only part of a batch cannot make progress).
            piece = log.read(r.fetch_offset, limit, max_offset=upper, min_one_message=True)
        except OffsetOutOfRangeError:
            r.error_code = OFFSET_OUT_OF_RANGE
            return 0
    if replica >= 0:
        broker.on_follower_fetch(partition, replica, r.fetch_offset)
        r.high_watermark = log.high_watermark
    if piece.length == 0 or (piece.length > limit and not min_one):
        return 0
    if replica >= 0 and broker.replication_quotas.leader.throttles(
            partition.topic, partition.index, replica in partition.isr, piece.length):
        return 0  # Kafka's shouldLeaderThrottle: no records while over the rate
    if read_committed:
        r.aborted = log.aborted_transactions_in(piece, r.fetch_offset, upper)
    if piece.length <= COPY_MAX:
        # Copied: no descriptor stays pinned for the many small reads of a wide fetch.
        r.records = piece.read_bytes()
    else:
        # Pinned: the segment may roll or be deleted while we send; its file stays open.
        r.region = FileRegion(piece.pin(), piece.position, piece.length, piece.unpin)
    return piece.length


def _diverging(partition: Any, r: PartitionRead) -> bool:
    """KIP-320: does the follower's log diverge from ours at its last fetched epoch?
    If so, answer with the largest epoch we share and where it ends."""
    if r.last_fetched_epoch < 0:
        return False
    log = partition.log
    epoch, end = log.leader_epochs.end_offset_for(r.last_fetched_epoch, log.log_end_offset)
    if epoch == r.last_fetched_epoch and end >= r.fetch_offset:
        return False
    r.diverging_epoch = (epoch, end)
    r.high_watermark = log.high_watermark
    r.log_start_offset = log.log_start_offset
    r.last_stable_offset = partition.last_stable_offset
    return True
