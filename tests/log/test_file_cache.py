"""The bounded cache of segment file descriptors (log/file_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from josefk.log import file_cache
from josefk.log.file_cache import CachedFile, FileCache

from .conftest import build_batch


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def files(tmp_path: Path, count: int) -> list[CachedFile]:
    out = []
    for i in range(count):
        path = tmp_path / f"{i}.log"
        path.write_bytes(bytes([i]) * 10)
        out.append(CachedFile(path))
    return out


def test_at_most_capacity_files_stay_open(tmp_path: Path) -> None:
    cache = FileCache(capacity=3)
    cached = files(tmp_path, 10)
    before = open_fds()
    for _ in range(3):
        for i, f in enumerate(cached):
            fd = cache.acquire(f)
            assert os.pread(fd, 1, 0) == bytes([i])
            cache.release(f)
            assert len(cache) <= 3
    assert open_fds() - before == 3
    # The least recently used went first: the last three are the ones open.
    assert [f.fd >= 0 for f in cached] == [False] * 7 + [True] * 3
    for f in cached:
        cache.close(f)
    assert open_fds() == before


def test_pinned_files_are_not_closed_under_their_user(tmp_path: Path) -> None:
    cache = FileCache(capacity=1)
    a, b, c = files(tmp_path, 3)
    fd_a = cache.acquire(a)
    fd_b = cache.acquire(b)  # over capacity, but a is pinned and b is being acquired
    assert a.fd == fd_a and b.fd == fd_b and len(cache) == 2
    cache.release(b)
    cache.acquire(c)  # b is unpinned and least recently used after a: closed
    assert b.fd == -1 and a.fd == fd_a
    assert os.pread(fd_a, 1, 0) == b"\x00"
    cache.close(a)  # closing a pinned file waits for its last user
    assert a.fd == fd_a
    cache.release(a)
    assert a.fd == -1
    cache.release(c)
    cache.close(c)


def test_running_out_of_descriptors(tmp_path: Path) -> None:
    """Under a low open-file limit the cache gives its descriptors back to a new open;
    when every one is pinned the open fails with StorageError (KAFKA_STORAGE_ERROR)."""
    script = textwrap.dedent(f"""
        import os, resource
        from pathlib import Path
        from josefk.log.errors import StorageError
        from josefk.log.file_cache import CachedFile, FileCache
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        cache = FileCache(capacity=1000)  # larger than the limit: only EMFILE bounds it
        paths = [Path({str(tmp_path)!r}) / f"{{i}}.log" for i in range(200)]
        for p in paths:
            p.write_bytes(b"x")
        cached = [CachedFile(p) for p in paths]
        for f in cached:  # 200 files under a limit of 64: descriptors are reused
            assert os.pread(cache.acquire(f), 1, 0) == b"x"
            cache.release(f)
        pinned = []
        try:
            for f in cached:
                cache.acquire(f)
                pinned.append(f)
        except StorageError as e:
            assert e.error_code == 56
            print("pinned", len(pinned))
        for f in pinned:
            cache.release(f)
        assert os.pread(cache.acquire(cached[-1]), 1, 0) == b"x"
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stderr
    pinned, ok = result.stdout.split("\n")[:2]
    assert 30 < int(pinned.split()[1]) < 64 and ok == "ok"
    assert "out of file descriptors opening" in result.stderr


def test_a_log_reads_all_its_segments_with_two_descriptors(
        make_log, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_cache.FILES, "_capacity", 2)
    log = make_log(segment_bytes=300)
    for _ in range(40):
        log.append_as_leader(build_batch(2), leader_epoch=0)
    assert len(log.segments) > 10
    before = open_fds()
    for offset in range(0, log.log_end_offset, 2):
        piece = log.read(offset, 1)
        assert piece.read_bytes()
        assert open_fds() <= before + 2
        assert len(file_cache.FILES) <= 2
    log.close()
    monkeypatch.setattr(file_cache.FILES, "_capacity", None)
    assert file_cache.FileCache().capacity == max(32, os.sysconf("SC_OPEN_MAX") // 4)


def test_the_default_capacity_reads_the_limit_once_until_it_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limits = iter([40, 80])
    reads = []

    def capacity() -> int:
        reads.append(1)
        return next(limits)

    monkeypatch.setattr(file_cache, "default_capacity", capacity)
    cache = FileCache()
    for f in files(tmp_path, 3):
        cache.acquire(f)
        cache.release(f)
    assert (cache.capacity, len(reads)) == (40, 1)  # not a system call per acquire
    cache.limit_changed()
    assert (cache.capacity, cache.capacity, len(reads)) == (80, 80, 2)
