"""A follower's fetcher ignores answers to requests sent before a leadership change.

Regression test for the loss `make chaos` found (seed 103): broker 1 followed broker 2
at epoch 13 and asked it OffsetForLeaderEpoch; broker 2 was paused (SIGSTOP), broker 3
became leader at epoch 14 and broker 1 fetched from it; when broker 2 woke up, its
stale answer ("epoch 12 ends at 8528") truncated broker 1's log, and the Fetch answer
from broker 3 then in flight (records from 9583) was appended at 8528, leaving a hole
of a thousand acknowledged records that broker 1, later leader, never served. The
fetcher talks to a stand-in peer here; the log and partition are real.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.cluster.partition import Partition
from josefk.log.config import LogConfig
from josefk.log.log import Log
from josefk.protocol.error_codes import OFFSET_OUT_OF_RANGE
from josefk.server.replication import fetchers as replication
from josefk.server.replication.fetchers import ReplicaFetcher
from josefk.server.security.client import PLAINTEXT_PEERS

TP = ("t", 0)
CONFIG = SimpleNamespace(values={
    "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
    "replica.fetch.response.max.bytes": 10 << 20, "replica.fetch.max.bytes": 1 << 20,
    "replica.fetch.backoff.ms": 100, "replica.socket.timeout.ms": 30_000,
    "replica.socket.receive.buffer.bytes": 65536,
})


def batch(base_offset: int, count: int, leader_epoch: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=b"v%d" % i, headers=[])
    buf = bytearray(builder.build())
    # Base offset and partition leader epoch sit outside the CRC.
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, leader_epoch)
    return bytes(buf)


class Host:
    """The broker as the fetcher sees it: one followed partition."""

    node_id = 1
    config = CONFIG
    broker_epoch = 1
    controller_id = 3
    peer_security = PLAINTEXT_PEERS

    def __init__(self, partition: Partition) -> None:
        self._partition = partition

    def partition(self, topic: str, index: int) -> Partition | None:
        return self._partition if (topic, index) == TP else None

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        return ("127.0.0.1", 9000 + broker_id)


class HeldPeer:
    """Takes one request and answers it only when the test says so."""

    def __init__(self) -> None:
        self.sent = trio.Event()
        self.request: Any = None
        self._answer: Any = None
        self._release = trio.Event()

    async def request_(self, request: Any, version: int) -> Any:
        self.request = request
        self.sent.set()
        await self._release.wait()
        return self._answer

    def answer(self, response: Any) -> None:
        self._answer = response
        self._release.set()


def follower(tmp_path: Path) -> Partition:
    """Broker 1 following broker 2 at epoch 13, holding offsets 0-9 written in epoch 12
    (two batches: a log is cut only between batches)."""
    log = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    log.append_as_follower(batch(0, 4, 12))
    log.append_as_follower(batch(4, 6, 12))
    return Partition(topic="t", index=0, topic_id=uuid.uuid4(), log=log, node_id=1,
                     replicas=[1, 2, 3], isr=[2, 1, 3], leader_epoch=13, leader=2)


def offset_for_leader_epoch_answer(epoch: int, end_offset: int) -> Any:
    p = SimpleNamespace(partition=0, error_code=0, leader_epoch=epoch, end_offset=end_offset)
    return SimpleNamespace(topics=[SimpleNamespace(topic="t", partitions=[p])])


def fetch_answer(records: bytes, high_watermark: int) -> Any:
    data = SimpleNamespace(partition_index=0, error_code=0, high_watermark=high_watermark,
                           log_start_offset=0, diverging_epoch=None, records=records)
    return SimpleNamespace(error_code=0, session_id=0,
                           responses=[SimpleNamespace(topic="t", partitions=[data])])


async def run_round(fetcher: ReplicaFetcher, peer: HeldPeer) -> None:
    wrapper = SimpleNamespace(request=peer.request_)
    await fetcher._round(wrapper)  # type: ignore[arg-type]


def fetcher_of(partition: Partition) -> ReplicaFetcher:
    """Broker 1's fetcher from broker 2, following ``partition``."""
    fetcher = ReplicaFetcher(Host(partition), leader_id=2)  # type: ignore[arg-type]
    fetcher.add(TP)
    return fetcher


async def one_round(fetcher: ReplicaFetcher, answer: Any,
                    meanwhile: Callable[[HeldPeer], None] = lambda _peer: None) -> None:
    """One fetcher round; its request is answered with ``answer`` once ``meanwhile`` ran."""
    peer = HeldPeer()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_round, fetcher, peer)
        await peer.sent.wait()
        meanwhile(peer)
        peer.answer(answer)


async def test_a_deposed_leaders_late_truncation_answer_changes_nothing(tmp_path: Path) -> None:
    partition = follower(tmp_path)
    fetcher = fetcher_of(partition)

    def broker_3_leads(_peer: HeldPeer) -> None:
        # Broker 2 stalls; broker 3 leads at epoch 14 and this replica follows it.
        partition.apply_leadership(3, 14, [3, 1], [1, 2, 3], 25)
        fetcher.remove(TP)
        partition.log.append_as_follower(batch(10, 5, 14))  # fetched from broker 3

    await one_round(fetcher, offset_for_leader_epoch_answer(epoch=12, end_offset=4),
                    broker_3_leads)
    assert partition.log.log_end_offset == 15


async def test_the_same_leader_re_followed_ignores_the_old_answer(tmp_path: Path) -> None:
    partition = follower(tmp_path)
    fetcher = fetcher_of(partition)

    def followed_afresh(_peer: HeldPeer) -> None:
        # LeaderAndIsr again (same leader, same epoch): the partition is followed afresh.
        fetcher.remove(TP)
        fetcher.add(TP)

    await one_round(fetcher, offset_for_leader_epoch_answer(epoch=12, end_offset=4),
                    followed_afresh)
    assert partition.log.log_end_offset == 10


async def test_fetched_records_land_only_at_the_offset_they_were_fetched_for(
    tmp_path: Path,
) -> None:
    partition = follower(tmp_path)
    fetcher = fetcher_of(partition)
    fetcher.partitions[TP].truncating = False

    def log_moves(peer: HeldPeer) -> None:
        assert peer.request.topics[0].partitions[0].fetch_offset == 10
        partition.log.truncate_to(4)  # the log moved while the fetch was in flight

    await one_round(fetcher, fetch_answer(batch(10, 5, 13), high_watermark=15), log_moves)
    assert partition.log.log_end_offset == 4


async def test_an_answer_for_the_current_state_is_applied(tmp_path: Path) -> None:
    partition = follower(tmp_path)
    fetcher = fetcher_of(partition)
    await one_round(fetcher, offset_for_leader_epoch_answer(epoch=12, end_offset=4))
    assert partition.log.log_end_offset == 4
    assert not fetcher.partitions[TP].truncating
    await one_round(fetcher, fetch_answer(batch(4, 3, 13), high_watermark=7))
    assert partition.log.log_end_offset == 7


def bad_size(records: bytes, batch_length: int) -> bytes:
    """``records`` with the first batch's length field set to ``batch_length``."""
    buf = bytearray(records)
    struct.pack_into(">i", buf, 8, batch_length)
    return bytes(buf)


@pytest.mark.timeout(30)  # the loop it guards against never yields: fail_after cannot fire
async def test_a_batch_of_impossible_size_is_logged_and_retried_not_looped_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    partition = follower(tmp_path)
    fetcher = fetcher_of(partition)
    fetcher.partitions[TP].truncating = False
    # -12 made the batch 0 bytes long: the follower's loop never moved on nor yielded.
    for length in (-12, -100, 10):
        with trio.fail_after(5):
            await one_round(fetcher, fetch_answer(bad_size(batch(10, 5, 13), length), 15))
        assert partition.log.log_end_offset == 10
        assert fetcher.partitions[TP].truncating
        assert f"cannot append t-0 from broker 2: a batch of {12 + length} bytes" in caplog.text
        fetcher.partitions[TP].truncating = False
        fetcher.partitions[TP].retry_at = 0.0


class FailingPeer:
    """A leader whose first answer cannot be made sense of; then, none at all."""

    host, port = Host.endpoint_of(None, 2)  # type: ignore[arg-type]

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.requests = 0
        self.retried = trio.Event()

    async def request(self, request: Any, version: int) -> Any:
        self.requests += 1
        if self.requests == 1:
            raise self.error
        self.retried.set()
        await trio.sleep_forever()

    async def aclose(self) -> None:
        pass


async def test_an_unexpected_error_in_a_round_is_logged_and_the_fetcher_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    peer = FailingPeer(KeyError("no such field"))
    monkeypatch.setattr(replication, "PeerConnection", lambda *args, **kwargs: peer)
    fetcher = fetcher_of(follower(tmp_path))
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetcher.run)
            await peer.retried.wait()
            fetcher.scope.cancel()
    assert "fetching from broker 2 failed" in caplog.text
    assert "KeyError: 'no such field'" in caplog.text


class ScriptedPeer:
    """A leader answering each request with the next of ``answers``."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[Any] = []

    async def request(self, request: Any, version: int) -> Any:
        self.requests.append(request)
        return self.answers.pop(0)


def out_of_range_answer() -> Any:
    answer = fetch_answer(b"", high_watermark=-1)
    answer.responses[0].partitions[0].error_code = OFFSET_OUT_OF_RANGE
    return answer


def list_offsets_answer(offset: int) -> Any:
    return SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[SimpleNamespace(
        partition_index=0, error_code=0, offset=offset)])])


async def test_a_follower_behind_the_leaders_log_start_starts_over_there(
        tmp_path: Path) -> None:
    """Its log ends at 10, the leader's starts at 50 (retention ran while it was away):
    fetching from 10 is out of range for ever unless, as Kafka's fetcher does, it asks
    the leader's log start and end and starts over at the start."""
    partition = follower(tmp_path)
    fetcher = fetcher_of(partition)
    fetcher.partitions[TP].truncating = False
    peer = ScriptedPeer(out_of_range_answer(), list_offsets_answer(80),
                        list_offsets_answer(50))
    await fetcher._round(peer)  # type: ignore[arg-type]
    assert [r.topics[0].partitions[0].timestamp for r in peer.requests[1:]] == [-1, -2]
    assert peer.requests[1].replica_id == 1  # as a follower: the leader's log end
    log = partition.log
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert not fetcher.partitions[TP].truncating


async def test_a_follower_ahead_of_the_leaders_log_end_cuts_back_to_it(tmp_path: Path) -> None:
    partition = follower(tmp_path)
    fetcher = fetcher_of(partition)
    fetcher.partitions[TP].truncating = False
    peer = ScriptedPeer(out_of_range_answer(), list_offsets_answer(4), list_offsets_answer(0))
    await fetcher._round(peer)  # type: ignore[arg-type]
    assert partition.log.log_end_offset == 4


class ManyPartitions(Host):
    """Broker 1 following broker 2 on partitions t-0..t-3."""

    def __init__(self, partitions: dict[tuple[str, int], Partition]) -> None:
        self._partitions = partitions

    def partition(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))


async def test_truncations_past_the_rounds_slice_wait_for_the_next_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each truncation rebuilds producer state on the event loop: a round applies them for
    at most TRUNCATION_SLICE_S, and the rest are asked again in the next round."""
    partitions = {}
    for index in range(4):
        partition = follower(tmp_path / str(index))
        partition.index = index
        partitions[("t", index)] = partition
    fetcher = ReplicaFetcher(ManyPartitions(partitions), leader_id=2)  # type: ignore[arg-type]
    for tp in partitions:
        fetcher.add(tp)
    clock = [0.0]
    monkeypatch.setattr(replication, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    apply = fetcher._apply_truncation

    def slow_truncation(*args: Any) -> None:
        apply(*args)
        clock[0] += 0.06  # each truncation takes 60 ms: two fit in the 0.1-s slice

    monkeypatch.setattr(fetcher, "_apply_truncation", slow_truncation)

    def answer_for(indexes: list[int]) -> Any:
        ps = [SimpleNamespace(partition=i, error_code=0, leader_epoch=12, end_offset=4)
              for i in indexes]
        return SimpleNamespace(topics=[SimpleNamespace(topic="t", partitions=ps)])

    def asked(peer: ScriptedPeer) -> list[int]:
        return sorted(p.partition for t in peer.requests[0].topics for p in t.partitions)

    first = ScriptedPeer(answer_for([0, 1, 2, 3]))
    await fetcher._round(first)  # type: ignore[arg-type]
    ends = {i: partitions[("t", i)].log.log_end_offset for i in range(4)}
    assert sorted(ends.values()) == [4, 4, 10, 10]
    left = sorted(i for i, end in ends.items() if end == 10)
    assert sorted(i for (_, i), f in fetcher.partitions.items() if f.truncating) == left
    second = ScriptedPeer(answer_for(left))
    await fetcher._round(second)  # type: ignore[arg-type]
    assert asked(second) == left
    assert [partitions[("t", i)].log.log_end_offset for i in range(4)] == [4] * 4
    assert not any(f.truncating for f in fetcher.partitions.values())
