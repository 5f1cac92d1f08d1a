"""Transactions on a three-broker cluster, through confluent-kafka (librdkafka).

- A transactional producer writes to partitions led by three different brokers, commits
  and aborts; read_committed sees exactly the committed records, and every partition's
  leader holds the coordinator's COMMIT/ABORT markers (WriteTxnMarkers reached brokers
  other than the coordinator).
- The transaction coordinator (FindCoordinator key type 1) is SIGKILLed between the
  first send and the commit: after failover the transaction is committed or aborted on
  every partition, never half visible, and the transactional id goes on working.
- A transaction left open past ``transaction.timeout.ms`` is aborted on every partition.
"""

from __future__ import annotations

import contextlib
import time
import uuid

import confluent_kafka
import pytest
from kafka.record.memory_records import MemoryRecords

from ..clients import confluent_consumer, confluent_poll
from ..rawkafka import RawConnection
from .harness import Cluster, coordinator_of, wait_until

TXN_TIMEOUT = 60.0
# Partition p led by broker p + 1: markers go to all three brokers.
ASSIGNMENTS = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
PARTITIONS = tuple(ASSIGNMENTS)
TRANSACTION_KEY = 1
# A killed coordinator's partitions move after the ZooKeeper session expires; a
# transaction nobody ends is aborted past its timeout, checked every 10 s by default.
SETTLE_TIMEOUT = 90.0


def txn_producer(cluster: Cluster, transactional_id: str,
                 **config: object) -> confluent_kafka.Producer:
    settings: dict[str, object] = {"bootstrap.servers": cluster.bootstrap,
                                   "transactional.id": transactional_id,
                                   "client.id": "cluster-txn"}
    settings.update(config)
    p = confluent_kafka.Producer(settings)
    p.init_transactions(TXN_TIMEOUT)
    return p


def send(p: confluent_kafka.Producer, topic: str, prefix: str) -> list[bytes]:
    """One record to each partition; the values sent, by partition."""
    values = [f"{prefix}-p{partition}".encode() for partition in PARTITIONS]
    for partition, value in zip(PARTITIONS, values, strict=True):
        p.produce(topic, value=value, partition=partition)
    assert p.flush(TXN_TIMEOUT) == 0
    return values


def read_all(cluster: Cluster, topic: str, isolation: str, count: int,
             timeout: float = 30.0) -> set[bytes]:
    """The values of every partition a consumer at ``isolation`` reads (``count``
    expected; anything more that turns up within a second is included)."""
    consumer = confluent_consumer(cluster.bootstrap, **{"isolation.level": isolation})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in PARTITIONS])
        got = confluent_poll(consumer, count, timeout)
        got += confluent_poll(consumer, 1, 1.0)
        values = [g.value for g in got]
        assert len(values) == len(set(values)), values
        return {v for v in values if v is not None}
    finally:
        consumer.close()


def end_offsets(cluster: Cluster, topic: str, isolation: str) -> dict[int, int]:
    """Partition -> end offset (the LSO for read_committed, else the high watermark)."""
    consumer = confluent_consumer(cluster.bootstrap, **{"isolation.level": isolation})
    try:
        return {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p),
                                                  timeout=10, cached=False)[1]
                for p in PARTITIONS}
    finally:
        consumer.close()


def settled(cluster: Cluster, topic: str) -> dict[int, int] | None:
    """The end offsets once no transaction is open on any partition (LSO = high
    watermark everywhere), else None."""
    try:
        committed = end_offsets(cluster, topic, "read_committed")
        uncommitted = end_offsets(cluster, topic, "read_uncommitted")
    except confluent_kafka.KafkaException:
        return None  # a partition without a leader yet
    return uncommitted if committed == uncommitted and min(committed.values()) >= 0 else None


def control_batches(cluster: Cluster, topic: str, partition: int) -> list[int]:
    """Offsets of the control batches of a partition, as its current leader returns them."""
    leader = cluster.leader_of(topic, partition)
    with RawConnection(leader.bootstrap, timeout=10.0) as conn:
        fetched = conn.fetch(topic, partition, 0)
    assert fetched.error_code == 0, fetched
    out = []
    memory = MemoryRecords(fetched.records)
    while (batch := memory.next_batch()) is not None:
        if batch.is_control_batch:
            out.append(batch.base_offset)
    return out


def transaction_coordinator(cluster: Cluster, transactional_id: str) -> int | None:
    return coordinator_of(cluster, transactional_id, TRANSACTION_KEY)


def new_txn_id() -> str:
    return f"cluster-txn-{uuid.uuid4().hex[:10]}"


def test_commit_and_abort_across_leaders(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, assignments=ASSIGNMENTS)
    p = txn_producer(cluster, new_txn_id())
    p.begin_transaction()
    first = send(p, topic, "c1")
    p.commit_transaction(TXN_TIMEOUT)
    p.begin_transaction()
    aborted = send(p, topic, "a1")
    p.abort_transaction(TXN_TIMEOUT)
    p.begin_transaction()
    second = send(p, topic, "c2")
    p.commit_transaction(TXN_TIMEOUT)

    assert read_all(cluster, topic, "read_committed", 6) == {*first, *second}
    assert read_all(cluster, topic, "read_uncommitted", 9) == {*first, *aborted, *second}
    # record, COMMIT, record, ABORT, record, COMMIT on each partition, whoever leads it
    assert end_offsets(cluster, topic, "read_committed") == dict.fromkeys(PARTITIONS, 6)
    for partition in PARTITIONS:
        assert control_batches(cluster, topic, partition) == [1, 3, 5], partition


@pytest.mark.timeout(300)
def test_coordinator_sigkill_before_commit(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, assignments=ASSIGNMENTS)
    txn_id = new_txn_id()
    p = txn_producer(cluster, txn_id, **{"transaction.timeout.ms": 20_000})
    p.begin_transaction()
    before = send(p, topic, "before")
    p.commit_transaction(TXN_TIMEOUT)

    p.begin_transaction()
    inflight = send(p, topic, "inflight")
    coordinator = wait_until(lambda: transaction_coordinator(cluster, txn_id), 30,
                             f"the coordinator of {txn_id}")
    cluster[coordinator].kill()

    committed = False
    try:
        p.commit_transaction(TXN_TIMEOUT)
        committed = True
    except confluent_kafka.KafkaException as e:
        error = e.args[0]
        if error.txn_requires_abort():
            with contextlib.suppress(confluent_kafka.KafkaException):
                p.abort_transaction(TXN_TIMEOUT)
    # Whatever the producer managed, the coordinator now in charge ends it.
    ends = wait_until(lambda: settled(cluster, topic), SETTLE_TIMEOUT,
                      f"no open transaction on {topic}")
    # before, COMMIT, inflight, COMMIT or ABORT
    assert ends == dict.fromkeys(PARTITIONS, 4), ends
    visible = read_all(cluster, topic, "read_committed", 6, timeout=15.0)
    assert visible in ({*before}, {*before, *inflight}), visible
    if committed:
        assert visible == {*before, *inflight}
    assert read_all(cluster, topic, "read_uncommitted", 6) == {*before, *inflight}

    # The transactional id goes on working with the new coordinator.
    again = txn_producer(cluster, txn_id)
    again.begin_transaction()
    after = send(again, topic, "after")
    again.commit_transaction(TXN_TIMEOUT)
    assert read_all(cluster, topic, "read_committed", len(visible) + 3) == {*visible, *after}


@pytest.mark.timeout(180)
def test_hanging_transaction_is_aborted(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, assignments=ASSIGNMENTS)
    p = txn_producer(cluster, new_txn_id(), **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    send(p, topic, "hanging")
    assert end_offsets(cluster, topic, "read_committed") == dict.fromkeys(PARTITIONS, 0)
    began = time.monotonic()
    ends = wait_until(lambda: settled(cluster, topic), SETTLE_TIMEOUT,
                      f"the hanging transaction on {topic} aborted")
    assert ends == dict.fromkeys(PARTITIONS, 2), (ends, time.monotonic() - began)
    assert read_all(cluster, topic, "read_committed", 0, timeout=1.0) == set()
    for partition in PARTITIONS:
        assert control_batches(cluster, topic, partition) == [1], partition


def test_offsets_sent_to_a_transaction_on_another_brokers_group_coordinator(
        cluster: Cluster, topic: str) -> None:
    """Consume-transform-produce where the group's coordinator is not the transaction's:
    the offsets TxnOffsetCommit wrote become the group's committed offsets with the
    commit marker the transaction coordinator sends there, never with an abort."""
    cluster.create_topic(topic, assignments=ASSIGNMENTS)
    txn_id = new_txn_id()
    txn_coordinator = wait_until(lambda: transaction_coordinator(cluster, txn_id), 30,
                                 "a transaction coordinator")
    group = next(g for g in (f"cluster-txn-group-{i}" for i in range(200))
                 if wait_until(lambda g=g: coordinator_of(cluster, g), 30,
                               "a group coordinator") != txn_coordinator)
    consumer = confluent_consumer(cluster.bootstrap, **{"group.id": group})
    p = txn_producer(cluster, txn_id)
    try:
        tp = confluent_kafka.TopicPartition

        def committed() -> int:
            [got] = consumer.committed([tp(topic, 0)], timeout=15)
            return got.offset

        p.begin_transaction()
        send(p, topic, "aborted")
        p.send_offsets_to_transaction([tp(topic, 0, 5)], consumer.consumer_group_metadata(),
                                      TXN_TIMEOUT)
        p.abort_transaction(TXN_TIMEOUT)
        assert committed() < 0, "an aborted transaction's offsets stay uncommitted"
        p.begin_transaction()
        send(p, topic, "committed")
        p.send_offsets_to_transaction([tp(topic, 0, 7)], consumer.consumer_group_metadata(),
                                      TXN_TIMEOUT)
        p.commit_transaction(TXN_TIMEOUT)
        wait_until(lambda: committed() == 7, 30, f"group {group}'s offset of {topic}-0")
    finally:
        consumer.close()
