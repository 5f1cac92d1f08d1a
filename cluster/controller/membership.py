"""A broker's place in a ZooKeeper cluster: its registration, the cluster id, and the
controller election (seed 002: whoever creates the ephemeral ``/controller`` is the
controller; when it goes, the others race to create it again).

`Membership.run` keeps this broker registered under ``/brokers/ids/<id>`` for the
life of the process, re-registering after a lost session, and runs the election: the
winner bumps ``/controller_epoch`` in the same ZooKeeper multi that creates
``/controller`` (Kafka's ``registerControllerAndIncrementControllerEpoch``) and runs a
`Controller` until it loses the znode or its session. A suspended session (no
contact with ZooKeeper) stops the controller at once, before the session can expire
and another broker can win, so two controllers never act at the same time.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable
from typing import Any

import trio

from josefk.cluster.controller.controller import Controller, ControllerMovedError
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import (
    BadVersionError,
    Create,
    NodeExistsError,
    NoNodeError,
    SessionState,
    SetData,
    ZkError,
    ZooKeeper,
)

logger = logging.getLogger(__name__)

ControllerFactory = Callable[[int, int], Controller]
"""(epoch, epoch znode version) -> the controller to run."""


class BrokerIdInUseError(Exception):
    """Another live broker holds ``/brokers/ids/<id>``."""


class InconsistentClusterIdError(Exception):
    """The cluster id in ZooKeeper differs from the one this broker was given."""


async def ensure_cluster_id(zk: ZooKeeper, proposed: str) -> str:
    """The cluster's id: read ``/cluster/id``, or create it with ``proposed``."""
    try:
        data, _ = await zk.get(zn.CLUSTER_ID)
        return zn.decode_cluster_id(data)
    except NoNodeError:
        pass
    try:
        await zk.create(zn.CLUSTER_ID, zn.encode_cluster_id(proposed), makepath=True)
        return proposed
    except NodeExistsError:
        data, _ = await zk.get(zn.CLUSTER_ID)
        return zn.decode_cluster_id(data)


async def create_top_level_paths(zk: ZooKeeper) -> None:
    for path in zn.PERSISTENT_PATHS:
        await zk.ensure_path(path)
    await _repair_empty_producer_id_block(zk)


async def _repair_empty_producer_id_block(zk: ZooKeeper) -> None:
    """Null the empty ``/latest_producer_id_block`` of a cluster created by an older josefk
    (kazoo's default value), which a Kafka controller fails to parse. Only while it is
    unwritten (version 0), and conditional on that, so a block allocated meanwhile stays."""
    data, stat = await zk.get(zn.PRODUCER_ID_BLOCK)
    if data or stat.version != 0:
        return
    with contextlib.suppress(BadVersionError, NoNodeError):
        await zk.set(zn.PRODUCER_ID_BLOCK, None, version=0)


class Membership:
    """Registration and election for one broker; `controller` is set while it leads."""

    def __init__(self, zk: ZooKeeper, registration: zn.BrokerRegistration,
                 controller_factory: ControllerFactory) -> None:
        self.zk = zk
        self.registration = registration
        self.controller_factory = controller_factory
        self.controller: Controller | None = None
        self.broker_epoch = -1
        self.active_controller_id = -1
        self._states, self._state_receive = trio.open_memory_channel[SessionState](math.inf)
        self._controller_changed = trio.Event()
        zk.on_session_state(self._on_session_state)

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id

    def _on_session_state(self, state: SessionState) -> None:
        self._states.send_nowait(state)

    async def register(self) -> int:
        """Create ``/brokers/ids/<id>``; returns the broker epoch (the znode's czxid)."""
        path = zn.broker_path(self.broker_id)
        data = self.registration.encode()
        try:
            await self.zk.create(path, data, ephemeral=True)
        except NodeExistsError:
            # Ours from this very session (a retried create after a connection loss)?
            try:
                _, stat = await self.zk.get(path)
            except NoNodeError:
                return await self.register()
            if stat.ephemeral_owner != self.zk.session_id:
                raise BrokerIdInUseError(
                    f"Error while creating ephemeral at {path}, node already exists and owner "
                    f"'0x{stat.ephemeral_owner:x}' does not match current session "
                    f"'0x{self.zk.session_id:x}': broker.id {self.broker_id} is in use by "
                    "another live broker") from None
        _, stat = await self.zk.get(path)
        self.broker_epoch = stat.czxid
        logger.info("registered broker %d at %s with addresses %s, czxid (broker epoch) %d",
                    self.broker_id, path,
                    [e.connection_string for e in self.registration.endpoints],
                    self.broker_epoch)
        return self.broker_epoch

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Stay registered and take part in the election until cancelled."""
        started = False
        while True:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._elect_forever)
                if not started:
                    task_status.started()
                    started = True
                await self._until_session_lost()
                nursery.cancel_scope.cancel()
            self.controller = None
            logger.warning("broker %d: ZooKeeper session lost or suspended; registering again "
                           "once connected", self.broker_id)
            await self._until_connected()
            await self.register()

    async def _until_session_lost(self) -> None:
        async for state in self._state_receive:
            if state is SessionState.LOST:
                return
            if state is SessionState.SUSPENDED and self.controller is not None:
                # Stop acting before ZooKeeper can expire us and elect someone else.
                logger.warning("broker %d: lost contact with ZooKeeper; resigning as "
                               "controller", self.broker_id)
                return

    async def _until_connected(self) -> None:
        async for state in self._state_receive:
            if state is SessionState.CONNECTED:
                return

    async def _elect_forever(self) -> None:
        while True:
            self._controller_changed = trio.Event()
            try:
                epoch = await self._try_elect()
            except (ZkError, zn.ZnodeFormatError) as e:
                # Connection trouble: the session-state handling decides what happens next.
                # An unreadable /controller_epoch fails the election, not the broker (Kafka).
                logger.warning("broker %d: controller election interrupted: %s",
                               self.broker_id, e)
                await trio.sleep(0.5)
                continue
            if epoch is not None:
                await self._run_controller(*epoch)
                continue
            await self._controller_changed.wait()

    def _on_controller_znode(self) -> None:
        self._controller_changed.set()

    async def _try_elect(self) -> tuple[int, int] | None:
        """Become controller if nobody is; returns (epoch, epoch zk version) on success."""
        try:
            data, stat = await self.zk.get(zn.CONTROLLER, self._on_controller_znode)
            self.active_controller_id = self._controller_id(data)
            if stat.ephemeral_owner != self.zk.session_id:
                return None
            # Ours, from before a suspended session came back: give it up and run a
            # fresh election, so the epoch moves on and fences anything still in flight.
            logger.info("broker %d: dropping its own /controller from before the "
                        "disconnection", self.broker_id)
            await self.zk.delete(zn.CONTROLLER, stat.version)
        except NoNodeError:
            pass
        epoch, version = await self._read_controller_epoch()
        try:
            await self.zk.multi([
                Create(zn.CONTROLLER, zn.encode_controller(self.broker_id), ephemeral=True),
                SetData(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(epoch + 1), version),
            ])
        except (NodeExistsError, BadVersionError):
            # Someone else won: watch their znode.
            stat = await self.zk.exists(zn.CONTROLLER, self._on_controller_znode)
            if stat is None:
                self._controller_changed.set()
            return None
        self.active_controller_id = self.broker_id
        await self.zk.exists(zn.CONTROLLER, self._on_controller_znode)
        return epoch + 1, version + 1

    def _controller_id(self, data: bytes) -> int:
        """The broker ``/controller`` names; -1 (no controller) when it cannot be parsed,
        as Kafka's getControllerId reads it."""
        try:
            return zn.decode_controller(data)
        except zn.ZnodeFormatError as e:
            logger.error("broker %d: cannot read /controller, taken as no controller: %s",
                         self.broker_id, e)
            return -1

    async def _read_controller_epoch(self) -> tuple[int, int]:
        try:
            data, stat = await self.zk.get(zn.CONTROLLER_EPOCH)
            return zn.decode_controller_epoch(data), stat.version
        except NoNodeError:
            pass
        try:
            await self.zk.create(zn.CONTROLLER_EPOCH,
                                 zn.encode_controller_epoch(zn.INITIAL_CONTROLLER_EPOCH))
            return zn.INITIAL_CONTROLLER_EPOCH, zn.INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        except NodeExistsError:
            data, stat = await self.zk.get(zn.CONTROLLER_EPOCH)
            return zn.decode_controller_epoch(data), stat.version

    async def _run_controller(self, epoch: int, epoch_zk_version: int) -> None:
        controller = self.controller_factory(epoch, epoch_zk_version)
        self.controller = controller
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._resign_when_moved, nursery.cancel_scope, epoch)
                await controller.run()
        except* ControllerMovedError as group:
            logger.warning("broker %d: controller moved (%s); resigning", self.broker_id,
                           group.exceptions[0])
        except* ZkError as group:
            logger.error("broker %d: controller failed on a ZooKeeper error (%s); resigning",
                         self.broker_id, group.exceptions[0])
            await self._delete_own_controller_znode()
        finally:
            self.controller = None

    async def _resign_when_moved(self, scope: trio.CancelScope, epoch: int) -> None:
        await self._controller_changed.wait()
        try:
            data, _ = await self.zk.get(zn.CONTROLLER)
            still_us = self._controller_id(data) == self.broker_id
        except NoNodeError:
            still_us = False
        if not still_us:
            logger.info("broker %d: /controller is no longer ours (epoch %d)", self.broker_id,
                        epoch)
            scope.cancel()

    async def _delete_own_controller_znode(self) -> None:
        try:
            data, stat = await self.zk.get(zn.CONTROLLER)
            if self._controller_id(data) == self.broker_id:
                await self.zk.delete(zn.CONTROLLER, stat.version)
        except ZkError as e:
            # Best effort: the session's end removes the ephemeral znode anyway.
            logger.info("broker %d: could not delete its /controller: %s", self.broker_id, e)
