"""Replaying a ``__consumer_offsets`` partition at load, folding superseded offset commits.

A group's history is mostly offset commits, each superseded by the next commit of the
same group and partition. The load scans each batch for its records' (offset, key,
value) bytes only (the log cleaner's scan), keeps the last plain offset commit of each
key, and decodes and replays only those, each at its own place among the records that
are always replayed in log order: tombstones, group metadata and KIP-848 records,
transactional records and their markers. That is what replaying the whole log gives:
a dropped commit is followed by one that overwrites it, and a tombstone, a marker or a
group record in between meets a state the later commit overwrites too (a transaction's
marker keeps the later of a transactional and a plain commit, by offset).
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import NamedTuple

from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.records import Record, decode_key, decode_value
from josefk.cluster.coordinator.records import (
    OFFSETS_TOPIC,
    RecordFormatError,
    control_is_commit,
    keys_and_values,
    log_batches,
)
from josefk.log.log import Log, OffsetOutOfRangeError
from josefk.protocol.record_batch import BatchHeader, RecordBatchError

logger = logging.getLogger(__name__)

LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # offsets.load.buffer.size's default
# Records held before they are replayed: bounds the memory of a load whose history is
# mostly records that are not folded (transactional commits, group records).
WINDOW_RECORDS = 200_000
# Records replayed between two pauses of a load in the background.
PAUSE_RECORDS = 2_000

# An OffsetCommitKey's int16 version, 0 or 1; the same key in either.
_COMMIT_V0 = b"\x00\x00"
_COMMIT_V1 = b"\x00\x01"


class Entry(NamedTuple):
    """A data record to replay: its key and value bytes (None: a tombstone)."""

    offset: int
    key: bytes
    value: bytes | None
    producer_id: int = -1  # >= 0: in that producer's transaction


class Marker(NamedTuple):
    """A transaction marker: its producer's offsets here commit or abort."""

    offset: int
    producer_id: int
    commit: bool


class HistoryScan:
    """The records of a partition's batches, read in log order, to replay in that order
    with every superseded plain offset commit left out."""

    def __init__(self) -> None:
        # The last plain offset commit of each key (as version 1): (offset, value).
        self._commits: dict[bytes, tuple[int, bytes]] = {}
        self._others: list[Entry | Marker] = []

    def add_batch(self, batch: bytes | memoryview, header: BatchHeader) -> None:
        """Take in one whole batch of the log."""
        offsets, keys, values = keys_and_values(batch, header)
        if header.is_control:
            for offset, key in zip(offsets, keys, strict=True):
                commit = control_is_commit(key)
                if commit is not None:
                    self._others.append(Marker(offset, header.producer_id, commit))
            return
        if header.is_transactional:
            self._others += [Entry(o, k, v, header.producer_id)
                             for o, k, v in zip(offsets, keys, values, strict=True)]
            return
        if keys and None not in values and min(keys).startswith(_COMMIT_V1) and \
                max(keys).startswith(_COMMIT_V1):
            # Offset commits only (every key between two that start with the prefix starts
            # with it too), as most batches are: folded without a Python loop.
            self._commits.update(zip(keys, zip(offsets, values, strict=True), strict=True))
            return
        commits, others = self._commits, self._others
        for offset, key, value in zip(offsets, keys, values, strict=True):
            if value is None or key[:2] not in (_COMMIT_V1, _COMMIT_V0):
                others.append(Entry(offset, key, value))
            elif key[1] == 1:
                commits[key] = (offset, value)
            else:
                commits[_COMMIT_V1 + key[2:]] = (offset, value)

    def __len__(self) -> int:
        """How many records :meth:`drain` would give."""
        return len(self._commits) + len(self._others)

    def drain(self) -> Iterator[Entry | Marker]:
        """The records taken in so far to replay, in log order; the scan starts afresh.
        (Replaying a commit a later batch supersedes is what replaying everything does.)"""
        survivors = sorted(Entry(offset, key, value)
                           for key, (offset, value) in self._commits.items())
        others = self._others
        self._commits, self._others = {}, []
        return heapq.merge(survivors, others, key=itemgetter(0))


class PartitionLoad:
    """Replaying partition ``p``'s log (whose groups ``in_partition`` selects) into
    ``groups``, ``window`` records held at a time at most. :meth:`steps` pauses now and
    then so a caller on the event loop can serve others meanwhile; it reads to the end
    the log had when it began, so a caller that paused runs it again until
    :attr:`caught_up`. ``touched`` gathers the ids of the groups replayed."""

    def __init__(self, log: Log, groups: Groups, in_partition: Callable[[str], bool], p: int,
                 window: int = WINDOW_RECORDS) -> None:
        self.log, self.groups, self.in_partition, self.p = log, groups, in_partition, p
        self.window = window
        self.offset = log.log_start_offset
        self.failed = False
        self.touched: set[str] = set()

    @property
    def caught_up(self) -> bool:
        """Whether nothing is left to read: the log's end reached, or a batch unreadable."""
        return self.failed or self.offset >= self.log.log_end_offset

    def steps(self) -> Iterator[None]:
        """Replay from :attr:`offset` to the log's present end, pausing after each batch
        and every few thousand records replayed."""
        scan = HistoryScan()
        try:
            for header, batch in log_batches(self.log, LOAD_BUFFER_BYTES, self.offset):
                scan.add_batch(batch, header)
                self.offset = header.next_offset
                if len(scan) >= self.window:
                    yield from self._replay(scan.drain())
                yield
        except (RecordBatchError, OffsetOutOfRangeError, OSError, ValueError, IndexError) as e:
            logger.error("loading %s-%d stopped at offset %d: %s", OFFSETS_TOPIC, self.p,
                         self.offset, e)
            self.failed = True
        yield from self._replay(scan.drain())

    def run(self) -> set[str]:
        """The whole replay with no pause: the ids of the groups it touched."""
        deque(self.steps(), maxlen=0)
        return self.touched

    def _replay(self, records: Iterable[Entry | Marker]) -> Iterator[None]:
        groups, in_partition, touched = self.groups, self.in_partition, self.touched
        for n, item in enumerate(records, 1):
            if isinstance(item, Marker):
                groups.replay_txn_marker(item.producer_id, item.commit, in_partition)
            else:
                # A transaction's offsets stay pending until its marker is read (or after
                # the log end, while it is still open).
                record = _decode(item, self.p)
                if record is not None:
                    groups.replay(record, item.offset, item.producer_id)
                    touched.add(record[0].group)
            if n % PAUSE_RECORDS == 0:
                yield


def load_log(log: Log, groups: Groups, in_partition: Callable[[str], bool], p: int,
             window: int = WINDOW_RECORDS) -> set[str]:
    """Replay partition ``p``'s whole log at once (:class:`PartitionLoad`): the ids of the
    groups it touched."""
    return PartitionLoad(log, groups, in_partition, p, window).run()


def _decode(entry: Entry, p: int) -> Record | None:
    try:
        key = decode_key(entry.key)
        if key is None:
            return None
        return key, decode_value(key, entry.value)
    except (RecordFormatError, UnicodeDecodeError) as e:
        logger.warning("skipping undecodable record at %s-%d offset %d: %s", OFFSETS_TOPIC, p,
                       entry.offset, e)
        return None
