"""Consumers' fetch sessions on a broker in this process: a long poll in a session wakes
when the high watermark moves, partitions of an unknown topic id stay in the session
answered UNKNOWN_TOPIC_ID, fairness under max_bytes, and
``max.incremental.fetch.session.cache.slots=0`` turns sessions off. (The wire, through
stock clients and against Apache Kafka: compat_tests/test_fetch_sessions.py.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kafka.protocol.consumer import FetchRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.protocol.error_codes import UNKNOWN_TOPIC_ID
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config
from josefk.server.network.peer import PeerConnection

TOPIC = "sessions"


def _broker(tmp_path: Path, **overrides: str) -> Broker:
    return Broker(load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                     "log.dirs": str(tmp_path / "data"), **overrides}))


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with trio.open_nursery() as nursery:
        yield await nursery.start(_broker(tmp_path).serve)
        nursery.cancel_scope.cancel()


def batch(value: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=None, key=None, value=value, headers=[])
    return bytes(builder.build())


def fetch(partitions: dict[int, int], session_id: int, epoch: int, *, max_wait_ms: int = 0,
          max_bytes: int = 50 << 20, topic_id: uuid.UUID | None = None) -> Any:
    asks = [FetchRequest.FetchTopic.FetchPartition(
        partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20) for p, offset in partitions.items()]
    topic = (FetchRequest.FetchTopic(topic=TOPIC, partitions=asks) if topic_id is None
             else FetchRequest.FetchTopic(topic_id=topic_id, partitions=asks))
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1,
                        max_bytes=max_bytes, isolation_level=0, session_id=session_id,
                        session_epoch=epoch, forgotten_topics_data=[], rack_id="",
                        topics=[topic] if asks else [])


def answered(response: Any) -> dict[int, tuple[int, int]]:
    """Partition -> (error code, bytes of records)."""
    return {p.partition_index: (p.error_code, len(p.records or b""))
            for t in response.responses for p in t.partitions}


async def ask(broker: Broker, request: Any, version: int = 12) -> Any:
    peer = PeerConnection("127.0.0.1", broker.bound_ports[0], "consumer", 30)
    try:
        return await peer.request(request, version)
    finally:
        await peer.aclose()


async def test_a_long_poll_in_a_session_wakes_when_the_high_watermark_moves(
        broker: Broker) -> None:
    await broker.create_topic(TOPIC, 3)
    full = await ask(broker, fetch({0: 0, 1: 0, 2: 0}, 0, 0))
    assert full.session_id and answered(full) == {0: (0, 0), 1: (0, 0), 2: (0, 0)}
    session = full.session_id
    result: list[Any] = []

    async def poll() -> None:
        result.append(await ask(broker, fetch({}, session, 1, max_wait_ms=20_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        await trio.sleep(0.2)  # the poll waits: nothing new in its session
        assert not result
        partition = broker.partition(TOPIC, 2)
        assert partition is not None
        partition.append_records(batch(b"new"), 1)
    [woken] = result
    assert woken.session_id == session and list(answered(woken)) == [2]
    assert answered(woken)[2][1] > 0


async def test_a_partition_with_records_is_read_after_the_others(broker: Broker) -> None:
    await broker.create_topic(TOPIC, 2)
    for p in (0, 1):
        partition = broker.partition(TOPIC, p)
        assert partition is not None
        partition.append_records(batch(b"x" * 2000), 1)
    # max_bytes allows one partition's batch: each fetch serves the other one next.
    full = await ask(broker, fetch({0: 0, 1: 0}, 0, 0, max_bytes=1000))
    first = [p for p, (_, size) in answered(full).items() if size]
    assert len(first) == 1
    nxt = await ask(broker, fetch({}, full.session_id, 1, max_bytes=1000))
    second = [p for p, (_, size) in answered(nxt).items() if size]
    assert second == [1 - first[0]]


async def test_an_unknown_topic_id_stays_in_the_session(broker: Broker) -> None:
    await broker.create_topic(TOPIC, 1)
    stranger = uuid.uuid4()
    full = await ask(broker, fetch({0: 0}, 0, 0, topic_id=stranger), 13)
    assert full.session_id and answered(full) == {0: (UNKNOWN_TOPIC_ID, 0)}
    again = await ask(broker, fetch({}, full.session_id, 1, topic_id=stranger), 13)
    assert (again.error_code, answered(again)) == (0, {0: (UNKNOWN_TOPIC_ID, 0)})


async def test_no_slots_no_sessions(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        broker = await nursery.start(
            _broker(tmp_path, **{"max.incremental.fetch.session.cache.slots": "0"}).serve)
        await broker.create_topic(TOPIC, 2)
        full = await ask(broker, fetch({0: 0, 1: 0}, 0, 0))
        assert (full.error_code, full.session_id) == (0, 0)
        assert answered(full) == {0: (0, 0), 1: (0, 0)}
        nursery.cancel_scope.cancel()
