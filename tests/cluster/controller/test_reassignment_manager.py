"""`ReassignmentManager` alone: KIP-455's steps and the ``/admin`` znode, on an
in-memory ZooKeeper, with fakes of the elections and the ISR removal."""

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
)

from josefk.cluster.controller.context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller.reassignment import ReassignmentManager
from josefk.cluster.controller.states import ReplicaState
from josefk.cluster.metadata.requests import LeaderAndIsr, StopReplica
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.cluster.zk.znodes import TopicAssignment
from josefk.protocol.error_codes import (
    INVALID_REPLICA_ASSIGNMENT,
    NO_REASSIGNMENT_IN_PROGRESS,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
)

TP0: TP = ("t", 0)


class Reassign:
    def __init__(self) -> None:
        self.zk = MemoryZooKeeper()
        self.ctx: ControllerContext = make_context((1, 2, 3, 4))
        add_topic(self.ctx, self.zk, "t", {0: ((1, 2, 3), 1, (1, 2, 3)),
                                           1: ((2, 3, 1), 2, (2, 3, 1))})
        self.writes = MemoryWrites(self.ctx, self.zk)
        self.channel = RecordingChannel()
        self.elections = FakeElections()
        self.isr = FakeIsrRemoval()
        self.queue = EventQueue()
        self.manager = ReassignmentManager(
            self.ctx, self.zk, self.writes, lambda: RequestBatch(self.ctx, self.channel),
            self.elections, self.isr, self.queue.watch)

    def assignment(self) -> TopicAssignment:
        return TopicAssignment.decode("t", self.zk.data(zn.topic_path("t")))

    def isr_grows_to(self, tp: TP, isr: tuple[int, ...]) -> None:
        """As IsrChanges would have written it."""
        li = self.ctx.leader_isr[tp]
        self.ctx.leader_isr[tp] = LeaderIsr(li.leader, li.leader_epoch, isr, li.controller_epoch,
                                            zk_version=li.zk_version + 1)


@pytest.fixture
def r() -> Reassign:
    return Reassign()


async def test_adding_replicas_then_removing(r: Reassign, caplog: pytest.LogCaptureFixture
                                             ) -> None:
    assert await r.manager.reassign({TP0: (2, 3, 4)}) == {TP0: NONE}
    # Step 1: the union of old and new, the new ones adding, the old ones removing.
    assert r.manager.list_reassignments() == {TP0: ((2, 3, 4, 1), (4,), (1,))}
    assert r.manager.list_reassignments([("t", 1)]) == {}
    assignment = r.assignment()
    assert (assignment.partitions[0], assignment.adding[0], assignment.removing[0]) == (
        (2, 3, 4, 1), (4,), (1,))
    assert r.ctx.leader_isr[TP0].leader_epoch == 1  # every replica learns the new set
    assert r.ctx.replica_state(TP0, 4) is ReplicaState.ONLINE
    [request] = r.channel.of(LeaderAndIsr, 4)
    assert request.partitions[0].replicas == (2, 3, 4, 1)
    assert request.partitions[0].adding == (4,)
    assert r.channel.of(StopReplica) == []

    # Not done until the new replica is in the ISR.
    await r.manager.on_isr_changed(TP0)
    assert TP0 in r.ctx.reassignments
    r.isr_grows_to(TP0, (1, 2, 3, 4))
    await r.manager.on_isr_changed(TP0)

    # Step 2: the leader (1) is being removed: a leader from the target, 1 leaves the
    # ISR, stops and deletes its replica; the final assignment is written.
    assert r.elections.elected == [([TP0], "reassignment")]
    assert r.isr.removed == [({1}, [TP0])]
    [stop] = r.channel.of(StopReplica, 1)
    assert [(p.partition, p.delete) for p in stop.partitions] == [(0, True)]
    assert r.ctx.replica_state(TP0, 1) is ReplicaState.NON_EXISTENT
    assert r.ctx.assignments[TP0] == (2, 3, 4)
    assignment = r.assignment()
    assert (assignment.partitions, assignment.adding, assignment.removing) == (
        {0: (2, 3, 4), 1: (2, 3, 1)}, {}, {})
    assert r.manager.list_reassignments() == {}
    assert illegal_transitions(caplog) == []


async def test_a_leader_in_the_target_keeps_leading(r: Reassign) -> None:
    r.isr_grows_to(TP0, (1, 2, 3, 4))  # broker 4 caught up already
    assert await r.manager.reassign({TP0: (1, 4)}) == {TP0: NONE}
    # Done at once: no election; the ISR shrinks to the target.
    assert r.elections.elected == [] and r.isr.removed == []
    li = r.ctx.leader_isr[TP0]
    assert (li.leader, li.isr, li.leader_epoch) == (1, (1, 4), 2)
    assert {s.broker_id for s in r.channel.sent if isinstance(s.request, StopReplica)} == {2, 3}
    assert r.assignment().partitions[0] == (1, 4)


async def test_cancelling_goes_back_to_the_original_replicas(r: Reassign) -> None:
    await r.manager.reassign({TP0: (2, 3, 4)})
    assert await r.manager.reassign({TP0: None}) == {TP0: NONE}
    # The original replicas, in the union's order (Kafka's originReplicas).
    assert r.ctx.assignments[TP0] == (2, 3, 1)
    assert r.manager.list_reassignments() == {}
    assert r.assignment().adding == {}


async def test_invalid_requests(r: Reassign) -> None:
    assert await r.manager.reassign({
        ("nope", 0): (1, 2),
        ("t", 1): None,
        TP0: (1, 1),
    }) == {("nope", 0): UNKNOWN_TOPIC_OR_PARTITION, ("t", 1): NO_REASSIGNMENT_IN_PROGRESS,
           TP0: INVALID_REPLICA_ASSIGNMENT}
    assert await r.manager.reassign({TP0: ()}) == {TP0: INVALID_REPLICA_ASSIGNMENT}
    assert await r.manager.reassign({TP0: (1, 9)}) == {TP0: INVALID_REPLICA_ASSIGNMENT}
    r.ctx.topics_to_delete.add("t")
    assert await r.manager.reassign({TP0: (2, 3, 4)}) == {TP0: UNKNOWN_TOPIC_OR_PARTITION}
    assert r.ctx.reassignments == {} and r.channel.sent == []


async def test_the_legacy_znode_starts_and_is_removed_when_done(r: Reassign) -> None:
    await r.manager.on_legacy_reassignment()  # absent: watched for its creation
    r.zk.put(zn.REASSIGN_PARTITIONS, zn.encode_reassignment({TP0: [2, 3, 4]}))
    assert len(r.queue.events) == 1
    await r.queue.run_all()
    assert r.ctx.reassignments == {TP0: (2, 3, 4)}
    assert zn.REASSIGN_PARTITIONS in r.zk.nodes  # in flight

    r.isr_grows_to(TP0, (1, 2, 3, 4))
    await r.manager.on_isr_changed(TP0)
    assert zn.REASSIGN_PARTITIONS not in r.zk.nodes
    assert r.ctx.assignments[TP0] == (2, 3, 4)


async def test_an_unreadable_legacy_znode_is_left_alone(r: Reassign) -> None:
    r.zk.put(zn.REASSIGN_PARTITIONS, b"{not json")
    await r.manager.on_legacy_reassignment()
    assert r.ctx.reassignments == {} and zn.REASSIGN_PARTITIONS in r.zk.nodes


async def test_failover_and_broker_startup_carry_reassignments_on(r: Reassign) -> None:
    await r.manager.reassign({TP0: (2, 3, 4)})
    r.isr_grows_to(TP0, (1, 2, 3, 4))
    await r.manager.on_brokers_started([1])  # not a target replica: nothing
    assert TP0 in r.ctx.reassignments
    await r.manager.on_brokers_started([4])
    assert TP0 not in r.ctx.reassignments

    await r.manager.reassign({("t", 1): (2, 3, 4)})
    r.isr_grows_to(("t", 1), (2, 3, 1, 4))
    await r.manager.resume()  # as after a failover
    assert r.ctx.reassignments == {} and r.ctx.assignments[("t", 1)] == (2, 3, 4)
