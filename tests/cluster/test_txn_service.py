"""The transaction coordinator wired to a real broker's logs (no sockets): the internal
topic, writes to ``__transaction_state``, markers, reload, timeouts, and transactional
offsets that become a group's only on commit.

Markers go through ``Partition.append_control_batch`` (the log layer's); a recording
stand-in replaces it here so these tests cover the coordinator's side only."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
import trio.testing

from josefk.cluster.coordinator.group.api import Error
from josefk.cluster.coordinator.records import BACKGROUND_LOAD_BYTES, OFFSETS_TOPIC, build_batch
from josefk.cluster.coordinator.records import partition_for as group_partition_for
from josefk.cluster.coordinator.transaction.host import TxnHost
from josefk.cluster.coordinator.transaction.records import (
    TRANSACTION_STATE_TOPIC,
    TopicPartition,
    TxnLogValue,
)
from josefk.cluster.coordinator.transaction.records import encode_record as encode_txn_record
from josefk.cluster.partition import Partition
from josefk.protocol import error_codes as ec
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config

TXN_PARTITIONS = 3


@dataclass
class _Info:
    last_offset: int


@pytest.fixture
def markers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int, int, int, bool]]:
    written: list[tuple[str, int, int, int, int, bool]] = []

    def append_control_batch(self: Partition, producer_id: int, producer_epoch: int,
                             coordinator_epoch: int, commit: bool, *_: object) -> _Info:
        written.append((self.topic, self.index, producer_id, producer_epoch,
                        coordinator_epoch, commit))
        return _Info(self.log.log_end_offset - 1)

    monkeypatch.setattr(Partition, "append_control_batch", append_control_batch, raising=False)
    return written


def make_broker(data: Path) -> Broker:
    config = load_config(None, {
        "log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0",
        "offsets.topic.num.partitions": "2",
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS)})
    broker = Broker(config)
    broker.startup()
    return broker


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def broker(data: Path) -> Iterator[Broker]:
    broker = make_broker(data)
    yield broker
    broker.shutdown()


async def _with_service(broker: Broker, body) -> None:  # type: ignore[no-untyped-def]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(broker.txn_service.run)
        await body()
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()


def run(broker: Broker, body) -> None:  # type: ignore[no-untyped-def]
    trio.run(_with_service, broker, body)


async def _setup(broker: Broker, topic: str = "t") -> None:
    await broker.txn_service.ensure_topic()
    await broker.create_topic(topic, 1, 1)


def test_the_broker_is_a_txn_host(broker: Broker) -> None:
    assert isinstance(broker, TxnHost)


def test_topic_settings(broker: Broker) -> None:
    trio.run(broker.txn_service.ensure_topic)
    topic = broker.store.get(TRANSACTION_STATE_TOPIC)
    assert topic is not None and len(topic.partitions) == TXN_PARTITIONS
    configs = broker.store.topic_configs(TRANSACTION_STATE_TOPIC)
    assert configs["cleanup.policy"] == "compact"
    assert configs["compression.type"] == "uncompressed"
    assert configs["min.insync.replicas"] == "1"  # capped to the one live broker
    assert set(broker.txn_service.loaded) == set(range(TXN_PARTITIONS))


def test_commit_writes_markers_then_completes(broker: Broker, markers: list, data: Path
                                              ) -> None:
    service = broker.txn_service
    result = {}

    async def body() -> None:
        await _setup(broker)
        init = await service.init_producer_id("tx", 60_000, -1, -1)
        assert init.error == ec.NONE and init.producer_epoch == 0
        pid = init.producer_id
        assert await service.add_partitions("tx", pid, 0, [TopicPartition("t", 0)]) == ec.NONE
        assert (await service.end_txn("tx", pid, 0, True))[0] == ec.NONE
        await trio.testing.wait_all_tasks_blocked()
        result["pid"] = pid

    run(broker, body)
    pid = result["pid"]
    coordinator_epoch = broker.partition(TRANSACTION_STATE_TOPIC,
                                         service.partition_for("tx")).leader_epoch
    assert markers == [("t", 0, pid, 0, coordinator_epoch, True)]
    assert service.coordinator.describe("tx").state == "CompleteCommit"
    broker.shutdown()

    again = make_broker(data)
    try:
        d = again.txn_service.coordinator.describe("tx")
        assert (d.error, d.state, d.producer_id, d.producer_epoch) == (
            ec.NONE, "CompleteCommit", pid, 0)
    finally:
        again.shutdown()


def test_fencing_an_open_transaction_aborts_it(broker: Broker, markers: list) -> None:
    service = broker.txn_service

    async def body() -> None:
        await _setup(broker)
        pid = (await service.init_producer_id("tx", 60_000, -1, -1)).producer_id
        assert await service.add_partitions("tx", pid, 0, [TopicPartition("t", 0)]) == ec.NONE
        fenced = await service.init_producer_id("tx", 60_000, -1, -1)
        assert fenced.error == ec.CONCURRENT_TRANSACTIONS
        await trio.testing.wait_all_tasks_blocked()
        again = await service.init_producer_id("tx", 60_000, -1, -1)
        assert (again.error, again.producer_id, again.producer_epoch) == (ec.NONE, pid, 2)
        assert (await service.end_txn("tx", pid, 0, True))[0] == ec.PRODUCER_FENCED

    run(broker, body)
    assert [(m[3], m[5]) for m in markers] == [(1, False)]


def test_timed_out_transaction_is_aborted(broker: Broker, markers: list) -> None:
    service = broker.txn_service

    async def body() -> None:
        await _setup(broker)
        pid = (await service.init_producer_id("tx", 1_000, -1, -1)).producer_id
        assert await service.add_partitions("tx", pid, 0, [TopicPartition("t", 0)]) == ec.NONE
        now = service.coordinator.clock()
        service.coordinator.clock = lambda: now + 5_000
        service.abort_timed_out()
        await trio.testing.wait_all_tasks_blocked()

    run(broker, body)
    assert [(m[3], m[5]) for m in markers] == [(1, False)]
    assert service.coordinator.describe("tx").state == "CompleteAbort"


def test_txn_offsets_become_visible_on_commit(broker: Broker, markers: list, data: Path
                                              ) -> None:
    service = broker.txn_service
    group = broker.group_coordinator

    def committed() -> int:
        _, [(_, [fetched])] = group.fetch_offsets("g", [("t", [0])])
        return fetched.offset

    async def body() -> None:
        await _setup(broker)
        await group.ensure_topic()
        pid = (await service.init_producer_id("tx", 60_000, -1, -1)).producer_id
        assert await service.add_offsets("tx", pid, 0, "g") == ec.NONE
        assert group.txn_commit_offsets("g", pid, 0, "", None, -1,
                                        [("t", [(0, 5, -1, "")])]) == Error.NONE
        assert committed() == -1
        _, [(_, [stable])] = group.fetch_offsets("g", [("t", [0])], require_stable=True)
        assert stable.error == Error.UNSTABLE_OFFSET_COMMIT
        assert (await service.end_txn("tx", pid, 0, False))[0] == ec.NONE
        await trio.testing.wait_all_tasks_blocked()
        assert committed() == -1

        pid2 = (await service.init_producer_id("tx", 60_000, pid, 0)).producer_id
        assert pid2 == pid
        assert await service.add_offsets("tx", pid, 1, "g") == ec.NONE
        assert group.txn_commit_offsets("g", pid, 1, "", None, -1,
                                        [("t", [(0, 9, -1, "")])]) == Error.NONE
        assert (await service.end_txn("tx", pid, 1, True))[0] == ec.NONE
        await trio.testing.wait_all_tasks_blocked()
        assert committed() == 9

    run(broker, body)
    offsets_partition = group_partition_for("g", 2)
    assert [(m[0], m[1], m[5]) for m in markers] == [
        (OFFSETS_TOPIC, offsets_partition, False), (OFFSETS_TOPIC, offsets_partition, True)]


def test_a_large_transaction_log_loads_in_the_background(data: Path) -> None:
    """A ``__transaction_state`` partition past BACKGROUND_LOAD_BYTES is read in a worker
    thread once the service runs; its ids answer COORDINATOR_LOAD_IN_PROGRESS until then."""
    broker = make_broker(data)
    trio.run(broker.txn_service.ensure_topic)
    p = broker.txn_service.partition_for("tx")
    ids = [i for i in (f"tx-{n}" for n in range(60_000))
           if broker.txn_service.partition_for(i) == p]
    partition = broker.partition(TRANSACTION_STATE_TOPIC, p)
    assert partition is not None
    for start in range(0, len(ids), 500):
        partition.append_records(build_batch([encode_txn_record(
            (i, TxnLogValue(n, 0, 60_000, 0, frozenset(), 0, 0)))
            for n, i in enumerate(ids[start:start + 500], start)], 0), required_acks=-1)
    assert partition.log.size_in_bytes() > BACKGROUND_LOAD_BYTES
    broker.shutdown()

    again = make_broker(data)
    try:
        coordinator = again.txn_service.coordinator
        assert coordinator.describe(ids[-1]).error == ec.COORDINATOR_LOAD_IN_PROGRESS

        async def body() -> None:
            with trio.fail_after(60):
                while p not in again.txn_service.loaded:
                    await trio.sleep(0.01)

        run(again, body)
        described = coordinator.describe(ids[-1])
        assert (described.error, described.producer_id) == (ec.NONE, len(ids) - 1)
    finally:
        again.shutdown()
