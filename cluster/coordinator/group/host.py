"""What the group coordinator needs of the broker that hosts it.

``josefk.cluster`` sits below ``josefk.server`` (imports point server → cluster → log →
protocol), so the coordinator never names the server's ``Broker``: it is handed a
`CoordinatorHost`, and the broker satisfies these protocols structurally, with no
registration and no import of ``josefk.server`` here. Each member below is one the
coordinator uses; growing the coordinator's needs means growing this list.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from josefk.cluster.metadata.store import BrokerInfo, Topic
from josefk.cluster.partition import Partition


@runtime_checkable
class CoordinatorConfig(Protocol):
    """The broker configuration the coordinator reads (the server's ``BrokerConfig``)."""

    @property
    def group_initial_rebalance_delay_ms(self) -> int: ...

    @property
    def group_min_session_timeout_ms(self) -> int: ...

    @property
    def group_max_session_timeout_ms(self) -> int: ...

    @property
    def offsets_retention_minutes(self) -> int: ...

    @property
    def offsets_retention_check_interval_ms(self) -> int: ...

    @property
    def offsets_topic_num_partitions(self) -> int: ...

    @property
    def offsets_topic_replication_factor(self) -> int: ...

    @property
    def offsets_topic_segment_bytes(self) -> int: ...

    @property
    def values(self) -> Mapping[str, Any]:
        """Every broker key's parsed value (``group.max.size``, ``offset.metadata.max.bytes``)."""
        ...


@runtime_checkable
class CoordinatorStore(Protocol):
    """The part of the metadata store the coordinator reads (a `MetadataStore` has it)."""

    def get(self, name: str) -> Topic | None: ...

    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None: ...

    def topics(self) -> list[Topic]:
        """Every topic (consumer groups subscribe by regular expression)."""
        ...


@runtime_checkable
class CoordinatorHost(Protocol):
    """The broker, as the group coordinator sees it."""

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> CoordinatorConfig: ...

    @property
    def store(self) -> CoordinatorStore: ...

    def partition(self, topic: str, index: int) -> Partition | None:
        """The replica of ``topic``-``index`` this broker hosts, if any. Appends to it
        wake the fetch purgatory through the partition's own ``on_data``."""
        ...

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int, *,
                           configs: dict[str, str] | None = None) -> Topic:
        """Create a topic and open the partitions placed on this broker; raises a
        `ClusterError` subclass when refused."""
        ...

    def advertised_endpoint(self) -> tuple[str, int]:
        """The host and port clients are told to connect to."""
        ...

    def live_brokers(self) -> Sequence[BrokerInfo]:
        """The live brokers, on the listener of the request in hand."""
        ...
