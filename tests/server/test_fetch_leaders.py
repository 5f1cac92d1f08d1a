"""Fetch v16+ (KIP-951): a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
carries its current leader, and the answer the leaders' endpoints; earlier versions and
other errors carry neither. The answers are decoded with kafka-python's FetchResponse."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.consumer import FetchResponse

from josefk.cluster.metadata.store import BrokerInfo
from josefk.cluster.partition import PartitionView
from josefk.protocol.error_codes import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.server.handlers.fetch import _encode
from josefk.server.handlers.partition_reads import PartitionRead


@dataclass
class FakeBroker:
    """What `_encode` asks a broker: partitions' leaders and the live brokers."""

    leaders: dict[tuple[str, int], PartitionView]

    def partition_view(self, topic: str, index: int) -> PartitionView | None:
        return self.leaders.get((topic, index))

    def live_brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(1, "one", 9091, None), BrokerInfo(2, "two", 9092, "rack-b"),
                BrokerInfo(3, "three", 9093, None)]


def read(index: int, error_code: int) -> PartitionRead:
    return PartitionRead(topic="t", topic_id=None, index=index, fetch_offset=0,
                         max_bytes=100, leader_epoch=-1, error_code=error_code)


def answer(version: int, reads: list[PartitionRead]) -> Any:
    broker = FakeBroker({("t", 0): PartitionView(2, 7, (1, 2), (1, 2)),
                         ("t", 1): PartitionView(3, 4, (1, 3), (1, 3)),
                         ("t", 2): PartitionView(1, 1, (1,), (1,))})
    request = SimpleNamespace(api_version=version, correlation_id=5)
    parts = _encode(broker, request, reads)  # type: ignore[arg-type]
    return FetchResponse.decode(b"".join(parts), version=version, header=True, framed=True)


def test_moved_leaders_and_their_endpoints_from_v16() -> None:
    response = answer(16, [read(0, NOT_LEADER_OR_FOLLOWER), read(1, FENCED_LEADER_EPOCH),
                           read(2, UNKNOWN_TOPIC_OR_PARTITION)])
    leaders = {p.partition_index: p.current_leader and (p.current_leader.leader_id,
                                                        p.current_leader.leader_epoch)
               for p in response.responses[0].partitions}
    assert leaders == {0: (2, 7), 1: (3, 4), 2: None}
    assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [
        (2, "two", 9092, "rack-b"), (3, "three", 9093, None)]


@pytest.mark.parametrize("version", [12, 15])
def test_nothing_of_it_before_v16(version: int) -> None:
    response = answer(version, [read(0, NOT_LEADER_OR_FOLLOWER)])
    [partition] = response.responses[0].partitions
    assert partition.current_leader is None
