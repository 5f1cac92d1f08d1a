"""Fakes for unit tests of the controller's parts (imported as ``controller_fakes``;
tests/cluster is not a package): an in-memory ZooKeeper, a recording channel to the
brokers, small fakes of the parts' narrow interfaces, and a cluster context to start
from. Each part is built alone on these; tests/cluster/test_controller.py runs the
whole controller on a real ZooKeeper."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from josefk.cluster.controller.context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller.interfaces import Event
from josefk.cluster.controller.states import PartitionState, ReplicaState
from josefk.cluster.metadata.requests import ControllerRequest, ControllerResponse
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import (
    BadVersionError,
    Check,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionState,
    SetData,
    Stat,
    Watch,
    ZkError,
)
from josefk.cluster.zk.znodes import BrokerRegistration, Endpoint, TopicAssignment
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr

CONTROLLER_ID = 3
EPOCH = 5
TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


# --- an in-memory ZooKeeper ----------------------------------------------------------------


@dataclass
class _Node:
    data: bytes | None
    version: int
    czxid: int


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class MemoryZooKeeper:
    """The `ZooKeeper` protocol over a dict: versions, czxids, one-shot watches (fired
    at once, on the caller's task) and all-or-nothing multis."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self._zxid = itertools.count(100)
        self._data_watches: dict[str, list[Watch]] = {}
        self._child_watches: dict[str, list[Watch]] = {}

    # --- synchronous helpers for tests ---

    def put(self, path: str, data: bytes = b"") -> None:
        """Create ``path`` (and missing parents) or overwrite its data."""
        for ancestor in self._ancestors(path):
            if ancestor not in self.nodes:
                self._create(ancestor, None)
        if path in self.nodes:
            self._set(path, data, -1)
        else:
            self._create(path, data)

    def data(self, path: str) -> bytes:
        return self.nodes[path].data

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.nodes
                      if p.startswith(prefix) and "/" not in p[len(prefix):])

    # --- the ZooKeeper protocol ---

    @property
    def session_id(self) -> int:
        return 1

    def on_session_state(self, listener: Callable[[SessionState], None]) -> None:
        pass

    async def create(self, path: str, data: bytes | None = None, *, ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> str:
        if makepath:
            await self.ensure_path(_parent(path))
        self._create(path, data)
        return path

    async def ensure_path(self, path: str) -> None:
        for ancestor in [*self._ancestors(path), path]:
            if ancestor not in self.nodes:
                self._create(ancestor, None)

    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, Stat]:
        node = self._node(path)
        if watch is not None:
            self._data_watches.setdefault(path, []).append(watch)
        return node.data or b"", Stat(node.version, node.czxid, node.czxid, 0,
                               len(self.children(path)))

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | ZkError]:
        out: list[tuple[bytes, Stat] | ZkError] = []
        for path in paths:
            try:
                out.append(await self.get(path))
            except ZkError as e:
                out.append(e)
        return out

    async def exists(self, path: str, watch: Watch | None = None) -> Stat | None:
        if watch is not None:
            self._data_watches.setdefault(path, []).append(watch)
        node = self.nodes.get(path)
        return None if node is None else Stat(node.version, node.czxid, node.czxid, 0)

    async def get_children(self, path: str, watch: Watch | None = None) -> list[str]:
        self._node(path)
        if watch is not None:
            self._child_watches.setdefault(path, []).append(watch)
        return self.children(path)

    async def set(self, path: str, data: bytes | None, version: int = -1) -> Stat:
        self._set(path, data, version)
        return (await self.exists(path)) or Stat(0, 0, 0, 0)

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        if recursive:
            for child in self.children(path):
                await self.delete(f"{path}/{child}", recursive=True)
        self._delete(path, version)

    async def multi(self, ops: list[Op]) -> None:
        saved = (dict(self.nodes), {p: list(w) for p, w in self._data_watches.items()},
                 {p: list(w) for p, w in self._child_watches.items()})
        fired: list[Watch] = []
        try:
            for op in ops:
                fired.extend(self._apply(op))
        except Exception:
            self.nodes, self._data_watches, self._child_watches = saved
            raise
        for watch in fired:
            watch()

    # --- internals ---

    def _apply(self, op: Op) -> list[Watch]:
        match op:
            case Check(path, version):
                if self._node(path).version != version:
                    raise BadVersionError(path)
                return []
            case Create(path, data, _):
                return self._create(path, data, fire=False)
            case SetData(path, data, version):
                return self._set(path, data, version, fire=False)
            case Delete(path, version):
                return self._delete(path, version, fire=False)
        raise AssertionError(op)

    @staticmethod
    def _ancestors(path: str) -> list[str]:
        parts = path.strip("/").split("/")[:-1]
        return ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]

    def _node(self, path: str) -> _Node:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path]

    def _create(self, path: str, data: bytes | None, fire: bool = True) -> list[Watch]:
        if path in self.nodes:
            raise NodeExistsError(path)
        if _parent(path) != "/" and _parent(path) not in self.nodes:
            raise NoNodeError(_parent(path))
        self.nodes[path] = _Node(data, 0, next(self._zxid))
        return self._fire([*self._take(self._data_watches, path),
                           *self._take(self._child_watches, _parent(path))], fire)

    def _set(self, path: str, data: bytes | None, version: int, fire: bool = True) -> list[Watch]:
        node = self._node(path)
        if version not in (-1, node.version):
            raise BadVersionError(path)
        self.nodes[path] = _Node(data, node.version + 1, node.czxid)
        return self._fire(self._take(self._data_watches, path), fire)

    def _delete(self, path: str, version: int, fire: bool = True) -> list[Watch]:
        node = self._node(path)
        if version not in (-1, node.version):
            raise BadVersionError(path)
        if self.children(path):
            raise NotEmptyError(path)
        del self.nodes[path]
        return self._fire([*self._take(self._data_watches, path),
                           *self._take(self._child_watches, path),
                           *self._take(self._child_watches, _parent(path))], fire)

    @staticmethod
    def _take(watches: dict[str, list[Watch]], path: str) -> list[Watch]:
        return watches.pop(path, [])

    @staticmethod
    def _fire(watches: list[Watch], fire: bool) -> list[Watch]:
        if not fire:
            return watches
        for watch in watches:
            watch()
        return []


# --- the brokers' side --------------------------------------------------------------------


@dataclass
class Sent:
    broker_id: int
    request: ControllerRequest
    on_response: Callable[[ControllerResponse], None] | None


@dataclass
class RecordingChannel:
    """Records what is sent to the brokers and which brokers come and go."""

    sent: list[Sent] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)

    def add_broker(self, broker: BrokerRegistration) -> None:
        self.added.append(broker.broker_id)

    def remove_broker(self, broker_id: int) -> None:
        self.removed.append(broker_id)

    def send(self, broker_id: int, request: ControllerRequest,
             on_response: Callable[[ControllerResponse], None] | None = None) -> None:
        self.sent.append(Sent(broker_id, request, on_response))

    def of(self, kind: type, broker_id: int | None = None) -> list[Any]:
        return [s.request for s in self.sent if isinstance(s.request, kind)
                and (broker_id is None or s.broker_id == broker_id)]

    def answer(self, kind: type, response: ControllerResponse) -> None:
        """Answer every request of ``kind`` sent with a callback, with ``response``."""
        for s in self.sent:
            if isinstance(s.request, kind) and s.on_response is not None:
                s.on_response(response)


# --- fakes of the parts' narrow interfaces ----------------------------------------------------


class MemoryWrites:
    """`ZkWrites` without the epoch fence: multis go to ``zk`` as they are; a partition
    state write lands unless its partition is in ``conflicts`` (its epoch moved)."""

    def __init__(self, ctx: ControllerContext, zk: MemoryZooKeeper) -> None:
        self.ctx = ctx
        self.zk = zk
        self.conflicts: set[TP] = set()
        self.leader_isr_writes: list[tuple[TP, LeaderIsr]] = []

    async def multi(self, ops: list[Op]) -> None:
        await self.zk.multi(ops)

    async def write_leader_isr(self, tp: TP, new: LeaderIsr) -> LeaderIsr | None:
        if tp in self.conflicts:
            return None
        written = replace(new, zk_version=self.ctx.leader_isr[tp].zk_version + 1)
        self.ctx.leader_isr[tp] = written
        self.leader_isr_writes.append((tp, written))
        return written


class FakeElections:
    """`Elections` that records what it was asked and answers ``result`` (NONE)."""

    def __init__(self, result: int = 0) -> None:
        self.result = result
        self.elected: list[tuple[list[TP], str]] = []
        self.triggered: list[list[TP] | None] = []

    async def elect(self, partitions: Iterable[TP], kind: str) -> dict[TP, int]:
        partitions = list(partitions)
        self.elected.append((partitions, kind))
        return dict.fromkeys(partitions, self.result)

    async def trigger_online_state_change(self, partitions: Iterable[TP] | None = None
                                          ) -> None:
        self.triggered.append(None if partitions is None else list(partitions))


class FakeIsrRemoval:
    """`IsrRemoval` that records which brokers were to leave which ISRs."""

    def __init__(self) -> None:
        self.removed: list[tuple[set[int], list[TP]]] = []

    async def remove_from_isr(self, brokers: Collection[int], partitions: Iterable[TP],
                              batch: RequestBatch) -> None:
        self.removed.append((set(brokers), list(partitions)))


@dataclass
class EventQueue:
    """``put`` and ``watch`` of the controller: events and fired watches queue here;
    `run_all` runs them in order."""

    events: list[Event] = field(default_factory=list)

    def put(self, event: Event) -> None:
        self.events.append(event)

    def watch(self, event: Event) -> Callable[[], None]:
        return lambda: self.put(event)

    async def run_all(self) -> None:
        while self.events:
            await self.events.pop(0)()


def illegal_transitions(caplog: Any) -> list[str]:
    """The state transitions the context refused (each one is a controller bug)."""
    return [r.getMessage() for r in caplog.records
            if "illegal state transition" in r.getMessage()]


# --- a cluster to start from ------------------------------------------------------------------


def registration(broker_id: int, epoch: int = 0) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id),),
                              epoch=epoch or 1000 + broker_id)


def make_context(brokers: Iterable[int] = (1, 2, 3)) -> ControllerContext:
    ctx = ControllerContext(CONTROLLER_ID, EPOCH, 0)
    ctx.brokers = {b: registration(b) for b in brokers}
    return ctx


def add_topic(ctx: ControllerContext, zk: MemoryZooKeeper | None, topic: str,
              partitions: dict[int, tuple[tuple[int, ...], int, tuple[int, ...]]]) -> None:
    """``topic`` online in ``ctx`` (and its znodes in ``zk``): partition ->
    (replicas, leader, isr); replicas on live brokers online, the others offline."""
    assignment = TopicAssignment(TOPIC_ID, {p: r for p, (r, _, _) in partitions.items()})
    ctx.set_topic(topic, assignment)
    for p, (replicas, leader, isr) in partitions.items():
        tp = (topic, p)
        state = LeaderIsr(leader, 0, isr, EPOCH, zk_version=0)
        ctx.leader_isr[tp] = state
        ctx.partition_states[tp] = (PartitionState.ONLINE if leader in ctx.brokers
                                    else PartitionState.OFFLINE)
        for r in replicas:
            ctx.replica_states[(topic, p, r)] = (ReplicaState.ONLINE if r in ctx.brokers
                                                 else ReplicaState.OFFLINE)
        if zk is not None:
            zk.put(zn.partition_state_path(*tp), state.encode())
    if zk is not None:
        zk.put(zn.topic_config_path(topic), zn.encode_config({}))
        zk.put(zn.topic_path(topic), assignment.encode())
