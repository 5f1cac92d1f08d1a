"""cluster/metadata_cache.py: what UpdateMetadata leaves in a broker's cache."""

from __future__ import annotations

import uuid

import trio
import trio.testing

from josefk.cluster.metadata.cache import MetadataCache
from josefk.cluster.metadata.requests import PartitionInfo, UpdateMetadata
from josefk.cluster.zk.znodes import BrokerRegistration, Endpoint

T = uuid.UUID(int=7)
U = uuid.UUID(int=8)
B1 = BrokerRegistration(1, (Endpoint("PLAINTEXT", "h1", 9092),))
B2 = BrokerRegistration(2, (Endpoint("PLAINTEXT", "h2", 9092),), rack="r")
B3 = BrokerRegistration(3, (Endpoint("PLAINTEXT", "h3", 9092),))


def info(topic: str, p: int, leader: int = 1, epoch: int = 0) -> PartitionInfo:
    return PartitionInfo(topic, p, 1, leader, epoch, (1, 2), 0, (1, 2), offline=())


def um(partitions: tuple[PartitionInfo, ...], brokers: tuple[BrokerRegistration, ...],
       topic_ids: dict[str, uuid.UUID], controller_id: int = 1, epoch: int = 1) -> UpdateMetadata:
    return UpdateMetadata(controller_id, epoch, -1, partitions, topic_ids, brokers)


def test_update_applies_partitions_brokers_and_controller() -> None:
    cache = MetadataCache()
    assert cache.controller_id == -1 and not cache.alive(1) and cache.topics() == []
    deleted = cache.update(um((info("t", 1, leader=2), info("t", 0), info("u", 0)),
                              (B1, B2), {"t": T, "u": U}, controller_id=2, epoch=5))
    assert deleted == []
    assert (cache.controller_id, cache.controller_epoch) == (2, 5)
    assert cache.brokers == {1: B1, 2: B2} and cache.alive(2) and not cache.alive(3)
    assert cache.topics() == ["t", "u"]
    assert [i.partition for i in cache.topic_partitions("t")] == [0, 1]
    assert cache.partition("t", 1) == info("t", 1, leader=2)
    assert cache.partition("t", 9) is None
    assert cache.topic_ids == {"t": T, "u": U}
    assert cache.has_leaders("t", [0, 1]) and not cache.has_leaders("t", [0, 5])

    # An incremental update: partitions not named stay; the broker list is replaced.
    cache.update(um((info("t", 0, leader=3, epoch=1),), (B2, B3), {"t": T}))
    assert cache.partition("t", 0).leader == 3 and cache.partition("t", 1).leader == 2
    assert cache.partition("u", 0) is not None
    assert sorted(cache.brokers) == [2, 3]
    # Partition u-0's leader (1) is gone from the live brokers.
    assert not cache.has_leaders("u", [0]) and cache.has_leaders("t", [0, 1])


def test_leader_during_delete_removes_partitions_and_topic_ids() -> None:
    cache = MetadataCache()
    cache.update(um((info("t", 0), info("t", 1), info("u", 0)), (B1,), {"t": T, "u": U}))
    # The controller still sends the topic id of a topic being deleted.
    deleted = cache.update(um((info("t", 0, leader=-2),), (B1,), {"t": T}))
    assert deleted == [("t", 0)]
    assert cache.partition("t", 0) is None and cache.partition("t", 1) is not None
    assert cache.topic_ids["t"] == T  # t-1 is still there
    deleted = cache.update(um((info("t", 1, leader=-2), info("u", 0, leader=-2)), (B1,),
                              {"t": T, "u": U}))
    assert sorted(deleted) == [("t", 1), ("u", 0)]
    assert cache.topics() == [] and cache.topic_ids == {}
    assert cache.topic_name(T) is None and cache.topic_name(U) is None
    # Deleting what the cache does not know is reported and harmless.
    assert cache.update(um((info("x", 0, leader=-2),), (B1,), {})) == [("x", 0)]


def test_topic_ids_name_their_topic_until_it_is_deleted_or_recreated() -> None:
    cache = MetadataCache()
    cache.update(um((info("t", 0), info("u", 0)), (B1,), {"t": T, "u": U}))
    assert (cache.topic_name(T), cache.topic_name(U)) == ("t", "u")
    assert cache.topic_name(uuid.UUID(int=9)) is None
    # "t" deleted and created again: the new id names it, the old one nothing.
    cache.update(um((info("t", 0, leader=-2),), (B1,), {"t": T}))
    recreated = uuid.UUID(int=10)
    cache.update(um((info("t", 0), info("t", 1)), (B1,), {"t": recreated}))
    assert cache.topic_name(T) is None and cache.topic_name(recreated) == "t"
    assert [i.partition for i in cache.topic_partitions("t")] == [0, 1]
    assert cache.topics() == ["t", "u"]


async def test_wait_changed_wakes_on_every_update() -> None:
    cache = MetadataCache()
    woken: list[int] = []

    async def waiter(n: int) -> None:
        await cache.wait_changed()
        woken.append(n)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter, 1)
            nursery.start_soon(waiter, 2)
            await trio.testing.wait_all_tasks_blocked()
            assert woken == []
            cache.update(um((info("t", 0),), (B1,), {"t": T}))
        assert sorted(woken) == [1, 2]

        # A waiter that starts after an update waits for the next one.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter, 3)
            await trio.testing.wait_all_tasks_blocked()
            assert 3 not in woken
            cache.update(um((), (B1,), {}))
        assert 3 in woken
