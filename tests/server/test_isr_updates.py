"""IsrUpdates batches ISR changes: while one AlterPartition is in flight, the others
queue and go out together in the next (Kafka's AlterPartitionManager)."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio
import trio.testing

from josefk.cluster.partition import Partition
from josefk.log.log import Log
from josefk.server.replication import fetchers as replication
from josefk.server.replication.fetchers import IsrUpdates
from josefk.server.security.client import PLAINTEXT_PEERS

TOPIC_IDS = {"a": uuid.uuid4(), "b": uuid.uuid4()}


class Host:
    node_id = 1
    broker_epoch = 7
    controller_id = 0
    peer_security = PLAINTEXT_PEERS
    config = SimpleNamespace(replica_lag_time_max_ms=30_000, request_timeout_ms=30_000)

    def endpoint_of(self, broker_id: int) -> tuple[str, int]:
        return ("controller", broker_id)


def led(tmp_path: Path, topic: str, index: int) -> Partition:
    log = Log.open(tmp_path / f"{topic}-{index}")
    return Partition(topic=topic, index=index, topic_id=TOPIC_IDS[topic], log=log, node_id=1,
                     replicas=[1, 2, 3], isr=[1, 2, 3], leader_epoch=4, leader=1,
                     partition_epoch=9)


def accepted(request: Any) -> SimpleNamespace:
    """The controller's answer accepting a one-partition AlterPartition as asked."""
    [t] = request.topics
    [p] = t.partitions
    return SimpleNamespace(error_code=0, topics=[SimpleNamespace(
        topic_id=t.topic_id, topic_name="", partitions=[SimpleNamespace(
            partition_index=p.partition_index, error_code=0, leader_id=1,
            leader_epoch=p.leader_epoch, isr=list(p.new_isr),
            partition_epoch=p.partition_epoch + 1)])])


async def test_isr_changes_share_alter_partition_requests(tmp_path: Path, monkeypatch) -> None:
    sent: list[Any] = []
    release = trio.Event()

    async def once(endpoint, name, timeout, request, version, what, security=None):  # type: ignore[no-untyped-def]
        sent.append(request)
        await release.wait()  # the first request stays in flight while the rest queue
        topics = [SimpleNamespace(topic_id=t.topic_id, topic_name="", partitions=[
            SimpleNamespace(partition_index=p.partition_index, error_code=0, leader_id=1,
                            leader_epoch=p.leader_epoch, isr=list(p.new_isr),
                            partition_epoch=p.partition_epoch + 1)
            for p in t.partitions]) for t in request.topics]
        return SimpleNamespace(error_code=0, topics=topics)

    monkeypatch.setattr(replication.PeerConnection, "once", once)
    partitions = [led(tmp_path, topic, i) for topic in ("a", "b") for i in range(50)]
    async with trio.open_nursery() as nursery:
        updates = IsrUpdates(Host(), nursery, lambda: partitions)  # type: ignore[arg-type]
        updates._propose(partitions[0], [1, 2])
        await trio.testing.wait_all_tasks_blocked()
        for partition in partitions[1:]:
            updates._propose(partition, [1, 3])
        await trio.testing.wait_all_tasks_blocked()
        assert len(sent) == 1  # the others wait for the one in flight
        release.set()
    assert len(sent) == 2
    first, second = ([(t.topic_id, p.partition_index) for t in r.topics for p in t.partitions]
                     for r in sent)
    assert first == [(TOPIC_IDS["a"], 0)]
    assert sorted(second) == sorted((p.topic_id, p.index) for p in partitions[1:])
    assert partitions[0].isr == [1, 2] and partitions[0].partition_epoch == 10
    assert all(p.isr == [1, 3] and p.partition_epoch == 10 for p in partitions[1:])
    assert all(p.pending_isr is None for p in partitions)
    for p in partitions:
        p.log.close()


async def test_an_unanswered_isr_change_is_sent_again_unchanged(tmp_path: Path,
                                                                monkeypatch) -> None:
    """A change the controller wrote but whose answer was lost (too slow) must be asked
    again as it was: a different one, from the old partition epoch, is refused forever."""
    sent: list[Any] = []

    async def once(endpoint, name, timeout, request, version, what, security=None):  # type: ignore[no-untyped-def]
        sent.append(request)
        if len(sent) == 1:
            return None  # timed out
        return accepted(request)

    monkeypatch.setattr(replication.PeerConnection, "once", once)
    monkeypatch.setattr(replication, "ALTER_PARTITION_RETRY_S", 0.01)
    partition = led(tmp_path, "a", 0)
    async with trio.open_nursery() as nursery:
        updates = IsrUpdates(Host(), nursery, lambda: [partition])  # type: ignore[arg-type]
        updates._propose(partition, [1, 2])
        assert partition.pending_isr == [1, 2]
    assert len(sent) == 2
    asked = [(p.new_isr, p.partition_epoch) for r in sent for t in r.topics for p in t.partitions]
    assert asked == [([1, 2], 9), ([1, 2], 9)]
    assert partition.isr == [1, 2] and partition.partition_epoch == 10
    assert partition.pending_isr is None
    partition.log.close()


async def test_an_answer_for_a_state_replaced_meanwhile_is_dropped(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """While an expansion is in flight, the controller moves the partition on (a
    LeaderAndIsr at the same leader epoch, shrinking the ISR): the answer to the old
    proposal must not be applied, or a follower below the new high watermark would be
    in the ISR (as Kafka's Partition drops an answer for a state no longer in flight)."""
    release = trio.Event()

    async def once(endpoint, name, timeout, request, version, what, security=None):  # type: ignore[no-untyped-def]
        await release.wait()
        return accepted(request)

    monkeypatch.setattr(replication.PeerConnection, "once", once)
    partition = led(tmp_path, "a", 0)
    partition.isr = [1]
    async with trio.open_nursery() as nursery:
        updates = IsrUpdates(Host(), nursery, lambda: [partition])  # type: ignore[arg-type]
        updates._propose(partition, [1, 2])
        await trio.testing.wait_all_tasks_blocked()
        partition.apply_leadership(1, 4, [1], [1, 2, 3], 10)  # the controller's new state
        release.set()
    assert partition.isr == [1] and partition.partition_epoch == 10
    partition.log.close()


async def test_a_stopped_replica_stops_asking_for_its_isr_change(tmp_path: Path,
                                                                 monkeypatch) -> None:
    """While the controller is unreachable an ISR change is asked again and again; once
    StopReplica took the partition away, nothing is asked for it any more."""
    sent: list[Any] = []
    partition = led(tmp_path, "a", 0)

    async def once(endpoint, name, timeout, request, version, what, security=None):  # type: ignore[no-untyped-def]
        sent.append(request)
        if len(sent) == 3:
            partition.stop()
        return None  # the controller does not answer

    monkeypatch.setattr(replication.PeerConnection, "once", once)
    monkeypatch.setattr(replication, "ALTER_PARTITION_RETRY_S", 0.01)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            updates = IsrUpdates(Host(), nursery, lambda: [partition])  # type: ignore[arg-type]
            updates._propose(partition, [1, 2])
    assert len(sent) == 3
    assert partition.isr == [1, 2, 3] and not partition.is_leader
    partition.log.close()


async def test_stop_replica_stops_the_partition(broker) -> None:  # type: ignore[no-untyped-def]
    await broker.create_topic("stopped", 1, 1)
    partition = broker.partition("stopped", 0)
    assert partition is not None and partition.is_leader
    broker.stop_replica("stopped", 0, delete=False)
    assert broker.partition("stopped", 0) is None and not partition.is_leader


async def test_a_follower_joins_an_isr_holding_a_removed_replica(tmp_path: Path,
                                                                 monkeypatch) -> None:
    """A reassignment that moves the leader leaves the removed replica in the ISR until
    the controller takes it out; a follower catching up meanwhile used to crash the ISR
    ordering (ValueError) and drop its fetch connection."""
    sent: list[Any] = []

    async def once(endpoint, name, timeout, request, version, what, security=None):  # type: ignore[no-untyped-def]
        sent.append(request)
        return accepted(request)

    monkeypatch.setattr(replication.PeerConnection, "once", once)
    log = Log.open(tmp_path / "a-0")
    partition = Partition(topic="a", index=0, topic_id=TOPIC_IDS["a"], log=log, node_id=1,
                          replicas=[1, 2, 3], isr=[1, 4, 2], leader_epoch=4, leader=1,
                          partition_epoch=9)
    partition.record_follower_fetch(3, 0, 1_000)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            updates = IsrUpdates(Host(), nursery, lambda: [partition])  # type: ignore[arg-type]
            updates.maybe_expand(partition, 3)
    [[asked]] = [t.partitions for t in sent[0].topics]
    assert asked.new_isr == [1, 2, 3]
    assert partition.isr == [1, 2, 3]
    log.close()
