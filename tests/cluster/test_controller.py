"""cluster/controller.py against a real ZooKeeper, with a recording ControllerChannel
in place of the brokers: topic creation, broker failure, controlled shutdown, preferred
election, fencing by /controller_epoch, topic deletion and failover.

Broker znodes are registered (ephemeral, BrokerRegistration.encode) on a session of
their own, so that deleting one is what a broker's death looks like to the controller.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from zk_harness import SessionFactory, wait_for

from josefk.cluster.controller.context import TP
from josefk.cluster.controller.controller import (
    Controller,
    ControllerConfig,
    ControllerMovedError,
    for_each,
)
from josefk.cluster.controller.membership import create_top_level_paths
from josefk.cluster.controller.states import PartitionState as ControllerPartitionState
from josefk.cluster.metadata.requests import (
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsr,
    StopReplica,
    StopReplicaPartition,
    UpdateMetadata,
)
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import NoNodeError, ZooKeeper
from josefk.cluster.zk.znodes import BrokerRegistration, Endpoint, PartitionState, TopicAssignment
from josefk.protocol.error_codes import (
    BROKER_NOT_AVAILABLE,
    ELECTION_NOT_NEEDED,
    NONE,
    PREFERRED_LEADER_NOT_AVAILABLE,
    STALE_BROKER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
)

pytestmark = pytest.mark.usefixtures("zookeeper_server")

CONTROLLER_ID = 3
EPOCH = 5
TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")
ASSIGNMENT = {0: (1, 2, 3), 1: (2, 3, 1)}


# --- a recording ControllerChannel --------------------------------------------------------


@dataclass
class Sent:
    broker_id: int
    request: ControllerRequest
    on_response: Callable[[ControllerResponse], None] | None
    live: bool  # was the broker added (and not removed) when this was sent


@dataclass
class RecordingChannel:
    """Records what the controller sends; answers nothing unless a test does."""

    sent: list[Sent] = field(default_factory=list)
    live: dict[int, BrokerRegistration] = field(default_factory=dict)
    added: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    running: bool = False

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self.running = True
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            self.running = False

    def add_broker(self, broker: BrokerRegistration) -> None:
        assert self.running, "add_broker before run() started"
        self.live[broker.broker_id] = broker
        self.added.append(broker.broker_id)

    def remove_broker(self, broker_id: int) -> None:
        self.live.pop(broker_id, None)
        self.removed.append(broker_id)

    def send(self, broker_id: int, request: ControllerRequest,
             on_response: Callable[[ControllerResponse], None] | None = None) -> None:
        self.sent.append(Sent(broker_id, request, on_response, broker_id in self.live))

    def of(self, kind: type, broker_id: int | None = None) -> list[Any]:
        return [s.request for s in self.sent if isinstance(s.request, kind)
                and (broker_id is None or s.broker_id == broker_id)]

    def partitions_to(self, kind: type, broker_id: int) -> dict[tuple[str, int], Any]:
        """The last word each partition got in requests of ``kind`` to ``broker_id``."""
        out: dict[tuple[str, int], Any] = {}
        for request in self.of(kind, broker_id):
            for p in request.partitions:
                out[(p.topic, p.partition)] = p
        return out

    def clear(self) -> None:
        self.sent.clear()


# --- the cluster around the controller ------------------------------------------------------


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id),))


@dataclass
class Cluster:
    zk: ZooKeeper  # the controller's session, also used by the test to look
    brokers_zk: ZooKeeper  # holds the brokers' ephemeral znodes
    channel: RecordingChannel
    controller: Controller
    nursery: trio.Nursery
    epochs: dict[int, int] = field(default_factory=dict)  # broker id -> czxid
    outcome: list[BaseException] = field(default_factory=list)
    illegal: list[str] = field(default_factory=list)  # refused state transitions

    async def register(self, broker_id: int) -> int:
        await self.brokers_zk.create(zn.broker_path(broker_id),
                                     registration(broker_id).encode(), ephemeral=True)
        _, stat = await self.zk.get(zn.broker_path(broker_id))
        self.epochs[broker_id] = stat.czxid
        return stat.czxid

    async def kill(self, broker_id: int) -> None:
        await self.brokers_zk.delete(zn.broker_path(broker_id))

    async def create_topic(self, topic: str, partitions: dict[int, tuple[int, ...]],
                           topic_id: uuid.UUID = TOPIC_ID) -> None:
        """As Kafka's AdminZkClient does: the config znode, then the topic znode."""
        await self.zk.create(zn.topic_config_path(topic), zn.encode_config({}))
        await self.zk.create(zn.topic_path(topic),
                             TopicAssignment(topic_id, partitions).encode())

    async def state(self, topic: str, partition: int) -> PartitionState | None:
        try:
            data, stat = await self.zk.get(zn.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return PartitionState.decode(data, stat.version)

    async def wait_state(self, topic: str, partition: int,
                         check: Callable[[PartitionState], bool], timeout: float = 10.0
                         ) -> PartitionState:
        found: list[PartitionState] = []

        async def ready() -> bool:
            state = await self.state(topic, partition)
            if state is not None and check(state):
                found.append(state)
                return True
            return False

        await wait_for(ready, timeout)
        return found[0]

    async def call(self, fn: Callable[[], Any]) -> Any:
        with trio.fail_after(10):
            return await self.controller.call(fn)

    async def settle(self, check: bool = True) -> None:
        """Until the controller has handled every event queued so far (and whatever
        ZooKeeper watches those events' writes set off); then, with ``check``, that it
        attempted no illegal state transition so far."""
        async def noop() -> None:
            return None
        await self.call(noop)
        await trio.sleep(0.1)  # watch notifications in flight
        await self.call(noop)
        # Kafka logs a transition its state machines refuse as an error: each one is a
        # controller bug.
        assert not check or not self.illegal, "illegal state transitions attempted:\n" + "\n".join(
            self.illegal)

    async def crashed(self) -> BaseException:
        """Wait for the controller to end with an error, and take it (the teardown
        fails on any left)."""
        await wait_for(lambda: self.outcome, timeout=10)
        [error] = self.outcome
        self.outcome.clear()
        return error


class _IllegalTransitions(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if "illegal state transition" in record.getMessage():
            self.into.append(record.getMessage())


async def _run(controller: Controller, outcome: list[BaseException]) -> None:
    try:
        await controller.run()
    except BaseException as e:
        # Cancelled comes out of run's nursery in a group of its own: that is no crash.
        if isinstance(e, trio.Cancelled) or (isinstance(e, BaseExceptionGroup)
                                             and e.split(trio.Cancelled)[1] is None):
            raise
        outcome.append(e)  # recorded for the test to look at


def new_controller(zk: ZooKeeper, channel: RecordingChannel) -> Controller:
    return Controller(zk, channel, CONTROLLER_ID, ControllerConfig(
        unclean_leader_election=lambda _topic: False, auto_leader_rebalance_enable=False),
        EPOCH, 0)


@contextlib.asynccontextmanager
async def running_cluster(zk_session: SessionFactory,
                          prepare: Callable[[ZooKeeper], Awaitable[None]] | None = None
                          ) -> AsyncIterator[Cluster]:
    """Brokers 1, 2 and 3 registered and the controller running, after ``prepare`` has
    written what its failover finds. Fails on the way out if the controller crashed (a
    test where it should takes the crash with `Cluster.crashed`)."""
    zk = await zk_session()
    brokers_zk = await zk_session()
    await create_top_level_paths(zk)
    await zk.create(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(EPOCH))  # version 0
    if prepare is not None:
        await prepare(zk)
    channel = RecordingChannel()
    controller = new_controller(zk, channel)
    async with trio.open_nursery() as nursery:
        c = Cluster(zk, brokers_zk, channel, controller, nursery)
        handler = _IllegalTransitions(c.illegal)
        logging.getLogger("josefk.cluster.controller.context").addHandler(handler)
        try:
            for broker_id in (1, 2, 3):
                await c.register(broker_id)
            nursery.start_soon(_run, controller, c.outcome)
            yield c
        finally:
            logging.getLogger("josefk.cluster.controller.context").removeHandler(handler)
            nursery.cancel_scope.cancel()
    assert not c.outcome, f"the controller crashed: {c.outcome[0]!r}"


@pytest.fixture
async def cluster(zk_session: SessionFactory) -> AsyncIterator[Cluster]:
    async with running_cluster(zk_session) as c:
        yield c


async def with_topic(c: Cluster) -> None:
    await c.settle()
    await c.create_topic("t", ASSIGNMENT)
    await c.wait_state("t", 0, lambda s: True)
    await c.wait_state("t", 1, lambda s: True)
    await c.settle()


def answer_stop_replicas(sent: list[Sent], broker_id: int, error: int = NONE) -> int:
    """Answer every StopReplica recorded to ``broker_id``; returns how many."""
    answered = 0
    for s in sent:
        if s.broker_id == broker_id and isinstance(s.request, StopReplica) and s.on_response:
            s.on_response(ControllerResponse(NONE, {
                (p.topic, p.partition): error for p in s.request.partitions}))
            answered += 1
    return answered


def stopped_brokers(c: Cluster) -> set[int]:
    return {s.broker_id for s in c.channel.sent if isinstance(s.request, StopReplica)}


async def topic_gone(c: Cluster, topic: str) -> bool:
    return all([await c.zk.exists(path) is None for path in (
        zn.topic_path(topic), zn.topic_config_path(topic), zn.delete_topic_path(topic))])


# --- tests --------------------------------------------------------------------------------


async def test_failover_registers_brokers_and_sends_update_metadata(c: Cluster) -> None:
    await c.settle()
    assert sorted(c.channel.added) == [1, 2, 3]
    assert set(c.channel.live) == {1, 2, 3}
    for broker_id in (1, 2, 3):
        [um] = c.channel.of(UpdateMetadata, broker_id)
        assert (um.controller_id, um.controller_epoch) == (CONTROLLER_ID, EPOCH)
        assert um.broker_epoch == c.epochs[broker_id]
        assert sorted(b.broker_id for b in um.live_brokers) == [1, 2, 3]
        assert {b.broker_id: b.epoch for b in um.live_brokers} == c.epochs
        assert um.partitions == ()
    assert not c.channel.of(LeaderAndIsr)


async def test_new_topic_gets_leaders_isrs_and_requests(c: Cluster) -> None:
    await with_topic(c)
    assert await c.state("t", 0) == PartitionState(1, 0, (1, 2, 3), EPOCH, zk_version=0)
    assert await c.state("t", 1) == PartitionState(2, 0, (2, 3, 1), EPOCH, zk_version=0)

    for broker_id in (1, 2, 3):
        [lisr] = c.channel.of(LeaderAndIsr, broker_id)
        assert (lisr.controller_id, lisr.controller_epoch, lisr.broker_epoch) == (
            CONTROLLER_ID, EPOCH, c.epochs[broker_id])
        assert lisr.topic_ids == {"t": TOPIC_ID}
        by_partition = {p.partition: p for p in lisr.partitions}
        assert sorted(by_partition) == [0, 1]
        for p, (leader, isr) in {0: (1, (1, 2, 3)), 1: (2, (2, 3, 1))}.items():
            info = by_partition[p]
            assert (info.topic, info.leader, info.leader_epoch, info.isr) == ("t", leader, 0, isr)
            assert info.replicas == ASSIGNMENT[p]
            assert (info.controller_epoch, info.partition_epoch, info.is_new) == (EPOCH, 0, True)
        assert sorted(b.broker_id for b in lisr.live_leaders) == [1, 2]

        ums = [um for um in c.channel.of(UpdateMetadata, broker_id) if um.partitions]
        assert ums, f"no UpdateMetadata with the new partitions to broker {broker_id}"
        assert {(p.topic, p.partition): p.leader for p in ums[-1].partitions} == {
            ("t", 0): 1, ("t", 1): 2}
        assert ums[-1].topic_ids == {"t": TOPIC_ID}
        # LeaderAndIsr first, then UpdateMetadata (Kafka's sendRequestsToBrokers order).
        kinds = [type(s.request) for s in c.channel.sent if s.broker_id == broker_id]
        assert kinds.index(LeaderAndIsr) < len(kinds) - 1 - kinds[::-1].index(UpdateMetadata)
    assert all(s.live for s in c.channel.sent)


async def test_broker_failure_moves_leadership_and_shrinks_isrs(c: Cluster) -> None:
    await with_topic(c)
    c.channel.clear()
    await c.kill(1)
    state0 = await c.wait_state("t", 0, lambda s: s.leader != 1)
    assert state0 == PartitionState(2, 1, (2, 3), EPOCH, zk_version=1)
    state1 = await c.wait_state("t", 1, lambda s: 1 not in s.isr)
    assert state1 == PartitionState(2, 1, (2, 3), EPOCH, zk_version=1)
    await c.settle()

    assert c.channel.removed == [1] and set(c.channel.live) == {2, 3}
    assert not [s for s in c.channel.sent if s.broker_id == 1], "requests to a dead broker"
    for broker_id in (2, 3):
        latest = c.channel.partitions_to(LeaderAndIsr, broker_id)
        assert (latest[("t", 0)].leader, latest[("t", 0)].leader_epoch,
                latest[("t", 0)].isr) == (2, 1, (2, 3))
        assert (latest[("t", 1)].leader, latest[("t", 1)].isr) == (2, (2, 3))
        assert latest[("t", 0)].partition_epoch == 1
        um = c.channel.partitions_to(UpdateMetadata, broker_id)
        assert um[("t", 0)].leader == 2 and um[("t", 0)].offline == (1,)
        assert sorted(b.broker_id for b in c.channel.of(UpdateMetadata, broker_id)[-1]
                      .live_brokers) == [2, 3]


async def test_broker_coming_back_gets_its_partitions(c: Cluster) -> None:
    await with_topic(c)
    await c.kill(1)
    await c.wait_state("t", 1, lambda s: 1 not in s.isr)
    await c.settle()
    c.channel.clear()
    epoch = await c.register(1)
    await wait_for(lambda: c.channel.of(LeaderAndIsr, 1))
    await c.settle()
    assert 1 in c.channel.live and c.channel.live[1].epoch == epoch
    latest = c.channel.partitions_to(LeaderAndIsr, 1)
    assert set(latest) == {("t", 0), ("t", 1)}
    assert all(info.leader == 2 for info in latest.values())
    assert c.channel.of(LeaderAndIsr, 1)[-1].broker_epoch == epoch
    # The returning broker gets the whole metadata, the others learn it is alive.
    assert set(c.channel.partitions_to(UpdateMetadata, 1)) == {("t", 0), ("t", 1)}
    for broker_id in (2, 3):
        live = c.channel.of(UpdateMetadata, broker_id)[-1].live_brokers
        assert sorted(b.broker_id for b in live) == [1, 2, 3]


async def test_controlled_shutdown_moves_leaderships_off_the_broker(c: Cluster) -> None:
    await with_topic(c)
    await c.create_topic("single", {0: (2,)}, uuid.UUID(int=99))
    await c.wait_state("single", 0, lambda s: True)
    await c.settle()
    c.channel.clear()

    assert await c.call(lambda: c.controller.controlled_shutdown(9, -1)) == (
        BROKER_NOT_AVAILABLE, [])
    assert await c.call(lambda: c.controller.controlled_shutdown(2, c.epochs[2] - 1)) == (
        STALE_BROKER_EPOCH, [])

    error, remaining = await c.call(lambda: c.controller.controlled_shutdown(2, c.epochs[2]))
    assert error == NONE
    assert remaining == [("single", 0)]  # no other replica to take over
    # t-1 was led by 2: the first other ISR replica in assignment order leads; 2 leaves
    # the ISR. t-0 was followed by 2: it leaves the ISR and gets StopReplica.
    assert await c.state("t", 1) == PartitionState(3, 1, (3, 1), EPOCH, zk_version=1)
    assert await c.state("t", 0) == PartitionState(1, 1, (1, 3), EPOCH, zk_version=1)
    for broker_id in (1, 2, 3):
        latest = c.channel.partitions_to(LeaderAndIsr, broker_id)
        assert (latest[("t", 1)].leader, latest[("t", 1)].leader_epoch) == (3, 1)
        assert latest[("t", 1)].isr == (3, 1)
    assert ("t", 0) in c.channel.partitions_to(StopReplica, 2)
    assert not [s for s in c.channel.sent
                if isinstance(s.request, StopReplica) and s.broker_id != 2]
    assert 2 in c.controller.ctx.shutting_down
    await c.settle()


async def test_controlled_shutdown_stops_only_the_partitions_the_broker_followed(
        c: Cluster) -> None:
    """Kafka's doControlledShutdown splits the broker's partitions into led and followed
    *before* moving leaders: followed ones get StopReplica (delete=false, at the leader
    epoch before the ISR shrink); ones it led get LeaderAndIsr making it a follower, and
    no StopReplica."""
    await with_topic(c)
    c.channel.clear()
    assert await c.call(lambda: c.controller.controlled_shutdown(2, c.epochs[2])) == (NONE, [])
    assert c.channel.partitions_to(StopReplica, 2) == {
        ("t", 0): StopReplicaPartition("t", 0, 0, False)}
    await c.settle()


async def test_preferred_leader_election(c: Cluster) -> None:
    await c.settle()
    await c.kill(1)
    await c.settle()
    # Created while broker 1 is away: the first live replica leads.
    await c.create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    state = await c.wait_state("t", 0, lambda s: True)
    assert state == PartitionState(2, 0, (2, 3), EPOCH, zk_version=0)
    await c.register(1)
    await wait_for(lambda: c.channel.of(LeaderAndIsr, 1))
    await c.settle()

    tp0 = ("t", 0)
    # Broker 1 is not in the ISR yet: the preferred leader is not available.
    results = await c.call(lambda: c.controller.elect_leaders([tp0], "preferred"))
    assert results == {tp0: PREFERRED_LEADER_NOT_AVAILABLE}
    # The leader adds broker 1 back (AlterPartition), then the election moves leadership.
    error, written = await c.call(lambda: c.controller.alter_partition(
        2, c.epochs[2], tp0, 0, (2, 3, 1), 0, 0))
    assert error == NONE and written.isr == (2, 3, 1) and written.zk_version == 1
    assert await c.state(*tp0) == PartitionState(2, 0, (2, 3, 1), EPOCH, zk_version=1)

    c.channel.clear()
    results = await c.call(lambda: c.controller.elect_leaders(None, "preferred"))
    assert results == {tp0: NONE}
    assert await c.state(*tp0) == PartitionState(1, 1, (2, 3, 1), EPOCH, zk_version=2)
    for broker_id in (1, 2, 3):
        info = c.channel.partitions_to(LeaderAndIsr, broker_id)[tp0]
        assert (info.leader, info.leader_epoch, info.partition_epoch) == (1, 1, 2)

    results = await c.call(lambda: c.controller.elect_leaders(
        [tp0, ("t", 1), ("nope", 0)], "preferred"))
    assert results == {tp0: ELECTION_NOT_NEEDED, ("t", 1): ELECTION_NOT_NEEDED,
                       ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    await c.settle()


async def test_auto_leader_rebalance(c: Cluster) -> None:
    """leader.imbalance.per.broker.percentage (10): a broker that is the preferred leader
    of partitions it does not lead, and is back in their ISR, gets them back."""
    await c.settle()
    await c.kill(1)
    await c.settle()
    await c.create_topic("b", {0: (1, 2), 1: (1, 3), 2: (2, 1)})
    for p in range(3):
        await c.wait_state("b", p, lambda s: True)
    await c.register(1)
    await wait_for(lambda: c.channel.of(LeaderAndIsr, 1))
    await c.settle()
    for p, (leader, isr) in {0: (2, (2, 1)), 1: (3, (3, 1))}.items():
        error, _ = await c.call(lambda p=p, leader=leader, isr=isr: c.controller.alter_partition(
            leader, c.epochs[leader], ("b", p), 0, isr, 0, 0))
        assert error == NONE
    await c.call(c.controller.auto_rebalance)
    assert (await c.state("b", 0)).leader == 1
    assert (await c.state("b", 1)).leader == 1
    assert (await c.state("b", 2)).leader == 2  # already led by its preferred replica
    await c.settle()


async def test_fenced_write_raises_controller_moved(c: Cluster) -> None:
    await with_topic(c)
    # Another controller took over: /controller_epoch moved on.
    await c.zk.set(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(EPOCH + 1))
    with trio.fail_after(10), pytest.raises(ControllerMovedError):
        await c.controller.call(lambda: c.controller.alter_partition(
            1, c.epochs[1], ("t", 0), 0, (1, 2), 0, 0))
    # Nothing was written, and the fenced controller stopped.
    assert await c.state("t", 0) == PartitionState(1, 0, (1, 2, 3), EPOCH, zk_version=0)
    assert isinstance(await c.crashed(), ControllerMovedError)


async def test_controller_run_ends_with_controller_moved_error_when_fenced(c: Cluster) -> None:
    """Controller.run's contract (and what Membership._run_controller catches): it raises
    ControllerMovedError when another controller took over."""
    await with_topic(c)
    await c.zk.set(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(EPOCH + 1))
    await c.create_topic("later", {0: (1, 2)}, uuid.UUID(int=5))  # the next write is fenced
    error = await c.crashed()
    assert await c.state("later", 0) is None
    assert isinstance(error, ControllerMovedError), (
        f"Controller.run raised {error!r}, not ControllerMovedError: Membership's "
        f"`except ControllerMovedError` cannot catch it")


async def test_topic_deletion(c: Cluster) -> None:
    await with_topic(c)
    c.channel.clear()
    await c.zk.create(zn.delete_topic_path("t"))
    await wait_for(lambda: stopped_brokers(c) == {1, 2, 3})
    await c.settle()
    for broker_id in (1, 2, 3):
        stops = c.channel.partitions_to(StopReplica, broker_id)
        assert stops == {("t", 0): StopReplicaPartition("t", 0, -2, True),
                         ("t", 1): StopReplicaPartition("t", 1, -2, True)}
        um = c.channel.partitions_to(UpdateMetadata, broker_id)
        assert um[("t", 0)].leader == -2 and um[("t", 1)].leader == -2  # LeaderDuringDelete
    # Nothing goes until every replica has answered.
    assert all(s.on_response is not None for s in c.channel.sent
               if isinstance(s.request, StopReplica))
    answer_stop_replicas(c.channel.sent, 1)
    answer_stop_replicas(c.channel.sent, 2)
    await c.settle()
    assert await c.zk.exists(zn.topic_path("t")) is not None
    answer_stop_replicas(c.channel.sent, 3)

    await wait_for(lambda: topic_gone(c, "t"), timeout=10)
    await c.settle()
    assert "t" not in c.controller.ctx.topic_ids
    assert not c.controller.ctx.partitions_of("t")
    assert c.controller.ctx.topics_to_delete == set()


async def broker_1_gone(zk_session: SessionFactory) -> ZooKeeper:
    """State a previous controller left: topic "t", partition 0 led by broker 1 and
    partition 1 by broker 2 (broker 1 in its ISR); brokers 2 and 3 alive, 1 gone."""
    zk = await zk_session()
    brokers_zk = await zk_session()
    await create_top_level_paths(zk)
    await zk.create(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(EPOCH))
    await zk.create(zn.topic_path("t"), TopicAssignment(TOPIC_ID, ASSIGNMENT).encode())
    for p, (leader, isr) in {0: (1, (1, 2, 3)), 1: (2, (2, 3, 1))}.items():
        await zk.create(zn.partition_state_path("t", p),
                        PartitionState(leader, 4, isr, EPOCH - 1).encode(), makepath=True)
    for broker_id in (2, 3):
        await brokers_zk.create(zn.broker_path(broker_id), registration(broker_id).encode(),
                                ephemeral=True)
    return zk


async def test_failover_over_existing_state(zk_session: SessionFactory) -> None:
    """A new controller finds topics and state znodes left by the previous one, with
    broker 1 gone meanwhile: it elects a leader for what broker 1 led and shrinks ISRs."""
    zk = await broker_1_gone(zk_session)
    channel = RecordingChannel()
    controller = new_controller(zk, channel)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(controller.run)
        with trio.fail_after(10):
            await controller.call(lambda: trio.sleep(0))
        data, stat = await zk.get(zn.partition_state_path("t", 0))
        assert PartitionState.decode(data, stat.version) == PartitionState(
            2, 5, (2, 3), EPOCH, zk_version=1)
        data, stat = await zk.get(zn.partition_state_path("t", 1))
        assert PartitionState.decode(data, stat.version) == PartitionState(
            2, 5, (2, 3), EPOCH, zk_version=1)
        assert sorted(channel.added) == [2, 3]
        for broker_id in (2, 3):
            latest = channel.partitions_to(LeaderAndIsr, broker_id)
            assert latest[("t", 0)].leader == 2 and latest[("t", 0)].leader_epoch == 5
            assert set(channel.partitions_to(UpdateMetadata, broker_id)) == {("t", 0), ("t", 1)}
        assert not [s for s in channel.sent if s.broker_id == 1]
        nursery.cancel_scope.cancel()


async def test_failover_elects_leaders_before_it_shrinks_isrs(
        zk_session: SessionFactory) -> None:
    """Clients wait for leaders, not for ISRs to shrink: the new controller elects the
    partitions a dead broker led before it drops that broker from other ISRs (as Kafka's
    onBrokerFailure orders them; ZooKeeper's zxids order the two writes)."""
    zk = await broker_1_gone(zk_session)
    controller = new_controller(zk, RecordingChannel())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(controller.run)
        with trio.fail_after(10):
            await controller.call(lambda: trio.sleep(0))
        elected = await zk.get(zn.partition_state_path("t", 0))
        shrunk = await zk.get(zn.partition_state_path("t", 1))
        assert PartitionState.decode(elected[0]).leader == 2
        assert PartitionState.decode(shrunk[0]).isr == (2, 3)
        assert elected[1].mzxid < shrunk[1].mzxid
        nursery.cancel_scope.cancel()


@pytest.fixture
def c(cluster: Cluster) -> Cluster:
    return cluster


async def test_create_partitions(c: Cluster) -> None:
    await with_topic(c)
    c.channel.clear()
    grown = TopicAssignment(TOPIC_ID, {**ASSIGNMENT, 2: (3, 1, 2)})
    await c.zk.set(zn.topic_path("t"), grown.encode())
    state = await c.wait_state("t", 2, lambda s: True)
    assert state == PartitionState(3, 0, (3, 1, 2), EPOCH, zk_version=0)
    await c.settle()
    for broker_id in (1, 2, 3):
        latest = c.channel.partitions_to(LeaderAndIsr, broker_id)
        assert set(latest) == {("t", 2)} and latest[("t", 2)].is_new
    assert await c.state("t", 0) == PartitionState(1, 0, (1, 2, 3), EPOCH, zk_version=0)


async def leader_alone_in_isr(c: Cluster) -> TP:
    """Topic "u", partition 0 on brokers 1 and 2, its leader 1 shrunk the ISR to itself."""
    await c.settle()
    await c.create_topic("u", {0: (1, 2)})
    await c.wait_state("u", 0, lambda s: True)
    await c.settle()
    tp = ("u", 0)
    error, _ = await c.call(lambda: c.controller.alter_partition(
        1, c.epochs[1], tp, 0, (1,), 0, 0))
    assert error == NONE
    return tp


async def test_offline_partition_and_unclean_election(c: Cluster) -> None:
    tp = await leader_alone_in_isr(c)
    # The leader dies: no clean leader is left.
    c.channel.clear()
    await c.kill(1)
    state = await c.wait_state("u", 0, lambda s: s.leader != 1)
    # Kafka keeps the last ISR member so it can lead again when it returns.
    assert state == PartitionState(-1, 1, (1,), EPOCH, zk_version=2)
    await c.settle()
    assert c.channel.partitions_to(UpdateMetadata, 2)[tp].leader == -1

    results = await c.call(lambda: c.controller.elect_leaders([tp], "unclean"))
    assert results == {tp: NONE}
    assert await c.state(*tp) == PartitionState(2, 2, (2,), EPOCH, zk_version=3)
    assert c.channel.partitions_to(LeaderAndIsr, 2)[tp].leader == 2
    await c.settle()


async def test_offline_partition_comes_back_with_its_last_isr_member(c: Cluster) -> None:
    await c.settle()
    await c.create_topic("u", {0: (1, 2)})
    await c.wait_state("u", 0, lambda s: True)
    await c.settle()
    tp = ("u", 0)
    await c.call(lambda: c.controller.alter_partition(1, c.epochs[1], tp, 0, (1,), 0, 0))
    await c.kill(1)
    await c.wait_state("u", 0, lambda s: s.leader == -1)
    await c.settle()
    await c.register(1)
    state = await c.wait_state("u", 0, lambda s: s.leader != -1)
    assert (state.leader, state.isr) == (1, (1,))
    await c.settle()


async def reassign_r0(c: Cluster) -> tuple[str, int]:
    """Topic r, partition 0 on brokers (1, 2), reassigned to (2, 3) and completed (the
    leader adds 3 to the ISR); returns the partition."""
    await c.settle()
    await c.create_topic("r", {0: (1, 2)})
    await c.wait_state("r", 0, lambda s: True)
    await c.settle()
    tp = ("r", 0)
    c.channel.clear()
    assert await c.call(lambda: c.controller.reassign({tp: (2, 3)})) == {tp: NONE}
    # Phase one: the union, with adding and removing, in ZooKeeper and to the replicas.
    data, _ = await c.zk.get(zn.topic_path("r"))
    assert TopicAssignment.decode("r", data) == TopicAssignment(
        TOPIC_ID, {0: (2, 3, 1)}, {0: (3,)}, {0: (1,)})
    assert c.controller.list_reassignments() == {tp: ((2, 3, 1), (3,), (1,))}
    state = await c.state(*tp)
    assert (state.leader, state.leader_epoch, state.isr) == (1, 1, (1, 2))
    for broker_id in (1, 2, 3):
        info = c.channel.partitions_to(LeaderAndIsr, broker_id)[tp]
        assert (info.replicas, info.adding, info.removing) == ((2, 3, 1), (3,), (1,))

    # Broker 3 catches up: the leader adds it to the ISR and the reassignment completes.
    c.channel.clear()
    error, _ = await c.call(lambda: c.controller.alter_partition(
        1, c.epochs[1], tp, 1, (1, 2, 3), 1, 0))
    assert error == NONE
    await c.settle()
    data, _ = await c.zk.get(zn.topic_path("r"))
    assert TopicAssignment.decode("r", data) == TopicAssignment(TOPIC_ID, {0: (2, 3)})
    assert c.controller.list_reassignments() == {}
    return tp


async def test_partition_reassignment(c: Cluster) -> None:
    tp = await reassign_r0(c)
    state = await c.state(*tp)
    # Leadership moves into the target; the removed replica leaves the ISR (Kafka's
    # OfflineReplica transition of the removed replicas, step B4 of onPartitionReassignment).
    assert state.leader == 2
    assert set(state.isr) == {2, 3}, f"removed replica 1 still in the ISR: {state}"
    stops = c.channel.partitions_to(StopReplica, 1)
    assert set(stops) == {tp} and stops[tp].delete


async def test_reassignment_stop_replica_carries_the_leader_epoch(c: Cluster) -> None:
    """Kafka's addStopReplicaRequestForBrokers uses the -2 sentinel (EpochDuringDelete)
    only for topics queued for deletion; a replica removed by a reassignment is stopped
    at the partition's leader epoch, so the broker can fence a stale request."""
    tp = await reassign_r0(c)
    stop = c.channel.partitions_to(StopReplica, 1)[tp]
    assert stop.delete and stop.leader_epoch >= 1, stop


async def test_topic_deletion_waits_for_a_dead_replica(c: Cluster) -> None:
    """Kafka's TopicDeletionManager: replicas on dead brokers are ineligible for deletion;
    the topic stays until the broker is back and has deleted its replicas."""
    await with_topic(c)
    await c.kill(3)
    await c.wait_state("t", 1, lambda s: 3 not in s.isr)
    await c.settle()
    c.channel.clear()
    await c.zk.create(zn.delete_topic_path("t"))
    await wait_for(lambda: stopped_brokers(c) == {1, 2})
    await c.settle()
    assert stopped_brokers(c) == {1, 2}
    answer_stop_replicas(c.channel.sent, 1)
    answer_stop_replicas(c.channel.sent, 2)
    await c.settle()
    assert await c.zk.exists(zn.topic_path("t")) is not None

    c.channel.clear()
    await c.register(3)
    await wait_for(lambda: c.channel.of(StopReplica, 3))
    await c.settle()
    assert set(c.channel.partitions_to(StopReplica, 3)) == {("t", 0), ("t", 1)}
    assert not c.channel.of(LeaderAndIsr, 3), "a replica being deleted was brought online"
    answer_stop_replicas(c.channel.sent, 3)
    await wait_for(lambda: topic_gone(c, "t"), timeout=10)
    await c.settle()
    await c.settle()


async def test_topic_deletion_survives_a_replica_dying_mid_deletion(c: Cluster) -> None:
    """A broker dies after StopReplica went out and before it answered (Kafka:
    failReplicaDeletion -> ReplicaDeletionIneligible); the deletion completes once it is
    back and answers."""
    await with_topic(c)
    c.channel.clear()
    await c.zk.create(zn.delete_topic_path("t"))
    await wait_for(lambda: stopped_brokers(c) == {1, 2, 3})
    await c.settle()
    answer_stop_replicas(c.channel.sent, 1)
    answer_stop_replicas(c.channel.sent, 2)
    await c.kill(3)  # dies without answering
    await c.settle(check=False)
    assert await c.zk.exists(zn.topic_path("t")) is not None
    c.channel.clear()
    await c.register(3)
    await wait_for(lambda: c.channel.of(StopReplica, 3))
    await c.settle()
    answer_stop_replicas(c.channel.sent, 3)
    await wait_for(lambda: topic_gone(c, "t"), timeout=10)
    await c.settle()


async def test_one_topic_deletion_sends_one_stop_replica_per_broker(c: Cluster) -> None:
    """One change of /admin/delete_topics is one deletion round: one StopReplica to each
    replica (Kafka registers each znode handler once)."""
    await with_topic(c)
    c.channel.clear()
    await c.zk.create(zn.delete_topic_path("t"))
    await wait_for(lambda: stopped_brokers(c) == {1, 2, 3})
    await c.settle()
    counts = {b: len(c.channel.of(StopReplica, b)) for b in (1, 2, 3)}
    assert counts == {1: 1, 2: 1, 3: 1}, (
        f"StopReplica requests per broker: {counts} (the controller watches "
        f"/admin/delete_topics more than once)")


async def test_new_partition_without_live_replicas_waits_for_one(c: Cluster) -> None:
    """Kafka: a NewPartition with no live replica stays NewPartition (no state znode);
    it comes online when one of its replicas starts."""
    await c.settle()
    await c.create_topic("w", {0: (4,)})
    await c.settle(check=False)
    assert await c.state("w", 0) is None
    await c.register(4)
    state = await c.wait_state("w", 0, lambda s: True)
    assert state == PartitionState(4, 0, (4,), EPOCH, zk_version=0)
    await c.settle()  # the LeaderAndIsr goes out after the state znode is written
    assert c.channel.partitions_to(LeaderAndIsr, 4)[("w", 0)].is_new


async def test_failover_keeps_the_last_isr_member_of_an_offline_partition(
        zk_session: SessionFactory) -> None:
    """An offline partition (leader -1) keeps its last ISR member through a controller
    failover: removing dead brokers from ISRs never empties one (an empty ISR left
    partitions offline for good after a whole-cluster restart)."""
    zk = await zk_session()
    brokers_zk = await zk_session()
    await create_top_level_paths(zk)
    await zk.create(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(EPOCH))
    await zk.create(zn.topic_path("t"), TopicAssignment(TOPIC_ID, {0: (1, 2)}).encode())
    await zk.create(zn.partition_state_path("t", 0),
                    PartitionState(-1, 4, (1,), EPOCH - 1).encode(), makepath=True)
    await brokers_zk.create(zn.broker_path(2), registration(2).encode(), ephemeral=True)
    controller = new_controller(zk, RecordingChannel())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(controller.run)
        with trio.fail_after(10):
            await controller.call(lambda: trio.sleep(0))
        data, _ = await zk.get(zn.partition_state_path("t", 0))
        state = PartitionState.decode(data)
        assert (state.leader, state.isr) == (-1, (1,))
        await brokers_zk.create(zn.broker_path(1), registration(1).encode(), ephemeral=True)
        with trio.fail_after(10):
            while True:
                data, _ = await zk.get(zn.partition_state_path("t", 0))
                state = PartitionState.decode(data)
                if state.leader != -1:
                    break
                await trio.sleep(0.05)
        assert (state.leader, state.isr) == (1, (1,))
        nursery.cancel_scope.cancel()


async def test_a_fenced_controller_writing_many_partitions_at_once_still_ends_moved(
    c: Cluster,
) -> None:
    """Partition states are written many at a time (for_each); every write fenced at
    once must still end Controller.run with a bare ControllerMovedError."""
    await with_topic(c)
    await c.zk.set(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(EPOCH + 1))
    await c.create_topic("wide", {p: (1, 2) for p in range(40)}, uuid.UUID(int=6))
    error = await c.crashed()
    assert isinstance(error, ControllerMovedError), error
    assert [await c.state("wide", p) for p in range(40)] == [None] * 40


async def test_a_controller_crash_fails_the_cluster_on_the_way_out(
        zk_session: SessionFactory) -> None:
    """A test whose controller crashed unnoticed fails in the teardown."""
    async def moved() -> None:
        raise ControllerMovedError("another controller took over")

    with pytest.raises(AssertionError, match="the controller crashed"):
        async with running_cluster(zk_session) as c:
            await c.settle()
            c.controller.put(moved)
            await wait_for(lambda: c.outcome, timeout=10)


async def test_an_event_that_fails_is_logged_and_the_controller_carries_on(
        c: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's ControllerEventManager logs an event's error and goes on with the next
    event: one bad znode must not end the controller (every next one would end alike)."""
    await with_topic(c)

    async def broken() -> None:
        raise RuntimeError("a bug")

    c.controller.put(broken)
    await c.zk.set(zn.topic_path("t"), b"not json")  # its watch's event cannot parse it
    await c.zk.create(zn.topic_path("junk"), b"not json")  # skipped as a new topic
    await c.settle()
    await c.create_topic("later", {0: (1, 2)}, uuid.UUID(int=7))
    await c.wait_state("later", 0, lambda s: s.leader == 1)
    await c.settle()
    assert "junk" not in c.controller.ctx.topic_ids
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("error processing event" in m and "broken" in m for m in errors), errors
    assert any("error processing event" in m and "_topic_watch" in m for m in errors), errors
    assert any("skipping topic junk" in m for m in errors), errors


async def test_failover_skips_unreadable_topic_and_partition_state_znodes(
        zk_session: SessionFactory, caplog: pytest.LogCaptureFixture) -> None:
    """An unparsable topic or partition state znode is logged and skipped (the partition
    stays new, its znode as it is); the failover goes on with everything else."""
    async def prepare(zk: ZooKeeper) -> None:
        await zk.create(zn.topic_path("bad"), b"not json")
        await zk.create(zn.topic_path("t"), TopicAssignment(TOPIC_ID, ASSIGNMENT).encode())
        await zk.create(zn.partition_state_path("t", 0), b'{"leader":', makepath=True)
        await zk.create(zn.partition_state_path("t", 1),
                        PartitionState(2, 4, (2, 3, 1), EPOCH - 1).encode(), makepath=True)

    async with running_cluster(zk_session, prepare) as c:
        await c.settle()
        ctx = c.controller.ctx
        assert "bad" not in ctx.topic_ids and ctx.topic_ids["t"] == TOPIC_ID
        assert ("t", 0) not in ctx.leader_isr
        assert ctx.partition_states[("t", 0)] is ControllerPartitionState.NEW
        assert ctx.leader_isr[("t", 1)].leader == 2
        assert (await c.zk.get(zn.partition_state_path("t", 0)))[0] == b'{"leader":'
        await c.create_topic("later", {0: (1, 2)}, uuid.UUID(int=7))
        await c.wait_state("later", 0, lambda s: s.leader == 1)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("skipping topic bad" in m for m in errors), errors
    assert any("skipping the state of t-0" in m for m in errors), errors


async def test_failover_ignores_an_unreadable_legacy_reassignment(
        zk_session: SessionFactory) -> None:
    """Kafka's getPartitionReassignment logs invalid JSON in /admin/reassign_partitions
    and ignores it, leaving the znode in place."""
    async def prepare(zk: ZooKeeper) -> None:
        await zk.create(zn.REASSIGN_PARTITIONS, b"not json", makepath=True)

    async with running_cluster(zk_session, prepare) as c:
        await with_topic(c)
        assert (await c.zk.get(zn.REASSIGN_PARTITIONS))[0] == b"not json"


async def test_calls_to_a_stopping_or_stopped_controller_end_with_controller_moved(
        c: Cluster) -> None:
    """A request that reaches the controller as it stops, or after, is answered
    NOT_CONTROLLER (ControllerMovedError), never left waiting."""
    await c.settle()

    async def moved() -> None:
        raise ControllerMovedError("another controller took over")

    async def noop() -> None:
        return None

    c.controller.put(moved)
    with trio.fail_after(5), pytest.raises(ControllerMovedError):
        await c.controller.call(noop)  # queued behind the event that ends it
    assert isinstance(await c.crashed(), ControllerMovedError)
    with trio.fail_after(5), pytest.raises(ControllerMovedError):
        await c.controller.call(noop)


async def test_for_each_keeps_a_bounded_number_in_flight() -> None:
    in_flight, most, done = 0, 0, []

    async def write(item: int) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await trio.sleep(0.01)
        in_flight -= 1
        done.append(item)

    await for_each(range(50), write, limit=8)
    assert sorted(done) == list(range(50)) and most == 8

    released = trio.Event()

    async def fail(item: int, moved: bool = True) -> None:
        if item == 0:
            await trio.sleep(0.01)
            released.set()
            return
        await released.wait()  # the others fail together
        if item % 2 or not moved:
            raise NoNodeError(str(item))
        raise ControllerMovedError(str(item))

    with pytest.raises(ControllerMovedError):  # bare, whatever else failed with it
        await for_each(range(6), fail)
    released = trio.Event()
    with pytest.raises(NoNodeError):  # bare too
        await for_each(range(6), lambda item: fail(item, moved=False))


async def test_an_offline_election_reads_the_topics_configs_first(c: Cluster) -> None:
    """Before an offline election the topics' configs are read (Kafka reads the topic's
    from ZooKeeper there): a newly elected controller's broker may not have them yet, and
    the broker default would then decide unclean.leader.election.enable."""
    await leader_alone_in_isr(c)
    configs: dict[str, dict[str, str]] = {}  # the broker's cache: empty, as at start-up

    async def load(topics: set[str]) -> None:
        configs.update({t: {"unclean.leader.election.enable": "true"} for t in topics})

    c.controller.config = dataclasses.replace(
        c.controller.config, load_topic_configs=load,
        unclean_leader_election=lambda t: configs.get(t, {}).get(
            "unclean.leader.election.enable") == "true")
    await c.kill(1)
    state = await c.wait_state("u", 0, lambda s: s.leader != 1)
    assert (state.leader, state.isr) == (2, (2,))  # the topic allows an unclean leader
    await c.settle()
