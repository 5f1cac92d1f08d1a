"""Transactions from Apache Kafka's Java client: its transactional producer commits and aborts.

Kafka's ``TransactionalMessageCopier`` (the tool of Kafka's own exactly-once system
tests) consumes an input partition with a read_committed Java consumer and copies each
poll to an output topic inside one transaction, committing the consumed offsets with
``sendOffsetsToTransaction(offsets, consumer.groupMetadata())``. With
``--enable-random-aborts`` a third of its transactions are aborted (records and offsets
both) and re-copied from the last committed offset.

Proved here: the copier finishes, a read_committed consumer of the output sees every
input value exactly once and in order, the group's committed offset is the input's end,
the output log holds at least one abort marker (so Java aborts reached the broker) and
at least one commit marker per ten records, and a read_uncommitted consumer sees every
input value and at least as many records. Whether an aborted transaction's records
reach the log first is the client's timing: the Java producer drops batches it has not
sent yet when it aborts, so on a fast broker the read_uncommitted count may be exactly
the input's (seen on josefk) or well above it (seen on Kafka).

The copier does not print how many transactions it aborted, hence the markers. With ten
records per transaction there are at least fifty transactions, so the chance of no
abort at all is (2/3)**50, about 2e-9. (Run by hand without ``--enable-random-aborts``,
the copier wrote no abort marker on josefk.) Any KafkaException (a broker error) would
also make it abort and retry silently, so the exactly-once checks, not the abort count,
are what catch a broker bug.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import pytest
from kafka.record.default_records import ControlRecord
from kafka.record.memory_records import MemoryRecords

from .clients import Rec, confluent_consumer, confluent_poll, produce
from .conftest import Broker
from .rawkafka import RawConnection
from .test_java_tools import run_tool

COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
RECORDS = 500
PER_TXN = 10
COPIER_TIMEOUT = 150.0


def read_values(
    broker: Broker, topic: str, isolation: str, count: int, timeout: float = 30.0
) -> list[bytes | None]:
    """``count`` values (plus any that turn up within two seconds) from offset 0."""
    consumer = confluent_consumer(broker.bootstrap, **{"isolation.level": isolation})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got = confluent_poll(consumer, count, timeout)
        got += confluent_poll(consumer, 1_000_000, 2.0)
        return [g.value for g in got]
    finally:
        consumer.close()


def markers(broker: Broker, topic: str) -> Counter[str]:
    """Control records of partition 0, counted by kind ("commit"/"abort")."""
    kinds: Counter[str] = Counter()
    with RawConnection(broker.bootstrap) as conn:
        offset = 0
        while True:
            got = conn.fetch(topic, 0, offset)
            assert got.error_code == 0, got
            if offset >= got.high_watermark:
                return kinds
            memory = MemoryRecords(got.records)
            advanced = False
            while (batch := memory.next_batch()) is not None:
                advanced = True
                offset = batch.next_offset
                if batch.is_control_batch:
                    for rec in batch:
                        assert isinstance(rec, ControlRecord)
                        kinds["abort" if rec.abort else "commit"] += 1
            assert advanced, f"Fetch {topic}-0@{offset} returned no batch"


@pytest.mark.timeout(300)
def test_java_transactional_copier_commits_and_aborts(
    broker: Broker, make_topic: Callable[..., str], kafka_tools: Path
) -> None:
    source = make_topic()
    sink = make_topic()
    group = f"compat-java-txn-{uuid.uuid4().hex[:8]}"
    txn_id = f"compat-java-txn-{uuid.uuid4().hex[:8]}"
    values = [f"value-{i:04d}".encode() for i in range(RECORDS)]
    produce(broker.bootstrap, source, [Rec(f"k{i}".encode(), v) for i, v in enumerate(values)])

    done = run_tool(
        kafka_tools,
        COPIER,
        "--broker-list",
        broker.bootstrap,
        "--input-topic",
        source,
        "--input-partition",
        "0",
        "--output-topic",
        sink,
        "--consumer-group",
        group,
        "--transactional-id",
        txn_id,
        "--transaction-size",
        str(PER_TXN),
        "--transaction-timeout",
        "30000",
        "--max-messages",
        str(RECORDS),
        "--enable-random-aborts",
        "--use-group-metadata",
        timeout=COPIER_TIMEOUT,
    )
    status = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    # The last line is the shutdown status ("stage": "ShutdownComplete"; older
    # copiers print a "shutdown_complete" key instead).
    shutdown = status[-1]
    assert shutdown.get("stage") == "ShutdownComplete" or "shutdown_complete" in shutdown, (
        done.stdout[-2000:]
    )
    assert shutdown["totalProcessed"] == RECORDS, done.stdout[-2000:]
    assert shutdown["remaining"] == 0, shutdown

    # Exactly once: every input value once, in order; aborted copies are invisible.
    assert read_values(broker, sink, "read_committed", RECORDS) == values
    # Aborted copies are in the log, skipped only by read_committed.
    uncommitted = read_values(broker, sink, "read_uncommitted", RECORDS)
    assert len(uncommitted) >= RECORDS
    assert set(uncommitted) == set(values)
    kinds = markers(broker, sink)
    assert kinds["abort"] >= 1, kinds
    assert kinds["commit"] >= RECORDS // PER_TXN, kinds

    # The offsets went in with the transactions: the group committed the input's end.
    consumer = confluent_consumer(broker.bootstrap, **{"group.id": group})
    try:
        [committed] = consumer.committed([confluent_kafka.TopicPartition(source, 0)], timeout=15)
    finally:
        consumer.close()
    assert committed.error is None and committed.offset == RECORDS, committed
