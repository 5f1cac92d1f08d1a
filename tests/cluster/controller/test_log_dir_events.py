"""`LogDirEvents` alone: log dir event notifications and replicas in failed log
directories, on an in-memory ZooKeeper with the real `PartitionElections` and
`IsrChanges` over fake writes (Kafka 3.9's processLogDirEventNotification and
onReplicasBecomeOffline)."""

from __future__ import annotations

import pytest
from controller_fakes import (
    EventQueue,
    MemoryWrites,
    MemoryZooKeeper,
    RecordingChannel,
    add_topic,
    illegal_transitions,
    make_context,
)

# The cluster of the lifecycle tests: t-0 led by 1, t-1 led by 2 with 1 following, t-2
# on broker 1 alone.
from test_broker_lifecycle import PARTITIONS, TP0, TP1, TP2, _Config, _ignore

from josefk.cluster.controller.context import TP, RequestBatch
from josefk.cluster.controller.elections import PartitionElections
from josefk.cluster.controller.isr import IsrChanges
from josefk.cluster.controller.log_dirs import LogDirEvents
from josefk.cluster.controller.states import ReplicaState
from josefk.cluster.metadata.requests import (
    ControllerResponse,
    LeaderAndIsr,
    StopReplica,
    UpdateMetadata,
)
from josefk.cluster.zk import znodes as zn
from josefk.protocol.error_codes import KAFKA_STORAGE_ERROR, NONE

# What a Kafka 3.9 broker writes (LogDirEventNotificationSequenceZNode).
KAFKA_EVENT = b'{"version":1,"broker":1,"event":1}'


class Events:
    def __init__(self) -> None:
        self.zk = MemoryZooKeeper()
        self.ctx = make_context()
        self.channel = RecordingChannel()
        self.queue = EventQueue()
        writes = MemoryWrites(self.ctx, self.zk)
        elections = PartitionElections(self.ctx, self.zk, writes, self.batch, lambda: _Config())
        isr = IsrChanges(self.ctx, writes, self.batch, _ignore)
        self.part = LogDirEvents(self.ctx, self.zk, writes, self.batch, self.queue.put,
                                 self.queue.watch, elections, isr)

    def batch(self) -> RequestBatch:
        return RequestBatch(self.ctx, self.channel, self.part.on_leader_and_isr_response)

    def answer_leader_and_isr(self, broker_id: int, errors: dict[TP, int]) -> None:
        for sent in self.channel.sent:
            if sent.broker_id == broker_id and isinstance(sent.request, LeaderAndIsr):
                assert sent.on_response is not None
                sent.on_response(ControllerResponse(NONE, {
                    (p.topic, p.partition): errors.get((p.topic, p.partition), NONE)
                    for p in sent.request.partitions}))


@pytest.fixture
async def e() -> Events:
    events = Events()
    events.zk.put(f"{zn.LOG_DIR_EVENT_NOTIFICATION}/{zn.LOG_DIR_EVENT_PREFIX}0000000007",
                  KAFKA_EVENT)  # stale: from before this controller
    await events.part.load()
    await events.queue.run_all()  # the watch fired by the deletion: nothing left to do
    add_topic(events.ctx, events.zk, "t", PARTITIONS)
    return events


async def test_failover_deletes_stale_notifications_and_watches(e: Events) -> None:
    assert e.zk.children(zn.LOG_DIR_EVENT_NOTIFICATION) == []
    assert e.queue.events == [] and e.channel.sent == []
    path = await e.zk.create(zn.log_dir_event_path() + "0000000008", KAFKA_EVENT)
    assert path.endswith("log_dir_event_0000000008") and len(e.queue.events) == 1


async def test_a_notification_asks_the_broker_about_every_replica_it_hosts(
        e: Events, caplog: pytest.LogCaptureFixture) -> None:
    await e.zk.create(zn.log_dir_event_path() + "0000000008", zn.encode_log_dir_event(1))
    await e.queue.run_all()
    [request] = e.channel.of(LeaderAndIsr, 1)
    assert sorted((p.topic, p.partition) for p in request.partitions) == [TP0, TP1, TP2]
    assert e.zk.children(zn.LOG_DIR_EVENT_NOTIFICATION) == []  # deleted once read
    assert illegal_transitions(caplog) == []


async def test_replicas_answered_storage_error_go_offline(
        e: Events, caplog: pytest.LogCaptureFixture) -> None:
    await e.zk.create(zn.log_dir_event_path() + "0000000008", KAFKA_EVENT)
    await e.queue.run_all()
    # t-0 and t-2 were in the failed directory, t-1 in the other one.
    e.answer_leader_and_isr(1, {TP0: KAFKA_STORAGE_ERROR, TP2: KAFKA_STORAGE_ERROR})
    e.channel.sent.clear()
    await e.queue.run_all()

    assert e.ctx.replicas_on_offline_dirs == {1: {TP0, TP2}}
    # t-0: a new leader among the other ISR members, broker 1 out of the ISR.
    li = e.ctx.leader_isr[TP0]
    assert (li.leader, li.isr) == (2, (2, 3))
    # t-2 had no other replica: offline (its last ISR member kept).
    assert e.ctx.leader_isr[TP2].leader == -1
    # t-1 is untouched: broker 1's replica there is in an online directory.
    assert e.ctx.leader_isr[TP1].isr == (2, 3, 1)
    [stop] = e.channel.of(StopReplica, 1)
    assert sorted((p.topic, p.partition, p.delete) for p in stop.partitions) == [
        ("t", 0, False), ("t", 2, False)]
    assert e.ctx.replica_state(TP0, 1) is ReplicaState.OFFLINE
    # Metadata names the offline replica.
    offline = {(p.topic, p.partition): p.offline
               for u in e.channel.of(UpdateMetadata) for p in u.partitions}
    assert offline[TP0] == (1,)
    assert illegal_transitions(caplog) == []


async def test_an_offline_replica_cannot_lead_until_its_broker_comes_back(e: Events) -> None:
    e.ctx.replicas_on_offline_dirs[2] = {TP1}
    assert e.ctx.live_for(TP1) == {1, 3}
    assert e.ctx.live_for(TP0) == {1, 2, 3}
    # A later answer that the replica is online again forgets it.
    await e.part.on_replicas_answered(2, set(), {TP1})
    assert e.ctx.replicas_on_offline_dirs == {}


async def test_answers_without_storage_errors_queue_nothing(e: Events) -> None:
    reader = e.part.on_leader_and_isr_response(1)
    reader(ControllerResponse(NONE, {TP0: NONE}))
    assert e.queue.events == []
