"""Two corners of transactions, as Kafka answers them.

- A produce request whose transactional batches come from more than one producer id is
  refused with INVALID_PRODUCER_ID_MAPPING (Kafka's ``handleProduceAppend`` throws
  InvalidPidMappingException), and nothing of it is appended.
- Of a transactional offset commit (``send_offsets_to_transaction``) and a plain one of
  the same group and partition, the one whose record is later in ``__consumer_offsets``
  is the group's offset once the transaction commits (Kafka's
  ``replayEndTransactionMarker``): a plain commit made while the transaction is open wins;
  one made before the transactional record loses.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from .clients import confluent_consumer
from .conftest import Broker
from .rawkafka import RawConnection
from .test_transactions import (
    INVALID_PRODUCER_ID_MAPPING,
    TXN_TIMEOUT,
    _init_txn,
    _until_settled,
    committed_offset,
    producer,
    send,
    watermarks,
)

TopicData = ProduceRequest.TopicProduceData
PartitionData = TopicData.PartitionProduceData


def txn_batch(pid: int, epoch: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=pid,
        producer_epoch=epoch, base_sequence=0, batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
    return bytes(builder.build())


def plain_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
    return bytes(builder.build())


def test_batches_of_two_producer_ids_in_one_produce(
    broker: Broker, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=3)
    first, second = (f"compat-txn-pids-{uuid.uuid4().hex[:8]}" for _ in range(2))
    with RawConnection(broker.bootstrap, timeout=20.0) as conn:
        find = conn.pick_version(FindCoordinatorRequest, 1, 3)
        for txn_id in (first, second):
            _until_settled(lambda txn_id=txn_id: conn.request(
                FindCoordinatorRequest(key=txn_id, key_type=1), find), "FindCoordinator")
        a, b = _init_txn(conn, first), _init_txn(conn, second)
        assert (a.error_code, b.error_code) == (0, 0)
        assert a.producer_id != b.producer_id
        request = ProduceRequest(
            transactional_id=first, acks=-1, timeout_ms=15_000,
            topic_data=[TopicData(name=topic, partition_data=[
                PartitionData(index=0, records=txn_batch(a.producer_id, a.producer_epoch)),
                PartitionData(index=1, records=txn_batch(b.producer_id, b.producer_epoch)),
                PartitionData(index=2, records=plain_batch()),
            ])])
        version = conn.pick_version(ProduceRequest, 9, 11)
        [answer] = conn.request(request, version).responses
        # The whole request is refused, the plain batch too.
        assert {p.index: p.error_code for p in answer.partition_responses} == dict.fromkeys(
            range(3), INVALID_PRODUCER_ID_MAPPING)
    for p in range(3):
        assert watermarks(broker, topic, "read_uncommitted", p) == (0, 0)


@pytest.mark.parametrize("plain_first", [False, True], ids=["plain-later", "plain-earlier"])
def test_later_record_of_plain_and_transactional_commit_wins(
    broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient, plain_first: bool
) -> None:
    topic = make_topic()
    group = f"compat-txn-mixed-{uuid.uuid4().hex[:8]}"
    txn_id = f"compat-txn-mixed-{uuid.uuid4().hex[:8]}"
    consumer = confluent_consumer(broker.bootstrap, **{"group.id": group})
    tp = confluent_kafka.TopicPartition
    try:
        metadata = consumer.consumer_group_metadata()

        def plain_commit() -> None:
            consumer.commit(offsets=[tp(topic, 0, 10)], asynchronous=False)

        p = producer(broker, txn_id)
        if plain_first:
            plain_commit()
        p.begin_transaction()
        send(p, topic, [b"out"])
        p.send_offsets_to_transaction([tp(topic, 0, 5)], metadata, TXN_TIMEOUT)
        if not plain_first:
            plain_commit()
            # The transaction is open: its offset is not the group's yet (asked without
            # require_stable, which would wait for the transaction).
            offsets = admin.list_group_offsets(group)[group]
            assert offsets[TopicPartition(topic, 0)].offset == 10
        p.commit_transaction(TXN_TIMEOUT)
    finally:
        consumer.close()
    expected = 5 if plain_first else 10
    deadline = time.monotonic() + 15
    while (got := committed_offset(broker, group, topic)) != expected:
        assert time.monotonic() < deadline, f"committed offset {got}, expected {expected}"
        time.sleep(0.2)
