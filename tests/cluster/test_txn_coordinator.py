"""The transaction coordinator's decisions, error code by error code (Kafka 3.9's
TransactionCoordinator, TransactionStateManager and marker channel)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from josefk.cluster.coordinator.records import partition_for as group_partition_for
from josefk.cluster.coordinator.transaction.coordinator import TxnCoordinator
from josefk.cluster.coordinator.transaction.effects import (
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    Decision,
    InitPidResult,
    MarkerJob,
    TxnConfig,
    TxnWrite,
    WriteKind,
    WriteOutcome,
    error_for_version,
    unknown_partition_errors,
)
from josefk.cluster.coordinator.transaction.records import TopicPartition, decode_record
from josefk.cluster.coordinator.transaction.state import MAX_EPOCH, IllegalTxnTransition, TxnState
from josefk.protocol import error_codes as ec

S = TxnState
TP0, TP1, TP2 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
TID = "my-txn"


class Harness:
    """A coordinator leading every partition, a clock, and the log it wrote."""

    def __init__(self, **config: Any) -> None:
        self.now = 1000
        self.ids = itertools.count(100)
        self.c = TxnCoordinator(TxnConfig(**config), lambda: next(self.ids), lambda: self.now)
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for p in range(self.c.config.num_partitions):
            self.c.begin_loading(p, 1)
            assert self.c.finish_loading(p, 1, []) == []

    def write(self, write: TxnWrite | None, error: int = ec.NONE) -> WriteOutcome:
        assert write is not None
        assert self.c.is_current(write)
        if error == ec.NONE:
            self.log.setdefault(write.partition, []).append((write.key, write.value))
        return self.c.write_done(write, error)

    def decided(self, decision: Decision[Any], error: int = ec.NONE) -> WriteOutcome:
        assert decision.answer is None, decision.answer
        return self.write(decision.write, error)

    def init(self, tid: str = TID, timeout: int = 60000, pid: int = -1, epoch: int = -1,
             error: int = ec.NONE) -> InitPidResult:
        d = self.c.init_producer_id(tid, timeout, pid, epoch)
        if d.write is None:
            assert d.answer is not None
            return d.answer
        out = self.write(d.write, error)
        if out.markers is not None:
            self.markers(out.markers)
        return InitPidResult(out.producer_id, out.producer_epoch, out.error)

    def add(self, pid: int, epoch: int, *tps: TopicPartition, tid: str = TID) -> int:
        d = self.c.add_partitions(tid, pid, epoch, tps)
        return d.answer if d.write is None else self.write(d.write).error  # type: ignore

    def end(self, pid: int, epoch: int, commit: bool, tid: str = TID,
            markers: bool = True) -> int:
        d = self.c.end_txn(tid, pid, epoch, commit)
        if d.write is None:
            assert d.answer is not None
            return d.answer
        out = self.write(d.write)
        if markers and out.markers is not None:
            self.markers(out.markers)
        return out.error

    def markers(self, job: MarkerJob) -> None:
        progress = self.c.markers_written(job, dict.fromkeys(job.partitions, ec.NONE))
        assert progress.complete is not None and not progress.retry
        assert self.write(progress.complete).error == ec.NONE

    def md(self, tid: str = TID) -> Any:
        return self.c.partitions[self.c.partition_for(tid)].txns[tid]

    def ongoing(self, *tps: TopicPartition) -> tuple[int, int]:
        r = self.init()
        assert self.add(r.producer_id, r.producer_epoch, *(tps or (TP0,))) == ec.NONE
        return r.producer_id, r.producer_epoch


@pytest.fixture
def h() -> Harness:
    return Harness(num_partitions=3)


# --- InitProducerId ---------------------------------------------------------------------------


def test_init_new_then_bump(h: Harness) -> None:
    assert h.init() == InitPidResult(100, 0, ec.NONE)
    assert h.init() == InitPidResult(100, 1, ec.NONE)
    assert (h.md().state, h.md().producer_epoch) == (S.EMPTY, 1)


@pytest.mark.parametrize(("tid", "timeout", "pid", "epoch", "error"), [
    ("", 60000, -1, -1, ec.INVALID_REQUEST),
    (TID, 60000, 5, -1, ec.INVALID_REQUEST),
    (TID, 60000, -1, 3, ec.INVALID_REQUEST),
    (TID, 0, -1, -1, ec.INVALID_TRANSACTION_TIMEOUT),
    (TID, 900001, -1, -1, ec.INVALID_TRANSACTION_TIMEOUT),
])
def test_init_bad_requests(h: Harness, tid: str, timeout: int, pid: int, epoch: int,
                           error: int) -> None:
    assert h.init(tid, timeout, pid, epoch) == InitPidResult(-1, -1, error)
    assert h.init(TID, 900000).error == ec.NONE  # the limit itself is fine


def test_not_coordinator_and_loading(h: Harness) -> None:
    p = h.c.partition_for(TID)
    h.c.unload(p)
    assert h.init().error == ec.NOT_COORDINATOR
    assert h.c.end_txn(TID, 1, 0, True).answer == ec.NOT_COORDINATOR
    h.c.begin_loading(p, 2)
    assert h.init().error == ec.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.add_partitions(TID, 1, 0, [TP0]).answer == ec.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.list_transactions().error == ec.COORDINATOR_LOAD_IN_PROGRESS
    h.c.finish_loading(p, 2, [])
    assert h.init().error == ec.NONE


def test_init_while_a_write_is_pending(h: Harness) -> None:
    d = h.c.init_producer_id(TID, 60000)
    assert d.write is not None
    assert h.init().error == ec.CONCURRENT_TRANSACTIONS
    assert h.write(d.write).error == ec.NONE


def test_init_write_failure_maps_and_leaves_state(h: Harness) -> None:
    h.init()
    assert h.init(error=ec.NOT_ENOUGH_REPLICAS).error == ec.COORDINATOR_NOT_AVAILABLE
    assert h.init(error=ec.REQUEST_TIMED_OUT).error == ec.COORDINATOR_NOT_AVAILABLE
    assert h.init(error=ec.NOT_LEADER_OR_FOLLOWER).error == ec.NOT_COORDINATOR
    assert h.init(error=ec.MESSAGE_TOO_LARGE).error == ec.UNKNOWN_SERVER_ERROR
    assert (h.md().producer_epoch, h.md().pending_state) == (0, None)
    assert h.init() == InitPidResult(100, 1, ec.NONE)


def test_second_producer_fences_an_open_transaction(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0, TP1)
    d = h.c.init_producer_id(TID, 60000)
    assert d.write is not None and d.write.kind is WriteKind.FENCE
    assert (d.write.transit.state, d.write.transit.producer_epoch) == (S.PREPARE_ABORT, 1)
    # The old producer is fenced at once, before the abort is even written.
    assert h.add(pid, epoch, TP2) == ec.PRODUCER_FENCED
    assert h.c.end_txn(TID, pid, epoch, True).answer == ec.PRODUCER_FENCED
    out = h.write(d.write)
    assert (out.error, out.producer_id) == (ec.CONCURRENT_TRANSACTIONS, -1)
    assert out.markers is not None and not out.markers.commit
    assert (out.markers.producer_epoch, out.markers.partitions) == (1, {TP0, TP1})
    assert h.init().error == ec.CONCURRENT_TRANSACTIONS  # markers not written yet
    h.markers(out.markers)
    assert h.md().state is S.COMPLETE_ABORT
    assert h.init() == InitPidResult(pid, 2, ec.NONE)


def test_init_during_prepare_is_concurrent(h: Harness) -> None:
    pid, epoch = h.ongoing()
    d = h.c.end_txn(TID, pid, epoch, True)
    out = h.write(d.write)
    assert h.init().error == ec.CONCURRENT_TRANSACTIONS
    assert out.markers is not None
    h.markers(out.markers)
    assert h.init().producer_epoch == epoch + 1


def test_kip360_bump_retry_and_fencing(h: Harness) -> None:
    r = h.init()
    assert h.init(pid=r.producer_id, epoch=0) == InitPidResult(100, 1, ec.NONE)
    assert h.init(pid=r.producer_id, epoch=0) == InitPidResult(100, 1, ec.NONE)  # a retry
    assert h.init(pid=r.producer_id, epoch=7).error == ec.PRODUCER_FENCED
    assert h.init(pid=555, epoch=1).error == ec.PRODUCER_FENCED
    assert error_for_version(ec.PRODUCER_FENCED, INIT_PRODUCER_ID, 3) == ec.INVALID_PRODUCER_EPOCH
    assert error_for_version(ec.PRODUCER_FENCED, INIT_PRODUCER_ID, 4) == ec.PRODUCER_FENCED
    # A brand-new id (epoch -1) accepts whatever the recovering producer had.
    assert h.init("other", pid=42, epoch=3).error == ec.NONE


def test_epoch_exhaustion_rotates_the_producer_id(h: Harness) -> None:
    h.init()
    h.md().producer_epoch = MAX_EPOCH - 2
    assert h.init() == InitPidResult(100, MAX_EPOCH - 1, ec.NONE)
    assert h.init() == InitPidResult(101, 0, ec.NONE)
    h.md().producer_epoch = MAX_EPOCH - 1
    assert h.init(pid=101, epoch=MAX_EPOCH - 1) == InitPidResult(102, 0, ec.NONE)
    # The producer retries with what it had before the rotation: same answer, no new id.
    assert h.init(pid=101, epoch=MAX_EPOCH - 1) == InitPidResult(102, 0, ec.NONE)


def test_fence_at_the_last_epoch_then_rotation(h: Harness) -> None:
    h.init()
    h.md().producer_epoch = MAX_EPOCH - 1
    h.add(100, MAX_EPOCH - 1, TP0)
    assert h.init().error == ec.CONCURRENT_TRANSACTIONS  # fenced to MAX_EPOCH, aborted
    assert h.md().producer_epoch == MAX_EPOCH
    assert h.init() == InitPidResult(101, 0, ec.NONE)


# --- AddPartitionsToTxn / AddOffsetsToTxn / verification ------------------------------------


def test_add_partitions_paths(h: Harness) -> None:
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.add(pid, epoch, tid="") == ec.INVALID_REQUEST
    assert h.add(pid, epoch, TP0, tid="unknown") == ec.INVALID_PRODUCER_ID_MAPPING
    assert h.add(pid + 1, epoch, TP0) == ec.INVALID_PRODUCER_ID_MAPPING
    assert h.add(pid, epoch + 1, TP0) == ec.PRODUCER_FENCED
    assert error_for_version(ec.PRODUCER_FENCED, ADD_PARTITIONS_TO_TXN, 1) == 47
    h.now = 5000
    assert h.add(pid, epoch, TP0) == ec.NONE
    assert (h.md().state, h.md().start_timestamp, h.md().partitions) == (S.ONGOING, 5000, {TP0})
    d = h.c.add_partitions(TID, pid, epoch, [TP0])
    assert d == Decision(ec.NONE)  # already in: no write
    d = h.c.add_partitions(TID, pid, epoch, [TP1])
    assert h.c.add_partitions(TID, pid, epoch, [TP2]).answer == ec.CONCURRENT_TRANSACTIONS
    h.now = 6000
    h.write(d.write)
    assert (h.md().partitions, h.md().start_timestamp) == ({TP0, TP1}, 5000)
    h.write(h.c.end_txn(TID, pid, epoch, True).write)
    assert h.add(pid, epoch, TP2) == ec.CONCURRENT_TRANSACTIONS


def test_add_offsets_adds_the_groups_offsets_partition(h: Harness) -> None:
    r = h.init()
    d = h.c.add_offsets(TID, r.producer_id, r.producer_epoch, "my-group")
    assert d.write is not None
    assert d.write.transit.partitions == {
        TopicPartition("__consumer_offsets", group_partition_for("my-group", 50))}


def test_unknown_partition_errors() -> None:
    assert unknown_partition_errors([TP0, TP1], lambda tp: True) is None
    assert unknown_partition_errors([TP0, TP2], lambda tp: tp.topic == "a") == {
        TP0: ec.OPERATION_NOT_ATTEMPTED, TP2: ec.UNKNOWN_TOPIC_OR_PARTITION}


def test_verify_only(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0)
    assert h.c.verify_partitions(TID, pid, epoch, [TP0, TP1]) == {
        TP0: ec.NONE, TP1: ec.TRANSACTION_ABORTABLE}
    assert h.c.verify_partitions(TID, pid, epoch + 1, [TP0]) == {TP0: ec.PRODUCER_FENCED}
    assert h.c.verify_partitions(TID, pid + 1, epoch, [TP0]) == {
        TP0: ec.INVALID_PRODUCER_ID_MAPPING}
    assert h.c.verify_partitions("", pid, epoch, [TP0]) == {TP0: ec.INVALID_REQUEST}
    assert h.c.verify_partitions("nope", pid, epoch, [TP0]) == {
        TP0: ec.INVALID_PRODUCER_ID_MAPPING}
    h.write(h.c.end_txn(TID, pid, epoch, False).write)
    assert h.c.verify_partitions(TID, pid, epoch, [TP0]) == {TP0: ec.CONCURRENT_TRANSACTIONS}


# --- EndTxn and markers --------------------------------------------------------------------------


def test_commit_writes_markers_then_completes(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0, TP1)
    d = h.c.end_txn(TID, pid, epoch, True)
    assert d.write is not None and d.write.transit.state is S.PREPARE_COMMIT
    out = h.write(d.write)
    assert out.error == ec.NONE and out.markers is not None
    job = out.markers
    assert (job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch,
            job.partitions) == (pid, epoch, True, 1, {TP0, TP1})
    assert h.md().pending_state is S.COMPLETE_COMMIT
    assert h.c.markers_written(job, {TP0: ec.NONE}).complete is None
    progress = h.c.markers_written(job, {TP1: ec.NONE})
    assert progress.complete is not None
    assert h.write(progress.complete).error == ec.NONE
    assert (h.md().state, h.md().partitions) == (S.COMPLETE_COMMIT, set())
    # Retries of the finished EndTxn succeed; the opposite outcome cannot.
    assert h.end(pid, epoch, True) == ec.NONE
    assert h.end(pid, epoch, False) == ec.INVALID_TXN_STATE
    # The next transaction starts from CompleteCommit.
    assert h.add(pid, epoch, TP2) == ec.NONE


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_errors(h: Harness, commit: bool) -> None:
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.end(pid, epoch, commit) == ec.INVALID_TXN_STATE  # Empty
    assert h.end(pid, epoch, commit, tid="") == ec.INVALID_REQUEST
    assert h.end(pid, epoch, commit, tid="nope") == ec.INVALID_PRODUCER_ID_MAPPING
    assert h.end(pid + 1, epoch, commit) == ec.INVALID_PRODUCER_ID_MAPPING
    assert h.end(pid, epoch + 1, commit) == ec.PRODUCER_FENCED
    assert h.end(pid, epoch - 1, commit) == ec.PRODUCER_FENCED
    assert error_for_version(ec.PRODUCER_FENCED, END_TXN, 1) == ec.INVALID_PRODUCER_EPOCH
    h.add(pid, epoch, TP0)
    assert h.end(pid, epoch, commit, markers=False) == ec.NONE
    assert h.end(pid, epoch, commit) == ec.CONCURRENT_TRANSACTIONS  # pending markers
    md = h.md()
    md.pending_state = None  # as if the markers were still being retried after a reload
    assert h.end(pid, epoch, commit) == ec.CONCURRENT_TRANSACTIONS
    assert h.end(pid, epoch, not commit) == ec.INVALID_TXN_STATE


def test_end_txn_write_failure(h: Harness) -> None:
    pid, epoch = h.ongoing()
    d = h.c.end_txn(TID, pid, epoch, True)
    out = h.write(d.write, ec.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert out.error == ec.COORDINATOR_NOT_AVAILABLE
    assert (h.md().state, h.md().pending_state) == (S.ONGOING, None)
    assert h.end(pid, epoch, True) == ec.NONE


def test_marker_errors(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0, TP1, TP2)
    job = h.write(h.c.end_txn(TID, pid, epoch, False).write).markers
    assert job is not None
    p = h.c.markers_written(job, {TP0: ec.NOT_LEADER_OR_FOLLOWER, TP1: ec.UNSUPPORTED_VERSION})
    assert (p.retry, p.complete, p.cancelled) == ({TP0}, None, False)
    with pytest.raises(IllegalTxnTransition):
        h.c.markers_written(job, {TP0: ec.CORRUPT_MESSAGE})
    p = h.c.markers_written(job, {TP0: ec.NONE}, no_leader=[TP2])
    assert p.complete is not None
    # A job that is no longer pending is cancelled.
    assert h.c.markers_written(job, {TP0: ec.NONE}).cancelled
    # The Complete* write is retried while the log is unavailable, the state kept pending.
    out = h.write(p.complete, ec.NOT_ENOUGH_REPLICAS)
    assert out.retry and h.md().pending_state is S.COMPLETE_ABORT
    assert h.write(p.complete).error == ec.NONE
    assert h.md().state is S.COMPLETE_ABORT


def test_marker_fenced_cancels(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0, TP1)
    job = h.write(h.c.end_txn(TID, pid, epoch, True).write).markers
    assert job is not None
    assert h.c.markers_written(job, {TP0: ec.TRANSACTION_COORDINATOR_FENCED}).cancelled
    assert job.transactional_id not in h.c.pending_markers


def test_empty_transaction_completes_without_markers(h: Harness) -> None:
    r = h.init()
    h.add(r.producer_id, r.producer_epoch)  # no partitions at all
    job = h.write(h.c.end_txn(TID, r.producer_id, r.producer_epoch, True).write).markers
    assert job is not None and job.partitions == frozenset()
    assert h.c.markers_written(job, {}).complete is not None


# --- timeouts and expiration -------------------------------------------------------------------


def test_timed_out_transaction_is_aborted_with_a_bump(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0)
    h.now += 60000
    assert h.c.abort_timed_out() == []  # start + timeout is not yet in the past
    h.now += 1
    [w] = h.c.abort_timed_out()
    assert (w.kind, w.transit.state, w.transit.producer_epoch) == (
        WriteKind.TIMEOUT_ABORT, S.PREPARE_ABORT, epoch + 1)
    assert h.c.abort_timed_out() == []  # pending now
    assert h.end(pid, epoch, True) == ec.PRODUCER_FENCED
    out = h.write(w)
    assert out.error == ec.NONE and out.markers is not None
    h.markers(out.markers)
    assert (h.md().state, h.md().producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    assert h.add(pid, epoch, TP0) == ec.PRODUCER_FENCED


def test_failed_fence_does_not_bump_twice(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0)
    h.now += 60001
    [w] = h.c.abort_timed_out()
    assert h.write(w, ec.NOT_LEADER_OR_FOLLOWER).error == ec.NOT_COORDINATOR
    assert (h.md().state, h.md().producer_epoch, h.md().has_failed_epoch_fence) == (
        S.ONGOING, epoch + 1, True)
    [w] = h.c.abort_timed_out()
    assert w.transit.producer_epoch == epoch + 1
    out = h.write(w)
    assert out.markers is not None
    h.markers(out.markers)
    assert h.md().has_failed_epoch_fence is False


def test_transactional_id_expiration(h: Harness) -> None:
    h.c = TxnCoordinator(TxnConfig(num_partitions=3, id_expiration_ms=1000),
                         lambda: next(h.ids), lambda: h.now)
    for p in range(3):
        h.c.begin_loading(p, 1)
        h.c.finish_loading(p, 1, [])
    h.init("idle")
    h.ongoing()
    h.now += 1000
    [w] = h.c.expire_transactional_ids()
    assert (w.kind, w.transactional_id, w.value) == (WriteKind.EXPIRE, "idle", None)
    assert decode_record(w.key, w.value) == ("idle", None)
    assert h.c.describe("idle").state == "Empty"  # Dead is only ever pending
    assert h.init("idle").error == ec.CONCURRENT_TRANSACTIONS
    h.write(w, ec.NOT_ENOUGH_REPLICAS)
    assert h.md("idle").pending_state is None  # kept when the tombstone failed
    [w] = h.c.expire_transactional_ids()
    h.write(w)
    assert "idle" not in h.c.partitions[h.c.partition_for("idle")].txns
    assert h.init("idle") == InitPidResult(102, 0, ec.NONE)  # a brand-new producer id


# --- loading, describe, list ---------------------------------------------------------------------


def test_reload_replays_the_log_and_resumes_markers(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0, TP1)
    h.init("committed")
    h.add(101, 0, TP2, tid="committed")
    h.end(101, 0, True, tid="committed")
    out = h.write(h.c.end_txn(TID, pid, epoch, True).write)  # PrepareCommit, markers unsent
    assert out.markers is not None
    for p in range(3):
        h.c.unload(p)
    assert h.c.markers_written(out.markers, {TP0: ec.NONE}).cancelled
    jobs = []
    for p in range(3):
        h.c.begin_loading(p, 2)
        jobs += h.c.finish_loading(p, 2, h.log.get(p, []))
    [job] = jobs
    assert (job.transactional_id, job.commit, job.partitions, job.coordinator_epoch) == (
        TID, True, {TP0, TP1}, 2)
    assert h.c.describe("committed").state == "CompleteCommit"
    h.markers(job)
    d = h.c.describe(TID)
    assert (d.error, d.state, d.producer_id, d.producer_epoch, d.partitions) == (
        ec.NONE, "CompleteCommit", pid, epoch, frozenset())


def test_stale_load_and_write_after_unload(h: Harness) -> None:
    p = h.c.partition_for(TID)
    d = h.c.init_producer_id(TID, 60000)
    assert d.write is not None
    h.c.begin_loading(p, 5)
    h.c.unload(p, 5)
    assert h.c.finish_loading(p, 5, []) == []  # unloaded meanwhile
    assert not h.c.is_current(d.write)
    assert h.c.write_done(d.write, ec.NONE).error == ec.NOT_COORDINATOR
    h.c.begin_loading(p, 6)
    h.c.finish_loading(p, 6, [])
    assert h.c.write_done(d.write, ec.NONE).error == ec.NOT_COORDINATOR  # older epoch


def test_describe_and_list(h: Harness) -> None:
    h.now = 1000
    pid, epoch = h.ongoing(TP0)
    h.init("empty")
    assert h.c.describe("").error == ec.INVALID_REQUEST
    assert h.c.describe("nope").error == ec.TRANSACTIONAL_ID_NOT_FOUND
    d = h.c.describe(TID)
    assert (d.state, d.producer_id, d.producer_epoch, d.timeout_ms, d.start_timestamp,
            d.partitions) == ("Ongoing", pid, epoch, 60000, 1000, {TP0})
    h.now = 5000
    listing = h.c.list_transactions()
    assert sorted(listing.transactions) == [("empty", 101, "Empty"), (TID, 100, "Ongoing")]
    listing = h.c.list_transactions(states=["Ongoing", "Bogus"])
    assert (listing.transactions, listing.unknown_state_filters) == (
        ((TID, 100, "Ongoing"),), ("Bogus",))
    assert h.c.list_transactions(producer_ids=[101]).transactions == (("empty", 101, "Empty"),)
    assert h.c.list_transactions(min_duration_ms=3999).transactions[0][0] == TID
    # Kafka's duration filter: an id with no transaction (start -1) always passes it.
    assert h.c.list_transactions(min_duration_ms=4000).transactions == (
        ("empty", 101, "Empty"),)
