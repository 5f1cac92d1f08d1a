"""`PartitionElections` alone: new partitions and the election strategies, on an
in-memory ZooKeeper with a fake of the fenced writes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from controller_fakes import (
    MemoryWrites,
    MemoryZooKeeper,
    RecordingChannel,
    add_topic,
    illegal_transitions,
    make_context,
)

from josefk.cluster.controller.context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller.elections import PartitionElections
from josefk.cluster.controller.states import PartitionState, ReplicaState
from josefk.cluster.metadata.requests import LeaderAndIsr
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.cluster.zk.znodes import TopicAssignment
from josefk.protocol.error_codes import (
    ELECTION_NOT_NEEDED,
    ELIGIBLE_LEADERS_NOT_AVAILABLE,
    NONE,
    PREFERRED_LEADER_NOT_AVAILABLE,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
)

TP0: TP = ("t", 0)


@dataclass
class Config:
    unclean: set[str] = field(default_factory=set)
    loaded: list[set[str]] = field(default_factory=list)

    @property
    def unclean_leader_election(self) -> Callable[[str], bool]:
        return lambda topic: topic in self.unclean

    @property
    def load_topic_configs(self) -> Callable[[set[str]], Awaitable[None]]:
        async def load(topics: set[str]) -> None:
            self.loaded.append(topics)
        return load


class Elect:
    def __init__(self, brokers: tuple[int, ...] = (1, 2, 3)) -> None:
        self.zk = MemoryZooKeeper()
        self.ctx: ControllerContext = make_context(brokers)
        self.writes = MemoryWrites(self.ctx, self.zk)
        self.channel = RecordingChannel()
        self.config = Config()
        self.elections = PartitionElections(
            self.ctx, self.zk, self.writes, lambda: RequestBatch(self.ctx, self.channel),
            lambda: self.config)

    def new_topic(self, replicas: tuple[int, ...]) -> None:
        self.ctx.set_topic("n", TopicAssignment(None, {0: replicas}))
        self.ctx.move_partition(("n", 0), PartitionState.NEW)

    def state(self, tp: TP) -> LeaderIsr:
        data = self.zk.data(zn.partition_state_path(*tp))
        return LeaderIsr.decode(data, self.zk.nodes[zn.partition_state_path(*tp)].version)


@pytest.fixture
def e() -> Elect:
    return Elect()


async def test_a_new_partition_gets_its_state_znode(
        e: Elect, caplog: pytest.LogCaptureFixture) -> None:
    del e.ctx.brokers[1]
    e.new_topic((1, 2, 3))
    assert await e.elections.elect([("n", 0)], "offline") == {("n", 0): NONE}
    state = e.state(("n", 0))  # parents created as needed
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version) == (2, 0, (2, 3), 0)
    assert e.ctx.leader_isr[("n", 0)] == state
    assert e.ctx.partition_states[("n", 0)] is PartitionState.ONLINE
    assert e.ctx.replica_state(("n", 0), 2) is ReplicaState.ONLINE
    assert e.ctx.replica_state(("n", 0), 1) is ReplicaState.NEW  # not live
    [request] = e.channel.of(LeaderAndIsr, 3)
    assert request.partitions[0].is_new
    assert illegal_transitions(caplog) == []


async def test_a_new_partition_whose_state_exists_takes_it(e: Elect) -> None:
    e.new_topic((1, 2))
    e.zk.put(zn.partition_state_path("n", 0), LeaderIsr(2, 4, (2,), 1).encode())
    assert await e.elections.elect([("n", 0)], "offline") == {("n", 0): NONE}
    assert e.ctx.leader_isr[("n", 0)].leader_epoch == 4


async def test_a_new_partition_without_live_replicas(e: Elect) -> None:
    e.new_topic((7, 8))
    assert await e.elections.elect([("n", 0)], "offline") == {
        ("n", 0): ELIGIBLE_LEADERS_NOT_AVAILABLE}
    assert zn.partition_state_path("n", 0) not in e.zk.nodes


async def test_an_offline_partition_elects_from_its_live_isr(e: Elect) -> None:
    add_topic(e.ctx, e.zk, "t", {0: ((1, 2, 3), 1, (1, 3))})
    del e.ctx.brokers[1]
    e.ctx.partition_states[TP0] = PartitionState.OFFLINE
    await e.elections.trigger_online_state_change()
    li = e.ctx.leader_isr[TP0]
    assert (li.leader, li.leader_epoch, li.isr) == (3, 1, (3,))
    assert e.ctx.partition_states[TP0] is PartitionState.ONLINE
    assert e.config.loaded == [{"t"}]  # the topic's configs first


async def test_without_a_live_isr_member_the_partition_goes_offline(e: Elect) -> None:
    add_topic(e.ctx, e.zk, "t", {0: ((1, 2), 1, (1,))})
    del e.ctx.brokers[1]
    assert await e.elections.elect([TP0], "offline") == {TP0: ELIGIBLE_LEADERS_NOT_AVAILABLE}
    li = e.ctx.leader_isr[TP0]
    assert (li.leader, li.isr) == (-1, (1,))  # the last ISR member kept
    assert e.ctx.partition_states[TP0] is PartitionState.OFFLINE

    e.config.unclean.add("t")  # the topic allows it now
    assert await e.elections.elect([TP0], "offline") == {TP0: NONE}
    li = e.ctx.leader_isr[TP0]
    assert (li.leader, li.isr) == (2, (2,))


async def test_preferred_election(e: Elect) -> None:
    add_topic(e.ctx, e.zk, "t", {0: ((1, 2, 3), 2, (1, 2, 3)), 1: ((1, 2), 2, (2,)),
                                 2: ((3, 1), 3, (3, 1))})
    assert await e.elections.elect([("t", 0), ("t", 1), ("t", 2)], "preferred") == {
        ("t", 0): NONE, ("t", 1): PREFERRED_LEADER_NOT_AVAILABLE,
        ("t", 2): ELECTION_NOT_NEEDED}
    assert e.ctx.leader_isr[("t", 0)].leader == 1
    assert e.config.loaded == []  # only before offline elections


async def test_controlled_shutdown_and_unclean_strategies(e: Elect) -> None:
    add_topic(e.ctx, e.zk, "t", {0: ((1, 2, 3), 1, (1, 2, 3)), 1: ((1, 2), 1, (1,))})
    e.ctx.shutting_down.add(1)
    results = await e.elections.elect([("t", 0), ("t", 1)], "controlled_shutdown")
    assert results == {("t", 0): NONE, ("t", 1): ELIGIBLE_LEADERS_NOT_AVAILABLE}
    assert (e.ctx.leader_isr[("t", 0)].leader, e.ctx.leader_isr[("t", 0)].isr) == (2, (2, 3))
    assert e.ctx.leader_isr[("t", 1)].leader == 1  # nowhere to go
    assert await e.elections.elect([("t", 0)], "unclean") == {("t", 0): ELECTION_NOT_NEEDED}


async def test_unknown_partitions_deleting_topics_and_lost_races(e: Elect) -> None:
    add_topic(e.ctx, e.zk, "t", {0: ((1, 2), 2, (1, 2))})
    assert await e.elections.elect([("x", 0)], "preferred") == {
        ("x", 0): UNKNOWN_TOPIC_OR_PARTITION}
    e.writes.conflicts.add(TP0)  # the partition epoch moves under every write
    assert await e.elections.elect([TP0], "preferred") == {TP0: UNKNOWN_SERVER_ERROR}
    e.ctx.partition_states[TP0] = PartitionState.OFFLINE
    e.ctx.topics_to_delete.add("t")
    await e.elections.trigger_online_state_change()
    assert e.writes.leader_isr_writes == [] and e.config.loaded == []
