"""Fetch and ListOffsets with read_committed against a broker running in-process:
transactional batches and markers are appended straight through the Partition API
(the coordinator is not involved), then kafka-python's consumer reads them."""

from __future__ import annotations

import time

import trio
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.server.broker import Broker

TOPIC = "txn"
P1, P2 = 5001, 5002


def bootstrap(broker: Broker) -> str:
    return f"127.0.0.1:{broker.bound_ports[0]}"


def txn_batch(pid: int, seq: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=pid,
        producer_epoch=0, base_sequence=seq, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


def create_topic(broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(broker), request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
    finally:
        admin.close()


def read(broker: Broker, isolation: str, count: int) -> tuple[list[bytes], int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(broker), consumer_timeout_ms=3000,
                             isolation_level=isolation)
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning()
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == count:
                break
        return got, consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


async def test_read_committed_skips_aborted_and_stops_at_the_lso(broker: Broker) -> None:
    await trio.to_thread.run_sync(create_topic, broker)
    partition = broker.partition(TOPIC, 0)
    assert partition is not None
    partition.append_records(txn_batch(P1, 0, [b"aborted-0", b"aborted-1"]), -1)  # 0-1
    partition.append_records(txn_batch(P2, 0, [b"committed-0"]), -1)  # 2
    partition.append_control_batch(P1, 0, 0, commit=False)  # 3
    partition.append_records(txn_batch(P2, 1, [b"committed-1"]), -1)  # 4
    partition.append_control_batch(P2, 0, 0, commit=True)  # 5
    partition.append_records(txn_batch(P1, 2, [b"open"]), -1)  # 6: still open
    assert (partition.high_watermark, partition.last_stable_offset) == (7, 6)
    assert partition.log.collect_aborted_transactions(0, 7) == [(P1, 0)]

    committed, lso = await trio.to_thread.run_sync(read, broker, "read_committed", 3)
    assert (committed, lso) == ([b"committed-0", b"committed-1"], 6)
    everything, hw = await trio.to_thread.run_sync(read, broker, "read_uncommitted", 5)
    assert (everything, hw) == ([b"aborted-0", b"aborted-1", b"committed-0", b"committed-1",
                                 b"open"], 7)

    partition.append_control_batch(P1, 0, 0, commit=True)  # 7
    committed, lso = await trio.to_thread.run_sync(read, broker, "read_committed", 3)
    assert (committed, lso) == ([b"committed-0", b"committed-1", b"open"], 8)
