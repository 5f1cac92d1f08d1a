"""`TopicDeletionManager` alone, on an in-memory ZooKeeper and a recording channel."""

from __future__ import annotations

import pytest
from controller_fakes import (
    EventQueue,
    MemoryZooKeeper,
    RecordingChannel,
    add_topic,
    illegal_transitions,
    make_context,
    registration,
)

from josefk.cluster.controller.context import ControllerContext, RequestBatch
from josefk.cluster.controller.deletion import TopicDeletionManager
from josefk.cluster.controller.states import ReplicaState
from josefk.cluster.metadata.requests import (
    LEADER_DURING_DELETE,
    ControllerResponse,
    StopReplica,
    UpdateMetadata,
)
from josefk.cluster.zk import znodes as zn
from josefk.protocol.error_codes import KAFKA_STORAGE_ERROR, NONE

PARTITIONS = {0: ((1, 2, 3), 1, (1, 2, 3)), 1: ((2, 3, 1), 2, (2, 3, 1))}


class Deletion:
    """The manager with everything around it."""

    def __init__(self, brokers: tuple[int, ...] = (1, 2, 3), enabled: bool = True) -> None:
        self.zk = MemoryZooKeeper()
        self.ctx: ControllerContext = make_context(brokers)
        self.channel = RecordingChannel()
        self.queue = EventQueue()
        self.deleted: list[str] = []
        self.enabled = enabled
        self.zk.put(zn.DELETE_TOPICS)
        add_topic(self.ctx, self.zk, "t", PARTITIONS)
        self.manager = TopicDeletionManager(
            self.ctx, self.zk, lambda: RequestBatch(self.ctx, self.channel), self.queue.put,
            self.queue.watch, lambda: self.enabled, self.deleted.append)

    def answer(self, broker_id: int, error: int = NONE) -> None:
        """``broker_id`` answers each StopReplica it got, every partition with ``error``."""
        for sent in self.channel.sent:
            if sent.broker_id == broker_id and isinstance(sent.request, StopReplica):
                assert sent.on_response is not None
                sent.on_response(ControllerResponse(NONE, {
                    (p.topic, p.partition): error for p in sent.request.partitions}))

    def states(self, broker_id: int) -> set[ReplicaState]:
        return {self.ctx.replica_state(tp, broker_id) for tp in self.ctx.partitions_of("t")}

    def topic_znodes(self) -> list[str]:
        return [p for p in (zn.topic_path("t"), zn.topic_config_path("t"),
                            zn.delete_topic_path("t")) if p in self.zk.nodes]


@pytest.fixture
def d() -> Deletion:
    return Deletion()


async def test_every_replica_stops_and_deletes_then_the_znodes_go(
        d: Deletion, caplog: pytest.LogCaptureFixture) -> None:
    d.zk.put(zn.delete_topic_path("t"))
    await d.manager.on_delete_topics()
    assert d.ctx.topics_to_delete == {"t"}
    for broker_id in (1, 2, 3):
        [stop] = d.channel.of(StopReplica, broker_id)
        assert {(p.topic, p.partition, p.delete) for p in stop.partitions} == {
            ("t", 0, True), ("t", 1, True)}
        assert d.states(broker_id) == {ReplicaState.DELETION_STARTED}
    # Brokers learn the topic is going: leader -2 in UpdateMetadata.
    [update] = d.channel.of(UpdateMetadata, 1)
    assert {p.leader for p in update.partitions} == {LEADER_DURING_DELETE}

    d.answer(1)
    d.answer(2)
    await d.queue.run_all()  # the answers are events on the controller's queue
    assert d.states(1) == d.states(2) == {ReplicaState.DELETION_SUCCESSFUL}
    assert d.topic_znodes() and d.deleted == []  # broker 3 has not answered

    d.answer(3)
    await d.queue.run_all()
    assert d.topic_znodes() == []
    assert zn.partitions_path("t") not in d.zk.nodes
    assert d.deleted == ["t"]
    assert "t" not in d.ctx.topic_ids and not d.ctx.partitions_of("t")
    assert d.ctx.topics_to_delete == set()
    assert not [k for k in d.ctx.replica_states if k[0] == "t"]
    assert illegal_transitions(caplog) == []


async def test_replicas_on_a_dead_broker_wait_for_it(caplog: pytest.LogCaptureFixture) -> None:
    d = Deletion(brokers=(1, 2))
    d.zk.put(zn.delete_topic_path("t"))
    await d.manager.on_delete_topics()
    assert d.channel.of(StopReplica, 3) == []
    assert d.states(3) == {ReplicaState.DELETION_INELIGIBLE}
    d.answer(1)
    d.answer(2)
    await d.queue.run_all()
    assert d.topic_znodes() and d.deleted == []  # waiting for broker 3

    d.ctx.brokers[3] = registration(3)  # back: its deletion is retried
    d.channel.sent.clear()
    await d.manager.resume()
    assert d.channel.of(StopReplica, 1) == []  # done there already
    [stop] = d.channel.of(StopReplica, 3)
    assert {p.partition for p in stop.partitions} == {0, 1}
    d.answer(3)
    await d.queue.run_all()
    assert d.topic_znodes() == [] and d.deleted == ["t"]
    assert illegal_transitions(caplog) == []


async def test_a_failed_deletion_leaves_the_replica_ineligible(d: Deletion) -> None:
    d.zk.put(zn.delete_topic_path("t"))
    await d.manager.on_delete_topics()
    d.answer(1, KAFKA_STORAGE_ERROR)
    d.answer(2)
    d.answer(3)
    await d.queue.run_all()
    assert d.states(1) == {ReplicaState.DELETION_INELIGIBLE}
    assert d.topic_znodes() and d.deleted == []

    d.channel.sent.clear()
    await d.manager.resume()  # retried: only broker 1 is asked again
    assert [s.broker_id for s in d.channel.sent if isinstance(s.request, StopReplica)] == [1]
    d.answer(1)
    await d.queue.run_all()
    assert d.deleted == ["t"]


async def test_deleting_an_unknown_topic_drops_the_request(d: Deletion) -> None:
    d.zk.put(zn.delete_topic_path("nope"))
    await d.manager.on_delete_topics()
    assert zn.delete_topic_path("nope") not in d.zk.nodes
    assert d.ctx.topics_to_delete == set() and d.channel.sent == []


async def test_with_deletion_disabled_the_request_is_dropped_and_the_topic_stays() -> None:
    d = Deletion(enabled=False)
    d.zk.put(zn.delete_topic_path("t"))
    await d.manager.on_delete_topics()
    assert zn.delete_topic_path("t") not in d.zk.nodes
    assert zn.topic_path("t") in d.zk.nodes and "t" in d.ctx.topic_ids
    assert d.ctx.topics_to_delete == set() and d.channel.sent == []


async def test_a_new_deletion_request_is_watched(d: Deletion) -> None:
    await d.manager.on_delete_topics()  # nothing to delete yet; the watch is set
    assert d.channel.sent == []
    d.zk.put(zn.delete_topic_path("t"))
    assert len(d.queue.events) == 1  # the watch queued the handler again
    await d.queue.run_all()
    assert d.ctx.topics_to_delete == {"t"}
    assert len(d.channel.of(StopReplica)) == 3


async def test_without_the_admin_znode_nothing_happens() -> None:
    d = Deletion()
    del d.zk.nodes[zn.DELETE_TOPICS]
    await d.manager.on_delete_topics()
    assert d.channel.sent == [] and d.ctx.topics_to_delete == set()
