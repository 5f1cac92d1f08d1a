"""Copying a partition's log to another log directory (AlterReplicaLogDirs across file
systems): only what changed since the last copy, then made durable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from josefk.log.checkpoint import fsync_dir


def copy_changed_files(source: Path, target: Path) -> int:
    """Make the flat directory ``target`` a copy of ``source``, copying only the files
    whose size or modification time differ (``copy2`` keeps the time) and removing those
    ``source`` no longer has; the bytes copied."""
    copied = 0
    present = {entry.name: entry.stat() for entry in os.scandir(target)}
    for entry in os.scandir(source):
        if not entry.is_file():
            continue
        stat, had = entry.stat(), present.pop(entry.name, None)
        if had is None or (had.st_size, had.st_mtime_ns) != (stat.st_size, stat.st_mtime_ns):
            shutil.copy2(entry.path, target / entry.name)
            copied += stat.st_size
    for name in present:
        (target / name).unlink()
    return copied


def fsync_tree(directory: Path) -> None:
    """fsync every file of a flat directory, then the directory itself."""
    for entry in os.scandir(directory):
        fd = os.open(entry.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(directory)
