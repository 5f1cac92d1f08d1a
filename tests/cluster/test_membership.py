"""cluster/membership.py against a real ZooKeeper: broker registration (Kafka's znode and
its broker-id check), the controller election (/controller plus /controller_epoch in one
multi) and re-election when the controller's session goes."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from zk_harness import SessionFactory, TcpProxy, ZooKeeperServer, wait_for

from josefk.cluster.controller.controller import Controller, ControllerConfig
from josefk.cluster.controller.membership import (
    BrokerIdInUseError,
    Membership,
    create_top_level_paths,
    ensure_cluster_id,
)
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import SessionState
from josefk.cluster.zk.znodes import BrokerRegistration, Endpoint, TopicAssignment
from josefk.server.control.zk_bridge import KazooZooKeeper, split_connect

pytestmark = pytest.mark.usefixtures("zookeeper_server")


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id),),
                              rack="rack-a" if broker_id == 2 else None)


@dataclass
class Elections:
    """What the stub controllers saw: (broker id, epoch, epoch zk version) per start."""

    started: list[tuple[int, int, int]] = field(default_factory=list)
    stopped: list[tuple[int, int, int]] = field(default_factory=list)

    def factory(self, broker_id: int) -> Callable[[int, int], Any]:
        elections = self

        class StubController:
            """Runs (sleeps) until cancelled; records its start and end."""

            def __init__(self, epoch: int, epoch_zk_version: int) -> None:
                self.key = (broker_id, epoch, epoch_zk_version)

            async def run(self) -> None:
                elections.started.append(self.key)
                try:
                    await trio.sleep_forever()
                finally:
                    elections.stopped.append(self.key)

        return StubController


@contextlib.asynccontextmanager
async def running(member: Membership) -> AsyncIterator[list[BaseException]]:
    """``member`` registered and running until the block ends; yields the list of what
    ended its run (tests check it stays empty)."""
    crashed: list[BaseException] = []

    async def run(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await member.run(task_status=task_status)
        except trio.Cancelled:
            raise
        except BaseException as e:
            crashed.append(e)

    async with trio.open_nursery() as nursery:
        with trio.fail_after(10):
            await member.register()
            await nursery.start(run)
        yield crashed
        nursery.cancel_scope.cancel()


async def controller_doc(zk: KazooZooKeeper) -> dict[str, Any]:
    data, _ = await zk.get(zn.CONTROLLER)
    return json.loads(data)


async def controller_epoch(zk: KazooZooKeeper) -> tuple[int, int]:
    data, stat = await zk.get(zn.CONTROLLER_EPOCH)
    return zn.decode_controller_epoch(data), stat.version


async def test_registration_znode_is_kafkas(zk_session: SessionFactory) -> None:
    zk = await zk_session()
    await create_top_level_paths(zk)
    member = Membership(zk, registration(2), Elections().factory(2))
    with trio.fail_after(10):
        epoch = await member.register()
        data, stat = await zk.get(zn.broker_path(2))
    assert epoch == member.broker_epoch == stat.czxid
    assert stat.ephemeral_owner == zk.session_id
    doc = json.loads(data)
    assert set(doc) == {"features", "listener_security_protocol_map", "endpoints", "jmx_port",
                        "port", "host", "version", "timestamp", "rack"}
    assert (doc["version"], doc["host"], doc["port"], doc["jmx_port"]) == (5, "127.0.0.1",
                                                                            9092, -1)
    assert doc["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert doc["rack"] == "rack-a" and doc["features"] == {}
    assert isinstance(doc["timestamp"], str) and doc["timestamp"].isdigit()
    assert BrokerRegistration.decode(2, data, stat.czxid) == dataclasses.replace(
        registration(2), timestamp=doc["timestamp"], epoch=stat.czxid)


async def test_broker_id_in_use_and_idempotent_registration(zk_session: SessionFactory
                                                            ) -> None:
    zk_a, zk_c = await zk_session(), await zk_session()
    await create_top_level_paths(zk_a)
    first = Membership(zk_a, registration(1), Elections().factory(1))
    with trio.fail_after(10):
        epoch = await first.register()
        # The same session registering again (a retried create) is fine.
        assert await first.register() == epoch
        imposter = Membership(zk_c, registration(1), Elections().factory(1))
        with pytest.raises(BrokerIdInUseError, match="already exists"):
            await imposter.register()
        # The znode is still the first broker's.
        _, stat = await zk_c.get(zn.broker_path(1))
        assert stat.ephemeral_owner == zk_a.session_id and stat.czxid == epoch
        # Once the first broker's session is gone, the id is free again.
        await zk_a.stop()
        assert await imposter.register() != epoch


async def test_ensure_cluster_id(zk_session: SessionFactory) -> None:
    zk_a, zk_b = await zk_session(), await zk_session()
    with trio.fail_after(10):
        assert await ensure_cluster_id(zk_a, "first-proposal") == "first-proposal"
        assert await ensure_cluster_id(zk_b, "second-proposal") == "first-proposal"
        data, _ = await zk_b.get(zn.CLUSTER_ID)
    assert json.loads(data) == {"version": "1", "id": "first-proposal"}


async def test_one_controller_and_failover_when_its_session_closes(
        zk_session: SessionFactory) -> None:
    zks = {1: await zk_session(), 2: await zk_session()}
    observer = await zk_session()
    await create_top_level_paths(observer)
    elections = Elections()
    members = {b: Membership(zks[b], registration(b), elections.factory(b)) for b in (1, 2)}
    async with trio.open_nursery() as nursery:
        with trio.fail_after(10):
            for member in members.values():
                await member.register()
            for member in members.values():
                await nursery.start(member.run)
            await wait_for(lambda: elections.started)
            await trio.sleep(0.3)  # time for a second controller, if there were one
        assert len(elections.started) == 1
        winner, epoch, version = elections.started[0]
        loser = 3 - winner
        assert (epoch, version) == (1, 1)  # /controller_epoch created at 0, then bumped
        with trio.fail_after(10):
            assert await controller_epoch(observer) == (1, 1)
            doc = await controller_doc(observer)
            assert (doc["version"], doc["brokerid"], doc["kraftControllerEpoch"]) == (2, winner, -1)
            _, stat = await observer.get(zn.CONTROLLER)
            assert stat.ephemeral_owner == zks[winner].session_id
        assert members[winner].controller is not None and members[loser].controller is None
        assert members[winner].active_controller_id == winner

        # The controller's session closes: its /controller goes, the other broker wins.
        with trio.fail_after(10):
            await zks[winner].stop()
            await wait_for(lambda: len(elections.started) == 2, timeout=5)
        assert elections.started[1] == (loser, 2, 2)
        with trio.fail_after(10):
            assert await controller_epoch(observer) == (2, 2)
            assert (await controller_doc(observer))["brokerid"] == loser
        assert members[loser].controller is not None
        assert members[loser].active_controller_id == loser
        nursery.cancel_scope.cancel()


async def test_controller_resigns_when_its_znode_is_deleted(zk_session: SessionFactory
                                                            ) -> None:
    """Deleting /controller (how operators force a re-election) ends the controller's
    run; the election runs again under a new epoch."""
    zk = await zk_session()
    observer = await zk_session()
    await create_top_level_paths(observer)
    elections = Elections()
    member = Membership(zk, registration(1), elections.factory(1))
    async with trio.open_nursery() as nursery:
        with trio.fail_after(10):
            await member.register()
            await nursery.start(member.run)
            await wait_for(lambda: elections.started)
            await observer.delete(zn.CONTROLLER)
            await wait_for(lambda: len(elections.started) == 2)
        assert elections.stopped[0] == (1, 1, 1)
        assert elections.started == [(1, 1, 1), (1, 2, 2)]
        nursery.cancel_scope.cancel()


async def test_controller_comes_back_after_a_suspended_session_reconnects(
        zookeeper_server: ZooKeeperServer, zk_connect: str, zk_session: SessionFactory
) -> None:
    """A suspended session makes the controller resign (Membership's design). When the
    same session reconnects, /controller (ephemeral, still this session's) still names
    this broker, so no other broker can be elected: this broker has to act as
    controller again (or give the znode up); the cluster must not stay without one."""
    observer = await zk_session()
    await create_top_level_paths(observer)
    elections = Elections()
    async with trio.open_nursery() as nursery:
        proxy = TcpProxy(zookeeper_server.port)
        await nursery.start(proxy.run)
        zk = await zk_session(proxy.hosts + split_connect(zk_connect)[1])
        states: list[SessionState] = []
        zk.on_session_state(states.append)
        member = Membership(zk, registration(1), elections.factory(1))
        with trio.fail_after(10):
            await member.register()
            await nursery.start(member.run)
            await wait_for(lambda: elections.started)
        session = zk.session_id

        assert proxy.cut() >= 1
        with trio.fail_after(10):
            await wait_for(lambda: SessionState.CONNECTED in states[
                states.index(SessionState.SUSPENDED):] if SessionState.SUSPENDED in states
                else False, timeout=10)
        assert zk.session_id == session and SessionState.LOST not in states
        await trio.sleep(0.5)  # Membership has handled SUSPENDED and CONNECTED by now

        def acting() -> bool:  # a controller runs: the latest started has not stopped
            return (member.controller is not None and bool(elections.started)
                    and elections.started[-1] not in elections.stopped)

        try:
            await wait_for(acting, timeout=5)
        except trio.TooSlowError:
            with trio.fail_after(10):
                _, stat = await observer.get(zn.CONTROLLER)
                holder = (await controller_doc(observer))["brokerid"]
            pytest.fail(
                f"5 s after reconnecting no controller runs: /controller names broker "
                f"{holder}, held by session 0x{stat.ephemeral_owner:x} (this broker's is "
                f"0x{session:x}), so no other broker can win; controller starts and stops: "
                f"{elections.started}, {elections.stopped}")
        with trio.fail_after(10):
            assert (await controller_doc(observer))["brokerid"] == 1
        nursery.cancel_scope.cancel()


async def test_fenced_controller_resigns_and_the_broker_keeps_running(
        zk_session: SessionFactory) -> None:
    """A real Controller whose writes are fenced (/controller_epoch moved on, another
    controller took over) raises ControllerMovedError; Membership resigns and carries on
    (Membership._run_controller catches ControllerMovedError)."""
    zk = await zk_session()
    observer = await zk_session()
    await create_top_level_paths(observer)

    class NullChannel:
        async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            await trio.sleep_forever()

        def add_broker(self, broker: Any) -> None: ...

        def remove_broker(self, broker_id: int) -> None: ...

        def send(self, broker_id: int, request: Any, on_response: Any = None) -> None: ...

    controllers: list[Controller] = []

    def factory(epoch: int, version: int) -> Controller:
        controller = Controller(zk, NullChannel(), 1, ControllerConfig(
            unclean_leader_election=lambda _t: False, auto_leader_rebalance_enable=False),
            epoch, version)
        controllers.append(controller)
        return controller

    member = Membership(zk, registration(1), factory)
    async with running(member) as crashed:
        with trio.fail_after(10):
            await wait_for(lambda: member.controller is not None)
            await member.controller.call(lambda: trio.sleep(0))  # failover done
            # Another controller bumped the epoch; the next write is fenced.
            await observer.set(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(7))
            await observer.create(zn.topic_path("t"),
                                  TopicAssignment(None, {0: (1,)}).encode())
            # As Kafka's triggerControllerMove: resign, drop /controller, elect again.
            await wait_for(lambda: len(controllers) >= 2 or crashed)
            await trio.sleep(0.2)
        assert not crashed, f"Membership.run died: {crashed[0]!r}"
        assert [c.epoch for c in controllers] == [controllers[0].epoch, 8]
        assert member.controller is controllers[1]
        data, _ = await observer.get(zn.CONTROLLER_EPOCH)
        assert zn.decode_controller_epoch(data) == 8


@pytest.mark.parametrize("path", [zn.CONTROLLER, zn.CONTROLLER_EPOCH])
async def test_an_unreadable_controller_znode_does_not_take_the_broker_down(
        zk_session: SessionFactory, path: str) -> None:
    """Kafka reads an unparsable /controller as no controller (-1), and an unparsable
    /controller_epoch fails the election; both are logged and the broker stays up, to be
    elected once the znode is good again."""
    zk = await zk_session()
    other = await zk_session()
    await create_top_level_paths(other)
    if path == zn.CONTROLLER:
        await other.create(zn.CONTROLLER, b"not json", ephemeral=True)
    else:
        await other.create(zn.CONTROLLER_EPOCH, b"not a number")
    elections = Elections()
    member = Membership(zk, registration(1), elections.factory(1))
    async with running(member) as crashed:
        with trio.fail_after(10):
            await trio.sleep(1)  # elections tried meanwhile
            assert not crashed, f"Membership.run died: {crashed[0]!r}"
            assert not elections.started and member.active_controller_id == -1
            if path == zn.CONTROLLER:
                await other.delete(zn.CONTROLLER)
            else:
                await other.set(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(3))
            await wait_for(lambda: elections.started or crashed)
        assert not crashed, f"Membership.run died: {crashed[0]!r}"
        assert elections.started[0][0] == 1 and member.active_controller_id == 1


async def test_a_controller_whose_znode_turns_unreadable_resigns_and_is_elected_again(
        zk_session: SessionFactory) -> None:
    """/controller rewritten with what cannot be parsed names no controller: this one
    resigns, drops its znode and wins a fresh election; the broker stays up."""
    zk = await zk_session()
    observer = await zk_session()
    await create_top_level_paths(observer)
    elections = Elections()
    member = Membership(zk, registration(1), elections.factory(1))
    async with running(member) as crashed:
        with trio.fail_after(10):
            await wait_for(lambda: elections.started)
            await observer.set(zn.CONTROLLER, b"not json")
            await wait_for(lambda: len(elections.started) == 2 or crashed)
        assert not crashed, f"Membership.run died: {crashed[0]!r}"
        assert elections.started == [(1, 1, 1), (1, 2, 2)]
        assert elections.stopped[0] == (1, 1, 1)
