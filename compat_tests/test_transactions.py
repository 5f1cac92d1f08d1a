"""Transactions through confluent-kafka (librdkafka), as Apache Kafka serves them.

- A transactional producer commits and aborts; a read_committed consumer sees exactly
  the committed records, a read_uncommitted one every data record.
- ``send_offsets_to_transaction`` moves a group's offsets only when the transaction
  commits.
- A second producer with the same transactional.id fences the first, whose open
  transaction is aborted.
- A transaction left open past ``transaction.timeout.ms`` is aborted by the coordinator
  and the last stable offset moves past it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import confluent_kafka
import pytest

from .clients import confluent_consumer, confluent_poll
from .conftest import Broker

TXN_TIMEOUT = 60.0


def producer(broker: Broker, transactional_id: str, **config: object) -> confluent_kafka.Producer:
    settings: dict[str, object] = {"bootstrap.servers": broker.bootstrap,
                                   "transactional.id": transactional_id,
                                   "client.id": "compat-txn"}
    settings.update(config)
    p = confluent_kafka.Producer(settings)
    p.init_transactions(TXN_TIMEOUT)
    return p


def send(p: confluent_kafka.Producer, topic: str, values: list[bytes]) -> None:
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(TXN_TIMEOUT) == 0


def read_all(broker: Broker, topic: str, isolation: str, count: int,
             timeout: float = 20.0) -> list[bytes]:
    consumer = confluent_consumer(broker.bootstrap, **{"isolation.level": isolation})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got = confluent_poll(consumer, count, timeout)
        # Anything past ``count`` would be a record that should not be there.
        got += confluent_poll(consumer, 1, 1.0)
        return [g.value for g in got]
    finally:
        consumer.close()


def watermarks(broker: Broker, topic: str, isolation: str) -> tuple[int, int]:
    consumer = confluent_consumer(broker.bootstrap, **{"isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                              timeout=10, cached=False)
    finally:
        consumer.close()


@pytest.fixture
def txn_id() -> str:
    return f"compat-txn-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def topic(make_topic: Callable[..., str]) -> str:
    return make_topic()


def test_commit_and_abort(broker: Broker, topic: str, txn_id: str) -> None:
    p = producer(broker, txn_id)
    p.begin_transaction()
    send(p, topic, [b"c1", b"c2", b"c3"])
    p.commit_transaction(TXN_TIMEOUT)
    p.begin_transaction()
    send(p, topic, [b"a1", b"a2"])
    p.abort_transaction(TXN_TIMEOUT)
    p.begin_transaction()
    send(p, topic, [b"c4"])
    p.commit_transaction(TXN_TIMEOUT)

    assert read_all(broker, topic, "read_committed", 4) == [b"c1", b"c2", b"c3", b"c4"]
    assert read_all(broker, topic, "read_uncommitted", 6) == [
        b"c1", b"c2", b"c3", b"a1", b"a2", b"c4"]
    # Three markers after six records: the LSO is the log end.
    assert watermarks(broker, topic, "read_committed") == (0, 9)


def test_open_transaction_holds_the_lso(broker: Broker, topic: str, txn_id: str) -> None:
    p = producer(broker, txn_id)
    p.begin_transaction()
    send(p, topic, [b"open"])
    assert watermarks(broker, topic, "read_uncommitted") == (0, 1)
    assert watermarks(broker, topic, "read_committed") == (0, 0)
    assert read_all(broker, topic, "read_committed", 0) == []
    p.commit_transaction(TXN_TIMEOUT)
    assert read_all(broker, topic, "read_committed", 1) == [b"open"]


def committed_offset(broker: Broker, group: str, topic: str) -> int:
    consumer = confluent_consumer(broker.bootstrap, **{"group.id": group})
    try:
        [tp] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=15)
        return tp.offset
    finally:
        consumer.close()


def test_send_offsets_to_transaction(broker: Broker, topic: str, txn_id: str) -> None:
    group = f"compat-txn-group-{uuid.uuid4().hex[:8]}"
    source = confluent_consumer(broker.bootstrap, **{"group.id": group})
    try:
        metadata = source.consumer_group_metadata()
        p = producer(broker, txn_id)
        p.begin_transaction()
        send(p, topic, [b"out1"])
        p.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, 0, 5)], metadata,
                                      TXN_TIMEOUT)
        p.abort_transaction(TXN_TIMEOUT)
        assert committed_offset(broker, group, topic) == confluent_kafka.OFFSET_INVALID

        p.begin_transaction()
        send(p, topic, [b"out2"])
        p.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, 0, 7)], metadata,
                                      TXN_TIMEOUT)
        p.commit_transaction(TXN_TIMEOUT)
        assert committed_offset(broker, group, topic) == 7
    finally:
        source.close()
    assert read_all(broker, topic, "read_committed", 1) == [b"out2"]


def test_second_producer_fences_the_first(broker: Broker, topic: str, txn_id: str) -> None:
    first = producer(broker, txn_id)
    first.begin_transaction()
    send(first, topic, [b"zombie"])
    second = producer(broker, txn_id)
    with pytest.raises(confluent_kafka.KafkaException) as info:
        first.commit_transaction(TXN_TIMEOUT)
    error = info.value.args[0]
    assert error.fatal() or error.code() in (
        confluent_kafka.KafkaError._FENCED, confluent_kafka.KafkaError.PRODUCER_FENCED,
        confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH), error
    second.begin_transaction()
    send(second, topic, [b"winner"])
    second.commit_transaction(TXN_TIMEOUT)
    assert read_all(broker, topic, "read_committed", 1) == [b"winner"]
    assert read_all(broker, topic, "read_uncommitted", 2) == [b"zombie", b"winner"]


@pytest.mark.timeout(120)
def test_hanging_transaction_is_aborted(broker: Broker, topic: str, txn_id: str) -> None:
    # The coordinator looks for timed-out transactions every 10 s (Kafka's default).
    p = producer(broker, txn_id, **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    send(p, topic, [b"hanging"])
    assert watermarks(broker, topic, "read_committed") == (0, 0)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        low, lso = watermarks(broker, topic, "read_committed")
        if lso > 0:
            break
        time.sleep(0.5)
    assert (low, lso) == (0, 2)  # the record and the ABORT marker
    assert read_all(broker, topic, "read_committed", 0) == []
    with pytest.raises(confluent_kafka.KafkaException):
        p.commit_transaction(TXN_TIMEOUT)
