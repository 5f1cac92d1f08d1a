"""A log directory that fails goes offline: its logs raise StorageError and leave the
manager, the other directories go on (Kafka's LogDirFailureChannel). The failures are
real: ENOSPC from a small tmpfs, EIO from a FUSE file system switched to fail."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from josefk.log.cleaner.cleaner import Cleaner, OffsetMap
from josefk.log.cleaner.manager import LogCleanerManager
from josefk.log.config import LogConfig
from josefk.log.dirs.failure import DirGuardedLog
from josefk.log.errors import StorageError
from josefk.log.manager import RECOVERY_POINT_FILE, LogManager

from .conftest import build_batch

# The fault helpers of the chaos harness (tests/ alone does not put the checkout on the path).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from compat_tests.chaos import disk  # noqa: E402

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(disk.available() is not None,
                                 reason=disk.available() or "")]

SMALL = LogConfig(segment_bytes=64 * 1024)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    disk.mount_tmpfs(mount, 1 << 20)
    try:
        yield mount
    finally:
        disk.umount(mount)


@pytest.fixture
def eio_fs(tmp_path: Path) -> Iterator[Path]:
    backing, mount = tmp_path / "backing", tmp_path / "eio"
    process = disk.mount_eio_fs(backing, mount)
    try:
        yield mount
    finally:
        disk.set_eio(backing, False)
        disk.unmount_eio_fs(mount, process)


def _manager(dirs: list[Path]) -> tuple[LogManager, list[Path]]:
    manager = LogManager(dirs, lambda _topic: SMALL)
    manager.startup()
    seen: list[Path] = []
    manager.failures.listen(seen.append)
    return manager, seen


def _fill_until_error(log: DirGuardedLog) -> StorageError:
    for _ in range(10_000):
        try:
            log.append_as_leader(build_batch(10, value_size=1000), leader_epoch=0)
        except StorageError as e:
            return e
    raise AssertionError("the full file system took every append")


def test_enospc_takes_the_directory_offline_and_the_other_goes_on(small_fs: Path,
                                                                   tmp_path: Path) -> None:
    healthy = tmp_path / "healthy"
    manager, seen = _manager([small_fs, healthy])
    on_small = manager.get_or_create_log("t", 0)
    on_healthy = manager.get_or_create_log("t", 1)
    assert {manager.dir_of("t", 0), manager.dir_of("t", 1)} == {small_fs, healthy}
    on_small.append_as_leader(build_batch(3), leader_epoch=0)
    disk.fill(small_fs)

    error = _fill_until_error(on_small)

    assert "No space left on device" in str(error) and str(small_fs) in str(error)
    assert seen == [small_fs] and manager.failures.offline_dirs == [small_fs]
    assert manager.handle_dir_failure(small_fs) == [("t", 0)]
    assert manager.is_offline("t", 0) and ("t", 0) not in manager.logs
    assert manager.live_log_dirs == [healthy]
    with pytest.raises(StorageError, match="offline"):
        on_small.append_as_leader(build_batch(1), leader_epoch=0)
    with pytest.raises(StorageError, match="offline"):
        on_small.read(0, 1 << 20)
    with pytest.raises(StorageError):
        manager.get_or_create_log("t", 0)
    # What was written before stays as the broker knew it.
    assert on_small.log_end_offset >= 3
    # The healthy directory serves, takes new logs and checkpoints alone.
    on_healthy.append_as_leader(build_batch(2), leader_epoch=0)
    assert on_healthy.log_end_offset == 2
    manager.get_or_create_log("u", 0)
    assert manager.dir_of("u", 0) == healthy
    manager.checkpoint()
    assert set(manager.checkpoint_offsets()) == {healthy / name for name in (
        RECOVERY_POINT_FILE, "log-start-offset-checkpoint", "replication-offset-checkpoint")}
    assert manager.enforce_retention() == 0
    manager.shutdown()


def test_eio_on_flush_takes_the_directory_offline(eio_fs: Path, tmp_path: Path) -> None:
    manager, seen = _manager([eio_fs])
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(build_batch(5), leader_epoch=0)
    disk.set_eio(tmp_path / "backing", True)

    with pytest.raises(StorageError, match="Error while flushing t-0"):
        log.flush()

    assert seen == [eio_fs]
    manager.handle_dir_failure(eio_fs)
    assert manager.live_log_dirs == [] and manager.is_offline("t", 0)
    # Reported once, however many logs of the directory fail after.
    with pytest.raises(StorageError):
        log.roll()
    assert seen == [eio_fs]


def test_a_directory_failing_at_startup_is_offline_from_the_start(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("a file where a directory should be")
    manager = LogManager([good, bad])
    manager.startup()
    assert manager.failures.offline_dirs == [bad] and manager.live_log_dirs == [good]
    manager.get_or_create_log("t", 0)
    assert manager.dir_of("t", 0) == good
    os.unlink(bad)


def test_an_io_error_in_the_middle_of_a_cleaner_swap_takes_the_directory_offline(
        eio_fs: Path, tmp_path: Path) -> None:
    """Issue 32: the swap failing no longer leaves the partition uncleanable until a
    restart: its directory goes offline, and the restart with it repaired finds every
    key's latest value."""
    from .test_cleaner import fill, latest, records

    config = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                       segment_bytes=4096)
    manager = LogManager([eio_fs], lambda _topic: config)
    manager.startup()
    seen: list[Path] = []
    manager.failures.listen(seen.append)
    log = manager.get_or_create_log("c", 0)
    fill(log, versions=6, keys=20)
    expected = latest(records(log))
    cleaners = LogCleanerManager(manager)
    plan = cleaners.grab_filthiest()
    assert plan is not None

    def swap_on_a_failing_disk(group, writer):  # type: ignore[no-untyped-def]
        disk.set_eio(tmp_path / "backing", True)
        return cleaners.replace(plan, group, writer)

    # The swap fails (reported), then so does the cleaner's removal of its output.
    with pytest.raises(OSError):
        Cleaner(OffsetMap(10_000)).clean(plan, swap_on_a_failing_disk)
    cleaners.done(plan, None, failed=True)
    assert seen == [eio_fs]
    manager.handle_dir_failure(eio_fs)

    disk.set_eio(tmp_path / "backing", False)
    restarted = LogManager([eio_fs], lambda _topic: config)
    restarted.startup()
    assert latest(records(restarted.get_log("c", 0))) == expected
    restarted.shutdown()
