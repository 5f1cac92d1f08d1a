"""``fetch.max.bytes`` caps every Fetch response whatever the request's max_bytes, and
min_bytes within it, as Kafka's handleFetchRequest does: a consumer asking for 2 GiB
of partitions gets at most the broker's limit (beyond the first batch, which always
comes whole)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from kafka.protocol.consumer import FetchRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.server.broker import Broker
from josefk.server.config.broker import load_config
from josefk.server.network.peer import PeerConnection

TOPIC = "limited"
LIMIT = 4096
INT32_MAX = 2**31 - 1


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                "log.dirs": str(tmp_path / "data"),
                                "fetch.max.bytes": str(LIMIT)})
    async with trio.open_nursery() as nursery:
        yield await nursery.start(Broker(config).serve)
        nursery.cancel_scope.cancel()


def batch(value: bytes, count: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=None, key=None, value=value, headers=[])
    return bytes(builder.build())


async def fetch_all(broker: Broker, partitions: int, min_bytes: int) -> list[int]:
    """Bytes of records returned per partition for one Fetch of every partition from 0."""
    asks = [FetchRequest.FetchTopic.FetchPartition(
        partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=INT32_MAX) for p in range(partitions)]
    request = FetchRequest(replica_id=-1, max_wait_ms=5000, min_bytes=min_bytes,
                           max_bytes=INT32_MAX, isolation_level=0, session_id=0,
                           session_epoch=-1, forgotten_topics_data=[], rack_id="",
                           topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=asks)])
    peer = PeerConnection("127.0.0.1", broker.bound_ports[0], "consumer", 30)
    try:
        response = await peer.request(request, 12)
    finally:
        await peer.aclose()
    return [len(p.records or b"") for p in response.responses[0].partitions]


async def test_a_response_is_capped_at_fetch_max_bytes(broker: Broker) -> None:
    await broker.create_topic(TOPIC, 3)
    for p in range(3):
        partition = broker.partition(TOPIC, p)
        assert partition is not None
        for _ in range(3):
            partition.append_records(batch(b"x" * 1000, 2), 1)  # ~2 KiB a batch
    got = await fetch_all(broker, 3, min_bytes=1)
    # The first partition's batches up to the limit (the first whole), nothing after.
    assert 0 < got[0] <= LIMIT and got[1:] == [0, 0]


async def test_min_bytes_above_the_cap_is_met_by_the_cap(broker: Broker) -> None:
    await broker.create_topic(TOPIC, 1)
    partition = broker.partition(TOPIC, 0)
    assert partition is not None
    for _ in range(3):
        partition.append_records(batch(b"x" * 1000, 2), 1)
    began = time.monotonic()
    got = await fetch_all(broker, 1, min_bytes=10 << 20)  # more than the broker would send
    assert got[0] > 0
    assert time.monotonic() - began < 4  # answered, not held for the whole max wait (5 s)


async def test_a_batch_cut_by_the_cap_is_not_sent_in_part(broker: Broker) -> None:
    """As Kafka's readFromLog: past the first partition, a batch larger than what is left
    of the cap is left for the next fetch, not cut (a consumer cannot use a cut batch:
    the Java consumer fails "no complete records were found")."""
    await broker.create_topic(TOPIC, 2)
    for p in range(2):
        partition = broker.partition(TOPIC, p)
        assert partition is not None
        partition.append_records(batch(b"x" * 1500, 2), 1)  # one ~3 KiB batch each
    got = await fetch_all(broker, 2, min_bytes=1)
    assert got[0] > LIMIT // 2 and got[1] == 0
