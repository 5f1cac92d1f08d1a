"""`TopicChanges` alone: topics loaded and followed, on an in-memory ZooKeeper with a
fake of the elections."""

from __future__ import annotations

import pytest
from controller_fakes import (
    TOPIC_ID,
    EventQueue,
    FakeElections,
    MemoryZooKeeper,
    make_context,
)

from josefk.cluster.controller.context import ControllerContext
from josefk.cluster.controller.states import PartitionState
from josefk.cluster.controller.topics import TopicChanges
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.cluster.zk.znodes import TopicAssignment


class Topics:
    def __init__(self) -> None:
        self.zk = MemoryZooKeeper()
        self.zk.put(zn.TOPICS)
        self.ctx: ControllerContext = make_context()
        self.elections = FakeElections()
        self.queue = EventQueue()
        self.unclean: set[str] = set()
        self.topics = TopicChanges(self.ctx, self.zk, self.elections, self.queue.watch,
                                   lambda topic: topic in self.unclean)

    def write_topic(self, topic: str, assignment: TopicAssignment) -> None:
        self.zk.put(zn.topic_path(topic), assignment.encode())


@pytest.fixture
def t() -> Topics:
    return Topics()


async def test_failover_loads_topics_states_and_reassignments_in_flight(t: Topics) -> None:
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1, 2), 1: (2, 3, 1)},
                                       adding={1: (3,)}, removing={1: (1,)}))
    t.zk.put(zn.partition_state_path("a", 0), LeaderIsr(1, 3, (1, 2), 4).encode())
    t.zk.put(zn.topic_path("junk"), b"{not json")  # skipped, the others load
    await t.topics.load_all()
    assert t.ctx.topic_ids == {"a": TOPIC_ID}
    assert t.ctx.assignments == {("a", 0): (1, 2), ("a", 1): (2, 3, 1)}
    assert t.ctx.leader_isr[("a", 0)].leader_epoch == 3
    assert ("a", 1) not in t.ctx.leader_isr
    assert t.ctx.reassignments == {("a", 1): (2, 3)}  # the union minus the removed


async def test_a_new_topic_is_loaded_and_elected(t: Topics) -> None:
    await t.topics.load_all()
    t.write_topic("b", TopicAssignment(TOPIC_ID, {0: (1,), 1: (2,)}))
    assert len(t.queue.events) == 1  # /brokers/topics is watched
    await t.queue.run_all()
    assert t.elections.elected == [([("b", 0), ("b", 1)], "offline")]
    assert t.ctx.partition_states[("b", 0)] is PartitionState.NEW


async def test_a_removed_topic_leaves_the_context(t: Topics) -> None:
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1,)}))
    await t.topics.load_all()
    await t.zk.delete(zn.topic_path("a"), recursive=True)
    await t.queue.run_all()
    assert t.ctx.topic_ids == {} and t.ctx.assignments == {}
    assert t.elections.elected == []


async def test_a_topic_that_grew_elects_its_new_partitions(t: Topics) -> None:
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1,)}))
    await t.topics.load_all()
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1,), 1: (2, 3)}))
    await t.queue.run_all()  # the topic znode's watch
    assert t.ctx.assignments[("a", 1)] == (2, 3)
    assert t.elections.elected == [([("a", 1)], "offline")]


async def test_a_topic_being_deleted_does_not_grow(t: Topics) -> None:
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1,)}))
    await t.topics.load_all()
    t.ctx.topics_to_delete.add("a")
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1,), 1: (2,)}))
    await t.queue.run_all()
    assert ("a", 1) not in t.ctx.assignments and t.elections.elected == []


async def test_a_forgotten_topic_is_no_longer_followed(t: Topics) -> None:
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1,)}))
    await t.topics.load_all()
    t.ctx.remove_topic("a")
    t.topics.forget("a")
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1,), 1: (2,)}))
    await t.queue.run_all()
    assert t.ctx.assignments == {} and t.elections.elected == []


async def test_enabling_unclean_election_retries_the_topics_partitions(t: Topics) -> None:
    t.write_topic("a", TopicAssignment(TOPIC_ID, {0: (1,), 1: (2,)}))
    await t.topics.load_all()
    await t.topics.on_topic_config_change("a")
    assert t.elections.triggered == []
    t.unclean.add("a")
    await t.topics.on_topic_config_change("a")
    await t.topics.on_topic_config_change("unknown")
    assert t.elections.triggered == [[("a", 0), ("a", 1)]]
