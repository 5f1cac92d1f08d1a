"""The narrow interfaces the controller's parts are built on: each part
(`TopicDeletionManager`, `ReassignmentManager`, `IsrChanges`, `BrokerLifecycle`,
`PartitionElections`, `TopicChanges`) takes in its constructor only the protocols and
callables it calls, and the `Controller` wires them together. No part sees another
part, or the controller, whole.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any, Protocol

from josefk.cluster.controller.context import TP, RequestBatch
from josefk.cluster.zk.client import Op
from josefk.cluster.zk.znodes import BrokerRegistration
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr

#: A unit of the controller's work, run from its queue one at a time.
Event = Callable[[], Awaitable[Any]]
#: Queues an event on the controller (``Controller.put``).
Put = Callable[[Event], None]
#: Turns an event into a ZooKeeper watch that queues it when it fires.
Watcher = Callable[[Event], Callable[[], None]]
#: A fresh `RequestBatch` for one event's requests to the brokers.
BatchFactory = Callable[[], RequestBatch]


class ZkWrites(Protocol):
    """ZooKeeper writes fenced by the controller epoch (`FencedWrites`)."""

    async def multi(self, ops: list[Op]) -> None: ...

    async def write_leader_isr(self, tp: TP, new: LeaderIsr) -> LeaderIsr | None: ...


class Elect(Protocol):
    """Leader election with a named strategy (`PartitionElections.elect`)."""

    async def elect(self, partitions: Iterable[TP], kind: str) -> dict[TP, int]: ...


class Elections(Elect, Protocol):
    """Leader elections, and electing every partition without a leader."""

    async def trigger_online_state_change(self, partitions: Iterable[TP] | None = None
                                          ) -> None: ...


class IsrRemoval(Protocol):
    """Dropping dead or stopping followers from ISRs (`IsrChanges.remove_from_isr`)."""

    async def remove_from_isr(self, brokers: Collection[int], partitions: Iterable[TP],
                              batch: RequestBatch) -> None: ...


class BrokerChannels(Protocol):
    """The part of `ControllerChannel` that follows brokers coming and going."""

    def add_broker(self, broker: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...


class ElectionConfig(Protocol):
    """The settings an election reads (of `ControllerConfig`)."""

    @property
    def unclean_leader_election(self) -> Callable[[str], bool]: ...

    @property
    def load_topic_configs(self) -> Callable[[set[str]], Awaitable[None]] | None: ...
