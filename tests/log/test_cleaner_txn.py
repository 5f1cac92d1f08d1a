"""The cleaner and transactions, as Kafka 3.9's cleaner treats them.

Aborted transactional data never enters the offset map and is discarded; a
COMMIT/ABORT marker stays while its transaction has data in the log, then until
its delete horizon (stamped by the first pass that finds the data gone); a live
producer's last batch stays (as an empty header if need be); the cleaned
``.txnindex`` keeps an aborted transaction only while the pass removing its data
keeps its marker; nothing at or above the LSO is touched.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.log.cleaner.manager import LogCleanerManager
from josefk.log.config import LogConfig
from josefk.log.log import Log
from josefk.log.manager import LogManager
from josefk.log.records import delete_horizon_ms, iter_records
from josefk.protocol.end_txn_marker import decode_marker
from josefk.protocol.record_batch import BatchHeader, parse_header
from josefk.protocol.varint import read_varint

from .conftest import clean_pass

T = int(time.time() * 1000)  # records and markers stamped now: no roll by time
RETENTION = 1000
P1, P2, P3 = 1000, 2000, 3000

Rec = tuple[int, bytes | None, bytes | None]  # offset, key, value (None: tombstone)


class Producer:
    """A transactional producer's batches with their sequence numbers."""

    def __init__(self, log: Log, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, *items: tuple[bytes, bytes | None], transactional: bool = True) -> int:
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=transactional, producer_id=self.pid,
            producer_epoch=self.epoch, base_sequence=self.seq, batch_size=1 << 20)
        for delta, (key, value) in enumerate(items):
            builder.append(delta, timestamp=T, key=key, value=value, headers=[])
        self.seq += len(items)
        return self.log.append_as_leader(bytearray(builder.build()), leader_epoch=0).first_offset

    def end(self, commit: bool, epoch: int | None = None) -> int:
        return self.log.append_control_batch(self.pid, self.epoch if epoch is None else epoch, 0,
                                             commit, leader_epoch=0, now=T).first_offset


def plain(log: Log, *items: tuple[bytes, bytes | None]) -> int:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for delta, (key, value) in enumerate(items):
        builder.append(delta, timestamp=T, key=key, value=value, headers=[])
    return log.append_as_leader(bytearray(builder.build()), leader_epoch=0).first_offset


def seal(log: Log) -> None:
    log.roll()
    log.high_watermark = log.log_end_offset


def key_value(tail: bytes) -> tuple[bytes | None, bytes | None]:
    key_len, pos = read_varint(tail, 0)
    key = tail[pos:pos + key_len] if key_len >= 0 else None
    pos += max(key_len, 0)
    value_len, pos = read_varint(tail, pos)
    return key, tail[pos:pos + value_len] if value_len >= 0 else None


def batches(log: Log) -> Iterator[tuple[BatchHeader, bytes]]:
    for segment in log.segments:
        for position, header in segment.batches_from(0):
            yield header, segment.pread(position, header.size)


def uncommitted(log: Log) -> list[Rec]:
    """Every data record (read_uncommitted, markers left out)."""
    return [(r.offset, *key_value(r.tail)) for h, b in batches(log) if not h.is_control
            for r in iter_records(b, h)]


def committed(log: Log) -> list[Rec]:
    """What a read_committed consumer gets through Log.read: up to the LSO, dropping
    the aborted transactions the fetch reports as Kafka's consumer does."""
    lso, offset = log.last_stable_offset, log.log_start_offset
    pieces: list[bytes] = []
    aborted: set[tuple[int, int]] = set()
    while offset < lso:
        piece = log.read(offset, 1 << 20, max_offset=lso)
        if piece.length == 0:
            break
        data = piece.read_bytes()
        aborted.update(log.aborted_transactions_in(piece, offset, lso))
        pieces.append(data)
        pos = 0
        while pos < len(data):
            header = parse_header(data, pos)
            offset, pos = header.next_offset, pos + header.size
    pending = sorted(aborted, key=lambda t: t[1])
    aborting: set[int] = set()
    out: list[Rec] = []
    for data in pieces:
        pos = 0
        while pos < len(data):
            header = parse_header(data, pos)
            batch = data[pos:pos + header.size]
            pos += header.size
            while pending and pending[0][1] <= header.last_offset:
                aborting.add(pending.pop(0)[0])
            if header.is_control:
                marker = decode_marker(batch, header)
                if marker is not None and not marker.commit:
                    aborting.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborting:
                continue
            out.extend((r.offset, *key_value(r.tail)) for r in iter_records(batch, header)
                       if r.offset < lso)
    return out


def markers(log: Log) -> list[tuple[int, int, bool | None, int | None]]:
    """(offset, producer, commit or None if emptied, delete horizon) of each control batch."""
    out = []
    for header, batch in batches(log):
        if header.is_control:
            marker = decode_marker(batch, header)
            out.append((header.base_offset, header.producer_id,
                        None if marker is None else marker.commit, delete_horizon_ms(header)))
    return out


def producer_view(log: Log) -> dict[int, tuple[int, int, int, int]]:
    return {pid: (e.epoch, e.last_seq, e.last_offset, e.current_txn_first_offset)
            for pid, e in log.producer_state.producers.items()}


def latest(records: list[Rec]) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {k: (o, v) for o, k, v in records}


def config(**overrides: object) -> LogConfig:
    settings_: dict[str, object] = {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.0,
                                    "segment_bytes": 400, "delete_retention_ms": RETENTION}
    settings_.update(overrides)
    return LogConfig(**settings_)  # type: ignore[arg-type]


def open_manager(directory: Path, **overrides: object) -> tuple[LogManager, Log]:
    lm = LogManager([directory], lambda _topic: config(**overrides))
    lm.startup()
    return lm, lm.get_or_create_log("topic", 0)


def dirty_again(log: Log, n: int) -> None:
    """New data (and a roll) so that the log has something to clean."""
    plain(log, (b"filler-%d" % n, b"x"))
    seal(log)


def _with_log(tmp_path: Path, body: Callable[[LogManager, Log], None]) -> None:
    lm, log = open_manager(tmp_path)
    try:
        body(lm, log)
    finally:
        with contextlib.suppress(Exception):
            lm.shutdown()


# --- the offset map and aborted data -------------------------------------------------------------


def test_aborted_data_never_removes_a_committed_value(tmp_path: Path) -> None:
    def body(lm: LogManager, log: Log) -> None:
        p1, p2 = Producer(log, P1), Producer(log, P2)
        p1.send((b"a", b"committed"))
        p1.end(commit=True)
        p2.send((b"a", b"aborted"), (b"b", b"aborted"))
        p2.end(commit=False)
        p2.send((b"c", b"p2"))  # the producer's last batch is elsewhere
        p2.end(commit=True)
        plain(log, (b"d", b"plain"))
        seal(log)
        expected = committed(log)
        assert latest(expected)[b"a"] == (0, b"committed")
        clean_pass(lm, LogCleanerManager(lm), now=T)
        assert committed(log) == expected
        # The aborted records are gone from the log itself, not only hidden.
        assert [v for _, _, v in uncommitted(log)] == [b"committed", b"p2", b"plain"]
        # The ABORT marker stays with its index entry: this pass removed its data.
        assert [(pid, c) for _, pid, c, _ in markers(log)] == [
            (P1, True), (P2, False), (P2, True)]
        assert log.collect_aborted_transactions(0, log.log_end_offset) == [(P2, 2)]

    _with_log(tmp_path, body)


def test_a_committed_transaction_compacts_like_plain_data(tmp_path: Path) -> None:
    def body(lm: LogManager, log: Log) -> None:
        p1 = Producer(log, P1)
        p1.send((b"a", b"1"), (b"b", b"1"))
        p1.end(commit=True)
        p1.send((b"a", b"2"))
        p1.end(commit=True)
        seal(log)
        clean_pass(lm, LogCleanerManager(lm), now=T)
        assert committed(log) == [(1, b"b", b"1"), (3, b"a", b"2")]

    _with_log(tmp_path, body)


# --- markers -----------------------------------------------------------------------------------


def test_markers_go_after_their_horizon_but_not_before(tmp_path: Path) -> None:
    def body(lm: LogManager, log: Log) -> None:
        cleaners = LogCleanerManager(lm)
        p1, p2 = Producer(log, P1), Producer(log, P2)
        p1.send((b"a", b"1"))
        commit1 = p1.end(commit=True)
        p2.send((b"b", b"aborted"))
        abort = p2.end(commit=False)
        p1.send((b"a", b"2"))
        commit2 = p1.end(commit=True)
        p2.send((b"c", b"1"))
        commit3 = p2.end(commit=True)
        seal(log)
        expected = latest(committed(log))

        # Pass 1 removes a's first value and the aborted data: both markers stay,
        # without a horizon (their transactions had data in this pass).
        clean_pass(lm, cleaners, now=T)
        assert [(o, h) for o, _, _, h in markers(log)] == [
            (commit1, None), (abort, None), (commit2, None), (commit3, None)]
        assert log.collect_aborted_transactions(0, log.log_end_offset) == [(P2, 2)]
        assert {k: v for k, v in latest(committed(log)).items() if k in expected} == expected

        # Pass 2 finds those transactions empty: the horizon is stamped, the index entry goes.
        dirty_again(log, 1)
        clean_pass(lm, cleaners, now=T + 10)
        horizon = T + 10 + RETENTION
        assert [(o, h) for o, _, _, h in markers(log)] == [
            (commit1, horizon), (abort, horizon), (commit2, None), (commit3, None)]
        assert log.collect_aborted_transactions(0, log.log_end_offset) == []

        # Before the horizon they stay; at it they go. Markers of live data stay.
        dirty_again(log, 2)
        clean_pass(lm, cleaners, now=horizon - 1)
        assert [o for o, *_ in markers(log)] == [commit1, abort, commit2, commit3]
        dirty_again(log, 3)
        clean_pass(lm, cleaners, now=horizon)
        assert [o for o, *_ in markers(log)] == [commit2, commit3]
        assert {k: v for k, v in latest(committed(log)).items() if k in expected} == expected
        assert uncommitted(log)[:2] == [(commit2 - 1, b"a", b"2"), (commit3 - 1, b"c", b"1")]

    _with_log(tmp_path, body)


def test_an_open_transaction_is_not_touched(tmp_path: Path) -> None:
    def body(lm: LogManager, log: Log) -> None:
        p1, p2 = Producer(log, P1), Producer(log, P2)
        p2.send((b"a", b"aborted"))
        p2.end(commit=False)
        plain(log, (b"a", b"plain"))
        first_open = p1.send((b"a", b"open"))
        plain(log, (b"a", b"later"))
        seal(log)
        assert log.last_stable_offset == first_open
        before = [r for r in uncommitted(log) if r[0] >= first_open]
        clean_pass(lm, LogCleanerManager(lm), now=T)
        assert [r for r in uncommitted(log) if r[0] >= first_open] == before
        assert committed(log) == [(2, b"a", b"plain")]
        # Once committed (and the log cleaned again), the open value is superseded.
        p1.end(commit=True)
        dirty_again(log, 1)
        clean_pass(lm, LogCleanerManager(lm), now=T)
        assert [r for r in committed(log) if r[1] == b"a"] == [(first_open + 1, b"a", b"later")]

    _with_log(tmp_path, body)


# --- producer state ----------------------------------------------------------------------------


def test_last_batches_of_producers_and_restarts(tmp_path: Path) -> None:
    lm, log = open_manager(tmp_path)
    try:
        p1, p2, p3 = Producer(log, P1), Producer(log, P2), Producer(log, P3)
        p1.send((b"a", b"1"))
        p1.end(commit=True)
        p2.send((b"b", b"1"))
        p2.end(commit=True)
        p1.send((b"b", b"aborted"))  # P1's last data batch, aborted
        p1.end(commit=False)
        p3.send((b"x", b"p3"))
        p3.end(commit=False, epoch=1)  # the coordinator aborts with a bumped epoch
        plain(log, (b"a", b"2"), (b"b", b"2"), (b"x", b"2"))
        seal(log)
        cleaners = LogCleanerManager(lm)
        state = producer_view(log)
        expected = committed(log)
        for now in (T, T + 10, T + 10 + RETENTION):
            clean_pass(lm, cleaners, now=now)
            dirty_again(log, now)
        clean_pass(lm, cleaners, now=T + 10 + RETENTION)
        headers = {h.producer_id: h for h, _ in batches(log) if h.has_producer_id
                   and not h.is_control}
        # P1's aborted last batch stays as an empty header, so its marker and entry stay.
        assert (headers[P1].record_count, headers[P1].base_sequence) == (0, 1)
        assert headers[P2].record_count == 0  # superseded, but P2's last batch
        assert log.collect_aborted_transactions(0, log.log_end_offset) == [(P1, 4)]
        # P3's last entry is its epoch-1 marker: kept, emptied once past its horizon.
        assert [(pid, c) for _, pid, c, _ in markers(log) if pid == P3] == [(P3, None)]
        assert producer_view(log) == state
        assert [r for r in committed(log) if not r[1].startswith(b"filler")] == [
            r for r in expected if r[1] in (b"a", b"b", b"x") and r[0] >= 8]
        reads = committed(log), uncommitted(log), log.last_stable_offset
    finally:
        lm.shutdown()
    # A clean restart loads the producer snapshot.
    lm, log = open_manager(tmp_path)
    try:
        log.high_watermark = log.log_end_offset
        assert producer_view(log) == state
        assert (committed(log), uncommitted(log), log.last_stable_offset) == reads
    finally:
        lm.shutdown()
    # Without snapshots, replaying the cleaned log rebuilds the sequences and the LSO.
    for snapshot in (tmp_path / "topic-0").glob("*.snapshot"):
        snapshot.unlink()
    log = Log.open(tmp_path / "topic-0", config())
    try:
        log.high_watermark = log.log_end_offset
        replayed = producer_view(log)
        assert {pid: v[1:] for pid, v in replayed.items() if pid != P3} == {
            pid: v[1:] for pid, v in state.items() if pid != P3}
        assert (committed(log), uncommitted(log), log.last_stable_offset) == reads
    finally:
        log.close()


# --- a model -----------------------------------------------------------------------------------

keys = st.sampled_from([b"a", b"b", b"c"])
values = st.one_of(st.none(), st.sampled_from([b"1", b"2", b"3"]))
ops = st.lists(st.one_of(
    st.tuples(st.just("plain"), keys, values),
    st.tuples(st.just("txn"), st.sampled_from([P1, P2]), keys, values),
    st.tuples(st.just("end"), st.sampled_from([P1, P2]), st.booleans()),
    st.tuples(st.just("roll")),
), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, leave_open=st.booleans())
def test_cleaning_transactions_matches_a_model(tmp_path_factory, ops, leave_open) -> None:
    directory = tmp_path_factory.mktemp("txnmodel")
    lm, log = open_manager(directory, segment_bytes=300)
    try:
        producers = {pid: Producer(log, pid) for pid in (P1, P2)}
        open_txns: dict[int, list[int]] = {}
        aborted: set[int] = set()
        plain(log, (b"a", b"0"))
        for op in ops:
            if op[0] == "plain":
                plain(log, (op[1], op[2]))
            elif op[0] == "txn":
                offset = producers[op[1]].send((op[2], op[3]))
                open_txns.setdefault(op[1], []).append(offset)
            elif op[0] == "end" and op[1] in open_txns:
                producers[op[1]].end(commit=op[2])
                if not op[2]:
                    aborted.update(open_txns[op[1]])
                del open_txns[op[1]]
            elif op[0] == "roll" and log.active_segment.size:
                log.roll()
        if not leave_open:
            for pid in list(open_txns):
                producers[pid].end(commit=True)
                del open_txns[pid]
        seal(log)
        lso = log.last_stable_offset
        before = uncommitted(log)
        model = latest([r for r in before if r[0] not in aborted and r[0] < lso])
        state = producer_view(log)
        cleaners = LogCleanerManager(lm)
        ends = []
        for n, now in enumerate((T, T + 1, T + 2 + RETENTION, T + 3 + 2 * RETENTION)):
            ends.append(clean_pass(lm, cleaners, now=now) or 0)
            dirty_again(log, n)
        after = committed(log)
        for key, (offset, value) in model.items():
            got = latest(after).get(key)
            assert got == (offset, value) or (value is None and got is None)
        # Every record left is as written, and no aborted one is left where cleaned.
        assert set(uncommitted(log)) - set(before) <= {
            r for r in uncommitted(log) if r[1] not in (b"a", b"b", b"c")}
        assert not [o for o, _, _ in uncommitted(log) if o in aborted and o < max(ends)]
        # The open transaction's records are as they were.
        assert [r for r in uncommitted(log) if r[0] >= lso and r[1] in (b"a", b"b", b"c")
                ] == [r for r in before if r[0] >= lso]
        if open_txns:
            assert log.last_stable_offset == lso
        assert producer_view(log) == state
        # A replay of the cleaned log sees the same transactions (no marker lost).
        reads = committed(log)
        lm.shutdown()
        for snapshot in (directory / "topic-0").glob("*.snapshot"):
            snapshot.unlink()
        again = Log.open(directory / "topic-0", config(segment_bytes=300))
        try:
            again.high_watermark = again.log_end_offset
            if open_txns:
                assert again.last_stable_offset == lso
            assert committed(again) == reads
        finally:
            again.close()
    finally:
        with contextlib.suppress(Exception):
            lm.shutdown()
