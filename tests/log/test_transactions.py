"""Transactions in the log: markers, producer state, the LSO and the ``.txnindex``.

The rules, as Kafka 3.9's ProducerAppendInfo, ProducerStateManager, TransactionIndex
and UnifiedLog apply them: a producer's first transactional batch opens its
transaction; a COMMIT/ABORT marker closes it unless its coordinator epoch is older
than the producer's last (52) or its producer epoch older (47); an ABORT appends a
34-byte entry (version, producerId, firstOffset, lastOffset, lastStableOffset) to
the segment's ``.txnindex``; the LSO is the smaller of the high watermark and the
first offset of the oldest transaction undecided or with its marker above the HW.
"""

from __future__ import annotations

import struct
import tempfile
import time
import unittest.mock
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.log import producer_state
from josefk.log.config import LogConfig
from josefk.log.index.txn import AbortedTxn, TransactionIndex
from josefk.log.log import Log
from josefk.log.manager import LogManager
from josefk.log.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerEntry,
    TransactionCoordinatorFencedError,
    decode_snapshot,
    encode_snapshot,
)
from josefk.protocol.end_txn_marker import (
    EndTxnMarker,
    decode_marker,
    encode_marker_batch,
)
from josefk.protocol.record_batch import InvalidRecordError, check_batch, parse_header

from .conftest import BASE_TS, INT32_MAX, clean_pass, files_with, seg_name

P1, P2 = 1000, 2000
ENTRY = struct.Struct(">hqqqq")


def txn_batch(pid: int, seq: int, count: int = 1, *, epoch: int = 0,
              transactional: bool = True, value_size: int = 16) -> bytearray:
    """Records stamped now: a marker (stamped now) must not roll the segment by time."""
    now = int(time.time() * 1000)
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=now + i, key=b"k%d" % i, value=b"v" * value_size,
                       headers=[])
    return bytearray(builder.build())


def lso_after_hw(log: Log) -> int:
    """Everything appended is replicated: the LSO is then bounded by transactions only."""
    log.high_watermark = log.log_end_offset
    return log.last_stable_offset


def txnindex_bytes(log: Log, base: int = 0) -> bytes:
    path = log.directory / seg_name(base, ".txnindex")
    return path.read_bytes() if path.exists() else b""


# --- the marker codec ---------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_marker_batch_is_kafkas_end_transaction_marker(commit: bool) -> None:
    buf = encode_marker_batch(P1, 3, 7, commit, BASE_TS, base_offset=42, leader_epoch=5)
    header = check_batch(buf)
    assert (header.base_offset, header.partition_leader_epoch, header.producer_id,
            header.producer_epoch, header.base_sequence, header.record_count,
            header.is_control, header.is_transactional, header.base_timestamp,
            header.max_timestamp) == (42, 5, P1, 3, -1, 1, True, True, BASE_TS, BASE_TS)
    [record] = list(DefaultRecordBatch(bytes(buf)))
    assert record.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert record.value == struct.pack(">hi", 0, 7)
    assert decode_marker(buf, header) == EndTxnMarker(commit, 7)


def test_a_client_may_not_write_a_control_batch(make_log: Callable[..., Log]) -> None:
    log = make_log()
    with pytest.raises(InvalidRecordError, match="control records"):
        log.append_as_leader(bytes(encode_marker_batch(P1, 0, 0, True, BASE_TS)), 0)
    assert log.log_end_offset == 0


# --- producer state and the LSO -------------------------------------------------------------

def test_transactions_v2_bump_the_epoch_at_the_marker(make_log: Callable[..., Log]) -> None:
    """KIP-890 part 2: the marker carries the epoch after the data's; the next transaction
    starts at it from sequence 0, and the old epoch is fenced."""
    log = make_log()
    log.append_as_leader(txn_batch(P1, 0, 2, epoch=4), 0)
    assert log.has_ongoing_transaction(P1) and log.has_ongoing_transaction(P1, 4)
    # An open transaction of an older epoch is not the producer's current one.
    assert not log.has_ongoing_transaction(P1, 5)
    log.append_control_batch(P1, 5, 0, commit=True, leader_epoch=0)
    assert not log.has_ongoing_transaction(P1)
    log.append_as_leader(txn_batch(P1, 0, 1, epoch=5), 0)
    assert log.has_ongoing_transaction(P1, 5)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(P1, 2, 1, epoch=4), 0)


def test_a_transaction_holds_the_lso_until_its_marker_is_replicated(
        make_log: Callable[..., Log]) -> None:
    log = make_log()
    log.append_as_leader(txn_batch(-1, -1, 2, epoch=-1, transactional=False), 0)  # 0-1
    log.append_as_leader(txn_batch(P1, 0, 3), 0)  # 2-4
    assert log.first_unstable_offset == 2
    assert log.has_ongoing_transaction(P1)
    log.high_watermark = 1
    assert log.last_stable_offset == 1  # the HW is lower
    assert lso_after_hw(log) == 2
    info = log.append_control_batch(P1, 0, 0, commit=True, leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (5, 5)
    assert not log.has_ongoing_transaction(P1)
    log.high_watermark = 5  # the marker is not replicated yet
    assert (log.first_unstable_offset, log.last_stable_offset) == (2, 2)
    assert lso_after_hw(log) == 6
    assert log.first_unstable_offset is None
    assert txnindex_bytes(log) == b""  # commits are not indexed


def test_the_lso_is_the_oldest_open_transaction(make_log: Callable[..., Log]) -> None:
    log = make_log()
    log.append_as_leader(txn_batch(P1, 0), 0)  # 0
    log.append_as_leader(txn_batch(P2, 0), 0)  # 1
    log.append_as_leader(txn_batch(P1, 1), 0)  # 2: same transaction
    assert lso_after_hw(log) == 0
    log.append_control_batch(P1, 0, 0, commit=False, leader_epoch=0)  # 3
    assert lso_after_hw(log) == 1
    log.append_control_batch(P2, 0, 0, commit=True, leader_epoch=0)  # 4
    assert lso_after_hw(log) == 5
    log.append_as_leader(txn_batch(P1, 2), 0)  # 5: a new transaction of P1
    assert lso_after_hw(log) == 5


def test_marker_from_an_older_coordinator_epoch_is_fenced(make_log: Callable[..., Log]) -> None:
    log = make_log()
    log.append_as_leader(txn_batch(P1, 0), 0)
    log.append_control_batch(P1, 0, 5, commit=True, leader_epoch=0)
    log.append_as_leader(txn_batch(P1, 1), 0)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError) as e:
        log.append_control_batch(P1, 0, 4, commit=False, leader_epoch=0)
    assert e.value.error_code == 52
    assert log.log_end_offset == end and log.has_ongoing_transaction(P1)
    log.append_control_batch(P1, 0, 5, commit=False, leader_epoch=0)  # the same epoch is fine
    assert log.producer_state.producers[P1].coordinator_epoch == 5


def test_marker_from_an_older_producer_epoch_is_refused(make_log: Callable[..., Log]) -> None:
    log = make_log()
    log.append_as_leader(txn_batch(P1, 0, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError) as e:
        log.append_control_batch(P1, 2, 0, commit=True, leader_epoch=0)
    assert e.value.error_code == 47
    # The coordinator's abort after a timeout bumps the epoch: accepted, sequences restart.
    log.append_control_batch(P1, 4, 0, commit=False, leader_epoch=0)
    entry = log.producer_state.producers[P1]
    assert (entry.epoch, list(entry.batches), entry.current_txn_first_offset) == (4, [], -1)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(P1, 1, epoch=3), 0)


@pytest.mark.parametrize("restart", [None, "clean", "unclean"])
@pytest.mark.parametrize("known_before", [True, False])
def test_after_a_marker_set_the_epoch_only_sequence_0_follows(
        tmp_path: Path, known_before: bool, restart: str | None) -> None:
    """A producer entry at the batch's epoch with no batches of it (the marker bumped
    the epoch, or it created the entry) has last sequence -1: Kafka's checkSequence takes
    only 0 next (inSequence(-1, seq)); only an entry with no epoch takes any sequence."""
    log = Log.open(tmp_path / "t-0", LogConfig())
    if known_before:
        log.append_as_leader(txn_batch(P1, 0, 3, epoch=3), 0)  # seq 0-2 at epoch 3
        log.append_control_batch(P1, 4, 0, commit=False, leader_epoch=0)  # bumped to 4
    else:
        log.append_control_batch(P1, 4, 0, commit=False, leader_epoch=0)  # unknown before
    if restart is not None:
        leo = log.log_end_offset
        if restart == "clean":
            log.close()
        log = Log.open(tmp_path / "t-0", LogConfig(), recovery_point=leo if restart == "clean"
                       else 0, clean_shutdown=restart == "clean")
    entry = log.producer_state.producers[P1]
    assert (entry.epoch, list(entry.batches)) == (4, [])
    end = log.log_end_offset
    for seq in (3, 1, INT32_MAX):
        with pytest.raises(OutOfOrderSequenceError) as e:
            log.append_as_leader(txn_batch(P1, seq, epoch=4), 0)
        assert e.value.error_code == 45
    assert log.log_end_offset == end
    info = log.append_as_leader(txn_batch(P1, 0, 2, epoch=4), 0)
    assert (info.first_offset, info.duplicate) == (end, False)
    log.append_as_leader(txn_batch(P1, 2, epoch=4), 0)
    log.close()


def test_a_producer_without_an_epoch_may_send_any_sequence(make_log: Callable[..., Log]) -> None:
    """An idempotent batch at NO_PRODUCER_EPOCH (-1) from a producer the partition knows
    at no epoch: Kafka accepts any sequence (currentEntry.producerEpoch == -1)."""
    log = make_log()
    log.append_as_leader(txn_batch(P1, 7, epoch=-1, transactional=False), 0)
    log.append_as_leader(txn_batch(P1, 3, epoch=-1, transactional=False), 0)
    assert log.log_end_offset == 2


def test_marker_for_an_unknown_producer_is_written(make_log: Callable[..., Log]) -> None:
    log = make_log()
    info = log.append_control_batch(P1, 0, 0, commit=False, leader_epoch=7)
    assert info.last_offset == 0 and log.last_stable_offset == log.high_watermark
    assert txnindex_bytes(log) == b""  # an empty transaction is not indexed
    assert log.leader_epochs.latest_epoch == 7


def test_non_transactional_batch_during_a_transaction_is_invalid_txn_state(
        make_log: Callable[..., Log]) -> None:
    log = make_log()
    log.append_as_leader(txn_batch(P1, 0), 0)
    with pytest.raises(InvalidTxnStateError) as e:
        log.append_as_leader(txn_batch(P1, 1, transactional=False), 0)
    assert e.value.error_code == 48
    # Transactional batches follow the idempotent sequence rules.
    assert log.append_as_leader(txn_batch(P1, 0), 0).duplicate
    with pytest.raises(OutOfOrderSequenceError, match="sequence"):
        log.append_as_leader(txn_batch(P1, 5), 0)


# --- the aborted-transaction index ------------------------------------------------------------

def test_abort_writes_kafkas_34_byte_entry(make_log: Callable[..., Log]) -> None:
    log = make_log()
    log.append_as_leader(txn_batch(P1, 0, 2), 0)  # 0-1
    log.append_as_leader(txn_batch(P2, 0), 0)  # 2
    log.append_control_batch(P1, 0, 0, commit=False, leader_epoch=0)  # 3: P2 still open
    log.append_control_batch(P2, 0, 0, commit=False, leader_epoch=0)  # 4
    assert txnindex_bytes(log) == (ENTRY.pack(0, P1, 0, 3, 2) + ENTRY.pack(0, P2, 2, 4, 5))
    assert log.collect_aborted_transactions(0, 5) == [(P1, 0), (P2, 2)]
    assert log.collect_aborted_transactions(4, 5) == [(P2, 2)]
    assert log.collect_aborted_transactions(0, 2) == [(P1, 0)]


def test_transaction_index_collect_stops_at_the_upper_bound(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "x.txnindex", 0)
    for txn in (AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 25, 30, 31)):
        index.append(txn)
    assert index.collect(11, 21) == ([AbortedTxn(2, 5, 20, 21)], True)
    assert index.collect(0, 100) == (index.entries, False)
    with pytest.raises(ValueError):
        index.append(AbortedTxn(4, 26, 30, 31))
    index.truncate_to(20)
    assert (tmp_path / "x.txnindex").read_bytes() == ENTRY.pack(0, 1, 0, 10, 11)
    assert TransactionIndex(tmp_path / "x.txnindex", 0).entries == [AbortedTxn(1, 0, 10, 11)]


def _spread_over_segments(log: Log) -> None:
    """P1's aborted transaction opens in the first segment and ends several later."""
    log.append_as_leader(txn_batch(P1, 0, value_size=200), 0)
    for seq in range(6):
        log.append_as_leader(txn_batch(P2, seq, value_size=200, transactional=False), 0)
    log.append_control_batch(P1, 0, 0, commit=False, leader_epoch=0)
    log.append_as_leader(txn_batch(P2, 6, transactional=False), 0)


def test_aborted_transactions_span_segments(make_log: Callable[..., Log]) -> None:
    log = make_log(segment_bytes=700)
    _spread_over_segments(log)
    assert len(log.segments) > 2
    marker_segment = log.segments[log._segment_index_for(7)]
    assert marker_segment.txn_index.entries == [AbortedTxn(P1, 0, 7, 8)]
    assert files_with(log.directory, ".txnindex") == [
        seg_name(marker_segment.base_offset, ".txnindex")]
    # A fetch from the first segment finds it in a later one.
    assert log.collect_aborted_transactions(0, 3) == [(P1, 0)]
    assert log.collect_aborted_transactions(8, 9) == []
    lso = lso_after_hw(log)
    piece = log.read(0, 1 << 20, max_offset=lso)
    assert log.aborted_transactions_in(piece, 0, lso) == [(P1, 0)]


# --- recovery, snapshots, truncation, replication -----------------------------------------

@pytest.mark.parametrize("segment_bytes", [700, 1 << 20])
def test_unclean_restart_rebuilds_the_index_and_open_transactions(
        tmp_path: Path, segment_bytes: int) -> None:
    config = LogConfig(segment_bytes=segment_bytes)
    log = Log.open(tmp_path / "t-0", config)
    _spread_over_segments(log)
    log.append_as_leader(txn_batch(P1, 1, epoch=0), 0)  # a new open transaction
    open_at = log.log_end_offset - 1
    expected = {s.base_offset: s.txn_index.entries for s in log.segments}
    for path in tmp_path.glob("t-0/*.txnindex"):
        path.unlink()
    # A crash: no close, no snapshot at the end; recovery from offset 0.
    log2 = Log.open(tmp_path / "t-0", config)
    assert {s.base_offset: s.txn_index.entries for s in log2.segments} == expected
    assert log2.first_unstable_offset == 0  # the aborted one, until the HW passes it
    assert lso_after_hw(log2) == log2.first_unstable_offset == open_at
    assert log2.producer_state.producers[P1].current_txn_first_offset == open_at
    log2.close()


def test_clean_restart_keeps_open_transactions_in_the_snapshot(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(txn_batch(P2, 0, 2), 0)  # 0-1
    log.append_control_batch(P2, 0, 9, commit=True, leader_epoch=0)
    log.append_as_leader(txn_batch(P1, 0), 0)  # 3
    log.close()
    [p2, p1] = sorted(decode_snapshot((tmp_path / "t-0" / seg_name(4, ".snapshot"))
                                      .read_bytes()), key=lambda e: -e.producer_id)
    assert (p1.producer_id, p1.current_txn_first_offset, p1.coordinator_epoch) == (P1, 3, -1)
    assert (p2.current_txn_first_offset, p2.coordinator_epoch) == (-1, 9)
    reopened = Log.open(tmp_path / "t-0", LogConfig(), recovery_point=4, clean_shutdown=True)
    assert reopened.first_unstable_offset == 3
    with pytest.raises(TransactionCoordinatorFencedError):
        reopened.append_control_batch(P2, 0, 8, commit=True, leader_epoch=0)
    reopened.close()


def test_snapshot_round_trip_keeps_transaction_fields() -> None:
    entry = ProducerEntry(P1, 2, coordinator_epoch=4, current_txn_first_offset=77,
                          last_timestamp=BASE_TS)
    [back] = decode_snapshot(encode_snapshot([entry]))
    assert (back.epoch, back.coordinator_epoch, back.current_txn_first_offset,
            back.last_timestamp, list(back.batches)) == (2, 4, 77, BASE_TS, [])


def test_truncation_drops_index_entries_and_reopens_the_transaction(
        make_log: Callable[..., Log]) -> None:
    log = make_log()
    log.append_as_leader(txn_batch(P1, 0), 0)  # 0
    log.append_control_batch(P1, 0, 0, commit=False, leader_epoch=0)  # 1
    log.append_as_leader(txn_batch(P1, 1), 0)  # 2
    log.append_control_batch(P1, 0, 0, commit=False, leader_epoch=0)  # 3
    assert len(txnindex_bytes(log)) == 2 * ENTRY.size
    log.high_watermark = 4
    log.truncate_to(3)
    assert txnindex_bytes(log) == ENTRY.pack(0, P1, 0, 1, 2)
    assert log.first_unstable_offset == 2  # the HW (4, cut to 3) passed the first marker
    log.truncate_to(1)
    assert txnindex_bytes(log) == b"" and lso_after_hw(log) == 0
    log.truncate_fully_and_start_at(10)
    assert log.first_unstable_offset is None and txnindex_bytes(log) == b""


def test_a_follower_builds_the_same_index(make_log: Callable[..., Log]) -> None:
    leader, follower = make_log("leader-0"), make_log("follower-0")
    leader.append_as_leader(txn_batch(P1, 0), 0)
    leader.append_as_leader(txn_batch(P2, 0), 0)
    leader.append_control_batch(P1, 0, 0, commit=False, leader_epoch=0)
    follower.append_as_follower(leader.read(0, 1 << 20).read_bytes())
    assert txnindex_bytes(follower) == txnindex_bytes(leader) == ENTRY.pack(0, P1, 0, 2, 1)
    assert lso_after_hw(follower) == 1
    # Replication does not fence: a marker the leader accepted is applied as it is.
    marker = encode_marker_batch(P2, 0, -5, True, BASE_TS, base_offset=3)
    follower.append_as_follower(bytes(marker))
    assert lso_after_hw(follower) == 4


def test_retention_deletes_the_index_with_its_segment(make_log: Callable[..., Log]) -> None:
    log = make_log(segment_bytes=700, file_delete_delay_ms=0)
    _spread_over_segments(log)
    index = log.segments[log._segment_index_for(7)].txn_index.path
    log.roll()
    log.high_watermark = log.log_end_offset
    log.delete_records(log.log_end_offset)
    log.delete_expired_files(now=1 << 62)
    assert not index.exists() and files_with(log.directory, ".txnindex") == []
    assert log.first_unstable_offset is None


def test_first_unstable_offset_is_at_least_the_log_start(make_log: Callable[..., Log]) -> None:
    log = make_log()
    log.append_as_leader(txn_batch(P1, 0), 0)  # 0
    log.append_as_leader(txn_batch(P2, 0, transactional=False), 0)  # 1
    log.high_watermark = 2
    log.delete_records(1)
    assert (log.first_unstable_offset, log.last_stable_offset) == (1, 1)


def test_log_append_time_marker(make_log: Callable[..., Log]) -> None:
    log = make_log(message_timestamp_type="LogAppendTime")
    info = log.append_control_batch(P1, 0, 0, commit=True, leader_epoch=0, now=BASE_TS + 5)
    header = info.batches[0]
    assert header.is_log_append_time and header.max_timestamp == BASE_TS + 5
    check_batch(log.read(0, 1 << 20).read_bytes())
    assert parse_header(log.read(0, 1 << 20).read_bytes()).is_control


# --- compaction -------------------------------------------------------------------------------

def plain() -> bytearray:
    return txn_batch(-1, -1, 2, epoch=-1, value_size=100, transactional=False)


def _compacted(tmp_path: Path) -> tuple[LogManager, Log]:
    lm = LogManager([tmp_path], lambda _topic: LogConfig(
        cleanup_policy="compact", min_cleanable_dirty_ratio=0.0, segment_bytes=700))
    lm.startup()
    return lm, lm.get_or_create_log("topic", 0)


def test_the_cleaner_stops_at_an_open_transaction_and_keeps_the_index(tmp_path: Path) -> None:
    lm, log = _compacted(tmp_path)
    try:
        for _ in range(6):
            log.append_as_leader(plain(), 0)
        log.append_as_leader(txn_batch(P1, 0, value_size=100), 0)  # offset 12: open
        for _ in range(6):
            log.append_as_leader(plain(), 0)
        log.roll()
        log.high_watermark = log.log_end_offset
        assert log.last_stable_offset == 12
        assert (clean_pass(lm) or 0) <= 12  # nothing at or above the open transaction
        assert len([h for s in log.segments for _, h in s.batches_from(0)
                    if h.base_offset >= 12]) == 7
        log.append_control_batch(P1, 0, 0, commit=False, leader_epoch=0)
        log.append_as_leader(plain(), 0)
        log.roll()
        log.high_watermark = log.log_end_offset
        entries = [t for s in log.segments for t in s.txn_index.entries]
        holder = log.segments[log._segment_index_for(entries[0].last_offset)]
        assert entries and clean_pass(lm) is not None
        assert log.segments[log._segment_index_for(entries[0].last_offset)] is not holder
        assert [t for s in log.segments for t in s.txn_index.entries] == entries
        assert log.collect_aborted_transactions(0, log.log_end_offset) == [(P1, 12)]
    finally:
        lm.shutdown()
    reopened = Log.open(log.directory, LogConfig(cleanup_policy="compact", segment_bytes=700))
    assert reopened.collect_aborted_transactions(0, reopened.log_end_offset) == [(P1, 12)]
    reopened.close()


# --- truncation replays from an in-memory checkpoint ------------------------------------------

def _state(log: Log) -> tuple[object, ...]:
    ps = log.producer_state
    return ({pid: (e.epoch, list(e.batches), e.coordinator_epoch, e.current_txn_first_offset,
                   e.last_timestamp) for pid, e in ps.producers.items()},
            dict(ps.ongoing), dict(ps.unreplicated), ps.map_end_offset, log.last_stable_offset)


_op_st = st.tuples(st.sampled_from(["data", "txn", "commit", "abort"]), st.sampled_from([P1, P2]))


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(_op_st, min_size=1, max_size=60), cut=st.floats(0, 1),
       hw=st.floats(0, 1))
def test_a_truncation_from_a_checkpoint_leaves_the_state_a_full_replay_leaves(
        ops: list[tuple[str, int]], cut: float, hw: float) -> None:
    """Checkpoints every few offsets (instead of thousands): after truncate_to, the
    producers, open and unreplicated transactions and the LSO equal what replaying the
    whole log gives."""
    with tempfile.TemporaryDirectory() as tmp, \
            unittest.mock.patch.object(producer_state, "CHECKPOINT_INTERVAL", 3), \
            unittest.mock.patch.object(producer_state, "CHECKPOINT_OFFSETS_PER_PRODUCER", 0):
        log = Log.open(Path(tmp) / "t-0", LogConfig())
        try:
            seqs = {P1: 0, P2: 0}
            for kind, pid in ops:
                if kind in ("commit", "abort"):
                    if log.producer_state.has_ongoing_transaction(pid):
                        log.append_control_batch(pid, 0, 0, commit=kind == "commit",
                                                 leader_epoch=0)
                    continue
                if kind == "data" and log.producer_state.has_ongoing_transaction(pid):
                    continue  # a producer in a transaction writes transactionally
                log.append_as_leader(txn_batch(pid, seqs[pid], 2,
                                               transactional=kind == "txn"), leader_epoch=0)
                seqs[pid] += 2
            log.high_watermark = int(log.log_end_offset * hw)
            log.truncate_to(max(log.high_watermark, int(log.log_end_offset * cut)))
            truncated = _state(log)
            log.producer_state.reset()  # no checkpoints: replay from the log start
            log._load_producer_state()
            log.producer_state.on_high_watermark_updated(log.high_watermark)
            assert _state(log) == truncated
        finally:
            log.close()


def test_a_truncation_replays_only_from_the_newest_checkpoint_below_the_cut(
        make_log: Callable[..., Log], monkeypatch: pytest.MonkeyPatch) -> None:
    log = make_log()
    for seq in range(0, 10_000, 2):
        log.append_as_leader(txn_batch(P1, seq, 2, transactional=False), leader_epoch=0)
    replayed = []
    real = log.producer_state.replay
    monkeypatch.setattr(log.producer_state, "replay",
                        lambda header, *a: (replayed.append(header.base_offset),
                                            real(header, *a))[1])
    log.truncate_to(9_001)
    assert log.log_end_offset == 9_000
    # The checkpoint at 8,000 (every CHECKPOINT_INTERVAL offsets), not the log start.
    assert replayed == list(range(8_000, 9_000, 2))
    assert list(log.producer_state.producers[P1].batches)[-1].last_seq == 8_999
