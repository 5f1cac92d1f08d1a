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
- Bad input (raw requests): an unknown producer id, a fenced epoch, an EndTxn with no
  transaction ongoing, a timeout over ``transaction.max.timeout.ms`` and a TxnOffsetCommit
  outside the transaction get Kafka's error codes, and no record or offset is written.
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
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
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


# --- bad input: Kafka's error codes, and nothing written -------------------------------------

INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120
# Coordinator loading / not available / not this broker yet, a transition completing.
SETTLING = (14, 15, 16, 51)


def _settled_code(call: Callable[[], int]) -> int:
    """``call()``'s error code, asked again while it is one of ``SETTLING``."""
    deadline = time.monotonic() + 30
    while True:
        error = call()
        if error not in SETTLING or time.monotonic() > deadline:
            return error
        time.sleep(0.2)


def _init_txn(conn: RawConnection, txn_id: str, timeout_ms: int = 60_000) -> Any:
    """InitProducerId (v3..v4) for ``txn_id``; the response, whatever its error."""
    version = conn.pick_version(InitProducerIdRequest, 3, 4)
    deadline = time.monotonic() + 30
    while True:
        response = conn.request(InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=timeout_ms, producer_id=-1,
            producer_epoch=-1), version)
        # Loading / not yet created coordinator, or a concurrent transition settling.
        if response.error_code not in SETTLING or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def _add_partition(conn: RawConnection, txn_id: str, pid: int, epoch: int, topic: str,
                   version: int = 3) -> int:
    """AddPartitionsToTxn (v0..v3) of ``topic``-0: its partition's error code."""
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
            name=topic, partitions=[0])])

    def once() -> int:
        [added] = conn.request(add, version).results_by_topic_v3_and_below
        [p] = added.results_by_partition
        return int(p.partition_error_code)

    return _settled_code(once)


def _end_txn(conn: RawConnection, txn_id: str, pid: int, epoch: int, commit: bool,
             version: int = 3) -> int:
    """EndTxn (v0..v4): its error code."""
    return _settled_code(lambda: int(conn.request(EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
        committed=commit), version).error_code))


def _add_offsets(conn: RawConnection, txn_id: str, pid: int, epoch: int, group: str) -> int:
    return _settled_code(lambda: int(conn.request(AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group),
        3).error_code))


def _txn_offset_commit(conn: RawConnection, txn_id: str, pid: int, epoch: int, group: str,
                       topic: str, version: int = 3) -> int:
    """TxnOffsetCommit (v0..v4) of offset 0 of ``topic``-0 for ``group``: its error code."""
    part = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=0, committed_leader_epoch=-1,
        committed_metadata="")
    request = TxnOffsetCommitRequest(
        transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic,
                                                                   partitions=[part])])

    def once() -> int:
        [t] = conn.request(request, version).topics
        [p] = t.partitions
        return int(p.error_code)

    return _settled_code(once)


def test_bad_input_gets_kafkas_error_codes(broker: Broker, topic: str, txn_id: str) -> None:
    ts = int(time.time() * 1000)
    with RawConnection(broker.bootstrap, timeout=20.0) as conn:
        _until_settled(lambda: conn.request(FindCoordinatorRequest(key=txn_id, key_type=1),
                                            conn.pick_version(FindCoordinatorRequest, 1, 3)),
                       "FindCoordinator")
        # A transaction timeout over transaction.max.timeout.ms (900000 by default).
        over = _init_txn(conn, txn_id, timeout_ms=900_001)
        assert over.error_code == INVALID_TRANSACTION_TIMEOUT, over
        assert _init_txn(conn, txn_id, timeout_ms=0).error_code == INVALID_TRANSACTION_TIMEOUT

        # An unknown transactional id, and a known one with a producer id not its own.
        unknown = f"{txn_id}-unknown"
        assert _add_partition(conn, unknown, 123_456, 0, topic) == INVALID_PRODUCER_ID_MAPPING
        assert _end_txn(conn, unknown, 123_456, 0, True) == INVALID_PRODUCER_ID_MAPPING
        assert _add_offsets(conn, unknown, 123_456, 0, "g") == INVALID_PRODUCER_ID_MAPPING
        first = _init_txn(conn, txn_id)
        assert first.error_code == 0, first
        pid, old_epoch = first.producer_id, first.producer_epoch
        assert _add_partition(conn, txn_id, pid + 1, old_epoch, topic) == \
            INVALID_PRODUCER_ID_MAPPING
        assert _end_txn(conn, txn_id, pid + 1, old_epoch, False) == INVALID_PRODUCER_ID_MAPPING

        # EndTxn with no transaction ongoing (Empty).
        assert _end_txn(conn, txn_id, pid, old_epoch, True) == INVALID_TXN_STATE
        assert _end_txn(conn, txn_id, pid, old_epoch, False) == INVALID_TXN_STATE

        # A newer InitProducerId fences the older epoch.
        second = _init_txn(conn, txn_id)
        assert second.error_code == 0, second
        assert second.producer_id == pid and second.producer_epoch == old_epoch + 1, second
        epoch = second.producer_epoch
        assert _add_partition(conn, txn_id, pid, old_epoch, topic) == PRODUCER_FENCED
        assert _add_partition(conn, txn_id, pid, old_epoch, topic, version=1) == \
            INVALID_PRODUCER_EPOCH
        assert _end_txn(conn, txn_id, pid, old_epoch, True) == PRODUCER_FENCED
        assert _end_txn(conn, txn_id, pid, old_epoch, True, version=1) == \
            INVALID_PRODUCER_EPOCH
        assert _add_offsets(conn, txn_id, pid, old_epoch, "g") == PRODUCER_FENCED

        # A transaction that wrote nothing: a commit, its retry (idempotent), then an
        # abort, which the completed commit refuses.
        assert _add_partition(conn, txn_id, pid, epoch, topic) == 0
        assert _end_txn(conn, txn_id, pid, epoch, True) == 0
        assert _end_txn(conn, txn_id, pid, epoch, True) == 0
        assert _end_txn(conn, txn_id, pid, epoch, False) == INVALID_TXN_STATE

        # A produce with the fenced epoch is refused and appends nothing.
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=True, producer_id=pid,
            producer_epoch=old_epoch, base_sequence=0, batch_size=1 << 20)
        builder.append(0, timestamp=ts, key=None, value=b"stale", headers=[])
        stale = bytes(builder.build())
        assert _produce_txn(conn, txn_id, topic, stale, 9) == INVALID_PRODUCER_EPOCH
        assert _produce_txn(conn, txn_id, topic, stale, 11) == INVALID_PRODUCER_EPOCH

        # TxnOffsetCommit: the group coordinator verifies with the transaction coordinator
        # (KIP-890 part 1); a fenced epoch is INVALID_PRODUCER_EPOCH as for Produce.
        group = f"{txn_id}-group"
        _until_settled(lambda: conn.request(FindCoordinatorRequest(key=group, key_type=0),
                                            conn.pick_version(FindCoordinatorRequest, 1, 3)),
                       "FindCoordinator group")
        assert _txn_offset_commit(conn, unknown, 123_456, 0, group, topic) == \
            INVALID_PRODUCER_ID_MAPPING
        assert _txn_offset_commit(conn, txn_id, pid, old_epoch, group, topic) == \
            INVALID_PRODUCER_EPOCH
        # The group's partition of __consumer_offsets is not in the transaction (no
        # AddOffsetsToTxn): TRANSACTION_ABORTABLE from TxnOffsetCommit v4 (KIP-890).
        assert _txn_offset_commit(conn, txn_id, pid, epoch, group, topic, 0) == \
            INVALID_TXN_STATE
        assert _txn_offset_commit(conn, txn_id, pid, epoch, group, topic, 3) == \
            INVALID_TXN_STATE
        assert _txn_offset_commit(conn, txn_id, pid, epoch, group, topic, 4) == \
            TRANSACTION_ABORTABLE

    # Only the COMMIT marker of the empty transaction may be in the log: no record.
    deadline = time.monotonic() + 30
    while watermarks(broker, topic, "read_committed") != \
            watermarks(broker, topic, "read_uncommitted"):
        assert time.monotonic() < deadline, "the last stable offset never caught up"
        time.sleep(0.2)
    assert read_all(broker, topic, "read_uncommitted", 0) == []
    assert read_all(broker, topic, "read_committed", 0) == []
    assert committed_offset(broker, group, topic) < 0  # no offset committed
