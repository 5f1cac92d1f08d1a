"""The disk-full fault fills a real tmpfs, however full the broker left it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .disk import BALLAST, fill, free, mount_tmpfs, umount

SIZE = 1 << 20

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")


@pytest.fixture
def small_disk(tmp_path: Path):
    disk = tmp_path / "disk"
    mount_tmpfs(disk, SIZE)
    yield disk
    umount(disk)


def test_fill_takes_every_free_byte_and_free_gives_them_back(small_disk: Path) -> None:
    """The free space is no multiple of fill's chunk: its last write is cut short (found
    by a Kafka 3.9.1 chaos run, seed 3: closing the ballast file flushed the rest again
    and raised ENOSPC, which ended the run)."""
    (small_disk / "segment.log").write_bytes(b"x" * (SIZE // 4 + 4096))
    taken = fill(small_disk)
    assert SIZE // 2 < taken <= SIZE - SIZE // 4
    with pytest.raises(OSError):
        (small_disk / "more.log").write_bytes(b"x" * 8192)
    free(small_disk)
    assert not (small_disk / BALLAST).exists()
    (small_disk / "more.log").write_bytes(b"x" * 8192)


def test_a_disk_the_broker_filled_already_is_left_full(small_disk: Path) -> None:
    """The broker's own writes took the last byte: nothing is taken, nothing raised."""
    with open(small_disk / "segment.log", "ab", buffering=0) as f:
        while True:
            try:
                if not f.write(b"x" * 4096):
                    break
            except OSError:
                break
    taken = fill(small_disk)
    assert taken < 4096
    free(small_disk)
