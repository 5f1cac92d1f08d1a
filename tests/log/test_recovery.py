"""Recovery after an unclean stop: torn writes, flipped bits, lost or garbage indexes."""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from josefk.log.checkpoint import read_offsets
from josefk.log.config import LogConfig
from josefk.log.log import Log
from josefk.log.manager import RECOVERY_POINT_FILE, LogManager
from josefk.log.segment import LogSegment
from josefk.protocol.record_batch import BatchHeader, parse_header

from .conftest import (
    BASE_TS,
    GZIP,
    INT32_MAX,
    NONE,
    assert_valid_prefix,
    build_batch,
    files_with,
    log_batches,
    record_fsyncs,
    seg_name,
)

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=150, segment_index_bytes=4096)
# (records, compression, leader epoch) of each batch; the last batch starts epoch 5.
LAYOUT = [(1 + i % 4, GZIP if i % 3 == 0 else NONE, i // 6) for i in range(17)] + [(3, GZIP, 5)]


def write_log(directory: Path) -> list[BatchHeader]:
    """A closed multi-segment log; returns its batch headers."""
    log = Log.open(directory, CONFIG)
    for i, (count, codec, epoch) in enumerate(LAYOUT):
        ts = [BASE_TS + 100 * i + (7 * j) % 5 for j in range(count)]
        log.append_as_leader(build_batch(timestamp=ts, compression=codec, value_size=120),
                             leader_epoch=epoch, now=BASE_TS)
    headers = log_batches(log)
    log.close()
    return headers


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[BatchHeader]]:
    directory = tmp_path_factory.mktemp("original") / "topic-0"
    return directory, write_log(directory)


def index_files(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes()
            for name in files_with(directory, ".index") + files_with(directory, ".timeindex")}


def last_segment_name(directory: Path) -> str:
    return files_with(directory, ".log")[-1]


def copy_of(original: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(original, target)
    return target


def test_layout_has_several_segments(original: tuple[Path, list[BatchHeader]]) -> None:
    directory, headers = original
    logs = files_with(directory, ".log")
    assert len(logs) >= 3
    last_base = int(last_segment_name(directory)[:20])
    assert sum(h.base_offset >= last_base for h in headers) >= 2
    assert all(len(data) > 0 for data in index_files(directory).values())


def reopen_and_check_tail(directory: Path, expected_leo: int, expected: list[BatchHeader],
                          recovery_point: int = 0) -> None:
    """Open unclean; the log must be ``expected`` and accept an append at its LEO."""
    log = Log.open(directory, CONFIG, recovery_point=recovery_point)
    try:
        assert log.log_end_offset == expected_leo
        assert [(h.base_offset, h.crc) for h in log_batches(log)] == [
            (h.base_offset, h.crc) for h in expected]
        assert_valid_prefix(log)
        assert all(e[1] < expected_leo for e in log.leader_epochs.entries)
        info = log.append_as_leader(build_batch(2), leader_epoch=9, now=BASE_TS)
        assert (info.first_offset, info.last_offset) == (expected_leo, expected_leo + 1)
        assert log.read(expected_leo, 1 << 20).read_bytes()[:8] == struct.pack(">q", expected_leo)
    finally:
        log.close()


def test_torn_write_at_every_byte_of_the_last_batch(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path
) -> None:
    directory, headers = original
    last = headers[-1]
    name = last_segment_name(directory)
    size = (directory / name).stat().st_size
    start = size - last.size
    for cut in range(start, size):
        work = copy_of(directory, tmp_path / "work")
        os.truncate(work / name, cut)
        reopen_and_check_tail(work, last.base_offset, headers[:-1], int(name[:20]))
        assert (work / name).stat().st_size == start + len(build_batch(2))  # the new batch
        # The epoch of the lost batch is gone from the checkpoint; the new one follows.
        lines = (work / "leader-epoch-checkpoint").read_text().splitlines()[2:]
        epochs = [tuple(int(f) for f in line.split()) for line in lines]
        assert epochs[-1] == (9, last.base_offset)
        assert 5 not in [epoch for epoch, _ in epochs]


def test_torn_write_losing_the_last_segment_entirely(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path
) -> None:
    directory, headers = original
    name = last_segment_name(directory)
    base = int(name[:20])
    for cut in (0, 1, 11, 12, 60):
        work = copy_of(directory, tmp_path / "work")
        os.truncate(work / name, cut)
        reopen_and_check_tail(work, base, [h for h in headers if h.base_offset < base])


def expected_after_flip(original: bytes, flipped: bytes, last: BatchHeader, previous_next: int,
                        segment_base: int) -> int:
    """The LEO recovery must reach when one bit of the last batch is flipped.

    The CRC covers attributes..end, so any flip there, in the CRC, the length or the
    magic drops the batch. baseOffset and partitionLeaderEpoch are outside the CRC (as
    in Kafka): such a batch survives if its offsets still follow the previous batch.
    """
    header = parse_header(flipped)
    changed = next(i for i in range(len(flipped)) if flipped[i] != original[i])
    if changed < 8:
        last_offset = header.base_offset + header.last_offset_delta
        fits = 0 <= last_offset - segment_base <= INT32_MAX
        return last_offset + 1 if header.base_offset >= previous_next and fits else last.base_offset
    if 12 <= changed < 16:
        return last.next_offset
    return last.base_offset


@given(bit=st.integers(min_value=0))
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_flipped_bit_in_the_last_batch(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path, bit: int
) -> None:
    directory, headers = original
    last = headers[-1]
    name = last_segment_name(directory)
    data = (directory / name).read_bytes()
    start = len(data) - last.size
    bit %= last.size * 8
    flipped = bytearray(data[start:])
    flipped[bit // 8] ^= 0x80 >> (bit % 8)
    expected_leo = expected_after_flip(data[start:], bytes(flipped), last, headers[-2].next_offset,
                                       int(name[:20]))
    work = copy_of(directory, tmp_path / "flip")
    (work / name).write_bytes(data[:start] + flipped)
    log = Log.open(work, CONFIG, recovery_point=0)
    try:
        assert log.log_end_offset == expected_leo
        assert_valid_prefix(log)
        kept = log_batches(log)
        assert [h.crc for h in kept[:len(headers) - 1]] == [h.crc for h in headers[:-1]]
        assert len(kept) == len(headers) - (expected_leo == last.base_offset)
        info = log.append_as_leader(build_batch(1), leader_epoch=9, now=BASE_TS)
        assert info.first_offset == expected_leo
    finally:
        log.close()


def test_flips_in_the_batch_header_fields(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path
) -> None:
    """Deterministic companions of the property: one flip per header field."""
    directory, headers = original
    last = headers[-1]
    name = last_segment_name(directory)
    data = (directory / name).read_bytes()
    start = len(data) - last.size
    gap = next(1 << i for i in range(8) if not last.base_offset & (1 << i))
    down = next(1 << i for i in range(8) if last.base_offset & (1 << i))
    for byte, mask, expected_leo in [(7, gap, last.next_offset + gap),  # a gap: kept
                               (7, down, last.base_offset),  # below the previous batch
                               (0, 0x80, last.base_offset),  # negative baseOffset
                               (3, 0x01, last.base_offset),  # relative offset overflows
                               (11, 0x01, last.base_offset),  # length
                               (15, 0x01, last.next_offset),  # leader epoch: outside the CRC
                               (16, 0x01, last.base_offset),  # magic
                               (20, 0x01, last.base_offset),  # crc
                               (22, 0x01, last.base_offset),  # attributes
                               (60, 0x01, last.base_offset),  # record count
                               (last.size - 1, 0x01, last.base_offset)]:  # last record byte
        work = copy_of(directory, tmp_path / "work")
        flipped = bytearray(data)
        flipped[start + byte] ^= mask
        (work / name).write_bytes(flipped)
        log = Log.open(work, CONFIG, recovery_point=0)
        try:
            assert log.log_end_offset == expected_leo, byte
            assert_valid_prefix(log)
        finally:
            log.close()


def test_corrupt_batch_in_an_early_segment_drops_everything_after_it(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path
) -> None:
    directory, headers = original
    first = files_with(directory, ".log")[0]
    work = copy_of(directory, tmp_path / "work")
    data = bytearray((work / first).read_bytes())
    victims = [h for h in headers if h.base_offset < int(files_with(directory, ".log")[1][:20])]
    position = sum(h.size for h in victims[:2])
    data[position + 40] ^= 0x10  # the third batch's base timestamp
    (work / first).write_bytes(data)
    reopen_and_check_tail(work, victims[2].base_offset, victims[:2])
    assert files_with(work, ".log") == [first]
    assert files_with(work, ".index") == [first.replace(".log", ".index")]


def test_recovery_starts_at_the_recovery_point(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path
) -> None:
    directory, headers = original
    first = files_with(directory, ".log")[0]
    work = copy_of(directory, tmp_path / "work")
    data = bytearray((work / first).read_bytes())
    data[headers[0].size + 40] ^= 0x10
    (work / first).write_bytes(data)
    last_base = int(last_segment_name(directory)[:20])
    log = Log.open(work, CONFIG, recovery_point=last_base)
    try:
        # Segment 0 is below the recovery point: trusted, not rescanned.
        assert (work / first).stat().st_size == len(data)
        assert log.log_end_offset == headers[-1].next_offset
    finally:
        log.close()
    log = Log.open(work, CONFIG, recovery_point=0)
    try:
        assert log.log_end_offset == headers[1].base_offset
        assert (work / first).stat().st_size == headers[0].size
    finally:
        log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_missing_index_files_are_rebuilt_byte_for_byte(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path, clean: bool
) -> None:
    directory, headers = original
    expected = index_files(directory)
    work = copy_of(directory, tmp_path / "work")
    for name in expected:
        (work / name).unlink()
    log = Log.open(work, CONFIG, recovery_point=headers[-1].next_offset, clean_shutdown=clean)
    try:
        assert log.log_end_offset == headers[-1].next_offset
        assert sorted(index_files(work)) == sorted(expected)
    finally:
        log.close()
    assert index_files(work) == expected


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("which", ["first", "last"])
def test_one_missing_index_is_rebuilt_on_clean_open(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path, which: str, suffix: str
) -> None:
    directory, headers = original
    expected = index_files(directory)
    work = copy_of(directory, tmp_path / "work")
    logs = files_with(work, ".log")
    name = (logs[0] if which == "first" else logs[-1]).replace(".log", suffix)
    (work / name).unlink()
    log = Log.open(work, CONFIG, recovery_point=headers[-1].next_offset, clean_shutdown=True)
    log.close()
    assert index_files(work)[name] == expected[name]


def check_reads(log: Log, headers: list[BatchHeader], data: dict[int, bytes]) -> None:
    """Every offset reads back the batch holding it, byte for byte."""
    for header in headers:
        for offset in range(header.base_offset, header.next_offset):
            assert log.read(offset, 1).read_bytes() == data[header.base_offset]
        found = log.offset_for_timestamp(header.max_timestamp)
        assert found is not None and header.base_offset <= found.offset <= header.last_offset


def batch_bytes(directory: Path, headers: list[BatchHeader]) -> dict[int, bytes]:
    log = Log.open(directory, CONFIG, clean_shutdown=True, recovery_point=headers[-1].next_offset)
    try:
        return {h.base_offset: log.read(h.base_offset, 1).read_bytes() for h in headers}
    finally:
        log.close()


def garbage_random(data: bytes) -> bytes:
    return random.Random(len(data)).randbytes(max(len(data), 64))


def garbage_reversed(data: bytes, size: int) -> bytes:
    entries = [data[i:i + size] for i in range(0, len(data), size)]
    return b"".join(reversed(entries)) if len(entries) > 1 else data + data


@pytest.mark.parametrize("kind", ["random", "reversed"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_garbage_index_is_detected_and_rebuilt(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path, kind: str, suffix: str
) -> None:
    directory, headers = original
    expected = index_files(directory)
    data = batch_bytes(directory, headers)
    work = copy_of(directory, tmp_path / "work")
    entry = 8 if suffix == ".index" else 12
    for name in (files_with(work, ".log")[0], last_segment_name(work)):
        path = work / name.replace(".log", suffix)
        original_bytes = path.read_bytes()
        path.write_bytes(garbage_random(original_bytes) if kind == "random"
                         else garbage_reversed(original_bytes, entry))
    log = Log.open(work, CONFIG, clean_shutdown=True, recovery_point=headers[-1].next_offset)
    try:
        assert log.log_end_offset == headers[-1].next_offset
        check_reads(log, headers, data)
    finally:
        log.close()
    assert index_files(work) == expected


def test_untrimmed_index_after_a_crash(tmp_path: Path) -> None:
    """A log copied while open (a crash) has preallocated indexes full of zeros."""
    log = Log.open(tmp_path / "live", CONFIG)
    for i in range(12):
        log.append_as_leader(build_batch(2, BASE_TS + i, value_size=120), leader_epoch=0,
                             now=BASE_TS)
    log.flush()
    crashed = copy_of(tmp_path / "live", tmp_path / "crashed")
    crashed_twice = copy_of(tmp_path / "live", tmp_path / "crashed-clean")
    leo = log.log_end_offset
    log.close()
    expected = index_files(tmp_path / "live")
    active = last_segment_name(crashed).replace(".log", ".index")
    assert (crashed / active).stat().st_size == CONFIG.segment_index_bytes // 8 * 8
    for target, clean in ((crashed, False), (crashed_twice, True)):
        reopened = Log.open(target, CONFIG, recovery_point=leo, clean_shutdown=clean)
        try:
            assert reopened.log_end_offset == leo
            assert reopened.read(leo - 1, 1).read_bytes()[:8] == struct.pack(">q", leo - 2)
        finally:
            reopened.close()
        assert index_files(target) == expected


def test_clean_shutdown_skips_recovery(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path
) -> None:
    directory, headers = original
    leo = headers[-1].next_offset
    name = last_segment_name(directory)
    work = copy_of(directory, tmp_path / "work")
    good_size = (work / name).stat().st_size
    with open(work / name, "ab") as f:
        f.write(b"\xff" * 30)  # a torn tail a recovery would cut
    log = Log.open(work, CONFIG, clean_shutdown=True, recovery_point=leo)
    try:
        assert log.log_end_offset == leo
        assert log.recovery_point == leo
        assert (work / name).stat().st_size == good_size + 30
    finally:
        log.close()
    log = Log.open(work, CONFIG, recovery_point=leo)
    try:
        assert log.log_end_offset == leo
        assert (work / name).stat().st_size == good_size
    finally:
        log.close()


def test_leftover_deleted_and_tmp_files_are_removed_on_open(
    original: tuple[Path, list[BatchHeader]], tmp_path: Path
) -> None:
    directory, headers = original
    work = copy_of(directory, tmp_path / "work")
    (work / (seg_name(0) + ".deleted")).write_bytes(b"old")
    (work / "leader-epoch-checkpoint.tmp").write_bytes(b"half")
    (work / seg_name(10**9, ".index")).write_bytes(b"orphan")
    log = Log.open(work, CONFIG, clean_shutdown=True, recovery_point=headers[-1].next_offset)
    try:
        names = os.listdir(work)
        assert not [n for n in names if n.endswith((".deleted", ".tmp"))]
        assert seg_name(10**9, ".index") not in names
        assert log.log_end_offset == headers[-1].next_offset
    finally:
        log.close()


def test_recovery_of_batches_larger_than_its_read_chunk(tmp_path: Path) -> None:
    """Recovery reads the file in 1 MiB chunks; batches straddle and exceed them."""
    config = LogConfig()
    log = Log.open(tmp_path / "big", config)
    sizes = [300_000, 300_000, 300_000, 1_048_510, 200_000, 700_000]
    for i, value_size in enumerate(sizes):
        log.append_as_leader(build_batch(1, BASE_TS + i, value_size=value_size),
                             leader_epoch=0, now=BASE_TS)
    headers = log_batches(log)
    assert max(h.size for h in headers) > 1 << 20
    log.close()
    name = seg_name(0)
    total = (tmp_path / "big" / name).stat().st_size
    assert total == sum(h.size for h in headers)
    reopen_big = copy_of(tmp_path / "big", tmp_path / "work")
    with open(reopen_big / name, "ab") as f:
        f.write(bytes(headers[-1].size // 2))  # a torn tail after the last batch
    log = Log.open(reopen_big, config, recovery_point=0)
    try:
        assert log.log_end_offset == len(sizes)
        assert (reopen_big / name).stat().st_size == total
        assert [h.crc for h in log_batches(log)] == [h.crc for h in headers]
    finally:
        log.close()
    # Cut inside the batch larger than a chunk: everything from it on goes.
    reopen_big = copy_of(tmp_path / "big", tmp_path / "work")
    big_start = sum(h.size for h in headers[:3])
    os.truncate(reopen_big / name, big_start + headers[3].size - 4)
    log = Log.open(reopen_big, config, recovery_point=0)
    try:
        assert log.log_end_offset == 3
        assert (reopen_big / name).stat().st_size == big_start
    finally:
        log.close()


def test_a_roll_is_flushed_so_a_crash_recovers_only_the_active_segment(
        make_log, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka flushes a log up to a new segment's base offset once it rolls: the recovery
    point follows, and recovery after a crash rescans only what lies above it."""
    log = make_log(segment_bytes=400)
    for _ in range(30):
        log.append_as_leader(build_batch(2), leader_epoch=0)
    assert len(log.segments) > 5 and log.recovery_point == 0
    assert log.needs_flush()
    log.flush_due()
    active_base = log.active_segment.base_offset
    assert log.recovery_point == log.rolled_to == active_base < log.log_end_offset
    assert not log.needs_flush()
    leo, directory = log.log_end_offset, log.directory
    recovered: list[int] = []
    original = LogSegment.recover

    def counting(segment: LogSegment) -> int:
        recovered.append(segment.base_offset)
        return original(segment)

    monkeypatch.setattr(LogSegment, "recover", counting)
    log = Log.open(directory, log.config, recovery_point=log.recovery_point)  # unclean
    assert recovered == [active_base]
    assert log.log_end_offset == leo
    log.close()


def test_a_new_logs_first_epoch_is_made_durable_by_its_first_flush(
        make_log, monkeypatch: pytest.MonkeyPatch) -> None:
    """The epoch a new partition starts at offset 0 is written without an fsync; the
    first flush of records fsyncs it before the recovery point moves past them."""
    synced = record_fsyncs(monkeypatch)
    log = make_log()
    log.leader_epochs.assign(0, 0)
    assert not any("leader-epoch-checkpoint" in p for p in synced)
    log.append_as_leader(build_batch(2), leader_epoch=0)
    log.flush()
    assert any("leader-epoch-checkpoint" in p for p in synced)
    assert log.recovery_point == 2
    synced.clear()
    log.leader_epochs.assign(1, 2)  # an epoch over records: synced at once
    assert any("leader-epoch-checkpoint" in p for p in synced)


def test_unclean_recovery_moves_the_recovery_point_only_with_a_flush(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a process crash left in the page cache is valid to recovery but not durable:
    the recovery point stays where it was (Kafka's LogLoader: min(recoveryPoint, LEO)),
    so the checkpoint written after the restart still has it recovered after an OS crash;
    a flush, fsyncing those segments, moves it on."""
    manager = LogManager([tmp_path], lambda _topic: CONFIG)
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    for i, (count, codec, epoch) in enumerate(LAYOUT):
        log.append_as_leader(build_batch(count, BASE_TS + i, compression=codec),
                             leader_epoch=epoch, now=BASE_TS)
    leo, segments = log.log_end_offset, len(log.segments)
    assert segments > 2 and log.recovery_point == 0
    manager.checkpoint()
    log.close()  # the broker dies: no flush, no clean-shutdown marker

    synced = record_fsyncs(monkeypatch)
    manager = LogManager([tmp_path], lambda _topic: CONFIG)
    manager.startup()
    log = manager.logs[("t", 0)]
    try:
        assert not manager.had_clean_shutdown[tmp_path]
        assert log.log_end_offset == leo
        assert not any(p.endswith(".log") for p in synced)
        assert log.recovery_point == 0
        assert log.unflushed_messages == leo  # so a flush policy covers it too
        manager.checkpoint()
        assert read_offsets(tmp_path / RECOVERY_POINT_FILE) == {("t", 0): 0}
        log.flush()
        flushed = {Path(p).name for p in synced if p.endswith(".log")}
        assert flushed == {seg_name(s.base_offset) for s in log.segments}
        assert log.recovery_point == leo and log.unflushed_messages == 0
    finally:
        manager.shutdown()
