"""Kafka's checkpoint files: a version line, a count line, one entry per line.

Used for ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` (topic partition offset) and each partition's
``leader-epoch-checkpoint`` (epoch offset). Writes are atomic: temp file,
fsync, rename, fsync of the directory.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

CHECKPOINT_VERSION = 0
_libc = ctypes.CDLL(None, use_errno=True)


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not parse."""


def write_atomic(path: Path, data: bytes, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file.

    ``sync=False`` skips the fsyncs of the file and its directory: the file is then
    whole if present but may be missing (or, after a crash, empty) — for files rebuilt
    from elsewhere whenever they are wrong, or made durable by the caller (shutdown:
    one syncfs)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(directory: Path) -> None:
    """Make everything written to ``directory``'s file system durable with one
    ``syncfs`` (instead of an fsync per file; shutdown writes thousands)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
    finally:
        os.close(fd)


def write_entries(path: Path, entries: list[tuple[object, ...]], sync: bool = True) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [" ".join(str(field) for field in entry) for entry in entries]
    write_atomic(path, ("\n".join(lines) + "\n").encode(), sync)


def read_entries(path: Path, fields: int) -> list[list[str]]:
    """The entries of a checkpoint file, each split into ``fields`` strings; [] if absent."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    try:
        version, count = int(lines[0]), int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpointError(f"{path}: bad header") from None
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"{path}: unknown version {version}")
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count or any(len(entry) != fields for entry in entries):
        raise CorruptCheckpointError(f"{path}: expected {count} entries of {fields} fields")
    return entries


def write_offsets(path: Path, offsets: dict[tuple[str, int], int], sync: bool = True) -> None:
    """Write a broker-level ``topic partition offset`` checkpoint."""
    write_entries(path, [(topic, partition, offset) for (topic, partition), offset in
                         sorted(offsets.items())], sync)


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    try:
        return {(t, int(p)): int(o) for t, p, o in read_entries(path, 3)}
    except ValueError as e:
        raise CorruptCheckpointError(f"{path}: {e}") from None
