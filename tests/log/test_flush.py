"""Flushing: ``flush.messages`` and ``flush.ms`` decide, ``flush()`` moves the recovery point."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from josefk.log.config import LogConfig
from josefk.log.log import Log
from josefk.log.manager import DELETE_DIR_SUFFIX, LogManager, remove_dirs

from .conftest import BASE_TS, build_batch, record_fsyncs


def append(log: Log, count: int) -> None:
    log.append_as_leader(build_batch(count, BASE_TS), leader_epoch=0, now=BASE_TS)


def test_flush_messages(make_log) -> None:
    log = make_log(flush_messages=5)
    assert not log.needs_flush()
    append(log, 3)
    append(log, 1)
    assert log.unflushed_messages == 4
    assert not log.needs_flush()
    append(log, 1)
    assert log.needs_flush()
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == log.log_end_offset == 5
    assert log.unflushed_messages == 0
    assert not log.needs_flush()
    append(log, 7)  # one batch past the threshold
    assert log.needs_flush()


def test_flush_ms(make_log) -> None:
    log = make_log(flush_ms=1000)
    start = log.last_flush_ms
    assert not log.needs_flush(now=start + 10**6)  # nothing to flush
    append(log, 1)
    assert not log.needs_flush(now=start + 999)
    assert log.needs_flush(now=start + 1000)
    log.flush()
    assert log.last_flush_ms >= start
    assert not log.needs_flush(now=log.last_flush_ms + 999)
    append(log, 1)
    assert log.needs_flush(now=log.last_flush_ms + 1000)


def test_defaults_never_ask_for_a_flush(make_log) -> None:
    log = make_log()
    for _ in range(20):
        append(log, 5)
    assert log.unflushed_messages == 100
    assert not log.needs_flush(now=log.last_flush_ms + 10**12)


def test_flush_advances_the_recovery_point_across_segments(make_log) -> None:
    log = make_log(segment_bytes=400)
    for _ in range(6):
        append(log, 2)
    assert len(log.segments) > 1
    log.flush()
    assert log.recovery_point == 12
    append(log, 3)
    assert log.recovery_point == 12
    log.flush()
    assert log.recovery_point == 15


def test_recovery_point_does_not_pass_a_truncation(make_log) -> None:
    log = make_log()
    for _ in range(4):
        append(log, 2)
    log.flush()
    log.truncate_to(4)
    assert log.log_end_offset == 4
    assert log.recovery_point == 4
    append(log, 1)
    log.flush()
    assert log.recovery_point == 5


def test_reopen_keeps_the_given_recovery_point(make_log) -> None:
    log = make_log()
    append(log, 3)
    log.flush()
    directory, config = log.directory, log.config
    log.close()
    log = Log.open(directory, config, clean_shutdown=True, recovery_point=3)
    try:
        assert log.recovery_point == 3
        assert log.log_end_offset == 3
    finally:
        log.close()
    log = Log.open(directory, config, clean_shutdown=True, recovery_point=10)
    try:
        assert log.recovery_point == 3  # never above the log end offset
    finally:
        log.close()


def test_the_manager_watches_only_logs_that_may_need_a_flush(tmp_path) -> None:
    """The periodic flush check visits rolled logs and those under a flush policy, not
    every log that took an append (at 50,000 partitions that scan cost 8% of a CPU)."""
    configs = {"plain": LogConfig(segment_bytes=400), "policy": LogConfig(flush_messages=3)}
    manager = LogManager([tmp_path], lambda topic: configs[topic])
    plain = manager.get_or_create_log("plain", 0)
    policy = manager.get_or_create_log("policy", 0)
    try:
        append(plain, 1)
        append(policy, 1)
        assert manager.logs_needing_flush() == []
        assert manager._flush_watch == {policy}  # under a policy, not yet due
        append(policy, 2)
        assert manager.logs_needing_flush() == [policy]
        policy.flush_due()
        assert manager.logs_needing_flush() == [] and not manager._flush_watch

        for _ in range(6):
            append(plain, 2)  # rolls past 400 bytes
        assert len(plain.segments) > 1
        assert manager.logs_needing_flush() == [plain]
        plain.flush_due()
        assert plain.recovery_point == plain.segments[-1].base_offset
        assert manager.logs_needing_flush() == [] and not manager._flush_watch

        # A flush policy set later makes what is already unflushed due.
        plain.reconfigure(LogConfig(segment_bytes=400, flush_messages=1))
        assert manager.logs_needing_flush() == [plain]
        manager.delete_log("plain", 0)
        assert plain not in manager._flush_watch
    finally:
        manager.shutdown()


@pytest.mark.parametrize("refill", [True, False])
def test_a_truncation_during_a_flush_keeps_the_recovery_point_below_new_appends(
        make_log, monkeypatch: pytest.MonkeyPatch, refill: bool) -> None:
    """The server flushes on a worker thread while the event loop truncates (a follower)
    and appends again. The truncation does not wait for the fsync, and the flush, whose
    target was the old log end, must not move the recovery point over the batches
    appended after the truncation, which it may never have fsynced; nor fail on the
    segments the truncation deleted under it."""
    log = make_log(segment_bytes=400)
    for _ in range(8):
        append(log, 2)
    assert len(log.segments) > 2 and log.recovery_point == 0
    old_leo, cut = log.log_end_offset, log.segments[1].base_offset
    in_fsync, release = threading.Event(), threading.Event()
    flusher: list[threading.Thread] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if threading.current_thread() in flusher and not in_fsync.is_set():
            in_fsync.set()
            assert release.wait(10)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            log.flush()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    flusher.append(threading.Thread(target=flush))
    flusher[0].start()
    try:
        assert in_fsync.wait(10)
        started = time.monotonic()
        log.truncate_to(cut + 1)  # inside the second segment: the later ones are deleted
        assert time.monotonic() - started < 5  # it did not wait for the blocked fsync
        assert log.log_end_offset == cut and len(log.segments) == 2
        while refill and log.log_end_offset <= old_leo:
            append(log, 2)  # new data over the offsets the flush aimed at
    finally:
        release.set()
        flusher[0].join(10)
    assert not errors, errors
    assert log.recovery_point <= cut
    log.flush()
    assert log.recovery_point == log.log_end_offset


def test_a_flush_waits_while_retention_changes_the_segment_list(
        make_log, monkeypatch: pytest.MonkeyPatch) -> None:
    """Retention removes a segment from the list, then its base offset, under the flush
    lock: a flush on a worker thread that starts in between waits until both agree, then
    fsyncs from the segment holding the recovery point, not from the one after it."""
    log = make_log(segment_bytes=400)
    while len(log.segments) < 2:
        append(log, 2)
    log.flush_due()  # the first segment rolled: the recovery point is the second's base
    assert log.recovery_point == log.segments[1].base_offset
    while len(log.segments) < 4:
        append(log, 2)  # the second segment rolls: its data is above the recovery point
    unsynced = log.segments[1]
    assert log.rolled_to > log.recovery_point == unsynced.base_offset
    log.high_watermark = log.log_end_offset
    flushers: list[threading.Thread] = []
    waited: list[bool] = []

    class Segments(list):  # the flush thread starts between the two removals
        def remove(self, segment: object) -> None:
            super().remove(segment)
            flusher = threading.Thread(target=log.flush_due)
            flusher.start()
            flushers.append(flusher)
            flusher.join(0.3)
            waited.append(flusher.is_alive())

    log.segments = Segments(log.segments)
    synced = record_fsyncs(monkeypatch)
    log.delete_records(unsynced.base_offset)  # deletes the first segment
    flushers[0].join(10)
    assert waited == [True], "the flush ran while the segment list was half changed"
    assert log.segments[0] is unsynced
    assert log.recovery_point == log.rolled_to
    assert str(unsynced.log_path) in synced


def test_a_deleted_log_is_renamed_aside_and_removed_later(tmp_path: Path) -> None:
    """Deleting a topic's log renames its directory at once (as Kafka does); the removal,
    a tree of files, is left to the server's background work, off the event loop."""
    manager = LogManager([tmp_path])
    manager.startup()
    try:
        log = manager.get_or_create_log("doomed", 0)
        directory = log.directory
        manager.delete_log("doomed", 0)
        assert not directory.exists()
        (aside,) = manager.take_deleted_dirs()
        assert aside.exists() and aside.name.endswith(DELETE_DIR_SUFFIX)
        assert manager.take_deleted_dirs() == []
        remove_dirs([aside])
        assert not aside.exists()
    finally:
        manager.shutdown()


def test_a_longest_named_topic_is_deleted_too(tmp_path: Path) -> None:
    """A 249-character topic (the longest Kafka allows) has a 251-character directory; set
    aside with its unique suffix the name is cut to the 255 bytes a file name may have,
    as Kafka's logDirNameWithSuffixCappedLength does (found by make fuzz)."""
    topic = "x" * 249
    manager = LogManager([tmp_path])
    manager.startup()
    try:
        directory = manager.get_or_create_log(topic, 0).directory
        manager.delete_log(topic, 0)
        (aside,) = manager.take_deleted_dirs()
        assert not directory.exists() and aside.exists()
        assert len(aside.name) == 255 and aside.name.endswith(DELETE_DIR_SUFFIX)
        remove_dirs([aside])
    finally:
        manager.shutdown()
    again = LogManager([tmp_path])  # a restart finds nothing left of it
    again.startup()
    try:
        assert again.logs == {}
    finally:
        again.shutdown()
