"""Random sequences of transaction requests, failed writes, marker errors, timeouts and
reloads: the coordinator never takes a transition Kafka forbids, never trips its own
checks, and what it wrote to ``__transaction_state`` replays to what it holds in memory."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.cluster.coordinator.transaction.coordinator import TxnCoordinator
from josefk.cluster.coordinator.transaction.effects import MarkerJob, TxnConfig, TxnWrite, WriteKind
from josefk.cluster.coordinator.transaction.records import TopicPartition
from josefk.cluster.coordinator.transaction.state import VALID_PREVIOUS_STATES, TxnState
from josefk.protocol import error_codes as ec

S = TxnState
IDS = ["t0", "t1", "t2"]
TPS = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)]
APPEND_ERRORS = [ec.NONE, ec.NONE, ec.NONE, ec.NOT_ENOUGH_REPLICAS, ec.NOT_LEADER_OR_FOLLOWER,
                 ec.REQUEST_TIMED_OUT]
MARKER_ERRORS = [ec.NONE] * 6 + [ec.NOT_LEADER_OR_FOLLOWER, ec.UNSUPPORTED_VERSION,
                                  ec.INVALID_PRODUCER_EPOCH]


class Model:
    def __init__(self) -> None:
        self.now = 0
        ids = itertools.count()
        self.c = TxnCoordinator(TxnConfig(num_partitions=2, id_expiration_ms=50_000),
                                lambda: next(ids), lambda: self.now)
        self.epoch = 1
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {0: [], 1: []}
        self.writes: list[TxnWrite] = []
        self.jobs: list[MarkerJob] = []
        self.producers: dict[str, tuple[int, int]] = {}  # what each producer was told
        self.load()

    def load(self) -> None:
        for p in (0, 1):
            self.c.begin_loading(p, self.epoch)
            self.jobs += self.c.finish_loading(p, self.epoch, self.log[p])

    def metadata(self) -> dict[str, Any]:
        return {tid: md for entry in self.c.partitions.values() for tid, md in entry.txns.items()}

    def check(self) -> None:
        for md in self.metadata().values():
            assert md.pending_state is not S.PREPARE_EPOCH_FENCE
            if md.pending_state is not None:
                assert md.state in VALID_PREVIOUS_STATES[md.pending_state]
            if md.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                assert not md.partitions
            assert 0 <= md.producer_epoch <= 32767 or md.producer_epoch == -1

    def finish_write(self, w: TxnWrite, error: int) -> None:
        md = self.metadata().get(w.transactional_id)
        before = None if md is None else md.state
        if error == ec.NONE and self.c.is_current(w):
            self.log[w.partition].append((w.key, w.value))
        elif error == ec.NONE:
            error = ec.NOT_LEADER_OR_FOLLOWER  # a stale write is never appended
        out = self.c.write_done(w, error)
        after = self.metadata().get(w.transactional_id)
        if after is not None and before is not None and after.state is not before:
            assert before in VALID_PREVIOUS_STATES[after.state]
        if out.retry:
            self.writes.append(w)
        if out.markers is not None:
            self.jobs.append(out.markers)
        if w.kind is WriteKind.INIT_PRODUCER_ID and out.error == ec.NONE:
            self.producers[w.transactional_id] = (out.producer_id, out.producer_epoch)

    def step(self, data: st.DataObject) -> None:
        op = data.draw(st.sampled_from(
            ["init", "add", "add", "end", "end", "verify", "write", "write", "write", "write",
             "markers", "markers", "tick", "reload"]))
        tid = data.draw(st.sampled_from(IDS))
        pid, epoch = self.producers.get(tid, (0, 0))
        if data.draw(st.integers(0, 19)) == 0:
            epoch -= 1  # a zombie producer
        if op == "init":
            expected = (pid, epoch) if tid in self.producers and data.draw(st.booleans()) else (
                -1, -1)
            d = self.c.init_producer_id(tid, 10_000, *expected)
            if d.write is not None:
                self.writes.append(d.write)
        elif op == "add":
            tps = data.draw(st.lists(st.sampled_from(TPS), max_size=2))
            d = self.c.add_partitions(tid, pid, epoch, tps)
            if d.write is not None:
                self.writes.append(d.write)
        elif op == "end":
            d = self.c.end_txn(tid, pid, epoch, data.draw(st.booleans()))
            if d.write is not None:
                self.writes.append(d.write)
        elif op == "verify":
            self.c.verify_partitions(tid, pid, epoch, TPS)
        elif op == "write" and self.writes:
            w = self.writes.pop(data.draw(st.integers(0, len(self.writes) - 1)))
            self.finish_write(w, data.draw(st.sampled_from(APPEND_ERRORS)))
        elif op == "markers" and self.jobs:
            job = self.jobs.pop(data.draw(st.integers(0, len(self.jobs) - 1)))
            results = {tp: data.draw(st.sampled_from(MARKER_ERRORS)) for tp in job.partitions}
            progress = self.c.markers_written(job, results)
            if progress.retry:
                self.jobs.append(job)
            if progress.complete is not None:
                self.writes.append(progress.complete)
        elif op == "tick":
            self.now += data.draw(st.sampled_from([1_000, 11_000, 60_000]))
            self.writes += self.c.abort_timed_out() + self.c.expire_transactional_ids()
        elif op == "reload":
            self.reload()
        self.check()

    def reload(self) -> None:
        def stable(md: Any) -> tuple[Any, ...] | None:
            if (md.pending or md.has_failed_epoch_fence or md.producer_epoch < 0
                    or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
                return None  # memory legitimately ahead of (or apart from) the log
            return md.producer_id, md.producer_epoch, md.state, frozenset(md.partitions)

        before = {tid: stable(md) for tid, md in self.metadata().items()}
        for p in (0, 1):
            self.c.unload(p)
        self.epoch += 1
        self.load()
        after = self.metadata()
        for tid, state in before.items():
            if state is not None:
                assert stable(after[tid]) == state, tid


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_requests_keep_kafkas_invariants(data: st.DataObject) -> None:
    model = Model()
    for _ in range(100):
        model.step(data)
    model.reload()
