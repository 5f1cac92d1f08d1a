"""The ZooKeeper interface cluster mode codes against, and its errors.

The controller, the broker registration and the ZooKeeper metadata store use only
this: async operations on znodes, one-shot watches delivered as plain callbacks on
the trio thread, and multi-op transactions for conditional controller writes. The
implementation (kazoo on its own thread, bridged to trio) lives in
``josefk.server.control.zk_bridge``; the only place kazoo's exceptions exist is there, where
they become the errors below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

Watch = Callable[[], None]
"""A one-shot watch: called once, on the trio thread, when the znode (or its children)
changes or the session is lost."""


class ZkError(Exception):
    """A failed ZooKeeper operation."""


class NoNodeError(ZkError):
    """The znode does not exist."""


class NodeExistsError(ZkError):
    """The znode already exists."""


class BadVersionError(ZkError):
    """A conditional write's expected version did not match: someone else wrote first."""


class NotEmptyError(ZkError):
    """The znode has children."""


class ConnectionLossError(ZkError):
    """The connection dropped before the answer came; the operation may or may not have
    happened."""


class SessionExpiredError(ZkError):
    """The session is gone, and with it every ephemeral znode it owned."""


class SessionState(Enum):
    """What the ZooKeeper session is doing (kazoo's KazooState)."""

    CONNECTED = "connected"
    SUSPENDED = "suspended"  # disconnected; the session may still be alive on the server
    LOST = "lost"  # expired: ephemerals are gone; a new session follows


@dataclass(frozen=True, slots=True)
class Stat:
    """The parts of a znode's stat that Kafka uses."""

    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int
    num_children: int = 0


@dataclass(frozen=True, slots=True)
class Check:
    """Multi-op: fail the transaction unless ``path`` is at ``version``."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class Create:
    """Multi-op: create ``path`` with ``data``."""

    path: str
    data: bytes | None = None
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    """Multi-op: set ``path``'s data, if it is at ``version`` (-1: any)."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    """Multi-op: delete ``path``, if it is at ``version`` (-1: any)."""

    path: str
    version: int = -1


Op = Check | Create | SetData | Delete


class ZooKeeper(Protocol):
    """A ZooKeeper session rooted at the chroot of ``zookeeper.connect``."""

    @property
    def session_id(self) -> int: ...

    async def create(self, path: str, data: bytes | None = None, *, ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> str:
        """Create a znode; returns its path (with the sequence suffix, if any). ``None``
        is ZooKeeper's null value, what Kafka writes to a path without data (its parsers
        read an empty value as data to parse); parents made by ``makepath`` get it too."""

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents if missing (persistent, null data, as Kafka's
        ``createRecursive``)."""

    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, Stat]: ...

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | ZkError]:
        """Read every path (pipelined, no watches): for each, its data and stat or the
        error that read got (NoNodeError...), in the order asked."""

    async def exists(self, path: str, watch: Watch | None = None) -> Stat | None: ...

    async def get_children(self, path: str, watch: Watch | None = None) -> list[str]: ...

    async def set(self, path: str, data: bytes | None, version: int = -1) -> Stat: ...

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None: ...

    async def multi(self, ops: list[Op]) -> None:
        """All of ``ops`` or none; raises the error of the op that failed."""

    def on_session_state(self, listener: Callable[[SessionState], None]) -> None:
        """Call ``listener`` on the trio thread at every session state change."""
