"""The log cleaner's core: the offset map, what a pass keeps, and the swap at every crash point."""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.log.cleaner import swap as cleaner_swap
from josefk.log.cleaner.cleaner import Cleaner, CleaningAbortedError, OffsetMap
from josefk.log.cleaner.manager import CLEANER_CHECKPOINT_FILE, LogCleanerManager
from josefk.log.config import LogConfig
from josefk.log.log import Log, RecordValidationError
from josefk.log.manager import LogManager, write_checkpoints
from josefk.log.records import delete_horizon_ms
from josefk.protocol.record_batch import InvalidRecordError, assign_offset

from .conftest import BASE_TS, GZIP, NONE, clean_pass, files_with

Item = tuple[bytes | None, bytes | None]  # (key, value); a None value is a tombstone


def kv_batch(items: list[Item], *, compression: int = NONE, producer_id: int = -1,
             base_sequence: int = -1, timestamp: int = BASE_TS) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence, batch_size=1 << 20)
    for delta, (key, value) in enumerate(items):
        builder.append(delta, timestamp=timestamp + delta, key=key, value=value, headers=[])
    return bytearray(builder.build())


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, decoded by kafka-python."""
    out = []
    for segment in log.segments:
        for position, header in segment.batches_from(0):
            batch = DefaultRecordBatch(segment.pread(position, header.size))
            out.extend((r.offset, r.key, r.value) for r in batch)
    return out


def latest(items: list[tuple[int, bytes | None, bytes | None]]
           ) -> dict[bytes | None, tuple[int, bytes | None]]:
    last: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value in items:
        last[key] = (offset, value)
    return last


@pytest.fixture
def manager(tmp_path: Path):
    managers: list[LogManager] = []

    def factory(**config) -> tuple[LogManager, Log]:
        config.setdefault("cleanup_policy", "compact")
        config.setdefault("min_cleanable_dirty_ratio", 0.0)
        lm = LogManager([tmp_path], lambda _topic: LogConfig(**config))
        lm.startup()
        managers.append(lm)
        return lm, lm.get_or_create_log("topic", 0)

    yield factory
    for lm in managers:
        with contextlib.suppress(Exception):
            lm.shutdown()


def fill(log: Log, versions: int, keys: int, per_batch: int = 4) -> None:
    items = [(b"key-%d" % k, b"v%d-%d" % (v, k)) for v in range(versions) for k in range(keys)]
    for i in range(0, len(items), per_batch):
        log.append_as_leader(kv_batch(items[i:i + per_batch]), leader_epoch=0)
    log.roll()
    log.high_watermark = log.log_end_offset


# --- the offset map -----------------------------------------------------------------------


def test_offset_map_keeps_the_last_offset_and_hashes_long_keys():
    m = OffsetMap(slots=10, load_factor=0.5)
    m.put(b"a", 1)
    m.put(b"a", 7)
    m.put(b"x" * 100, 9)
    assert m.get(b"a") == 7 and m.get(b"x" * 100) == 9 and m.get(b"b") == -1
    assert m.latest_offset == 9 and len(m) == 2
    assert not m.full
    m.put(b"c", 10)
    m.put(b"d", 11)
    assert not m.full
    m.put(b"e", 12)
    assert m.full
    with pytest.raises(ValueError):
        OffsetMap(slots=1, load_factor=0.5)


# --- what a pass keeps ---------------------------------------------------------------------


def test_keeps_the_last_value_of_every_key_at_its_offset(manager):
    lm, log = manager(segment_bytes=600)
    fill(log, versions=10, keys=5)
    before = records(log)
    size_before = log.size_in_bytes()
    assert len(log.segments) > 3
    cleaners = LogCleanerManager(lm)
    end = clean_pass(lm, cleaners)
    assert end == log.active_segment.base_offset
    after = records(log)
    assert {k: v for k, (_, v) in latest(after).items()} == {
        k: v for k, (_, v) in latest(before).items()}
    assert [o for o, _, _ in after] == sorted(o for _, (o, _) in latest(before).items())
    assert log.size_in_bytes() < size_before
    assert not files_with(log.directory, ".cleaned") and not files_with(log.directory, ".swap")
    # A second pass with nothing new to read finds nothing to do.
    assert clean_pass(lm, cleaners) is None


def test_a_reopened_log_reads_the_cleaned_segments(manager):
    lm, log = manager(segment_bytes=600)
    for v in range(6):
        log.append_as_leader(kv_batch([(b"k%d" % k, b"x" * 200 + b"%d" % v) for k in range(3)],
                                      compression=GZIP), leader_epoch=0)
    log.roll()
    log.high_watermark = log.log_end_offset
    clean_pass(lm)
    expected = records(log)
    assert len(expected) == 3
    lm.shutdown()
    again = Log.open(log.directory, LogConfig(cleanup_policy="compact"))
    try:
        assert records(again) == expected
        assert again.read(0, 1 << 20).length > 0
    finally:
        again.close()


def test_tombstones_stay_until_their_delete_horizon(manager):
    lm, log = manager(segment_bytes=500, delete_retention_ms=1000)
    log.append_as_leader(kv_batch([(b"a", b"1"), (b"b", b"1")]), leader_epoch=0)
    log.append_as_leader(kv_batch([(b"a", None)]), leader_epoch=0)
    log.roll()
    log.high_watermark = log.log_end_offset
    cleaners = LogCleanerManager(lm)
    now = BASE_TS + 10_000
    clean_pass(lm, cleaners, now=now)
    assert [(o, k, v) for o, k, v in records(log)] == [(1, b"b", b"1"), (2, b"a", None)]
    tombstone_batch = [h for s in log.segments for _, h in s.batches_from(0)][-1]
    assert delete_horizon_ms(tombstone_batch) == now + 1000
    # More data makes the log dirty again; before the horizon the tombstone stays.
    log.append_as_leader(kv_batch([(b"c", b"1")]), leader_epoch=0)
    log.roll()
    log.high_watermark = log.log_end_offset
    clean_pass(lm, cleaners, now=now + 500)
    assert (2, b"a", None) in records(log)
    log.append_as_leader(kv_batch([(b"d", b"1")]), leader_epoch=0)
    log.roll()
    log.high_watermark = log.log_end_offset
    clean_pass(lm, cleaners, now=now + 1000)
    assert [k for _, k, _ in records(log)] == [b"b", b"c", b"d"]


def test_an_emptied_batch_of_a_live_producer_stays_as_a_header(manager):
    lm, log = manager(segment_bytes=400)
    log.append_as_leader(kv_batch([(b"a", b"p1"), (b"b", b"p1")], producer_id=7,
                                  base_sequence=0), leader_epoch=0)
    log.append_as_leader(kv_batch([(b"a", b"x"), (b"b", b"x")]), leader_epoch=0)
    log.append_as_leader(kv_batch([(b"c", b"x")]), leader_epoch=0)
    log.roll()
    log.high_watermark = log.log_end_offset
    clean_pass(lm)
    headers = [h for s in log.segments for _, h in s.batches_from(0)]
    first = headers[0]
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 1, 0)
    assert (first.producer_id, first.base_sequence, first.last_sequence) == (7, 0, 1)
    # The producer's state survives a reopen that replays the cleaned log.
    lm.shutdown()
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    again = Log.open(log.directory, LogConfig(cleanup_policy="compact"))
    try:
        assert again.producer_state.producers[7].last_seq == 1
    finally:
        again.close()


def test_records_past_a_full_offset_map_are_kept(manager):
    lm, log = manager(segment_bytes=300)
    fill(log, versions=4, keys=6, per_batch=3)
    before = records(log)
    cleaners = LogCleanerManager(lm)
    end = clean_pass(lm, cleaners, slots=4)  # room for 3 keys
    assert end is not None and end < log.log_end_offset
    after = records(log)
    # Nothing above the map's end changed; below it, only older duplicates went.
    assert [r for r in after if r[0] >= end] == [r for r in before if r[0] >= end]
    assert {k: v for k, (_, v) in latest(after).items()} == {
        k: v for k, (_, v) in latest(before).items()}
    # Later passes carry on from there until everything is clean.
    for _ in range(20):
        if clean_pass(lm, cleaners, slots=4) is None:
            break
    assert len(records(log)) == 6


def test_keyless_records_are_refused_by_a_compacted_log(make_log):
    log = make_log(cleanup_policy="compact")
    with pytest.raises(RecordValidationError) as caught:
        log.append_as_leader(kv_batch([(b"a", b"1"), (None, b"2")]), leader_epoch=0)
    assert caught.value.error_code == 87
    assert caught.value.record_errors == [
        (1, "Compacted topic cannot accept message without key in topic partition topic-0")]
    assert "One or more records have been rejected due to 1 record errors" in str(caught.value)
    assert log.log_end_offset == 0
    plain = make_log("plain-0")
    plain.append_as_leader(kv_batch([(None, b"2")]), leader_epoch=0)


@pytest.mark.parametrize("extra", [b"\0", b"\0" * 40])
def test_a_compacted_log_refuses_a_batch_whose_records_do_not_fill_it(make_log, extra):
    """The record count and the batch's bytes must agree, as Kafka's record iterator checks
    (a batch of zeros once passed as one record with an empty key)."""
    log = make_log(cleanup_policy="compact")
    batch = kv_batch([(b"a", b"1")]) + extra
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        log.append_as_leader(batch, leader_epoch=0)
    assert log.log_end_offset == 0


def test_a_follower_accepts_compacted_batches(manager, make_log):
    lm, log = manager(segment_bytes=600)
    fill(log, versions=5, keys=3)
    clean_pass(lm)
    data = b"".join(s.pread(0, s.size) for s in log.segments)
    follower = make_log("follower-0", cleanup_policy="compact")
    follower.append_as_follower(data)
    assert records(follower) == records(log)
    assert follower.log_end_offset == log.log_end_offset


def test_the_active_segment_and_data_above_the_high_watermark_stay(manager):
    lm, log = manager(segment_bytes=600)
    fill(log, versions=4, keys=2)
    log.append_as_leader(kv_batch([(b"key-0", b"again")]), leader_epoch=0)
    hw = log.segments[1].base_offset
    log.high_watermark = hw
    before = records(log)
    clean_pass(lm)
    after = records(log)
    assert [r for r in after if r[0] >= hw] == [r for r in before if r[0] >= hw]


def test_first_dirty_offsets_are_checkpointed_in_kafkas_format(manager, tmp_path):
    lm, log = manager(segment_bytes=600)
    fill(log, versions=4, keys=2)
    cleaners = LogCleanerManager(lm)
    end = clean_pass(lm, cleaners)
    write_checkpoints(cleaners.checkpoint_offsets())
    assert (tmp_path / CLEANER_CHECKPOINT_FILE).read_text() == f"0\n1\ntopic 0 {end}\n"
    again = LogCleanerManager(lm)
    again.load_checkpoints()
    assert again.first_dirty[("topic", 0)][0] == end


def test_a_truncation_during_a_pass_cancels_its_swap(manager):
    lm, log = manager(segment_bytes=600)
    fill(log, versions=6, keys=3)
    cleaners = LogCleanerManager(lm)
    plan = cleaners.grab_filthiest()
    assert plan is not None
    log.truncate_to(log.log_end_offset - 1)
    before = records(log)
    with pytest.raises(CleaningAbortedError, match="changed while"):
        Cleaner(OffsetMap(1000)).clean(plan, lambda g, w: cleaners.replace(plan, g, w))
    cleaners.done(plan, None)
    assert records(log) == before
    assert not files_with(log.directory, ".cleaned")


# --- crash points of the swap -----------------------------------------------------------------


def _renames(monkeypatch) -> list[tuple[str, str]]:
    done: list[tuple[str, str]] = []
    real = os.replace

    def counting(src, dst):
        done.append((str(src), str(dst)))
        real(src, dst)

    monkeypatch.setattr(os, "replace", counting)
    return done


class Crash(Exception):
    """The simulated crash: raised in place of a rename."""


def test_a_crash_at_every_step_of_a_swap_leaves_the_same_live_records(manager, tmp_path,
                                                                       monkeypatch):
    # Count the renames of a whole pass once, then crash before each of them in turn.
    lm, log = manager(segment_bytes=500)
    fill(log, versions=6, keys=4)
    expected = {k: v for k, (_, v) in latest(records(log)).items()}
    offsets_by_key = latest(records(log))
    renames = _renames(monkeypatch)
    clean_pass(lm)
    total = len(renames)
    monkeypatch.undo()
    lm.shutdown()
    assert total >= 6
    for crash_at in range(total + 1):
        directory = tmp_path / f"crash-{crash_at}"
        lm2 = LogManager([directory], lambda _t: LogConfig(
            segment_bytes=500, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0))
        lm2.startup()
        log2 = lm2.get_or_create_log("topic", 0)
        fill(log2, versions=6, keys=4)
        calls = 0

        def failing(src, dst, _at=crash_at, real=os.replace):
            nonlocal calls
            if calls == _at:
                raise Crash(f"crash before rename {calls}")
            calls += 1
            real(src, dst)

        monkeypatch.setattr(os, "replace", failing)
        with contextlib.suppress(Crash):
            clean_pass(lm2)
        monkeypatch.undo()
        # The process died: nothing is closed; the directory is opened again.
        reopened = Log.open(log2.directory, LogConfig(segment_bytes=500,
                                                      cleanup_policy="compact"))
        try:
            got = records(reopened)
            assert {k: v for k, (_, v) in latest(got).items()} == expected, crash_at
            assert {k: o for k, (o, _) in latest(got).items()} == {
                k: o for k, (o, _) in offsets_by_key.items()}, crash_at
            offsets = [o for o, _, _ in got]
            assert offsets == sorted(set(offsets))
            leftovers = [n for n in os.listdir(reopened.directory)
                         if n.endswith((".cleaned", ".swap"))]
            assert not leftovers, (crash_at, leftovers)
        finally:
            reopened.close()


def test_recovery_undoes_a_half_renamed_swap_and_finishes_a_complete_one(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    log = Log.open(directory, LogConfig(segment_bytes=300, cleanup_policy="compact"))
    for v in range(4):
        log.append_as_leader(kv_batch([(b"a", b"%d" % v), (b"b", b"%d" % v)]), leader_epoch=0)
    log.close()
    names = sorted(os.listdir(directory))
    first = next(n for n in names if n.endswith(".log"))
    # An incomplete swap: a .log.swap with its index still .cleaned: undone.
    (directory / (first + ".swap")).write_bytes(b"")
    (directory / first.replace(".log", ".index.cleaned")).write_bytes(b"")
    cleaner_swap.recover_swaps(directory)
    assert sorted(os.listdir(directory)) == names


# --- a model of compaction ----------------------------------------------------------------------

keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e"])
values = st.one_of(st.none(), st.binary(min_size=1, max_size=30))
batches = st.lists(st.lists(st.tuples(keys, values), min_size=1, max_size=5), min_size=1,
                   max_size=25)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches, compression=st.sampled_from([NONE, GZIP]))
def test_cleaning_keeps_exactly_the_last_record_of_each_key(tmp_path_factory, batches,
                                                             compression):
    directory = tmp_path_factory.mktemp("model")
    lm = LogManager([directory], lambda _t: LogConfig(
        segment_bytes=350, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
        delete_retention_ms=0))
    lm.startup()
    try:
        log = lm.get_or_create_log("topic", 0)
        for items in batches:
            buf = kv_batch(items, compression=compression)
            if compression and buf[22] & 7 != compression:
                buf = kv_batch(items)
            log.append_as_leader(buf, leader_epoch=0)
        log.roll()
        log.high_watermark = log.log_end_offset
        before = records(log)
        model = latest(before)
        cleaners = LogCleanerManager(lm)
        clean_pass(lm, cleaners, now=BASE_TS)
        after = records(log)
        # Every key's last record survives at its offset; nothing else but tombstones
        # (kept until their horizon) ...
        assert latest(after) == model
        assert {o for o, _, _ in after} == {o for o, _ in model.values()}
        # ... and after the horizon, a later pass drops them too.
        log.append_as_leader(kv_batch([(b"z", b"1")]), leader_epoch=0)
        log.roll()
        log.high_watermark = log.log_end_offset
        clean_pass(lm, cleaners, now=BASE_TS + 1)
        live = {k: v for k, (_, v) in model.items() if v is not None}
        live[b"z"] = next(v for _, k, v in records(log) if k == b"z")
        assert {k: v for _, k, v in records(log)} == live
    finally:
        lm.shutdown()


def test_rebuilt_batches_keep_their_offsets_for_kafka_python(manager):
    lm, log = manager(segment_bytes=400)
    buf = kv_batch([(b"a", b"1"), (b"b", b"1"), (b"a", b"2")])
    assign_offset(buf, 0, 0)
    log.append_as_leader(buf, leader_epoch=3)
    log.append_as_leader(kv_batch([(b"c", b"1")]), leader_epoch=3)
    log.roll()
    log.high_watermark = log.log_end_offset
    clean_pass(lm)
    [first, *_] = [h for s in log.segments for _, h in s.batches_from(0)]
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 2, 2)
    assert first.partition_leader_epoch == 3
    assert [(o, k) for o, k, _ in records(log)] == [(1, b"b"), (2, b"a"), (3, b"c")]
