"""A compressed batch that would inflate past `MAX_INFLATED_BYTES` on a compacted topic
(where the broker must read the records for their keys) is refused with CORRUPT_MESSAGE
and a log line, instead of taking the broker's memory; the broker goes on serving."""

from __future__ import annotations

import logging
import struct
import zlib

import crc32c
import pytest
import trio
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.log.inflate import MAX_INFLATED_BYTES
from josefk.server.broker import Broker
from josefk.server.network.peer import PeerConnection

TOPIC = "compacted"
CORRUPT_MESSAGE = 2
GZIP = 1
HEADER_SIZE, LENGTH_AT, CRC_AT, ATTRIBUTES_AT = 61, 8, 17, 21


def bootstrap(broker: Broker) -> str:
    return f"127.0.0.1:{broker.bound_ports[0]}"


def create_compacted_topic(broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(broker), request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    finally:
        admin.close()


def gzip_bomb(inflated: int) -> bytes:
    """A gzip stream of ``inflated`` zero bytes (about a thousandth of that in size)."""
    gz = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1 << 20)
    parts = [gz.compress(chunk) for _ in range(inflated // len(chunk))]
    return b"".join(parts) + gz.compress(bytes(inflated % len(chunk))) + gz.flush()


def bomb_batch(inflated: int) -> bytes:
    """A batch of one keyed record as kafka-python builds it, its records then swapped
    for the bomb (attributes, batch length and CRC set to match)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
    batch = bytearray(builder.build()[:HEADER_SIZE]) + gzip_bomb(inflated)
    struct.pack_into(">h", batch, ATTRIBUTES_AT, GZIP)
    struct.pack_into(">i", batch, LENGTH_AT, len(batch) - 12)
    struct.pack_into(">I", batch, CRC_AT, crc32c.crc32c(bytes(batch[ATTRIBUTES_AT:])))
    return bytes(batch)


def produce_and_consume_keyed(broker: Broker) -> list[tuple[bytes, bytes]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap(broker), compression_type="gzip")
    try:
        for i in range(3):
            producer.send(TOPIC, key=b"key-%d" % i, value=b"value-%d" % i * 1000)
        producer.flush(10)
    finally:
        producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap(broker),
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        return [(m.key, m.value) for _, m in zip(range(3), consumer, strict=False)]
    finally:
        consumer.close()


async def test_a_batch_inflating_past_the_bound_is_refused(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    await trio.to_thread.run_sync(create_compacted_topic, broker)
    batch = bomb_batch(MAX_INFLATED_BYTES + 1)
    assert len(batch) < 1_000_000  # under message.max.bytes: only its inflated size is wrong
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
    request = ProduceRequest[8](transactional_id=None, acks=1, timeout_ms=10_000,
                                topic_data=[ProduceRequest.TopicProduceData(
                                    name=TOPIC, partition_data=[partition])])
    peer = PeerConnection("127.0.0.1", broker.bound_ports[0], "bomber", 30)
    with caplog.at_level(logging.INFO, logger="josefk"):
        response = await peer.request(request, 8)
    await peer.aclose()
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == CORRUPT_MESSAGE
    assert f"decompress to more than {MAX_INFLATED_BYTES} bytes" in caplog.text
    assert broker.partition(TOPIC, 0).log.log_end_offset == 0
    got = await trio.to_thread.run_sync(produce_and_consume_keyed, broker)
    assert got == [(b"key-%d" % i, b"value-%d" % i * 1000) for i in range(3)]
