"""The broker-level checkpoint files of the log directories, read and written with
regard to directory failures."""

from __future__ import annotations

import logging
from pathlib import Path

from josefk.log.checkpoint import CorruptCheckpointError, read_offsets, write_offsets
from josefk.log.dirs.failure import LogDirFailureChannel

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def write_checkpoints(files: dict[Path, dict[TopicPartition, int]], sync: bool = True,
                      failures: LogDirFailureChannel | None = None) -> None:
    """Write checkpoint files; with ``failures``, one that cannot be written takes its
    log directory offline (Kafka's checkpoint I/O errors do) and the others are written."""
    for path, offsets in files.items():
        if failures is None:
            write_offsets(path, offsets, sync)
            continue
        try:
            write_offsets(path, offsets, sync)
        except OSError as e:
            failures.report(path.parent, f"Error while writing checkpoint file {path}", e)


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """A checkpoint's offsets; a corrupt one is ignored (logged) as if absent."""
    try:
        return read_offsets(path)
    except CorruptCheckpointError as e:
        logger.warning("ignoring corrupt checkpoint: %s", e)
        return {}
