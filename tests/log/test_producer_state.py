"""Producer state (``log/producer_state.py``) and its use by ``Log``: Kafka's idempotence rules.

The rules, as Kafka 4.3's ProducerAppendInfo and UnifiedLog apply them: a batch
matching one of the producer's last five (same epoch, same sequence range) is a
duplicate, acknowledged with its original offsets and not written; otherwise an
older epoch is INVALID_PRODUCER_EPOCH (47), and a sequence that does not follow
the last one (wrapping at Int32.MAX_VALUE) is OUT_OF_ORDER_SEQUENCE_NUMBER (45);
a new epoch starts at 0, and a producer the partition does not know may start
anywhere. The state survives in ``<offset>.snapshot`` files and by replaying the
log after the newest readable one.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import pytest
from conftest import require_kafka_jars
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.log.config import LogConfig
from josefk.log.log import AppendInfo, Log, RecordTooLargeError
from josefk.log.producer_state import (
    BatchMetadata,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)
from josefk.protocol.record_batch import RecordBatchError

from .conftest import BASE_TS, INT32_MAX, build_batch, files_with, log_batches, seg_name

REPO = Path(__file__).resolve().parents[2]
RUN_CLASS = REPO / "tools" / "kafka" / "run-class.sh"
OUT_OF_ORDER, INVALID_EPOCH = 45, 47
PID, OTHER_PID = 1000, 2000
DAY_MS = 86_400_000
SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")
# Kafka's ProducerStateManager snapshot, version 1: version, CRC-32C of the rest, entries.
KAFKA_HEADER = struct.Struct(">hIi")
KAFKA_ENTRY = struct.Struct(">qhiqiqiq")


def batch(seq: int, count: int = 1, *, pid: int = PID, epoch: int = 0,
          ts: int = BASE_TS) -> bytearray:
    """An idempotent batch of ``count`` records from ``pid``/``epoch`` at sequence ``seq``."""
    return build_batch(count, ts, value_size=16, producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq)


def append(log: Log, seq: int, count: int = 1, **kw: int) -> AppendInfo:
    return log.append_as_leader(batch(seq, count, **kw), leader_epoch=0)


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(m.group(1)) for name in os.listdir(directory)
                  if (m := SNAPSHOT_RE.match(name)))


def reopen(log: Log, *, clean: bool, **config: object) -> Log:
    """Close (clean) or just abandon (a crash: no snapshot at close) and open again."""
    if clean:
        log.close()
    return Log.open(log.directory, LogConfig(**config),  # type: ignore[arg-type]
                    clean_shutdown=clean, recovery_point=log.log_end_offset if clean else 0,
                    log_start_offset=log.log_start_offset)


def assert_rejected(log: Log, data: bytearray, code: int) -> None:
    """``data`` is refused with error ``code`` and the log is left as it was."""
    leo, size = log.log_end_offset, log.size_in_bytes()
    producers = {pid: (e.epoch, list(e.batches)) for pid, e in log.producer_state.producers.items()}
    with pytest.raises(RecordBatchError) as caught:
        log.append_as_leader(data, leader_epoch=0)
    assert caught.value.error_code == code
    assert (log.log_end_offset, log.size_in_bytes()) == (leo, size)
    assert {pid: (e.epoch, list(e.batches))
            for pid, e in log.producer_state.producers.items()} == producers


def assert_duplicate(log: Log, data: bytearray, first: int, last: int) -> None:
    """``data`` is acknowledged with offsets ``first``..``last`` and nothing is written."""
    leo, size, files = log.log_end_offset, log.size_in_bytes(), sorted(os.listdir(log.directory))
    info = log.append_as_leader(data, leader_epoch=0)
    assert info.duplicate
    assert (info.first_offset, info.last_offset) == (first, last)
    assert (log.log_end_offset, log.size_in_bytes()) == (leo, size)
    assert sorted(os.listdir(log.directory)) == files


# --- duplicates and sequence checks -------------------------------------------------


def test_each_of_the_last_five_batches_is_a_duplicate(make_log: Callable[..., Log]) -> None:
    log = make_log()
    sent = []
    for i in range(6):
        info = append(log, 2 * i, 2)
        sent.append((2 * i, info.first_offset, info.last_offset))
    assert [s[1] for s in sent] == [0, 2, 4, 6, 8, 10]
    for seq, first, last in sent[1:]:
        assert_duplicate(log, batch(seq, 2), first, last)
    assert len(log_batches(log)) == 6
    # Still in sequence after the duplicates.
    assert append(log, 12).first_offset == 12


def test_sixth_oldest_batch_resent_is_out_of_order(make_log: Callable[..., Log]) -> None:
    log = make_log()
    for i in range(6):
        append(log, i)
    assert_rejected(log, batch(0), OUT_OF_ORDER)


def test_sequence_gap_is_out_of_order(make_log: Callable[..., Log]) -> None:
    log = make_log()
    append(log, 0, 3)
    assert_rejected(log, batch(4), OUT_OF_ORDER)
    assert_rejected(log, batch(2, 2), OUT_OF_ORDER)  # overlaps, but is no batch sent
    with pytest.raises(OutOfOrderSequenceError):
        append(log, 10)
    assert append(log, 3).first_offset == 3


def test_older_epoch_is_fenced(make_log: Callable[..., Log]) -> None:
    log = make_log()
    append(log, 0, 2, epoch=3)
    append(log, 0, 1, epoch=4)
    assert_rejected(log, batch(2, epoch=3), INVALID_EPOCH)
    # A resend of the old epoch's batch is no duplicate any more: fenced too.
    assert_rejected(log, batch(0, 2, epoch=3), INVALID_EPOCH)
    with pytest.raises(InvalidProducerEpochError):
        append(log, 0, epoch=0)
    assert append(log, 1, epoch=4).first_offset == 3


def test_new_epoch_starts_at_sequence_zero(make_log: Callable[..., Log]) -> None:
    log = make_log()
    append(log, 0, 5)
    assert_rejected(log, batch(5, epoch=1), OUT_OF_ORDER)
    assert_rejected(log, batch(1, epoch=1), OUT_OF_ORDER)
    assert append(log, 0, 2, epoch=1).first_offset == 5
    # The new epoch's batches are the producer's last ones now.
    assert_duplicate(log, batch(0, 2, epoch=1), 5, 6)
    assert_rejected(log, batch(0, 5), INVALID_EPOCH)


@pytest.mark.parametrize("seq", [0, 1, 17, 1_000_000, INT32_MAX])
def test_unknown_producer_may_start_anywhere(make_log: Callable[..., Log], seq: int) -> None:
    log = make_log()
    append(log, 0, 2, pid=OTHER_PID)
    assert append(log, seq, epoch=7).first_offset == 2
    after = 0 if seq == INT32_MAX else seq + 1
    assert_rejected(log, batch(after + 1, epoch=7), OUT_OF_ORDER)
    assert append(log, after, epoch=7).first_offset == 3
    # The other producer was not disturbed.
    assert append(log, 2, pid=OTHER_PID).first_offset == 4


def test_producers_are_independent(make_log: Callable[..., Log]) -> None:
    log = make_log()
    append(log, 0, 2)
    append(log, 100, 3, pid=OTHER_PID, epoch=2)
    append(log, 2)
    assert_duplicate(log, batch(0, 2), 0, 1)
    assert_duplicate(log, batch(100, 3, pid=OTHER_PID, epoch=2), 2, 4)
    assert_rejected(log, batch(104, pid=OTHER_PID, epoch=2), OUT_OF_ORDER)
    assert append(log, 103, pid=OTHER_PID, epoch=2).first_offset == 6


@pytest.mark.parametrize("clean", [True, False], ids=["close", "crash"])
def test_sequence_wraps_at_int32_max(make_log: Callable[..., Log], clean: bool) -> None:
    log = make_log()
    append(log, INT32_MAX - 4, 3)  # MAX-4 .. MAX-2
    assert append(log, INT32_MAX - 1, 4).last_offset == 6  # MAX-1, MAX, 0, 1
    [_, wrapped] = log_batches(log)
    assert (wrapped.base_sequence, wrapped.last_sequence) == (INT32_MAX - 1, 1)
    assert_duplicate(log, batch(INT32_MAX - 1, 4), 3, 6)
    assert_rejected(log, batch(5), OUT_OF_ORDER)
    # The wrapped batch is the one a snapshot keeps: its first sequence comes back.
    log = reopen(log, clean=clean)
    assert_duplicate(log, batch(INT32_MAX - 1, 4), 3, 6)
    assert append(log, 2).first_offset == 7
    log.close()


def test_single_record_at_int32_max_then_zero(make_log: Callable[..., Log]) -> None:
    log = make_log()
    append(log, INT32_MAX)
    assert_rejected(log, batch(1), OUT_OF_ORDER)
    assert append(log, 0).first_offset == 1


def test_failed_append_leaves_no_state(make_log: Callable[..., Log]) -> None:
    log = make_log(max_message_bytes=2000)
    append(log, 0)
    too_big = build_batch(60, BASE_TS, value_size=64, producer_id=PID, producer_epoch=0,
                          base_sequence=1)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(too_big, leader_epoch=0)
    assert append(log, 1).first_offset == 1


def test_non_idempotent_batches_are_left_alone(make_log: Callable[..., Log]) -> None:
    log = make_log()
    plain = build_batch(2)
    assert [log.append_as_leader(plain, 0).first_offset for _ in range(3)] == [0, 2, 4]
    assert log.producer_state.producers == {}


# --- snapshots ----------------------------------------------------------------------

entries_st = st.lists(
    st.builds(
        lambda pid, epoch, last_seq, last_offset, delta, ts, coord, txn: (
            pid, epoch, last_seq, last_offset, delta, ts, coord, txn),
        st.integers(0, (1 << 63) - 1), st.integers(0, (1 << 15) - 1),
        st.integers(0, INT32_MAX), st.integers(0, (1 << 62)), st.integers(0, 10_000),
        st.integers(-1, (1 << 62)), st.integers(-1, INT32_MAX), st.just(-1)),
    max_size=20, unique_by=lambda e: e[0])


def entry_from(pid: int, epoch: int, last_seq: int, last_offset: int, delta: int, ts: int,
               coord: int, txn: int) -> ProducerEntry:
    first_seq = (last_seq - delta) % (1 << 31)
    entry = ProducerEntry(pid, epoch, coordinator_epoch=coord, current_txn_first_offset=txn,
                          last_timestamp=ts)
    entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, delta, ts))
    return entry


@given(entries_st)
def test_snapshot_round_trip(raw: list[tuple[int, ...]]) -> None:
    entries = [entry_from(*e) for e in raw]
    data = encode_snapshot(entries)
    decoded = decode_snapshot(data)
    assert [(e.producer_id, e.epoch, list(e.batches), e.coordinator_epoch,
             e.current_txn_first_offset) for e in decoded] == [
        (e.producer_id, e.epoch, list(e.batches), e.coordinator_epoch,
         e.current_txn_first_offset) for e in entries]
    # Byte for byte Kafka's layout: version 1, CRC-32C from the entry count on, entries.
    version, crc, count = KAFKA_HEADER.unpack_from(data)
    assert (version, count) == (1, len(raw))
    assert crc == crc32c.crc32c(data[6:])
    assert len(data) == KAFKA_HEADER.size + count * KAFKA_ENTRY.size
    for i, (pid, epoch, last_seq, last_offset, delta, ts, coord, txn) in enumerate(raw):
        assert KAFKA_ENTRY.unpack_from(data, KAFKA_HEADER.size + i * KAFKA_ENTRY.size) == (
            pid, epoch, last_seq, last_offset, delta, ts, coord, txn)


def test_snapshot_entry_without_batches() -> None:
    """An entry with no data batch (Kafka: lastOffset -1) keeps its epoch and nothing else."""
    [entry] = decode_snapshot(encode_snapshot([ProducerEntry(5, epoch=3)]))
    assert (entry.producer_id, entry.epoch, list(entry.batches)) == (5, 3, [])


@given(entries_st.filter(bool), st.data())
def test_corrupt_snapshot_bytes_are_refused(raw: list[tuple[int, ...]], data: st.DataObject
                                            ) -> None:
    good = encode_snapshot([entry_from(*e) for e in raw])
    where = data.draw(st.integers(0, len(good) - 1), label="byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    flipped = bytearray(good)
    flipped[where] ^= 1 << bit
    with pytest.raises(ValueError):
        decode_snapshot(bytes(flipped))
    cut = data.draw(st.integers(0, len(good) - 1), label="length")
    with pytest.raises(ValueError):
        decode_snapshot(good[:cut])
    with pytest.raises(ValueError):
        decode_snapshot(good + b"\0")


def test_snapshots_at_roll_and_close(make_log: Callable[..., Log]) -> None:
    log = make_log(segment_bytes=600)
    for seq in range(0, 30, 3):
        append(log, seq, 3)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    assert snapshot_offsets(log.directory) == bases[1:]
    for offset in bases[1:]:
        assert (log.directory / f"{offset:020d}.snapshot").exists()
        assert (log.directory / seg_name(offset)).exists()
    # A snapshot at a roll holds the state below the new segment, i.e. the batch before.
    second = bases[1]
    [entry] = decode_snapshot((log.directory / f"{second:020d}.snapshot").read_bytes())
    assert entry.batches[-1].last_offset == second - 1
    log.close()
    assert snapshot_offsets(log.directory) == [*bases[1:], 30]
    [entry] = decode_snapshot((log.directory / f"{30:020d}.snapshot").read_bytes())
    assert (entry.producer_id, entry.epoch, entry.batches[-1]) == (
        PID, 0, BatchMetadata(27, 29, 29, 2, BASE_TS))


def test_snapshot_is_read_by_kafka(make_log: Callable[..., Log]) -> None:
    """Apache Kafka's DumpLogSegments decodes our snapshot to the same entries."""
    require_kafka_jars()
    log = make_log()
    append(log, 0, 3, epoch=2, ts=BASE_TS + 5)
    append(log, INT32_MAX - 1, 3, pid=OTHER_PID, ts=BASE_TS + 9)
    log.close()
    path = log.directory / f"{6:020d}.snapshot"
    done = subprocess.run(
        [str(RUN_CLASS), "org.apache.kafka.tools.DumpLogSegments", "--files", str(path)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("producerId"))
    fields = [dict(re.findall(r"(\w+): (\S+)", line)) for line in lines]
    assert [(f["producerId"], f["producerEpoch"], f["firstSequence"], f["lastSequence"],
             f["lastOffset"], f["offsetDelta"], f["timestamp"]) for f in fields] == [
        (str(PID), "2", "0", "2", "2", "2", str(BASE_TS + 5)),
        (str(OTHER_PID), "0", str(INT32_MAX - 1), "0", "5", "2", str(BASE_TS + 9)),
    ]


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "version"])
def test_corrupt_snapshot_is_skipped_for_an_older_one(tmp_path: Path, damage: str) -> None:
    config = {"segment_bytes": 600}
    log = Log.open(tmp_path / "t-0", LogConfig(**config))
    for seq in range(0, 30, 3):
        append(log, seq, 3)
    log.close()
    snapshots = snapshot_offsets(log.directory)
    newest = log.directory / f"{snapshots[-1]:020d}.snapshot"
    data = bytearray(newest.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x10
    elif damage == "truncate":
        data = data[: len(data) - 7]
    elif damage == "empty":
        data = bytearray()
    else:
        data[1] = 2
    newest.write_bytes(bytes(data))
    log = Log.open(log.directory, LogConfig(**config), clean_shutdown=True,
                   recovery_point=30)
    # The damaged one is gone, the one before it was loaded and the rest replayed.
    assert snapshot_offsets(log.directory) == snapshots[:-1]
    assert log.producer_state.map_end_offset == 30
    assert_duplicate(log, batch(27, 3), 27, 29)
    assert_duplicate(log, batch(24, 3), 24, 26)
    assert append(log, 30).first_offset == 30
    log.close()


def test_manager_load_falls_back_and_ignores_stray_snapshots(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    older = [entry_from(PID, 0, 4, 4, 4, BASE_TS, -1, -1)]
    (tmp_path / f"{5:020d}.snapshot").write_bytes(encode_snapshot(older))
    (tmp_path / f"{9:020d}.snapshot").write_bytes(b"\x00\x01garbage")
    (tmp_path / f"{50:020d}.snapshot").write_bytes(encode_snapshot(older))  # past the end
    assert manager.load(log_start_offset=0, log_end_offset=20) == 5
    assert manager.map_end_offset == 5
    assert list(manager.producers) == [PID]
    assert snapshot_offsets(tmp_path) == [5]
    assert files_with(tmp_path, ".snapshot") == [f"{5:020d}.snapshot"]


# --- recovery ----------------------------------------------------------------------


@pytest.mark.parametrize("segment_bytes", [1 << 30, 600], ids=["one-segment", "rolled"])
def test_crash_rebuilds_state_by_replay(make_log: Callable[..., Log], segment_bytes: int) -> None:
    log = make_log(segment_bytes=segment_bytes)
    for seq in range(0, 30, 3):
        append(log, seq, 3)
    append(log, 0, 2, pid=OTHER_PID, epoch=4)
    # No close: no snapshot at the log end; what the last snapshot lacks is replayed.
    log = reopen(log, clean=False, segment_bytes=segment_bytes)
    assert log.log_end_offset == 32
    assert_duplicate(log, batch(27, 3), 27, 29)
    assert_duplicate(log, batch(0, 2, pid=OTHER_PID, epoch=4), 30, 31)
    assert_rejected(log, batch(31), OUT_OF_ORDER)
    assert_rejected(log, batch(2, pid=OTHER_PID, epoch=3), INVALID_EPOCH)
    assert append(log, 30).first_offset == 32
    log.close()


def test_clean_restart_keeps_the_last_batch(make_log: Callable[..., Log]) -> None:
    log = make_log()
    for seq in range(0, 12, 3):
        append(log, seq, 3)
    log = reopen(log, clean=True)
    assert_duplicate(log, batch(9, 3), 9, 11)
    assert_rejected(log, batch(13), OUT_OF_ORDER)
    assert append(log, 12).first_offset == 12
    log.close()


# --- truncation, DeleteRecords, expiry ---------------------------------------------


def test_truncate_to_rewinds_the_state(make_log: Callable[..., Log]) -> None:
    log = make_log(segment_bytes=600)
    for seq in range(0, 30, 3):
        append(log, seq, 3)
    snapshots = snapshot_offsets(log.directory)
    log.truncate_to(18)
    assert log.log_end_offset == 18
    assert snapshot_offsets(log.directory) == [s for s in snapshots if s <= 18]
    # Sequences 18.. are gone with their offsets: they are new again, not duplicates.
    assert_duplicate(log, batch(15, 3), 15, 17)
    assert_rejected(log, batch(21, 3), OUT_OF_ORDER)
    info = append(log, 18, 3)
    assert (info.duplicate, info.first_offset) == (False, 18)
    # Truncating into an epoch bump brings the old epoch back.
    append(log, 0, 1, epoch=1)
    log.truncate_to(21)
    assert append(log, 21, 1).first_offset == 21
    log.close()


def test_truncate_fully_forgets_producers(make_log: Callable[..., Log]) -> None:
    log = make_log()
    append(log, 0, 3)
    log = reopen(log, clean=True)
    assert snapshot_offsets(log.directory) == [3]
    log.truncate_fully_and_start_at(100)
    assert snapshot_offsets(log.directory) == []
    assert log.producer_state.producers == {}
    assert append(log, 40).first_offset == 100  # unknown again: any sequence


def test_delete_records_below_the_last_batch_keeps_the_state(
        make_log: Callable[..., Log]) -> None:
    log = make_log(segment_bytes=600)
    for seq in range(0, 30, 3):
        append(log, seq, 3)
    log.high_watermark = log.log_end_offset
    log.delete_records(20)
    assert_duplicate(log, batch(27, 3), 27, 29)
    assert_rejected(log, batch(31), OUT_OF_ORDER)
    log = reopen(log, clean=True, segment_bytes=600)
    assert log.log_start_offset == 20
    assert_duplicate(log, batch(27, 3), 27, 29)
    assert append(log, 30).first_offset == 30
    log.close()


def test_delete_records_past_a_producer_keeps_the_state(make_log: Callable[..., Log]) -> None:
    log = make_log()
    append(log, 0, 3)
    append(log, 0, 2, pid=OTHER_PID)
    log.high_watermark = log.log_end_offset
    log.delete_records(5)
    assert_duplicate(log, batch(0, 3), 0, 2)
    assert_rejected(log, batch(7), OUT_OF_ORDER)
    # The snapshot at close keeps them too (Kafka filters snapshots by expiry only).
    log = reopen(log, clean=True)
    assert log.log_start_offset == 5
    assert_duplicate(log, batch(0, 3), 0, 2)
    assert_duplicate(log, batch(0, 2, pid=OTHER_PID), 3, 4)
    assert append(log, 3).first_offset == 5
    log.close()


def test_remove_expired_honours_expiration_ms(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    log.producer_state.expiration_ms = DAY_MS
    append(log, 0, 2, ts=BASE_TS)
    append(log, 0, 1, pid=OTHER_PID, ts=BASE_TS + 1000)
    assert log.producer_state.remove_expired(BASE_TS + DAY_MS - 1) == 0
    assert log.producer_state.remove_expired(BASE_TS + DAY_MS) == 1
    assert set(log.producer_state.producers) == {OTHER_PID}
    # Forgotten: its last batch is no duplicate any more (an unknown producer's batch).
    info = append(log, 0, 2, ts=BASE_TS)
    assert (info.duplicate, info.first_offset) == (False, 3)
    assert_duplicate(log, batch(0, 1, pid=OTHER_PID, ts=BASE_TS + 1000), 2, 2)
    # The time of the producer's last batch counts: a new batch renews it.
    append(log, 1, pid=OTHER_PID, ts=BASE_TS + 5 * DAY_MS)
    assert log.producer_state.remove_expired(BASE_TS + 1000 + DAY_MS) == 1
    assert set(log.producer_state.producers) == {OTHER_PID}
    assert log.producer_state.remove_expired(BASE_TS + 6 * DAY_MS - 1) == 0
    assert log.producer_state.remove_expired(BASE_TS + 6 * DAY_MS) == 1
    log.close()


# --- a model of Kafka's rules ------------------------------------------------------


@dataclass
class ModelProducer:
    epoch: int
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=5))
    history: list[tuple[int, int, int]] = field(default_factory=list)  # (epoch, seq, count)

    @property
    def next_seq(self) -> int:
        return (self.batches[-1][1] + 1) % (1 << 31)


def model_append(producers: dict[int, ModelProducer], leo: int, pid: int, epoch: int,
                 seq: int, count: int) -> tuple[str, int, int]:
    """Kafka's verdict on a batch: ("dup", first, last), ("ok", first, last) or ("err", code, 0)."""
    last_seq = (seq + count - 1) % (1 << 31)
    entry = producers.get(pid)
    if entry is not None and entry.epoch == epoch:
        for first_seq, b_last, first, last in entry.batches:
            if (first_seq, b_last) == (seq, last_seq):
                return ("dup", first, last)
    if entry is not None:
        if epoch < entry.epoch:
            return ("err", INVALID_EPOCH, 0)
        expected = 0 if epoch != entry.epoch else entry.next_seq
        if seq != expected:
            return ("err", OUT_OF_ORDER, 0)
    if entry is None or epoch != entry.epoch:
        entry = producers[pid] = ModelProducer(epoch, history=entry.history if entry else [])
    entry.batches.append((seq, last_seq, leo, leo + count - 1))
    entry.history.append((epoch, seq, count))
    return ("ok", leo, leo + count - 1)


op_st = st.tuples(
    st.sampled_from([PID, OTHER_PID]),
    st.sampled_from(["next", "next", "next", "resend", "gap", "bump", "bump0", "stale"]),
    st.integers(0, 7),
    st.integers(1, 4),
)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(op_st, min_size=1, max_size=40),
       start=st.sampled_from([0, 5, INT32_MAX - 6]))
def test_log_follows_kafkas_rules(ops: list[tuple[str, int, int, int]], start: int) -> None:
    """Random sends, resends, gaps, epoch bumps and stale epochs: the log answers as the
    model does, its batches are exactly the accepted ones, and after a restart (clean or
    not) each producer's last batch is still a duplicate."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", LogConfig(segment_bytes=700))
        producers: dict[int, ModelProducer] = {}
        accepted = []
        for pid, kind, back, count in ops:
            entry = producers.get(pid)
            if entry is None:
                epoch, seq = 0, start
            elif kind == "resend" and entry.history:
                epoch, seq, count = entry.history[-1 - back % len(entry.history)]
            elif kind == "gap":
                epoch, seq = entry.epoch, (entry.next_seq + 1 + back) % (1 << 31)
            elif kind == "bump":
                epoch, seq = entry.epoch + 1, 0
            elif kind == "bump0":
                epoch, seq = entry.epoch + 1, back + 1
            elif kind == "stale" and entry.epoch > 0:
                epoch, seq = entry.epoch - 1, 0
            else:
                epoch, seq = entry.epoch, entry.next_seq
            expected = model_append(producers, log.log_end_offset, pid, epoch, seq, count)
            try:
                info = log.append_as_leader(batch(seq, count, pid=pid, epoch=epoch), 0)
            except RecordBatchError as e:
                got: tuple[str, int, int] = ("err", e.error_code, 0)
            else:
                got = ("dup" if info.duplicate else "ok", info.first_offset, info.last_offset)
            assert got == expected, (pid, epoch, seq, count)
            if got[0] == "ok":
                accepted.append((pid, epoch, seq, count))
        assert [(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count)
                for h in log_batches(log)] == accepted
        for clean in (False, True):
            log = reopen(log, clean=clean, segment_bytes=700)
            for pid, entry in producers.items():
                seq, _, first, last = entry.batches[-1]
                count = last - first + 1
                info = log.append_as_leader(batch(seq, count, pid=pid, epoch=entry.epoch), 0)
                assert (info.duplicate, info.first_offset, info.last_offset) == (True, first, last)
        log.close()
