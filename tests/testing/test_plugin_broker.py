"""The ``kafka_broker`` fixture (josefk's pytest plugin) as a user's tests use it: stock
clients produce, consume and commit against it from plain, trio and asyncio tests."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import trio
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consume_kafka_python(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=20_000)
    try:
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == count:
                break
        consumer.commit()
        return values
    finally:
        consumer.close()


def test_kafka_python_produces_consumes_and_commits_in_a_group(kafka_broker: str) -> None:
    topic, group = unique("kp"), unique("group")
    kafka_broker.create_topic(topic, partitions=3)  # type: ignore[attr-defined]
    producer = KafkaProducer(bootstrap_servers=kafka_broker, acks="all")
    sent = [f"value-{i}".encode() for i in range(30)]
    for value in sent:
        producer.send(topic, value)
    producer.flush(timeout=20)
    producer.close()

    assert sorted(consume_kafka_python(kafka_broker, topic, group, len(sent))) == sorted(sent)

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker)
    try:
        committed = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    assert sum(committed[TopicPartition(topic, p)].offset for p in range(3)) == len(sent)


def test_confluent_kafka_produces_and_a_group_consumes(kafka_broker: str) -> None:
    topic = unique("ck")
    producer = Producer({"bootstrap.servers": kafka_broker, "enable.idempotence": True})
    for i in range(20):
        producer.produce(topic, f"value-{i}".encode(), key=str(i % 4).encode())
    assert producer.flush(20) == 0

    consumer = Consumer({"bootstrap.servers": kafka_broker, "group.id": unique("group"),
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        for _ in range(200):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) == 20:
                break
        assert sorted(got) == sorted(f"value-{i}".encode() for i in range(20))
        assert consumer.assignment(), "the group assigned the partition"
    finally:
        consumer.close()


@pytest.mark.kafka_broker_config({"num.partitions": "4"})
def test_a_marker_sets_the_broker_config(kafka_broker: str) -> None:
    topic = unique("auto")
    producer = KafkaProducer(bootstrap_servers=kafka_broker)
    producer.send(topic, b"creates the topic").get(timeout=20)
    assert producer.partitions_for(topic) == {0, 1, 2, 3}
    producer.close()


async def test_under_pytest_trio(kafka_broker: str) -> None:
    """The broker's event loop is not the test's: a trio test may block on a helper and
    run a stock client on a worker thread."""
    topic = unique("trio")
    kafka_broker.create_topic(topic)  # type: ignore[attr-defined]

    def produce() -> int:
        producer = KafkaProducer(bootstrap_servers=kafka_broker)
        try:
            return producer.send(topic, b"from trio").get(timeout=20).offset
        finally:
            producer.close()

    assert await trio.to_thread.run_sync(produce) == 0
    got = await trio.to_thread.run_sync(consume_kafka_python, kafka_broker, topic,
                                        unique("g"), 1)
    assert got == [b"from trio"]


def test_beside_an_asyncio_loop(kafka_broker: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = unique("asyncio")

    async def roundtrip() -> bytes:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from asyncio")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_broker,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            return (await asyncio.wait_for(consumer.getone(), 20)).value
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == b"from asyncio"


def test_transactions_work_on_the_one_broker(kafka_broker: str) -> None:
    """A transactional producer commits and a read_committed consumer reads it, with no
    broker configuration in the test."""
    topic = unique("txn")
    producer = Producer({"bootstrap.servers": kafka_broker, "transactional.id": unique("tx")})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(20)

    consumer = Consumer({"bootstrap.servers": kafka_broker, "group.id": unique("group"),
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        consumer.subscribe([topic])
        got = consumer.consume(1, timeout=20)
        assert [m.value() for m in got] == [b"committed"]
    finally:
        consumer.close()
