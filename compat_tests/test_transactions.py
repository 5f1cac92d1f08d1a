"""Transactions through confluent-kafka (librdkafka), as Apache Kafka serves them.

- A transactional producer commits and aborts; a read_committed consumer sees exactly
  the committed records, a read_uncommitted one every data record.
- ``send_offsets_to_transaction`` moves a group's offsets only when the transaction
  commits.
- A second producer with the same transactional.id fences the first, whose open
  transaction is aborted.
- A transaction left open past ``transaction.timeout.ms`` is aborted by the coordinator
  and the last stable offset moves past it.
- A broker SIGKILLed between the first send and the commit comes back with the
  transaction committable or aborted, never half visible.
- Kafka's ``kafka-transactions.sh`` lists, describes, finds hanging transactions and
  aborts one partition's open transaction.
- KIP-890 part 1: a transactional produce to a partition not added to the transaction
  is refused by the leader, which asks the coordinator.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from .clients import confluent_consumer, confluent_poll
from .conftest import Broker
from .rawkafka import RawConnection
from .test_java_tools import run_tool

TXN_TIMEOUT = 60.0
TopicData = ProduceRequest.TopicProduceData
PartitionData = TopicData.PartitionProduceData
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


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


def read_all_partitions(broker: Broker, topic: str, partitions: int, isolation: str,
                        count: int, timeout: float = 20.0) -> list[bytes]:
    """The values of every partition (``count`` expected, plus any that turn up within
    a second)."""
    consumer = confluent_consumer(broker.bootstrap, **{"isolation.level": isolation})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0)
                         for p in range(partitions)])
        got = confluent_poll(consumer, count, timeout)
        got += confluent_poll(consumer, 1, 1.0)
        values = [g.value for g in got]
        assert len(values) == len(set(values)), values
        return values
    finally:
        consumer.close()


def watermarks(broker: Broker, topic: str, isolation: str,
               partition: int = 0) -> tuple[int, int]:
    consumer = confluent_consumer(broker.bootstrap, **{"isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, partition),
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


def end_offsets(broker: Broker, topic: str, partitions: int) -> tuple[list[int], list[int]]:
    """(LSOs, high watermarks) of the topic's partitions."""
    return ([watermarks(broker, topic, "read_committed", p)[1] for p in range(partitions)],
            [watermarks(broker, topic, "read_uncommitted", p)[1] for p in range(partitions)])


@pytest.mark.timeout(240)
def test_sigkill_between_send_and_commit(owned_broker: Broker, make_topic: Callable[..., str],
                                         txn_id: str) -> None:
    topic = make_topic(partitions=2)
    p = producer(owned_broker, txn_id, **{"transaction.timeout.ms": 30_000})
    p.begin_transaction()
    for partition in (0, 1):
        p.produce(topic, value=f"before-{partition}".encode(), partition=partition)
    p.commit_transaction(TXN_TIMEOUT)
    p.begin_transaction()
    inflight = {f"inflight-{partition}-{i}".encode() for partition in (0, 1) for i in range(3)}
    for value in sorted(inflight):
        p.produce(topic, value=value, partition=int(value.split(b"-")[1]))
    assert p.flush(TXN_TIMEOUT) == 0

    owned_broker.restart(kill=True)

    committed = False
    try:
        p.commit_transaction(TXN_TIMEOUT)
        committed = True
    except confluent_kafka.KafkaException as e:
        if e.args[0].txn_requires_abort():
            with contextlib.suppress(confluent_kafka.KafkaException):
                p.abort_transaction(TXN_TIMEOUT)
    # Whatever the producer managed, the coordinator ends the transaction (at the latest
    # past its timeout): markers on both partitions, the LSO at the log end.
    deadline = time.monotonic() + 120
    while True:
        with contextlib.suppress(confluent_kafka.KafkaException):  # still starting
            lsos, ends = end_offsets(owned_broker, topic, 2)
            if lsos == ends or time.monotonic() > deadline:
                break
        assert time.monotonic() < deadline, "the broker did not come back"
        time.sleep(0.5)
    # before, COMMIT, three in-flight records, COMMIT or ABORT
    assert (lsos, ends) == ([6, 6], [6, 6])
    visible = set(read_all_partitions(owned_broker, topic, 2, "read_committed", 8))
    before = {b"before-0", b"before-1"}
    assert visible in (before, before | inflight), visible
    if committed:
        assert visible == before | inflight
    assert set(read_all_partitions(owned_broker, topic, 2, "read_uncommitted", 8)) == (
        before | inflight)

    # The transactional id goes on working.
    again = producer(owned_broker, txn_id)
    again.begin_transaction()
    again.produce(topic, value=b"after", partition=0)
    again.commit_transaction(TXN_TIMEOUT)
    assert set(read_all_partitions(owned_broker, topic, 2, "read_committed",
                                   len(visible) + 1)) == visible | {b"after"}


# --- kafka-transactions.sh ---------------------------------------------------------------------


def transactions_tool(run_class: Path, broker: Broker, *args: str) -> list[dict[str, str]]:
    """Run ``kafka-transactions.sh`` (Kafka's TransactionsCommand): its table's rows."""
    done = run_tool(run_class, TRANSACTIONS_COMMAND, "--bootstrap-server", broker.bootstrap,
                    *args)
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    if not lines:
        return []
    header, *rows = lines
    return [dict(zip(header, row, strict=False)) for row in rows]


@pytest.mark.timeout(300)
def test_kafka_transactions_tool(broker: Broker, topic: str, txn_id: str,
                                 kafka_tools: Path) -> None:
    p = producer(broker, txn_id, **{"transaction.timeout.ms": 120_000})
    p.begin_transaction()
    send(p, topic, [b"stuck1", b"stuck2"])

    [producer_state] = transactions_tool(kafka_tools, broker, "describe-producers",
                                         "--topic", topic, "--partition", "0")
    pid = producer_state["ProducerId"]
    assert producer_state["CurrentTransactionStartOffset"] == "0", producer_state

    listed = [row for row in transactions_tool(kafka_tools, broker, "list")
              if row["TransactionalId"] == txn_id]
    assert [(r["ProducerId"], r["TransactionState"]) for r in listed] == [(pid, "Ongoing")]

    [described] = transactions_tool(kafka_tools, broker, "describe",
                                    "--transactional-id", txn_id)
    assert (described["ProducerId"], described["TransactionState"],
            described["TopicPartitions"]) == (pid, "Ongoing", f"{topic}-0"), described

    # Open, but its coordinator knows the partition: not hanging.
    assert transactions_tool(kafka_tools, broker, "find-hanging", "--topic", topic,
                             "--max-transaction-timeout", "0") == []

    # The admin client writes the ABORT marker itself (WriteTxnMarkers to the leader).
    transactions_tool(kafka_tools, broker, "abort", "--topic", topic, "--partition", "0",
                      "--start-offset", "0")
    assert watermarks(broker, topic, "read_committed") == (0, 3)
    assert read_all(broker, topic, "read_committed", 0) == []
    [after] = transactions_tool(kafka_tools, broker, "describe-producers",
                                "--topic", topic, "--partition", "0")
    assert after["CurrentTransactionStartOffset"] == "None", after

    # The producer's own abort adds a second marker, and nothing else.
    p.abort_transaction(TXN_TIMEOUT)
    assert watermarks(broker, topic, "read_committed") == (0, 4)
    assert read_all(broker, topic, "read_uncommitted", 2) == [b"stuck1", b"stuck2"]


# --- KIP-890 part 1: the partition leader verifies with the coordinator -----------------------


def _until_settled(call: Callable[[], Any], what: str) -> Any:
    """``call()`` again while the coordinator is loading or being created (14, 15, 16)."""
    deadline = time.monotonic() + 30
    while True:
        response = call()
        if response.error_code not in (14, 15, 16) or time.monotonic() > deadline:
            assert response.error_code == 0, (what, response)
            return response
        time.sleep(0.2)


def _produce_txn(conn: RawConnection, txn_id: str, topic: str, batch: bytes,
                 version: int) -> int:
    request = ProduceRequest(
        transactional_id=txn_id, acks=-1, timeout_ms=15_000,
        topic_data=[TopicData(name=topic, partition_data=[PartitionData(index=0,
                                                                        records=batch)])])
    deadline = time.monotonic() + 30
    while True:
        [topic_response] = conn.request(request, version).responses
        [p] = topic_response.partition_responses
        # NOT_ENOUGH_REPLICAS: the leader could not reach a settled coordinator yet.
        if p.error_code != 19 or time.monotonic() > deadline:
            return p.error_code
        time.sleep(0.2)


def test_produce_outside_the_transaction_is_refused(broker: Broker, topic: str,
                                                    txn_id: str) -> None:
    ts = int(time.time() * 1000)
    with RawConnection(broker.bootstrap, timeout=20.0) as conn:
        find = conn.pick_version(FindCoordinatorRequest, 1, 3)
        _until_settled(lambda: conn.request(
            FindCoordinatorRequest(key=txn_id, key_type=1), find), "FindCoordinator")
        init = conn.pick_version(InitProducerIdRequest, 0, 4)
        response = _until_settled(lambda: conn.request(InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1), init), "InitProducerId")
        pid, epoch = response.producer_id, response.producer_epoch

        def batch(seq: int) -> bytes:
            builder = DefaultRecordBatchBuilder(
                magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
            builder.append(0, timestamp=ts, key=None, value=b"txn", headers=[])
            return bytes(builder.build())

        # Not added to the transaction: INVALID_TXN_STATE before Produce v11,
        # TRANSACTION_ABORTABLE from v11 (KIP-890), and nothing appended.
        assert _produce_txn(conn, txn_id, topic, batch(0), 9) == 48
        assert _produce_txn(conn, txn_id, topic, batch(0), 11) == 120
        assert watermarks(broker, topic, "read_uncommitted") == (0, 0)

        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                name=topic, partitions=[0])])
        [added] = conn.request(add, 3).results_by_topic_v3_and_below
        assert [p.partition_error_code for p in added.results_by_partition] == [0]
        assert _produce_txn(conn, txn_id, topic, batch(0), 9) == 0
        assert _produce_txn(conn, txn_id, topic, batch(1), 9) == 0
        end = EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                            committed=False)
        assert conn.request(end, 3).error_code == 0
    deadline = time.monotonic() + 30
    while watermarks(broker, topic, "read_committed") != (0, 3):
        assert time.monotonic() < deadline, "the ABORT marker never came"
        time.sleep(0.2)
    assert read_all(broker, topic, "read_committed", 0) == []
