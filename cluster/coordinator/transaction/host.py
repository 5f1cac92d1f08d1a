"""What the transaction coordinator's I/O (`txn_service`) needs of the broker hosting it.

As for the group coordinator (`coordinator_host`), the broker satisfies this protocol
structurally: ``josefk.cluster`` never imports ``josefk.server``. The network (markers
to other brokers' partitions) and the producer id source live on the server side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from josefk.cluster.coordinator.transaction.records import TopicPartition
from josefk.cluster.metadata.store import BrokerInfo, Topic
from josefk.cluster.partition import Partition, PartitionView


@runtime_checkable
class TxnHostConfig(Protocol):
    @property
    def values(self) -> Mapping[str, Any]:
        """Every broker key's parsed value (``transaction.*``, ``request.timeout.ms``)."""
        ...


@runtime_checkable
class TxnHostStore(Protocol):
    def get(self, name: str) -> Topic | None: ...


@runtime_checkable
class TxnHost(Protocol):
    """The broker, as the transaction coordinator sees it."""

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> TxnHostConfig: ...

    @property
    def store(self) -> TxnHostStore: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...

    def partition_view(self, topic: str, index: int) -> PartitionView | None: ...

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int, *,
                           configs: dict[str, str] | None = None) -> Topic: ...

    def advertised_endpoint(self) -> tuple[str, int]: ...

    def live_brokers(self) -> Sequence[BrokerInfo]:
        """The live brokers, on the listener of the request in hand."""
        ...

    async def next_producer_id(self) -> int:
        """A producer id never handed out before; raises `TxnError` when none can be had."""
        ...

    async def wait_replicated(self, partition: Partition, end_offset: int,
                              timeout_s: float) -> int:
        """Wait until ``partition``'s high watermark reaches ``end_offset``: the error code
        of an acks=all append (NONE, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, ...)."""
        ...

    async def write_txn_markers(self, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int, commit: bool,
                                partitions: Iterable[TopicPartition]
                                ) -> tuple[dict[TopicPartition, int], set[TopicPartition]]:
        """Write COMMIT/ABORT control batches to ``partitions`` through their leaders:
        (partition → error code, partitions whose topic no longer exists)."""
        ...
