"""Metadata answers and their per-topic byte cache: whatever changes a topic, its
partitions, their leaders, ISR or epochs, or the live brokers shows in the next answer."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import trio
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from josefk.cluster.metadata.cache import MetadataCache
from josefk.cluster.metadata.requests import PartitionInfo, UpdateMetadata
from josefk.cluster.metadata.store import BrokerInfo, Topic
from josefk.cluster.partition import PartitionMap, PartitionView
from josefk.cluster.security.authorizer import AclCache
from josefk.protocol.header import RequestHeader
from josefk.protocol.messages import Request
from josefk.protocol.versions import SUPPORTED_VERSIONS
from josefk.server.broker import Broker
from josefk.server.handlers import metadata
from josefk.server.security.authorizer import Authorizer

VERSIONS = list(range(SUPPORTED_VERSIONS[3].min_version, SUPPORTED_VERSIONS[3].max_version + 1))
LEADER_NOT_AVAILABLE = 5


def request(version: int, topics: list[str] | None = None) -> Request:
    fields: dict[str, Any] = {"topics": None if topics is None else [
        MetadataRequest[version].MetadataRequestTopic(name=t) for t in topics]}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    header = RequestHeader(api_key=3, api_version=version, correlation_id=42, client_id="t",
                           flexible=version >= 9, body_offset=0)
    return Request(header=header, body=MetadataRequest[version](**fields))


async def answer(broker: Any, version: int = 12, topics: list[str] | None = None) -> Any:
    (frame,) = await metadata.handle(broker, request(version, topics))
    response = MetadataResponse.decode(frame[4:], version=version, header=True)
    assert response.header.correlation_id == 42
    return response


def layout(response: Any) -> dict[str, list[tuple[int, int, int, list[int], list[int]]]]:
    return {t.name: [(p.partition_index, p.error_code, p.leader_id, list(p.replica_nodes),
                      list(p.isr_nodes)) for p in t.partitions] for t in response.topics}


async def test_every_version_describes_the_topics(broker: Broker) -> None:
    topic = await broker.create_topic("a", 3)
    for version in VERSIONS:
        response = await answer(broker, version)
        assert [(b.node_id, b.port) for b in response.brokers] == [(0, broker.bound_ports[0])]
        assert layout(response) == {"a": [(p, 0, 0, [0], [0]) for p in range(3)]}
        if version >= 10:
            assert response.topics[0].topic_id == topic.topic_id


async def test_single_broker_changes_invalidate(broker: Broker) -> None:
    await broker.create_topic("a", 2)
    assert layout(await answer(broker)) == {"a": [(0, 0, 0, [0], [0]), (1, 0, 0, [0], [0])]}
    await broker.create_topic("b", 1)
    assert set(layout(await answer(broker))) == {"a", "b"}
    await broker.create_partitions("a", 4)
    assert [p[0] for p in layout(await answer(broker))["a"]] == [0, 1, 2, 3]
    assert [p[0] for p in layout(await answer(broker, topics=["a"]))["a"]] == [0, 1, 2, 3]
    first_id = (await answer(broker, topics=["b"])).topics[0].topic_id
    await broker.delete_topic("b")
    assert set(layout(await answer(broker))) == {"a"}
    assert (await answer(broker, topics=["b"])).topics[0].error_code == 3
    await broker.create_topic("b", 2)
    again = (await answer(broker, topics=["b"])).topics[0]
    assert again.topic_id != first_id and len(again.partitions) == 2
    # A partition this broker stops hosting is reported without a leader.
    await broker.open_deferred_partitions()
    del broker.partitions[("a", 1)]
    assert layout(await answer(broker))["a"][1] == (1, LEADER_NOT_AVAILABLE, -1, [0], [])


async def test_created_partitions_open_later_or_on_demand(broker: Broker) -> None:
    """CreateTopics answers before the logs exist; Metadata already reports what the
    partitions will say once open, the first request for one opens it, and the
    background task opens the rest."""
    topic = await broker.create_topic("d", 40)
    unopened = {p: broker.partition_view("d", p) for p in range(40)}
    generation = broker.partitions.generation
    assert broker.partition("d", 7) is not None
    assert broker.log_manager.get_log("d", 7) is not None
    with trio.fail_after(10):
        while len([k for k in broker.partitions if k[0] == "d"]) < 40:
            await trio.sleep(0.01)
    assert {p: broker.partition_view("d", p) for p in range(40)} == unopened
    # Opening them changed no answer, so cached Metadata bytes stay valid.
    assert broker.partitions.generation == generation
    for p in range(40):
        directory = broker.log_manager.get_log("d", p).directory
        assert (directory / "partition.metadata").exists(), p
    assert broker.partition("d", 3).topic_id == topic.topic_id


async def test_deleted_before_opening(broker: Broker) -> None:
    await broker.create_topic("e", 30)
    await broker.delete_topic("e")
    await broker.create_topic("e", 2)
    await broker.open_deferred_partitions()
    assert sorted(k for k in broker.partitions if k[0] == "e") == [("e", 0), ("e", 1)]
    assert layout(await answer(broker))["e"] == [(0, 0, 0, [0], [0]), (1, 0, 0, [0], [0])]


class FakeClusterBroker:
    """What the handler reads of a broker in a cluster, answering from a MetadataCache."""

    def __init__(self) -> None:
        self.cache = MetadataCache()
        self.authorizer = Authorizer(False, AclCache)  # no authorizer configured
        self.cluster = SimpleNamespace(cache=self.cache)
        self.config = SimpleNamespace(auto_create_topics_enable=False)
        self.cluster_id = "cluster"
        self.controller_id = 1
        self.topic = Topic.of("t", uuid.uuid4(), [[1, 2], [2, 1]])
        self.store = SimpleNamespace(topics=lambda: [self.topic],
                                     get=lambda n: self.topic if n == "t" else None,
                                     get_by_id=lambda i: None)

    def live_brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(b, "h", 9000 + b) for b in sorted(self.cache.brokers)]

    def partition_view(self, topic: str, index: int) -> PartitionView | None:
        info = self.cache.partition(topic, index)
        return info and PartitionView(info.leader, info.leader_epoch, info.replicas, info.isr)

    def update(self, live: list[int], leaders: dict[int, tuple[int, int, tuple[int, ...]]]
               ) -> None:
        registrations = [SimpleNamespace(broker_id=b) for b in live]
        infos = [PartitionInfo(topic="t", partition=p, controller_epoch=1, leader=leader,
                               leader_epoch=epoch, isr=isr, partition_epoch=epoch,
                               replicas=self.topic.partitions[p], offline=())
                 for p, (leader, epoch, isr) in leaders.items()]
        self.cache.update(UpdateMetadata(controller_id=1, controller_epoch=1,
                                         broker_epoch=-1, partitions=tuple(infos),
                                         live_brokers=tuple(registrations),  # type: ignore[arg-type]
                                         topic_ids={"t": self.topic.topic_id}))


async def test_cluster_updates_invalidate() -> None:
    broker = FakeClusterBroker()
    broker.update([1, 2], {0: (1, 0, (1, 2)), 1: (2, 0, (2, 1))})
    first = await answer(broker)
    assert layout(first)["t"] == [(0, 0, 1, [1, 2], [1, 2]), (1, 0, 2, [2, 1], [2, 1])]
    # A new leader and ISR for partition 0.
    broker.update([1, 2], {0: (2, 1, (2,))})
    response = await answer(broker)
    assert layout(response)["t"][0] == (0, 0, 2, [1, 2], [2])
    assert response.topics[0].partitions[0].leader_epoch == 1
    # Broker 2 dies: its leaderships are reported as none until the controller moves them.
    broker.update([1], {})
    assert layout(await answer(broker))["t"] == [(0, LEADER_NOT_AVAILABLE, -1, [1, 2], [2]),
                                                 (1, LEADER_NOT_AVAILABLE, -1, [2, 1], [2, 1])]
    # More partitions in the topic.
    broker.topic = Topic.of("t", broker.topic.topic_id, [[1, 2], [2, 1], [1, 2]])
    assert len(layout(await answer(broker))["t"]) == 3


def test_cache_keys() -> None:
    cache = metadata.TopicBytesCache()
    topic = Topic.of("t", uuid.uuid4(), [[0]])
    key = (1, frozenset({0}))
    cache.put(12, topic, key, b"x")
    assert cache.get(12, topic, key) == b"x"
    assert cache.get(12, Topic.of("t", topic.topic_id, [[0]]), key) == b"x"  # equal topic
    assert cache.get(11, topic, key) is None
    assert cache.get(12, topic, (2, frozenset({0}))) is None
    assert cache.get(12, topic, (1, frozenset({0, 1}))) is None
    assert cache.get(12, Topic.of("t", uuid.uuid4(), [[0]]), key) is None
    assert cache.get(12, Topic.of("t", topic.topic_id, [[0], [0]]), key) is None
    cache.keep_only(12, [])
    assert cache.get(12, topic, key) is None


def test_partition_map_generation() -> None:
    partitions = PartitionMap()
    one: Any = SimpleNamespace(view=lambda: PartitionView(0, 0, (0,), (0,)))
    seen = [partitions.generation]

    def changed() -> bool:
        seen.append(partitions.generation)
        return seen[-1] != seen[-2]

    partitions[("t", 0)] = one
    assert changed()
    partitions.put_same_view(("t", 1), one, PartitionView(0, 0, (0,), (0,)))
    assert not changed()
    partitions.put_same_view(("t", 2), one, PartitionView(0, 1, (0,), (0,)))
    assert changed()
    partitions.put_same_view(("t", 3), one, None)
    assert changed()
    del partitions[("t", 0)]
    assert changed()
    partitions.pop(("t", 1))
    assert changed()
    partitions.setdefault(("t", 4), one)
    assert changed()
    partitions.update({("t", 5): one})
    assert changed()
    partitions.popitem()
    assert changed()
    partitions.clear()
    assert changed()
