"""A leader's view of its followers (Partition): high watermark over the ISR, caught-up
times, who may join the ISR."""

from __future__ import annotations

import uuid
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.cluster.partition import FetchClock, Partition
from josefk.log.config import LogConfig
from josefk.log.log import Log

BASE_TS = 1_700_000_000_000


def build_batch(count: int, timestamp: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=timestamp, key=None, value=b"v%d" % i, headers=[])
    return bytearray(builder.build())


def leader(tmp_path: Path, isr: list[int]) -> Partition:
    log = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    return Partition(topic="t", index=0, topic_id=uuid.uuid4(), log=log, node_id=1,
                     replicas=[1, 2, 3], isr=isr, leader_epoch=0, leader=1)


def test_high_watermark_is_the_smallest_log_end_over_the_isr(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2, 3])
    p.append_records(build_batch(5, BASE_TS), required_acks=-1)
    assert p.high_watermark == 0  # no follower has fetched yet
    p.record_follower_fetch(2, 5, now_ms=10)
    assert p.high_watermark == 0
    p.record_follower_fetch(3, 3, now_ms=10)
    assert p.high_watermark == 3
    p.record_follower_fetch(3, 5, now_ms=11)
    assert p.high_watermark == 5


def test_only_the_follower_that_fetched_may_join_the_isr(tmp_path: Path) -> None:
    """A follower dropped from the ISR (dead) keeps its last known offset; that must not
    bring it back when another follower fetches (found under SIGKILL: a dead follower was
    put back into the ISR every two seconds)."""
    p = leader(tmp_path, [1, 2, 3])
    p.append_records(build_batch(4, BASE_TS), required_acks=1)
    p.record_follower_fetch(2, 4, now_ms=10)
    p.record_follower_fetch(3, 4, now_ms=10)
    p.isr = [1, 2]  # broker 3 died and the controller removed it
    assert not p.may_join_isr(2)  # already in
    assert p.may_join_isr(3) is True  # only if asked for 3 itself, i.e. after its fetch
    p.append_records(build_batch(2, BASE_TS), required_acks=1)
    p.record_follower_fetch(2, 6, now_ms=20)
    assert p.high_watermark == 6
    assert not p.may_join_isr(3)  # behind the high watermark now


def test_caught_up_means_reaching_the_leaders_end(tmp_path: Path) -> None:
    """Kafka's rule: caught up at a fetch that reaches the log end offset, or at the
    previous fetch when this one reaches what the log end was then."""
    p = leader(tmp_path, [1, 2, 3])
    p.append_records(build_batch(10, BASE_TS), required_acks=1)
    p.record_follower_fetch(2, 10, now_ms=100)
    assert p.replicas_out_of_sync(now_ms=150, max_lag_ms=100) == [3]
    p.append_records(build_batch(5, BASE_TS), required_acks=1)  # end 15
    p.record_follower_fetch(2, 10, now_ms=400)  # behind, but where the end was at 100
    assert p.followers[2].last_caught_up_ms == 100
    p.record_follower_fetch(2, 15, now_ms=450)
    assert p.followers[2].last_caught_up_ms == 450
    assert p.replicas_out_of_sync(now_ms=500, max_lag_ms=100) == [3]
    assert p.replicas_out_of_sync(now_ms=600, max_lag_ms=100) == [2, 3]


def test_a_follower_left_alone_at_the_end_stays_caught_up_with_its_session(
    tmp_path: Path,
) -> None:
    """A fetch session does not read a partition whose follower has everything; the
    session's clock stands for that follower's fetches until the partition changes."""
    p = leader(tmp_path, [1, 2, 3])
    p.append_records(build_batch(4, BASE_TS), required_acks=1)
    p.record_follower_fetch(2, 4, now_ms=100)
    clock = FetchClock(ms=100)
    assert p.follower_stays_at_end(2, clock)
    assert not p.follower_stays_at_end(3, clock)  # never fetched: it must be read
    clock.ms = 900  # the session fetched again and again, never reading this partition
    assert p.replicas_out_of_sync(now_ms=950, max_lag_ms=100) == [3]
    clock.ms = 1_000  # the last fetch before an append...
    p.append_records(build_batch(2, BASE_TS), required_acks=1)  # end 6
    p.settle_follower(2)  # ...which the session settles before its next fetch
    clock.ms = 5_000  # the session goes on; this partition is no longer left alone
    assert p.followers[2].caught_up_ms() == 1_000
    p.record_follower_fetch(2, 4, now_ms=1_050)  # behind, but where the end was at 1,000
    assert p.followers[2].last_caught_up_ms == 1_000
    assert p.replicas_out_of_sync(now_ms=1_200, max_lag_ms=100) == [2, 3]


def test_a_follower_that_stops_fetching_is_no_longer_caught_up(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2, 3])
    p.record_follower_fetch(2, 0, now_ms=100)
    p.record_follower_fetch(3, 0, now_ms=100)
    sessions = {2: FetchClock(ms=100), 3: FetchClock(ms=100)}
    assert all(p.follower_stays_at_end(r, clock) for r, clock in sessions.items())
    sessions[2].ms = 400  # broker 3 paused: its session's clock stops
    assert p.replicas_out_of_sync(now_ms=400, max_lag_ms=200) == [3]
