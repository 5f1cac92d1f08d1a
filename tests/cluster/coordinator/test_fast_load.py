"""Loading ``__consumer_offsets`` by folding superseded offset commits gives the groups,
offsets and open transactions that replaying every record in log order gives; loading
``__transaction_state`` from the last record of each id gives what replaying all gives.

Random histories on a real log (segments, compressed batches): plain and transactional
offset commits (key versions 0 and 1, value versions 1 and 3), offset tombstones, group
metadata and its tombstones, KIP-848 group records, COMMIT and ABORT markers, and
transactions left open at the log end.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.cluster.coordinator.group.api import GroupConfig
from josefk.cluster.coordinator.group.consumer.records import (
    METADATA,
    TARGET_METADATA,
    AssignmentEpochValue,
    ConsumerKey,
    GroupEpochValue,
)
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.load import HistoryScan, load_log
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    decode_key,
    decode_value,
    encode_record,
)
from josefk.cluster.coordinator.records import LogRecord, control_is_commit, read_batches
from josefk.cluster.coordinator.transaction.records import TopicPartition, TxnLogValue
from josefk.cluster.coordinator.transaction.records import encode_record as encode_txn_record
from josefk.cluster.coordinator.transaction.service import _read_records as read_txn_records
from josefk.cluster.coordinator.transaction.state import replay as txn_replay
from josefk.log.config import LogConfig
from josefk.log.log import Log
from josefk.protocol.record_batch import BatchHeader, parse_header

GROUPS = ["g0", "g1", "g2"]
PRODUCERS = [1000, 1001]
NOW = 1_700_000_000_000


def every(_group: str) -> bool:
    return True


def clock() -> int:
    return NOW


# --- random histories --------------------------------------------------------------------

groups_st = st.sampled_from(GROUPS)
commit_st = st.builds(
    lambda g, tp, offset, expiry: (OffsetCommitKey(g, "t", tp), OffsetCommitValue(
        offset, f"m{offset}", NOW, -1 if expiry else 3, NOW + 60_000 if expiry else -1)),
    groups_st, st.integers(0, 2), st.integers(0, 10**6), st.booleans())
offset_tombstone_st = st.builds(lambda g, tp: (OffsetCommitKey(g, "t", tp), None),
                                groups_st, st.integers(0, 2))
member = MemberMetadata("m-1", None, "client", "/127.0.0.1", 30_000, 10_000, b"sub", b"asg")
group_st = st.builds(
    lambda g, gen, members: (GroupMetadataKey(g), GroupMetadataValue(
        "consumer", gen, "range", "m-1" if members else None, NOW,
        (member,) if members else ())),
    groups_st, st.integers(0, 5), st.booleans())
group_tombstone_st = st.builds(lambda g: (GroupMetadataKey(g), None), groups_st)
consumer_st = st.one_of(
    st.builds(lambda g, e: (ConsumerKey(METADATA, g), GroupEpochValue(e)),
              groups_st, st.integers(1, 9)),
    st.builds(lambda g, e: (ConsumerKey(TARGET_METADATA, g), AssignmentEpochValue(e)),
              groups_st, st.integers(1, 9)),
    st.builds(lambda g: (ConsumerKey(METADATA, g), None), groups_st))
plain_record_st = st.one_of(commit_st, commit_st, commit_st, offset_tombstone_st, group_st,
                            group_tombstone_st, consumer_st)

# A batch: ("plain", records, gzip, key v0), ("txn", producer, records), ("marker", producer,
# commit).
batch_st = st.one_of(
    st.tuples(st.just("plain"), st.lists(plain_record_st, min_size=1, max_size=6),
              st.booleans(), st.booleans()),
    st.tuples(st.just("txn"), st.sampled_from(PRODUCERS),
              st.lists(st.one_of(commit_st, offset_tombstone_st), min_size=1, max_size=3)),
    st.tuples(st.just("marker"), st.sampled_from(PRODUCERS), st.booleans()))


def encoded(record: Record, key_v0: bool) -> tuple[bytes, bytes | None]:
    key, value = encode_record(record)
    if key_v0 and isinstance(record[0], OffsetCommitKey):
        key = b"\x00\x00" + key[2:]  # OffsetCommitKey v0: the same fields
    return key, value


def data_batch(entries: list[tuple[bytes, bytes | None]], *, gzip: bool = False,
               producer_id: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=1 if gzip else 0, is_transactional=producer_id >= 0,
        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=-1, batch_size=1 << 24)
    for i, (key, value) in enumerate(entries):
        builder.append(i, timestamp=NOW, key=key, value=value, headers=[])
    return bytes(builder.build())


def write_history(log: Log, history: list[tuple[Any, ...]]) -> None:
    open_txns: set[int] = set()
    for batch in history:
        if batch[0] == "plain":
            _, records, gzip, key_v0 = batch
            log.append_as_leader(data_batch([encoded(r, key_v0) for r in records], gzip=gzip),
                                 leader_epoch=0)
        elif batch[0] == "txn":
            _, producer_id, records = batch
            log.append_as_leader(data_batch([encoded(r, False) for r in records],
                                            producer_id=producer_id), leader_epoch=0)
            open_txns.add(producer_id)
        elif batch[1] in open_txns:
            _, producer_id, commit = batch
            log.append_control_batch(producer_id, 0, 0, commit, leader_epoch=0)
            open_txns.discard(producer_id)


# --- the reference: every record, decoded and replayed in log order -----------------------


def log_batches(log: Log) -> Iterator[tuple[BatchHeader, list[LogRecord]]]:
    """Every batch of the log, decoded by kafka-python (a read stops at a segment's end)."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30, max_offset=log.log_end_offset).read_bytes()
        for header, records in read_batches(data):
            yield header, records
            offset = header.next_offset


def full_replay(log: Log, groups: Groups) -> None:
    for header, records in log_batches(log):
        if header.is_control:
            for rec in records:
                commit = control_is_commit(rec.key)
                if commit is not None:
                    groups.replay_txn_marker(header.producer_id, commit, every)
            continue
        producer_id = header.producer_id if header.is_transactional else -1
        for rec in records:
            assert rec.key is not None
            key = decode_key(rec.key)
            assert key is not None
            groups.replay((key, decode_value(key, rec.value)), rec.offset, producer_id)


def state(groups: Groups) -> dict[str, Any]:
    return {
        "offsets": groups.offsets,
        "pending": groups.pending_txn._by_producer,
        "classic": {g: (x.state, x.generation, x.protocol_type, x.protocol_name, x.leader_id,
                        sorted(x.members)) for g, x in groups.groups.items()},
        "consumer": {g: (x.group_epoch, x.assignment_epoch, sorted(x.members))
                     for g, x in groups.consumer.groups.items()},
    }


def new_groups() -> Groups:
    return Groups(GroupConfig(), clock)


@settings(max_examples=150, deadline=None)
@given(st.lists(batch_st, min_size=1, max_size=40), st.sampled_from([1, 7, 10**6]))
def test_folded_load_equals_replaying_every_record(history, window):
    """Whatever the window of records held before replaying them (one, a few, all)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "__consumer_offsets-0",
                       LogConfig(cleanup_policy="compact", segment_bytes=1024))
        try:
            write_history(log, history)
            expected, actual = new_groups(), new_groups()
            full_replay(log, expected)
            touched = load_log(log, actual, every, 0, window)
            assert state(actual) == state(expected)
            assert touched == set(expected.offsets) | set(expected.groups) | \
                set(expected.consumer.groups) | touched_only(log)
        finally:
            log.close()


def touched_only(log: Log) -> set[str]:
    """Groups some record names, though none of them is left (e.g. deleted)."""
    return {key.group for header, records in log_batches(log) if not header.is_control
            for rec in records if rec.key is not None and (key := decode_key(rec.key))}


def test_superseded_commits_are_neither_kept_nor_decoded():
    """Ten thousand commits of a hundred partitions leave a hundred records to decode."""
    scan = HistoryScan()
    for n in range(100):
        batch = data_batch([encode_record((OffsetCommitKey("g", "t", p),
                                           OffsetCommitValue(n, "", NOW))) for p in range(100)])
        scan.add_batch(batch, parse_header(batch))
    assert len(scan) == 100
    groups = new_groups()
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "__consumer_offsets-0", LogConfig(segment_bytes=1 << 20))
        try:
            for n in range(100):
                log.append_as_leader(data_batch([encode_record(
                    (OffsetCommitKey("g", "t", p), OffsetCommitValue(n, "", NOW)))
                    for p in range(100)]), leader_epoch=0)
            log.append_as_leader(data_batch([encode_record(
                (OffsetCommitKey("g", "t", 0), None))]), leader_epoch=0)
            assert load_log(log, groups, every, 0) == {"g"}
        finally:
            log.close()
    assert {tp: o.offset for tp, o in groups.offsets["g"].items()} == \
        {("t", p): 99 for p in range(1, 100)}
    assert groups.offsets["g"][("t", 1)].record_offset == 99 * 100 + 1


# --- __transaction_state: the last record of each transactional id --------------------------

txn_value_st = st.builds(
    lambda pid, epoch, status, parts: TxnLogValue(
        pid, epoch, 60_000, status,
        frozenset(TopicPartition("t", p) for p in parts if status), NOW, NOW),
    st.integers(0, 5), st.integers(0, 3), st.sampled_from([0, 1, 2, 4, 5]),
    st.frozensets(st.integers(0, 3), max_size=3))
txn_record_st = st.tuples(st.sampled_from(["a", "b", "c", "d"]),
                          st.one_of(st.none(), txn_value_st, txn_value_st))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(txn_record_st, min_size=1, max_size=5), st.booleans()),
                min_size=1, max_size=30))
def test_transaction_state_load_keeps_what_replaying_every_record_keeps(batches):
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "__transaction_state-0",
                       LogConfig(cleanup_policy="compact", segment_bytes=1024))
        try:
            for records, gzip in batches:
                log.append_as_leader(data_batch([encode_txn_record(r) for r in records],
                                                gzip=gzip), leader_epoch=0)
            every_record = [(r.key, r.value) for header, recs in log_batches(log)
                            for r in recs]
            expected = txn_replay(every_record)
            actual = txn_replay(read_txn_records(log, 0, 1 << 20))
        finally:
            log.close()
    assert {t: m.snapshot() for t, m in actual.items()} == \
        {t: m.snapshot() for t, m in expected.items()}
    assert len(expected) == len({t for records, _ in batches for t, _ in records}
                                - {t for t, v in latest(batches).items() if v is None})


def latest(batches: list[tuple[list[tuple[str, Any]], bool]]) -> dict[str, Any]:
    return {t: v for records, _ in batches for t, v in records}
