"""A large ``__consumer_offsets`` partition loads in the background once the broker
serves, as Kafka's do: its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile while
other tasks run between the load's slices; a partition unloaded mid-load stops loading;
records appended while it loads are read before it counts as loaded; a load that fails is
logged and tried again at the next request. On a real broker's logs, no sockets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from josefk.cluster.coordinator.group import partitions as offsets_partitions
from josefk.cluster.coordinator.group.api import Error, PartitionCommit
from josefk.cluster.coordinator.group.coordinator import GroupCoordinator
from josefk.cluster.coordinator.group.load import PartitionLoad
from josefk.cluster.coordinator.group.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_record,
)
from josefk.cluster.coordinator.records import OFFSETS_TOPIC, build_batch
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config

TOPIC_PARTITIONS = 300
ROUNDS = 100  # ~1.3 MiB of commits: over BACKGROUND_LOAD_BYTES


def make_broker(data: Path) -> Broker:
    config = load_config(None, {
        "log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0",
        "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1"})
    broker = Broker(config)
    broker.startup()
    return broker


def commit_round(coordinator: GroupCoordinator, n: int) -> None:
    errors = coordinator.commit_offsets("g", "", None, -1, -1, [
        ("t", [PartitionCommit(p, n) for p in range(TOPIC_PARTITIONS)])], 8)
    assert set(errors.values()) == {Error.NONE}


def committed(coordinator: GroupCoordinator) -> dict[int, int]:
    error, fetched = coordinator.fetch_offsets("g", None)
    assert error is Error.NONE
    return {o.partition: o.offset for _, offsets in fetched for o in offsets}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A broker's directory whose one ``__consumer_offsets`` partition is large."""
    broker = make_broker(tmp_path)
    try:
        coordinator = broker.group_coordinator
        trio.run(coordinator.ensure_topic)
        for n in range(ROUNDS):
            commit_round(coordinator, n)
        log = broker.partition(OFFSETS_TOPIC, 0).log  # type: ignore[union-attr]
        assert log.size_in_bytes() > offsets_partitions.BACKGROUND_LOAD_BYTES
    finally:
        broker.shutdown()
    return tmp_path


@pytest.fixture
def restarted(data: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    # A pause after every step of the load, so the tests see it between steps.
    monkeypatch.setattr(offsets_partitions, "LOAD_SLICE_S", 0.0)
    broker = make_broker(data)
    yield broker
    broker.shutdown()


async def until(condition: object, ticks: list[int]) -> None:
    with trio.fail_after(60):
        while not condition():  # type: ignore[operator]
            ticks[0] += 1
            await trio.sleep(0)


async def test_a_large_partition_loads_in_the_background(restarted: Broker) -> None:
    coordinator = restarted.group_coordinator
    assert (coordinator.loading, coordinator.loaded) == ({0}, set())
    assert coordinator.check("g") is Error.COORDINATOR_LOAD_IN_PROGRESS
    assert coordinator.fetch_offsets("g", None) == (Error.COORDINATOR_LOAD_IN_PROGRESS, [])
    assert coordinator.commit_offsets("g", "", None, -1, -1, [("t", [PartitionCommit(0, 1)])],
                                      8) == {("t", 0): Error.COORDINATOR_LOAD_IN_PROGRESS}
    assert coordinator.list_groups([], []) == (Error.COORDINATOR_LOAD_IN_PROGRESS, [])
    ticks = [0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        await until(lambda: 0 in coordinator.loaded, ticks)
        nursery.cancel_scope.cancel()
    assert ticks[0] > 10  # others ran while it loaded
    assert coordinator.loading == set()
    assert committed(coordinator) == dict.fromkeys(range(TOPIC_PARTITIONS), ROUNDS - 1)
    commit_round(coordinator, ROUNDS)
    assert committed(coordinator)[0] == ROUNDS


async def test_a_partition_unloaded_while_it_loads_stops_and_loads_again(
        restarted: Broker) -> None:
    coordinator = restarted.group_coordinator
    ticks = [0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        await until(lambda: ticks[0] > 5, ticks)
        assert coordinator.loading == {0}  # partly read
        coordinator.unload(0)  # this broker no longer leads it
        assert coordinator.loading == set() and "g" not in coordinator.groups.offsets
        for _ in range(300):  # the load under way (~100 more steps) does not carry on
            await trio.sleep(0)
            assert "g" not in coordinator.groups.offsets and 0 not in coordinator.loaded
        coordinator.load(0)  # leader again
        assert coordinator.loading == {0}
        await until(lambda: 0 in coordinator.loaded, ticks)
        nursery.cancel_scope.cancel()
    assert committed(coordinator) == dict.fromkeys(range(TOPIC_PARTITIONS), ROUNDS - 1)


async def test_records_appended_while_it_loads_are_read(restarted: Broker) -> None:
    coordinator = restarted.group_coordinator
    partition = restarted.partition(OFFSETS_TOPIC, 0)
    assert partition is not None
    ticks = [0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        await until(lambda: ticks[0] > 5, ticks)
        assert coordinator.loading == {0}  # partly read
        # E.g. a transaction marker's partition: appended past the end the load began at.
        partition.append_records(build_batch([encode_record(
            (OffsetCommitKey("g", "t", 7), OffsetCommitValue(1234, "", 0)))], 0),
            required_acks=-1)
        await until(lambda: 0 in coordinator.loaded, ticks)
        nursery.cancel_scope.cancel()
    assert committed(coordinator)[7] == 1234


async def test_a_load_that_fails_is_logged_and_tried_again(
        restarted: Broker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    coordinator = restarted.group_coordinator
    steps = PartitionLoad.steps

    def failing(self: PartitionLoad) -> Iterator[None]:
        yield
        raise RuntimeError("unreadable")

    monkeypatch.setattr(PartitionLoad, "steps", failing)
    ticks = [0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        await until(lambda: not coordinator.loading, ticks)
        assert "loading __consumer_offsets-0 failed" in caplog.text
        assert 0 not in coordinator.loaded and "g" not in coordinator.groups.offsets
        monkeypatch.setattr(PartitionLoad, "steps", steps)
        assert coordinator.check("g") is Error.COORDINATOR_LOAD_IN_PROGRESS  # loads again
        await until(lambda: 0 in coordinator.loaded, ticks)
        nursery.cancel_scope.cancel()
    assert committed(coordinator) == dict.fromkeys(range(TOPIC_PARTITIONS), ROUNDS - 1)
