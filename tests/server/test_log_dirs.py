"""AlterReplicaLogDirs: moving a replica between the broker's log dirs (JBOD), through
kafka-python's admin client against a broker running in-process with two log dirs."""

from __future__ import annotations

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
