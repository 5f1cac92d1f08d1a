"""What the admin client returns: frozen snapshots of a cluster, its topics and its
consumer groups, each with ``as_json()`` giving plain dicts and lists."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class BrokerView:
    """A live broker as Metadata lists it."""

    id: int
    host: str
    port: int
    rack: str | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PartitionView:
    """One partition's leader (-1: none), replica assignment, ISR and offline replicas."""

    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader == -1

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "under_replicated": self.under_replicated,
                "offline": self.offline}


@dataclass(frozen=True)
class TopicView:
    """A topic and its partitions, in partition order."""

    name: str
    internal: bool
    partitions: list[PartitionView]

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "internal": self.internal,
                "partitions": [p.as_json() for p in self.partitions]}


@dataclass(frozen=True)
class ClusterView:
    """The cluster as one broker's Metadata answer shows it; -1: no controller known."""

    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerView]
    topics: list[TopicView]

    def as_json(self) -> dict[str, Any]:
        return {"cluster_id": self.cluster_id, "controller_id": self.controller_id,
                "brokers": [b.as_json() for b in self.brokers],
                "topics": [t.as_json() for t in self.topics]}


@dataclass(frozen=True)
class GroupListing:
    """A group as ListGroups names it."""

    group_id: str
    protocol_type: str
    state: str

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MemberView:
    """A member of a group and the partitions assigned to it."""

    member_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "assignment": [list(tp) for tp in self.assignment]}


@dataclass(frozen=True)
class PartitionLag:
    """A group's committed offset on a partition (None: none committed), the partition's
    log end offset (None: unknown), the lag (None when either is unknown) and the member
    it is assigned to (None: no member)."""

    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    lag: int | None
    member_id: str | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GroupView:
    """A consumer group: its state, members and per-partition lag."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: list[MemberView]
    offsets: list[PartitionLag]

    def as_json(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "state": self.state,
                "protocol_type": self.protocol_type, "protocol": self.protocol,
                "coordinator": self.coordinator,
                "members": [m.as_json() for m in self.members],
                "offsets": [o.as_json() for o in self.offsets]}
