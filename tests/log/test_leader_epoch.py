"""The leader epoch cache (KIP-101) and Kafka's checkpoint files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.log.checkpoint import (
    CorruptCheckpointError,
    read_entries,
    read_offsets,
    write_atomic,
    write_entries,
    write_offsets,
)
from josefk.log.leader_epoch import LeaderEpochCache
from josefk.log.log import Log

from .conftest import BASE_TS, build_batch, log_batches

CHECKPOINT = "leader-epoch-checkpoint"


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, offset in [(1, 0), (3, 10), (5, 20)]:
        cache.assign(epoch, offset)
    return cache


def test_assign_keeps_only_newer_epochs(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.entries == []
    assert not (tmp_path / CHECKPOINT).exists()
    cache.assign(-1, 0)  # batches without an epoch
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch again: its start does not move
    cache.assign(2, 7)
    cache.assign(1, 9)  # an older epoch
    cache.assign(4, 6)  # a start below the latest
    assert cache.entries == [(0, 0), (2, 7)]
    assert cache.latest_epoch == 2
    assert (tmp_path / CHECKPOINT).read_text() == "0\n2\n0 0\n2 7\n"


@pytest.mark.parametrize(("epoch", "expected"), [
    (5, (5, 30)),  # the latest epoch: the log end offset
    (3, (3, 20)),  # a known epoch: the start of the next one
    (1, (1, 10)),
    (4, (3, 20)),  # between known epochs: the largest epoch below, the next start
    (2, (1, 10)),
    (0, (0, 0)),  # below every epoch: itself and the first start offset
    (6, (-1, -1)),  # above every epoch
])
def test_end_offset_for(cache: LeaderEpochCache, epoch: int, expected: tuple[int, int]) -> None:
    assert cache.end_offset_for(epoch, 30) == expected


def test_end_offset_for_with_no_epochs(tmp_path: Path) -> None:
    assert LeaderEpochCache(tmp_path).end_offset_for(0, 30) == (-1, -1)


def test_end_offset_for_undefined_epoch(cache: LeaderEpochCache) -> None:
    assert cache.end_offset_for(-1, 30) == (-1, -1)


def test_truncate_from_end(cache: LeaderEpochCache, tmp_path: Path) -> None:
    cache.truncate_from_end(25)
    assert cache.entries == [(1, 0), (3, 10), (5, 20)]
    cache.truncate_from_end(20)
    assert cache.entries == [(1, 0), (3, 10)]
    assert (tmp_path / CHECKPOINT).read_text() == "0\n2\n1 0\n3 10\n"
    cache.truncate_from_end(1)
    assert cache.entries == [(1, 0)]
    cache.truncate_from_end(0)
    assert cache.entries == []
    assert (tmp_path / CHECKPOINT).read_text() == "0\n0\n"


def test_truncate_from_start(cache: LeaderEpochCache, tmp_path: Path) -> None:
    cache.truncate_from_start(0)
    assert cache.entries == [(1, 0), (3, 10), (5, 20)]
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12), (5, 20)]
    assert (tmp_path / CHECKPOINT).read_text() == "0\n2\n3 12\n5 20\n"
    cache.truncate_from_start(20)
    assert cache.entries == [(5, 20)]
    cache.truncate_from_start(100)
    assert cache.entries == [(5, 100)]


def test_entries_persist_and_a_corrupt_file_is_ignored(cache: LeaderEpochCache,
                                                       tmp_path: Path) -> None:
    assert LeaderEpochCache(tmp_path).entries == [(1, 0), (3, 10), (5, 20)]
    (tmp_path / CHECKPOINT).write_text("0\n3\n1 0\n3 10\n")  # count says 3, holds 2
    assert LeaderEpochCache(tmp_path).entries == []
    (tmp_path / CHECKPOINT).write_text("garbage")
    assert LeaderEpochCache(tmp_path).entries == []


def append(log: Log, count: int, epoch: int) -> int:
    return log.append_as_leader(build_batch(count, BASE_TS), leader_epoch=epoch,
                                now=BASE_TS).first_offset


def test_log_assigns_epochs_and_truncates_them(make_log) -> None:
    log = make_log(segment_bytes=400)
    starts = [append(log, 2, epoch) for epoch in (0, 0, 2, 2, 2, 5, 7)]
    assert starts == [0, 2, 4, 6, 8, 10, 12]
    assert [h.partition_leader_epoch for h in log_batches(log)] == [0, 0, 2, 2, 2, 5, 7]
    assert log.leader_epochs.entries == [(0, 0), (2, 4), (5, 10), (7, 12)]
    assert (log.directory / CHECKPOINT).read_text() == "0\n4\n0 0\n2 4\n5 10\n7 12\n"
    log.truncate_to(11)  # inside the epoch-5 batch: the whole batch goes
    assert log.log_end_offset == 10
    assert log.leader_epochs.entries == [(0, 0), (2, 4)]
    assert (log.directory / CHECKPOINT).read_text() == "0\n2\n0 0\n2 4\n"
    assert append(log, 1, 8) == 10
    assert log.leader_epochs.entries == [(0, 0), (2, 4), (8, 10)]
    assert log.leader_epochs.end_offset_for(2, log.log_end_offset) == (2, 10)
    assert log.leader_epochs.end_offset_for(8, log.log_end_offset) == (8, 11)


def test_truncate_across_segments_and_truncate_fully(make_log) -> None:
    log = make_log(segment_bytes=400)
    for epoch in (1, 1, 2, 3, 3, 4, 4, 4):
        append(log, 2, epoch)
    assert len(log.segments) >= 3
    log.truncate_to(5)
    assert log.log_end_offset == 4
    assert [s.base_offset for s in log.segments][-1] <= 4
    assert log.leader_epochs.entries == [(1, 0)]
    assert [h.base_offset for h in log_batches(log)] == [0, 2]
    assert append(log, 2, 6) == 4
    log.truncate_fully_and_start_at(100)
    assert log.leader_epochs.entries == []
    assert (log.directory / CHECKPOINT).read_text() == "0\n0\n"
    assert append(log, 1, 9) == 100
    assert log.leader_epochs.entries == [(9, 100)]


def test_follower_append_assigns_the_batches_epochs(make_log) -> None:
    log = make_log()
    for base, epoch in [(0, 1), (2, 1), (4, 3), (6, 3), (8, 4)]:
        log.append_as_follower(build_batch(2, base_offset=base, leader_epoch=epoch))
    assert log.leader_epochs.entries == [(1, 0), (3, 4), (4, 8)]


def test_unclean_open_rebuilds_epochs_from_the_batches(make_log) -> None:
    log = make_log(segment_bytes=400)
    for epoch in (1, 1, 2, 3, 3, 4):
        append(log, 2, epoch)
    expected = log.leader_epochs.entries
    directory, config = log.directory, log.config
    log.close()
    (directory / CHECKPOINT).unlink()
    log = Log.open(directory, config, recovery_point=0)
    try:
        assert log.leader_epochs.entries == expected == [(1, 0), (2, 4), (3, 6), (4, 10)]
    finally:
        log.close()


# --- checkpoint files ------------------------------------------------------------------


def test_checkpoint_file_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(path, {("b", 1): 7, ("a", 10): 3, ("a", 2): 99})
    assert path.read_text() == "0\n3\na 2 99\na 10 3\nb 1 7\n"
    assert read_offsets(path) == {("a", 2): 99, ("a", 10): 3, ("b", 1): 7}
    assert not list(tmp_path.glob("*.tmp"))
    write_offsets(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_offsets(path) == {}
    assert read_offsets(tmp_path / "missing") == {}


names = st.text(st.sampled_from("abcXYZ._-0123456789"), min_size=1, max_size=12)


@given(st.dictionaries(st.tuples(names, st.integers(0, 10_000)), st.integers(0, 1 << 62),
                       max_size=20))
@settings(max_examples=40, deadline=None)
def test_checkpoint_round_trip(offsets: dict[tuple[str, int], int]) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "replication-offset-checkpoint"
        write_offsets(path, offsets)
        assert read_offsets(path) == offsets
        assert path.read_text().splitlines()[:2] == ["0", str(len(offsets))]


@pytest.mark.parametrize("text", [
    "", "1\n0\n", "0\n", "0\n2\na 1 2\n", "0\n1\na 1\n", "x\n0\n", "0\n1\na b c\n"])
def test_corrupt_checkpoints_are_rejected(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError):
        read_offsets(path)


def test_read_entries_field_count(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT
    write_entries(path, [(3, 10), (4, 20)])
    assert read_entries(path, 2) == [["3", "10"], ["4", "20"]]
    with pytest.raises(CorruptCheckpointError):
        read_entries(path, 3)


def test_write_atomic_leaves_the_old_file_when_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / CHECKPOINT
    write_entries(path, [(1, 0)])

    def crash(src: object, dst: object) -> None:
        raise OSError("crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write_entries(path, [(1, 0), (2, 5)])
    monkeypatch.undo()
    assert path.read_text() == "0\n1\n1 0\n"
    assert (tmp_path / (CHECKPOINT + ".tmp")).read_text() == "0\n2\n1 0\n2 5\n"
    write_atomic(path, b"0\n0\n")
    assert path.read_bytes() == b"0\n0\n"
    assert not (tmp_path / (CHECKPOINT + ".tmp")).exists()
