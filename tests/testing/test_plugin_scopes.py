"""Fixture scopes: a module's tests share ``kafka_broker_module`` (and its data), and
``kafka_broker`` is a new broker per test."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from josefk.testing.plugin import broker_fixture

TOPIC = "shared-by-the-module"
seen: dict[str, str] = {}

# A module-scoped broker of another configuration, through the factory.
three_partitions = broker_fixture("module", config={"num.partitions": "3"})


def test_first_writes_to_the_module_broker(kafka_broker_module: str, kafka_broker: str) -> None:
    seen["module"], seen["function"] = kafka_broker_module, kafka_broker
    producer = KafkaProducer(bootstrap_servers=kafka_broker_module)
    producer.send(TOPIC, b"written by the first test").get(timeout=20)
    producer.close()


def test_second_reads_what_the_first_wrote(kafka_broker_module: str, kafka_broker: str) -> None:
    assert kafka_broker_module == seen["module"]
    assert kafka_broker != seen["function"]
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker_module, consumer_timeout_ms=20_000)
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.seek_to_beginning()
        assert next(iter(consumer)).value == b"written by the first test"
    finally:
        consumer.close()


def test_the_session_broker_is_another_one(kafka_broker_session: str,
                                           kafka_broker_module: str) -> None:
    assert kafka_broker_session != kafka_broker_module
    producer = KafkaProducer(bootstrap_servers=kafka_broker_session)
    producer.send("session-topic", b"x").get(timeout=20)
    producer.close()


def test_a_factory_fixture_has_its_own_config(three_partitions: str) -> None:
    producer = KafkaProducer(bootstrap_servers=three_partitions)
    producer.send("auto-created", b"x").get(timeout=20)
    assert producer.partitions_for("auto-created") == {0, 1, 2}
    producer.close()
