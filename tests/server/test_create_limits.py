"""CreateTopics and CreatePartitions past Kafka's 10,000 partitions per request are refused
before a single replica is placed, so a huge count neither blocks the event loop nor
eats the memory of its replica lists; the metadata stores refuse such counts themselves
(for every other caller). compat_tests/test_create_limits.py has the answers Kafka gives.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kafka import KafkaAdminClient

import josefk.cluster.metadata.store as metadata
from josefk.cluster.metadata.errors import (
    MAX_PARTITIONS_PER_BATCH,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PartitionBatchOverflowError,
    TooManyPartitionsError,
)
from josefk.cluster.metadata.store import BrokerInfo, LocalMetadataStore
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config

UNKNOWN_SERVER_ERROR = -1
POLICY_VIOLATION = 44
INT32_MAX = (1 << 31) - 1
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


@pytest.fixture
def placed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The partition counts replicas get placed for; more than the limit fails at once
    (instead of spending minutes and gigabytes on it)."""
    counts: list[int] = []
    real = metadata.assign_replicas

    def spy(broker_ids: Any, num_partitions: int, *args: Any, **kwargs: Any) -> Any:
        counts.append(num_partitions)
        assert num_partitions <= MAX_PARTITIONS_PER_BATCH, f"placing {num_partitions}"
        return real(broker_ids, num_partitions, *args, **kwargs)

    monkeypatch.setattr(metadata, "assign_replicas", spy)
    yield counts


async def start(nursery: trio.Nursery, data: Path, **settings: str) -> Broker:
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data),
                                **settings})
    return await nursery.start(Broker(config).serve)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with trio.open_nursery() as nursery:
        yield await start(nursery, tmp_path / "data")
        nursery.cancel_scope.cancel()


async def responsive(broker: Broker, call: Callable[[KafkaAdminClient], Any]) -> Any:
    """``call`` with a stock admin client (in a thread), checking that the broker's event
    loop kept ticking meanwhile."""
    gaps: list[float] = []

    async def tick() -> None:
        last = trio.current_time()
        while True:
            await trio.sleep(0.01)
            now = trio.current_time()
            gaps.append(now - last)
            last = now

    def run() -> Any:
        with contextlib.closing(KafkaAdminClient(
                bootstrap_servers=f"127.0.0.1:{broker.bound_ports[0]}",
                request_timeout_ms=10_000)) as client:
            return call(client)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        with trio.fail_after(30):
            result = await trio.to_thread.run_sync(run)
        nursery.cancel_scope.cancel()
    assert max(gaps, default=0) < 1.0, max(gaps)
    return result


def created(validate_only: bool, **partitions: int) -> Callable[[KafkaAdminClient], Any]:
    """CreateTopics for topics of so many partitions: (name, error code, message) each."""
    def call(client: KafkaAdminClient) -> Any:
        result = client.create_topics({n: {"num_partitions": c} for n, c in partitions.items()},
                                      validate_only=validate_only, raise_errors=False)
        return [(t["name"], t["error_code"], t["error_message"]) for t in result["topics"]]
    return call


def grown(validate_only: bool, **totals: int) -> Callable[[KafkaAdminClient], Any]:
    """CreatePartitions to so many partitions: (name, error code, message) each."""
    def call(client: KafkaAdminClient) -> Any:
        response = client.create_partitions(totals, validate_only=validate_only,
                                            raise_errors=False)
        return [(r.name, r.error_code, r.error_message) for r in response.results]
    return call


@pytest.mark.parametrize("validate_only", [True, False])
async def test_huge_create_topics_is_refused_at_once(broker: Broker, placed: list[int],
                                                     validate_only: bool) -> None:
    got = await responsive(broker, created(validate_only, huge=INT32_MAX, small=1))
    assert got == [("huge", POLICY_VIOLATION, TOO_MANY_PARTITIONS),
                   ("small", POLICY_VIOLATION, TOO_MANY_PARTITIONS)]
    assert placed == []
    assert broker.store.get("huge") is None and broker.store.get("small") is None


@pytest.mark.parametrize("validate_only", [True, False])
async def test_huge_create_partitions_is_refused_at_once(broker: Broker, placed: list[int],
                                                         validate_only: bool) -> None:
    await broker.create_topic("t", 1)
    await broker.create_topic("u", 1)
    placed.clear()
    got = await responsive(broker, grown(validate_only, t=INT32_MAX, u=2))
    # The first overflows the request's room; nothing fits after it.
    assert got == [("t", UNKNOWN_SERVER_ERROR, None), ("u", UNKNOWN_SERVER_ERROR, None)]
    assert placed == [1]  # u's own checks (validate only), before it is refused
    assert broker.store.get("t").num_partitions == 1  # type: ignore[union-attr]
    assert broker.partition("t", 1) is None


async def test_overflowing_create_partitions_grows_nothing(broker: Broker) -> None:
    """Kafka 4.3 keeps the partitions that fitted of the topic that overflowed (while
    answering the error); josefk adds none of them."""
    await broker.create_topic("t", 1)
    got = await responsive(broker, grown(False, t=MAX_PARTITIONS_PER_BATCH + 2))
    assert got == [("t", UNKNOWN_SERVER_ERROR, None)]
    assert broker.store.get("t").num_partitions == 1  # type: ignore[union-attr]


async def test_a_default_beyond_the_limit_counts(tmp_path: Path, placed: list[int]) -> None:
    async with trio.open_nursery() as nursery:
        broker = await start(nursery, tmp_path / "data", **{"num.partitions": str(INT32_MAX)})
        got = await responsive(broker, created(True, t=-1))
        assert got == [("t", POLICY_VIOLATION, TOO_MANY_PARTITIONS)]
        # Auto-creation takes the default too, and the store refuses it as well.
        with pytest.raises(TooManyPartitionsError):
            await broker.create_topic("auto")
        nursery.cancel_scope.cancel()
    assert placed == []


# --- the stores' own bound (every store plans through PlanningStore) -----------------------


def store(tmp_path: Path) -> LocalMetadataStore:
    return LocalMetadataStore(tmp_path, BrokerInfo(0, "127.0.0.1", 9092), rng=random.Random(0))


async def test_store_refuses_creating_too_many(tmp_path: Path, placed: list[int]) -> None:
    s = store(tmp_path)
    for validate_only in (True, False):
        with pytest.raises(TooManyPartitionsError) as err:
            await s.create_topic("t", INT32_MAX, 1, validate_only=validate_only)
        assert (err.value.error_code, str(err.value)) == (POLICY_VIOLATION, TOO_MANY_PARTITIONS)
        with pytest.raises(TooManyPartitionsError):
            await s.create_topic("t", -1, -1, validate_only=validate_only,
                                 assignment=[[0]] * (MAX_PARTITIONS_PER_BATCH + 1))
    topic = await s.create_topic("t", MAX_PARTITIONS_PER_BATCH, 1, validate_only=True)
    assert topic.num_partitions == MAX_PARTITIONS_PER_BATCH
    assert placed == [MAX_PARTITIONS_PER_BATCH]
    assert s.get("t") is None


async def test_store_refuses_growing_by_too_many(tmp_path: Path, placed: list[int]) -> None:
    s = store(tmp_path)
    await s.create_topic("t", 1, 1)
    for validate_only in (True, False):
        with pytest.raises(PartitionBatchOverflowError) as err:
            await s.create_partitions("t", INT32_MAX, validate_only=validate_only)
        assert err.value.error_code == UNKNOWN_SERVER_ERROR
        with pytest.raises(PartitionBatchOverflowError):
            await s.create_partitions("t", MAX_PARTITIONS_PER_BATCH + 2,
                                      [[0]] * (MAX_PARTITIONS_PER_BATCH + 1))
    # The topic's own checks come first, as in Kafka.
    with pytest.raises(InvalidReplicaAssignmentError, match="broker 7, but no such broker"):
        await s.create_partitions("t", MAX_PARTITIONS_PER_BATCH + 2,
                                  [[7]] * (MAX_PARTITIONS_PER_BATCH + 1))
    assert placed == [1]
    assert (await s.create_partitions("t", MAX_PARTITIONS_PER_BATCH + 1,
                                      validate_only=True)).num_partitions == 10_001
    assert s.get("t").num_partitions == 1  # type: ignore[union-attr]


async def test_store_checks_the_replication_factor_before_the_limit(tmp_path: Path) -> None:
    class Shrunk(LocalMetadataStore):
        def brokers(self) -> list[BrokerInfo]:
            return []  # the only broker is gone: a replication factor of 1 cannot be met

    s = Shrunk(tmp_path, BrokerInfo(0, "127.0.0.1", 9092))
    await s._commit({"t": metadata.Topic.of("t", s.new_topic_id(), [[0]])})
    with pytest.raises(InvalidReplicationFactorError, match="only 0 broker"):
        await s.create_partitions("t", INT32_MAX)
