"""`BrokerLifecycle` alone: broker failure, startup and controlled shutdown, on an
in-memory ZooKeeper with fakes of the elections and the ISR removal (and, where the
outcome is the point, with the real `PartitionElections` and `IsrChanges` over fake
writes)."""

from __future__ import annotations

import pytest
from controller_fakes import (
    EventQueue,
    FakeElections,
    FakeIsrRemoval,
    MemoryWrites,
    MemoryZooKeeper,
    RecordingChannel,
    add_topic,
    illegal_transitions,
    make_context,
    registration,
)

from josefk.cluster.controller.brokers import BrokerLifecycle
from josefk.cluster.controller.context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller.elections import PartitionElections
from josefk.cluster.controller.interfaces import Elections, IsrRemoval
from josefk.cluster.controller.isr import IsrChanges
from josefk.cluster.controller.states import PartitionState, ReplicaState
from josefk.cluster.metadata.requests import LeaderAndIsr, StopReplica, UpdateMetadata
from josefk.cluster.zk import znodes as zn
from josefk.protocol.error_codes import BROKER_NOT_AVAILABLE, NONE, STALE_BROKER_EPOCH

TP0: TP = ("t", 0)
TP1: TP = ("t", 1)
TP2: TP = ("t", 2)
# t-0 led by 1, t-1 led by 2 with 1 following, t-2 on broker 1 alone.
PARTITIONS = {0: ((1, 2, 3), 1, (1, 2, 3)), 1: ((2, 3, 1), 2, (2, 3, 1)), 2: ((1,), 1, (1,))}


class Lifecycle:
    """The part on fakes; with ``real``, on `PartitionElections` and `IsrChanges`."""

    def __init__(self, real: bool = False) -> None:
        self.zk = MemoryZooKeeper()
        self.ctx: ControllerContext = make_context(())
        self.channel = RecordingChannel()
        self.queue = EventQueue()
        self.writes = MemoryWrites(self.ctx, self.zk)
        self.fake_elections = FakeElections()
        self.fake_isr = FakeIsrRemoval()
        self.resumed_deletions = 0
        self.resumed_reassignments: list[list[int]] = []
        self.zk.put(zn.BROKER_IDS)
        for broker_id in (1, 2, 3):
            self.zk.put(zn.broker_path(broker_id), registration(broker_id).encode())
        elections: Elections = self.fake_elections
        isr: IsrRemoval = self.fake_isr
        if real:
            elections = PartitionElections(self.ctx, self.zk, self.writes, self.batch,
                                           lambda: _Config())
            isr = IsrChanges(self.ctx, self.writes, self.batch, _ignore)
        self.lifecycle = BrokerLifecycle(
            self.ctx, self.zk, self.channel, self.batch, self.queue.watch, elections, isr,
            self._resume_deletions, self._resume_reassignments)

    def batch(self) -> RequestBatch:
        return RequestBatch(self.ctx, self.channel)

    async def start(self) -> None:
        await self.lifecycle.load()
        add_topic(self.ctx, self.zk, "t", PARTITIONS)

    async def _resume_deletions(self) -> None:
        self.resumed_deletions += 1

    async def _resume_reassignments(self, started: list[int]) -> None:
        self.resumed_reassignments.append(started)

    def epoch(self, broker_id: int) -> int:
        return self.ctx.brokers[broker_id].epoch


@pytest.fixture
async def b() -> Lifecycle:
    lifecycle = Lifecycle()
    await lifecycle.start()
    return lifecycle


class _Config:
    unclean_leader_election = staticmethod(lambda _topic: False)
    load_topic_configs = None


async def _ignore(_tp: TP) -> None:
    pass


async def test_load_reads_the_registrations_with_their_epochs(b: Lifecycle) -> None:
    assert sorted(b.ctx.brokers) == [1, 2, 3]
    _, stat = await b.zk.get(zn.broker_path(2))
    assert b.epoch(2) == stat.czxid
    b.zk.put(f"{zn.BROKER_IDS}/junk", b"")
    await b.lifecycle.load()  # an unreadable registration is skipped
    assert sorted(b.ctx.brokers) == [1, 2, 3]


async def test_a_failed_broker_loses_its_leaderships_and_isr_places(
        b: Lifecycle, caplog: pytest.LogCaptureFixture) -> None:
    await b.zk.delete(zn.broker_path(1))
    assert len(b.queue.events) == 1  # /brokers/ids is watched
    await b.queue.run_all()
    assert sorted(b.ctx.brokers) == [2, 3] and b.channel.removed == [1]
    # The partitions it led go offline and to an offline election...
    assert b.ctx.partition_states[TP0] is PartitionState.OFFLINE
    assert b.fake_elections.triggered[0] == [TP0, TP2]
    # ...and it leaves the ISRs where it followed.
    assert b.fake_isr.removed == [({1}, [TP1])]
    assert {b.ctx.replica_state(tp, 1) for tp in (TP0, TP1, TP2)} == {ReplicaState.OFFLINE}
    assert {s.broker_id for s in b.channel.sent if isinstance(s.request, UpdateMetadata)} == {
        2, 3}
    assert illegal_transitions(caplog) == []


async def test_a_failure_elects_new_leaders_for_the_partitions_it_led() -> None:
    lc = Lifecycle(real=True)
    await lc.start()
    await lc.zk.delete(zn.broker_path(1))
    await lc.queue.run_all()
    li = lc.ctx.leader_isr[TP0]
    assert (li.leader, li.isr, li.leader_epoch) == (2, (2, 3), 1)
    assert lc.ctx.partition_states[TP0] is PartitionState.ONLINE
    assert lc.ctx.leader_isr[TP1].isr == (2, 3)  # a follower no more
    assert lc.ctx.leader_isr[TP2].leader == -1  # its only replica: offline
    assert lc.ctx.partition_states[TP2] is PartitionState.OFFLINE
    assert [p.leader for r in lc.channel.of(LeaderAndIsr, 2) for p in r.partitions
            if (p.topic, p.partition) == TP0] == [2]


async def test_a_new_broker_learns_the_cluster_and_its_replicas(b: Lifecycle) -> None:
    b.ctx.topics_to_delete.add("gone")
    b.zk.put(zn.broker_path(4), registration(4).encode())
    await b.queue.run_all()
    assert sorted(b.ctx.brokers) == [1, 2, 3, 4] and b.channel.added == [4]
    assert b.channel.of(UpdateMetadata, 4)[0].live_brokers[-1].broker_id == 4
    assert b.fake_elections.triggered == [None]  # every partition without a leader
    assert b.resumed_deletions == 1
    assert b.resumed_reassignments == [[4]]


async def test_a_bounced_broker_fails_over_then_starts_again(b: Lifecycle) -> None:
    old_epoch = b.epoch(1)
    await b.zk.delete(zn.broker_path(1))
    b.zk.put(zn.broker_path(1), registration(1).encode())  # before the watch ran
    await b.queue.run_all()
    assert b.epoch(1) != old_epoch
    assert (b.channel.removed, b.channel.added) == ([1], [1])
    assert b.fake_elections.triggered[0] == [TP0, TP2]
    assert b.ctx.replica_state(TP0, 1) is ReplicaState.ONLINE
    assert [(p.topic, p.partition) for r in b.channel.of(LeaderAndIsr, 1)
            for p in r.partitions] == [TP0, TP1, TP2]
    assert b.resumed_deletions == 0  # nothing being deleted
    assert b.resumed_reassignments == [[1]]


async def test_controlled_shutdown_refuses_unknown_and_stale_brokers(b: Lifecycle) -> None:
    assert await b.lifecycle.controlled_shutdown(9, -1) == (BROKER_NOT_AVAILABLE, [])
    assert await b.lifecycle.controlled_shutdown(2, b.epoch(2) - 1) == (STALE_BROKER_EPOCH, [])
    assert b.ctx.shutting_down == set() and b.fake_elections.elected == []


async def test_controlled_shutdown_moves_leaderships_and_stops_followers(b: Lifecycle) -> None:
    error, _ = await b.lifecycle.controlled_shutdown(1, b.epoch(1))
    assert error == NONE
    assert b.ctx.shutting_down == {1}
    # Led partitions with other replicas are elected away; t-2 has no other replica.
    assert b.fake_elections.elected == [([TP0], "controlled_shutdown")]
    [stop] = b.channel.of(StopReplica, 1)
    assert [(p.partition, p.delete) for p in stop.partitions] == [(1, False)]
    assert b.ctx.replica_state(TP1, 1) is ReplicaState.OFFLINE
    assert b.fake_isr.removed == [({1}, [TP1])]


async def test_controlled_shutdown_returns_the_partitions_remaining() -> None:
    lc = Lifecycle(real=True)
    await lc.start()
    assert await lc.lifecycle.controlled_shutdown(1, -1) == (NONE, [TP2])
    assert lc.ctx.leader_isr[TP0].leader == 2
    assert lc.ctx.leader_isr[TP0].isr == (2, 3)
    assert lc.ctx.leader_isr[TP1].isr == (2, 3)
