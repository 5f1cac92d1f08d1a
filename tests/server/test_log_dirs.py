"""AlterReplicaLogDirs: moving a replica between the broker's log dirs (JBOD), through
kafka-python's admin client against a broker running in-process with two log dirs."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError
from kafka.structs import TopicPartitionReplica

from josefk.log.manager import partition_dir_name
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dirs})
    async with trio.open_nursery() as nursery:
        yield await nursery.start(Broker(config).serve)
        nursery.cancel_scope.cancel()


def bootstrap(broker: Broker) -> str:
    return f"127.0.0.1:{broker.bound_ports[0]}"


def produce(broker: Broker, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap(broker), acks="all")
    try:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush(timeout=10)
    finally:
        producer.close(timeout=5)


def consume(broker: Broker, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(broker), consumer_timeout_ms=5000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        for message in consumer:
            got.append(message.value)
            if len(got) == count:
                break
        return got
    finally:
        consumer.close()


def alter(broker: Broker, moves: dict[TopicPartitionReplica, str]) -> dict:
    client = KafkaAdminClient(bootstrap_servers=bootstrap(broker), request_timeout_ms=10_000)
    try:
        return client.alter_replica_log_dirs(moves)
    finally:
        client.close()


async def test_a_replica_moves_to_another_log_dir_and_keeps_serving(broker: Broker) -> None:
    await broker.create_topic("moved", 1, 1)
    values = [b"v%d" % i for i in range(50)]
    await trio.to_thread.run_sync(produce, broker, "moved", values)
    source = broker.log_manager.dir_of("moved", 0)
    [target] = [d for d in broker.log_manager.log_dirs if d != source]
    replica = TopicPartitionReplica("moved", 0, broker.node_id)
    result = await trio.to_thread.run_sync(alter, broker, {replica: str(target.absolute())})
    assert result == {replica: NoError}
    assert broker.log_manager.dir_of("moved", 0) == target
    assert (target / partition_dir_name("moved", 0)).is_dir()
    assert not (source / partition_dir_name("moved", 0)).exists()
    # Everything written before the move reads back, and appends go on at the same offsets.
    await trio.to_thread.run_sync(produce, broker, "moved", [b"after"])
    got = await trio.to_thread.run_sync(consume, broker, "moved", 51)
    assert got == values + [b"after"]
    # Moving it where it already is changes nothing.
    result = await trio.to_thread.run_sync(alter, broker, {replica: str(target.absolute())})
    assert result == {replica: NoError}


async def test_unknown_log_dir_and_missing_replica(broker: Broker, tmp_path: Path) -> None:
    await broker.create_topic("here", 1, 1)
    here = TopicPartitionReplica("here", 0, broker.node_id)
    nowhere = str((tmp_path / "not-a-log-dir").absolute())
    result = await trio.to_thread.run_sync(alter, broker, {here: nowhere})
    assert result == {here: LogDirNotFoundError}
    target = str(broker.log_manager.log_dirs[0].absolute())
    missing = TopicPartitionReplica("here", 7, broker.node_id)
    result = await trio.to_thread.run_sync(alter, broker, {missing: target})
    assert result == {missing: ReplicaNotAvailableError}


@pytest.fixture
async def two_filesystems(tmp_path: Path) -> AsyncIterator[Broker]:
    """A broker whose second log dir is on tmpfs (/dev/shm), another file system."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system (/dev/shm) to move a log across")
    other = Path(tempfile.mkdtemp(prefix="josefk-test-", dir=shm))
    dirs = f"{tmp_path / 'a'},{other}"
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dirs})
    try:
        async with trio.open_nursery() as nursery:
            yield await nursery.start(Broker(config).serve)
            nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(other, ignore_errors=True)


async def test_a_move_across_file_systems_copies_off_the_event_loop(
        two_filesystems: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk of the copy runs in a worker thread while the log serves; only what
    changed meanwhile is copied on the event loop, and appends acknowledged during the
    move all read back afterwards."""
    broker = two_filesystems
    await broker.create_topic("far", 1, 1)
    bulk = [b"%06d" % i + b"x" * 4000 for i in range(4000)]  # about 16 MB to copy
    await trio.to_thread.run_sync(produce, broker, "far", bulk)
    source = broker.log_manager.dir_of("far", 0)
    [target] = [d for d in broker.log_manager.log_dirs if d != source]
    assert broker.log_manager.needs_copy("far", 0, target)
    replica = TopicPartitionReplica("far", 0, broker.node_id)
    copied = {"loop": 0, "worker": 0}
    copy2 = shutil.copy2

    def counting_copy2(src: str, dst: object) -> object:
        where = "loop" if threading.current_thread() is threading.main_thread() else "worker"
        copied[where] += os.stat(src).st_size
        return copy2(src, dst)

    monkeypatch.setattr(shutil, "copy2", counting_copy2)
    during: list[bytes] = []

    def write_during() -> None:
        for i in range(20):
            value = b"during-%d" % i
            produce(broker, "far", [value])
            during.append(value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, write_during)
        result = await trio.to_thread.run_sync(alter, broker, {replica: str(target.absolute())})
    assert result == {replica: NoError}
    assert copied["worker"] > 16_000_000 > 100 * copied["loop"], copied
    assert broker.log_manager.dir_of("far", 0) == target
    assert not (source / partition_dir_name("far", 0)).exists()
    await trio.to_thread.run_sync(produce, broker, "far", [b"after"])
    got = await trio.to_thread.run_sync(consume, broker, "far", len(bulk) + len(during) + 1)
    assert got[:len(bulk)] == bulk and got[-1] == b"after"
    assert sorted(got[len(bulk):-1]) == sorted(during)
