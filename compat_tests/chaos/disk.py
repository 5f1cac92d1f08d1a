"""Disk faults on a broker's log directory, made real (root only).

- **Full** (ENOSPC): the log directory is a small ``tmpfs`` of its own (``mount -t tmpfs
  -o size=...``); `fill` takes its last free byte with a ballast file, so the broker's
  next write fails with ENOSPC; `free` removes the ballast.
- **I/O errors** (EIO): the log directory is a FUSE passthrough file system
  (``python -m compat_tests.chaos.disk fuse BACKING MOUNTPOINT``, on fusepy and libfuse2)
  over a backing directory; while the flag file ``BACKING.eio`` exists, every write,
  fsync, create, mkdir, rename, truncate and unlink in it answers EIO (reads still work:
  index files are memory-mapped, and a failed page-in would be SIGBUS, not an error).
  `set_eio` switches it.

Kafka's answer to either is the same: the directory goes offline until the broker
restarts with it repaired. A fault is healed with `free` / ``set_eio(False)``, then a
restart of the broker.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

BALLAST = ".ballast"
#: The faults of the chaos nemesis (``disk-full``: ENOSPC, ``disk-error``: EIO).
FAULTS = frozenset({"disk-full", "disk-error"})
#: The size of a broker's faulty log directory (a tmpfs).
DISK_BYTES = 256 << 20


def available() -> str | None:
    """Why disk faults cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "disk faults need root (mount)"
    if not Path("/dev/fuse").exists():
        return "disk faults need /dev/fuse"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as e:
        return f"disk faults need fusepy and libfuse2: {e}"
    return None


# --- a small file system that fills up ---------------------------------------------------


def mount_tmpfs(path: Path, size_bytes: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs",
                    str(path)], check=True, capture_output=True, timeout=30)


def umount(path: Path) -> None:
    """Unmount (lazily: a killed broker's descriptors may linger a moment)."""
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def fill(path: Path) -> int:
    """Take every free byte of ``path``'s file system; the bytes taken (0 if the broker's
    own writes had filled it already: then even creating the ballast file fails)."""
    taken = 0
    chunk = b"\0" * (1 << 16)
    try:
        # Unbuffered: a write cut short by ENOSPC leaves nothing for close() to flush.
        with open(path / BALLAST, "ab", buffering=0) as f:
            while written := f.write(chunk):
                taken += written
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    return taken


def free(path: Path) -> None:
    (path / BALLAST).unlink(missing_ok=True)


# --- a file system that returns EIO on demand -------------------------------------------


def eio_flag(backing: Path) -> Path:
    return backing.with_name(backing.name + ".eio")


def set_eio(backing: Path, on: bool) -> None:
    flag = eio_flag(backing)
    if on:
        flag.touch()
    else:
        flag.unlink(missing_ok=True)


def mount_eio_fs(backing: Path, mountpoint: Path, timeout_s: float = 20.0
                 ) -> subprocess.Popen[bytes]:
    """Mount the EIO-on-demand passthrough of ``backing`` at ``mountpoint``; the process
    serving it (stop it with `unmount_eio_fs`)."""
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    set_eio(backing, False)
    process = subprocess.Popen([sys.executable, "-m", "compat_tests.chaos.disk", "fuse",
                                str(backing), str(mountpoint)],
                               cwd=Path(__file__).resolve().parents[2])
    deadline = time.monotonic() + timeout_s
    while not os.path.ismount(mountpoint):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the EIO file system did not mount at {mountpoint}")
        time.sleep(0.05)
    return process


def unmount_eio_fs(mountpoint: Path, process: subprocess.Popen[bytes]) -> None:
    umount(mountpoint)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)


@contextlib.contextmanager
def eio_fs(home: Path) -> Iterator[tuple[Path, Path]]:
    """(a backing directory, the EIO-on-demand file system over it) under ``home``,
    healthy at the start and unmounted at the end."""
    backing, mount = home / "backing", home / "eio"
    process = mount_eio_fs(backing, mount)
    try:
        yield backing, mount
    finally:
        set_eio(backing, False)
        unmount_eio_fs(mount, process)


class BrokerDisk:
    """A broker's second log directory for the chaos nemesis: the EIO-on-demand file
    system over a small tmpfs, so that it can fill up (`break_` "disk-full") or fail
    (`break_` "disk-error"); `repair` undoes either (the broker then needs a restart,
    as Kafka's does, to bring the directory back)."""

    def __init__(self, home: Path, broker_id: int, size_bytes: int = DISK_BYTES) -> None:
        self.backing = home / f"broker-{broker_id}-disk"
        self.log_dir = home / f"broker-{broker_id}-faulty"
        self.size_bytes = size_bytes
        self._process: subprocess.Popen[bytes] | None = None

    def mount(self) -> Path:
        """Mount it; the directory to add to the broker's ``log.dirs``."""
        mount_tmpfs(self.backing, self.size_bytes)
        self._process = mount_eio_fs(self.backing, self.log_dir)
        return self.log_dir

    def break_(self, fault: str) -> None:
        if fault == "disk-full":
            fill(self.backing)
        elif fault == "disk-error":
            set_eio(self.backing, True)
        else:
            raise ValueError(f"not a disk fault: {fault}")

    def repair(self) -> None:
        set_eio(self.backing, False)
        free(self.backing)

    def unmount(self) -> None:
        if self._process is not None:
            set_eio(self.backing, False)
            unmount_eio_fs(self.log_dir, self._process)
            self._process = None
        umount(self.backing)


def mounted(home: Path, broker_id: int) -> bool:
    """Whether the broker of the cluster in ``home`` has its faulty log directory."""
    return os.path.ismount(BrokerDisk(home, broker_id).log_dir)


def _serve_fuse(backing: str, mountpoint: str) -> None:
    from fuse import FUSE, FuseOSError, Operations

    flag = eio_flag(Path(backing))

    def failing(method):  # type: ignore[no-untyped-def]
        def call(self, *args):  # type: ignore[no-untyped-def]
            if flag.exists():
                raise FuseOSError(errno.EIO)
            return method(self, *args)
        return call

    class Passthrough(Operations):  # type: ignore[misc]
        """Every call on ``backing``'s files; the writing ones fail while flagged."""

        def _full(self, path: str) -> str:
            return os.path.join(backing, path.lstrip("/"))

        def access(self, path, mode):  # type: ignore[no-untyped-def]
            if not os.access(self._full(path), mode):
                raise FuseOSError(errno.EACCES)

        def getattr(self, path, fh=None):  # type: ignore[no-untyped-def]
            st = os.lstat(self._full(path))
            return {key: getattr(st, key) for key in (
                "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                "st_size", "st_uid")}

        def readdir(self, path, fh):  # type: ignore[no-untyped-def]
            return [".", "..", *os.listdir(self._full(path))]

        def statfs(self, path):  # type: ignore[no-untyped-def]
            st = os.statvfs(self._full(path))
            return {key: getattr(st, key) for key in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                "f_files", "f_flag", "f_frsize", "f_namemax")}

        def open(self, path, flags):  # type: ignore[no-untyped-def]
            return os.open(self._full(path), flags)

        def read(self, path, size, offset, fh):  # type: ignore[no-untyped-def]
            return os.pread(fh, size, offset)

        def release(self, path, fh):  # type: ignore[no-untyped-def]
            os.close(fh)

        def flush(self, path, fh):  # type: ignore[no-untyped-def]
            return 0

        def chmod(self, path, mode):  # type: ignore[no-untyped-def]
            os.chmod(self._full(path), mode)

        def utimens(self, path, times=None):  # type: ignore[no-untyped-def]
            os.utime(self._full(path), times)

        def rmdir(self, path):  # type: ignore[no-untyped-def]
            os.rmdir(self._full(path))

        @failing
        def create(self, path, mode, fi=None):  # type: ignore[no-untyped-def]
            return os.open(self._full(path), os.O_RDWR | os.O_CREAT, mode)

        @failing
        def write(self, path, data, offset, fh):  # type: ignore[no-untyped-def]
            return os.pwrite(fh, data, offset)

        @failing
        def fsync(self, path, datasync, fh):  # type: ignore[no-untyped-def]
            os.fsync(fh)

        @failing
        def truncate(self, path, length, fh=None):  # type: ignore[no-untyped-def]
            os.truncate(self._full(path), length)

        @failing
        def mkdir(self, path, mode):  # type: ignore[no-untyped-def]
            os.mkdir(self._full(path), mode)

        @failing
        def rename(self, old, new):  # type: ignore[no-untyped-def]
            os.rename(self._full(old), self._full(new))

        @failing
        def unlink(self, path):  # type: ignore[no-untyped-def]
            os.unlink(self._full(path))

    FUSE(Passthrough(), mountpoint, foreground=True, nothreads=False, allow_other=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "fuse":
        _serve_fuse(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: python -m compat_tests.chaos.disk fuse BACKING MOUNTPOINT")
