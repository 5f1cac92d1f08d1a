"""The log manager: every partition log under the broker's ``log.dirs``.

It owns the broker-level files Kafka keeps in each log dir: the clean-shutdown
marker and the recovery-point, log-start-offset and replication-offset
(high watermark) checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from josefk.log.checkpoint import sync_filesystem, write_atomic
from josefk.log.clock import now_ms
from josefk.log.config import LogConfig
from josefk.log.dirs.checkpoints import read_checkpoint, write_checkpoints
from josefk.log.dirs.failure import DirGuardedLog, LogDirFailureChannel, close_handles
from josefk.log.dirs.moves import copy_changed_files, fsync_tree
from josefk.log.errors import StorageError
from josefk.log.file_cache import FILES
from josefk.log.log import Log

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"
# A log being copied to another log dir; a crash mid-copy leaves the source intact.
FUTURE_DIR_SUFFIX = "-future"
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    m = _PARTITION_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def aside_name(topic: str, partition: int, kind: str) -> str:
    """A partition directory's name once set aside (``-delete``, ``-future``): Kafka's
    ``logDirNameWithSuffixCappedLength``, the topic cut so the name stays within the 255
    bytes a file name may have (a 249-character topic is legal)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{kind}"
    return topic[:255 - len(suffix)] + suffix


class LogManager:
    """Loads, creates, checkpoints and closes the logs of one broker."""

    def __init__(self, log_dirs: list[Path],
                 config_for: Callable[[str], LogConfig] = lambda _topic: LogConfig(),
                 threads_per_dir: int = 1) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.config_for = config_for
        # num.recovery.threads.per.data.dir: logs are flushed and closed this many at a
        # time per dir at shutdown (their fsyncs overlap; the GIL is released in them).
        self.threads_per_dir = threads_per_dir
        self.logs: dict[TopicPartition, Log] = {}
        self._flush_watch: set[Log] = set()  # logs that may need a flush (Log.flush_watch)
        self._delete_watch: set[Log] = set()  # logs with files to delete (Log.delete_watch)
        self._dir_of: dict[TopicPartition, Path] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        # Directories of deleted logs, renamed aside, for the server to remove off the
        # event loop (`take_deleted_dirs`); those left at a stop go at the next start.
        self._deleted_dirs: list[Path] = []
        # Copies made ahead of a move across file systems (`stage_move`), by partition.
        self._staged: dict[TopicPartition, Path] = {}
        # Directories that failed (I/O errors): their logs leave `logs` for `offline_logs`.
        self.failures = LogDirFailureChannel()
        self.offline_logs: dict[TopicPartition, Log] = {}
        # Partitions taken offline with no log loaded (`mark_offline`).
        self._offline_unloaded: set[TopicPartition] = set()

    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failures.is_offline(d)]

    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether the partition's log is in a directory that failed, or may be (see
        `mark_offline`): Kafka's ``HostedPartition.Offline``."""
        if not (self.offline_logs or self._offline_unloaded):
            return False  # the usual case, asked for every partition of every request
        tp = (topic, partition)
        return tp in self.offline_logs or tp in self._offline_unloaded

    def mark_offline(self, topic: str, partition: int) -> None:
        """A partition whose log was refused (`may_create`) is offline until the broker
        restarts: Kafka's ``markPartitionOffline``."""
        self._offline_unloaded.add((topic, partition))

    # --- start-up ----------------------------------------------------------------

    def startup(self) -> None:
        """Open every partition log; recover those of a dir that was not shut down cleanly."""
        for log_dir in self.log_dirs:
            try:
                self._start_dir(log_dir)
            except OSError as e:
                # Kafka's loadLogs: a directory failing at start-up is offline from the start.
                self.failures.report(log_dir, f"Error while loading log dir {log_dir}", e)
                self.handle_dir_failure(log_dir)
        # Loading read every log's tail: leave the descriptors to what comes next.
        FILES.close_unused()

    def _start_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[log_dir] = clean
        # From now on a crash is unclean until shutdown() writes the marker again.
        marker.unlink(missing_ok=True)
        self._load_dir(log_dir, clean)

    def _load_dir(self, log_dir: Path, clean: bool) -> None:
        recovery = read_checkpoint(log_dir / RECOVERY_POINT_FILE)
        starts = read_checkpoint(log_dir / LOG_START_OFFSET_FILE)
        high_watermarks = read_checkpoint(log_dir / HIGH_WATERMARK_FILE)
        # scandir knows which entries are directories without a stat each.
        dirs = sorted(Path(e.path) for e in os.scandir(log_dir) if e.is_dir())
        if not clean and any(parse_partition_dir(p.name) is not None for p in dirs):
            logger.warning("%s was not shut down cleanly: recovering its logs", log_dir)
        configs: dict[str, LogConfig] = {}  # one per topic, not per partition
        for path in dirs:
            if path.name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                shutil.rmtree(path, ignore_errors=True)
                continue
            tp = parse_partition_dir(path.name)
            if tp is None:
                continue
            if tp[0] not in configs:
                configs[tp[0]] = self.config_for(tp[0])
            log = self._watch(DirGuardedLog.open(
                path, configs[tp[0]], log_start_offset=starts.get(tp, 0),
                recovery_point=recovery.get(tp, 0), clean_shutdown=clean))
            log.high_watermark = high_watermarks.get(tp, 0)
            self.logs[tp] = log
            self._dir_of[tp] = log_dir

    # --- logs ------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                          *, is_new: bool = True) -> Log:
        """The partition's log, created in the online directory with the fewest logs if
        there is none. A partition that is not new gets none while a directory is offline:
        its log may be there (Kafka's ``getOrCreateLog``); it stays offline until then."""
        tp = (topic, partition)
        if tp in self.offline_logs:
            raise StorageError(f"the log of {topic}-{partition} is in the offline log "
                               f"directory {self._dir_of[tp]}")
        if tp not in self.logs:
            if not self.may_create(topic, partition, is_new=is_new):
                offline = ",".join(map(str, self.failures.offline_dirs))
                raise StorageError(f"Can not create log for {topic}-{partition} because log "
                                   f"directories {offline} are offline")
            live = self.live_log_dirs
            if not live:
                raise StorageError(f"no log directory online for {topic}-{partition}")
            log_dir = live[0] if len(live) == 1 else min(
                live, key=Counter(self._dir_of.values()).__getitem__)
            try:
                log = DirGuardedLog.open(log_dir / partition_dir_name(topic, partition),
                                         config or self.config_for(topic), clean_shutdown=True)
            except StorageError:
                raise
            except OSError as e:
                message = f"Error while creating log for {topic}-{partition} in dir {log_dir}"
                self.failures.report(log_dir, message, e)
                raise StorageError(f"{message}: {e}") from e
            self.logs[tp] = self._watch(log)
            self._dir_of[tp] = log_dir
        return self.logs[tp]

    def may_create(self, topic: str, partition: int, *, is_new: bool) -> bool:
        """Whether the partition may have its log here now: it has one, or it is new, or
        no directory is offline (one that is may hold its log)."""
        return (topic, partition) in self.logs or is_new or not self.failures.offline_dirs

    def dir_of(self, topic: str, partition: int) -> Path:
        return self._dir_of[(topic, partition)]

    def needs_copy(self, topic: str, partition: int, target: Path) -> bool:
        """Whether moving the log to ``target`` copies it (another file system)."""
        tp = (topic, partition)
        return (self._dir_of[tp] != Path(target)
                and os.stat(self._dir_of[tp]).st_dev != os.stat(target).st_dev)

    def stage_move(self, topic: str, partition: int, target: Path) -> None:
        """Copy a live log's files beside ``target`` ahead of :meth:`move_log`, which
        then copies only what changed meanwhile. Only reads the log's files: run it in a
        worker thread while the log keeps serving (roll it first, so that what changes
        meanwhile is little more than the appends)."""
        tp = (topic, partition)
        source = self.logs[tp].directory
        staging = self._staged.get(tp)
        if staging is None or staging.parent != Path(target):
            staging = Path(target) / aside_name(topic, partition, FUTURE_DIR_SUFFIX)
            staging.mkdir()
            self._staged[tp] = staging
        copy_changed_files(source, staging)

    def move_log(self, topic: str, partition: int, target: Path) -> Log:
        """Move a partition's log to another of the log dirs (AlterReplicaLogDirs):
        flushed, closed, its directory moved (renamed, or copied across file systems
        then renamed into place), reopened. The caller swaps in the returned Log."""
        tp = (topic, partition)
        log = self.logs[tp]
        target = Path(target)
        if self._dir_of[tp] == target:
            return log
        high_watermark, start = log.high_watermark, log.log_start_offset
        log.flush()
        _retire(log)
        log.close()
        destination = target / partition_dir_name(topic, partition)
        try:
            log.directory.rename(destination)
        except OSError:
            staging = self._staged.pop(tp, None)
            if staging is None or staging.parent != target:
                staging = target / aside_name(topic, partition, FUTURE_DIR_SUFFIX)
                staging.mkdir()
            copy_changed_files(log.directory, staging)
            fsync_tree(staging)
            staging.rename(destination)
            shutil.rmtree(log.directory, ignore_errors=True)
        self._unwatch(log)
        moved = self._watch(DirGuardedLog.open(destination, log.config, log_start_offset=start,
                                     recovery_point=log.log_end_offset, clean_shutdown=True))
        moved.high_watermark = high_watermark
        moved.producer_state.expiration_ms = log.producer_state.expiration_ms
        self.logs[tp] = moved
        self._dir_of[tp] = target
        logger.info("moved %s-%d to %s", topic, partition, target)
        return moved

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename the partition dir aside, as Kafka does; its removal is left to the
        server's background work (see `take_deleted_dirs`)."""
        tp = (topic, partition)
        log = self.logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        if log is None:
            return
        self._unwatch(log)
        _retire(log)
        log.close(sync=False)  # nothing of it is to survive a crash
        aside = log.directory.with_name(aside_name(topic, partition, DELETE_DIR_SUFFIX))
        log.directory.rename(aside)
        self._deleted_dirs.append(aside)

    def take_deleted_dirs(self) -> list[Path]:
        """The deleted logs' directories not yet removed (see `remove_dirs`)."""
        taken, self._deleted_dirs = self._deleted_dirs, []
        return taken

    # --- background work (the server schedules it) --------------------------------

    def logs_needing_flush(self, now: int | None = None) -> list[Log]:
        """The watched logs whose flush is due; those with nothing left to flush leave
        the watch."""
        now = now_ms() if now is None else now
        watch = self._flush_watch
        watch.difference_update([log for log in watch if not log.may_need_flush()])
        return [log for log in watch if log.needs_flush(now)]

    def handle_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Take a failed directory's logs out of service (Kafka's
        ``LogManager.handleLogDirFailure``): they leave `logs` (no flush, retention,
        checkpoint or cleaning touches them again), their descriptors are closed, and
        every guarded method of theirs raises StorageError. Returns their partitions."""
        log_dir = Path(log_dir)
        gone = sorted(tp for tp, d in self._dir_of.items()
                      if d == log_dir and tp in self.logs)
        for tp in gone:
            log = self.logs.pop(tp)
            if isinstance(log, DirGuardedLog):
                log.offline = True
            self._unwatch(log)
            close_handles(log)
            self.offline_logs[tp] = log
        logger.warning("log directory %s is offline: %d partition logs taken out of service; "
                       "%d of %d log directories remain online", log_dir, len(gone),
                       len(self.live_log_dirs), len(self.log_dirs))
        return gone

    def _watch(self, log: Log) -> Log:
        if isinstance(log, DirGuardedLog):
            log.failures = self.failures
        log.flush_watch = self._flush_watch
        if log.may_need_flush():
            self._flush_watch.add(log)
        log.delete_watch = self._delete_watch
        if log.pending_deletes:
            self._delete_watch.add(log)
        return log

    def _unwatch(self, log: Log) -> None:
        self._flush_watch.discard(log)
        self._delete_watch.discard(log)

    def delete_due_files(self, now: int | None = None) -> None:
        """Remove the ``.deleted`` files whose file.delete.delay.ms has passed: Kafka
        schedules each deletion at its delay, not at the next retention check."""
        now = now_ms() if now is None else now
        for log in list(self._delete_watch):
            # A log whose directory fails meanwhile is reported and skipped.
            with contextlib.suppress(StorageError):
                log.delete_expired_files(now)
            if not log.pending_deletes:
                self._delete_watch.discard(log)

    def enforce_retention(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        deleted = 0
        for log in list(self.logs.values()):
            # A log whose directory fails meanwhile is reported and skipped.
            with contextlib.suppress(StorageError):
                deleted += log.enforce_retention(now)
        return deleted  # their files go at their delay: delete_due_files

    def checkpoint(self) -> None:
        """Write the three broker-level checkpoints in every log dir."""
        write_checkpoints(self.checkpoint_offsets())

    def checkpoint_offsets(self) -> dict[Path, dict[TopicPartition, int]]:
        """Checkpoint file → offsets, read now: the server reads them on its event loop
        (where logs come and go) and writes the files from a worker thread."""
        files: dict[Path, dict[TopicPartition, int]] = {}
        for log_dir in self.live_log_dirs:
            mine = {tp: log for tp, log in self.logs.items() if self._dir_of[tp] == log_dir}
            files[log_dir / RECOVERY_POINT_FILE] = {
                tp: log.recovery_point for tp, log in mine.items()}
            files[log_dir / LOG_START_OFFSET_FILE] = {
                tp: log.log_start_offset for tp, log in mine.items()}
            files[log_dir / HIGH_WATERMARK_FILE] = {
                tp: log.high_watermark for tp, log in mine.items()}
        return files

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, then mark each dir as cleanly shut down."""
        # Written without an fsync per file, then made durable with one syncfs per dir
        # before the clean-shutdown marker says so: thousands of fsyncs take seconds.
        workers = max(1, self.threads_per_dir * len(self.log_dirs))
        with ThreadPoolExecutor(workers, thread_name_prefix="log-shutdown") as pool:
            list(pool.map(self._closed, self.logs.values()))
        for log_dir in self.live_log_dirs:
            self._in_dir(log_dir, "syncing", lambda d=log_dir: sync_filesystem(d))
        # Recovery points only once what they cover is durable.
        write_checkpoints(self.checkpoint_offsets(), failures=self.failures)
        marker = json.dumps({"version": 0, "brokerEpoch": -1}).encode()
        for log_dir in self.live_log_dirs:
            self._in_dir(log_dir, "marking a clean shutdown of",
                         lambda d=log_dir: write_atomic(d / CLEAN_SHUTDOWN_FILE, marker))
        self.logs.clear()

    def _closed(self, log: Log) -> None:
        """Flush and close one log at shutdown; a directory failing now only misses its
        clean-shutdown marker (the next start recovers it)."""
        self._in_dir(log.directory.parent, f"closing {log.directory.name} in",
                     lambda: (log.flush(sync=False), log.close(sync=False)))

    def _in_dir(self, log_dir: Path, what: str, action: Callable[[], object]) -> None:
        try:
            action()
        except OSError as e:
            self.failures.report(log_dir, f"Error while {what} {log_dir}", e)


def _retire(log: Log) -> None:
    if isinstance(log, DirGuardedLog):
        log.retired = True


def remove_dirs(paths: list[Path]) -> None:
    """Remove deleted logs' directories (blocking: the server runs it in a thread)."""
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
