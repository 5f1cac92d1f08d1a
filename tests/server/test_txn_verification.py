"""KIP-890 part 1 verification (`josefk.server.transactions.verification`) against stand-ins for
the broker, the coordinator and the peer that leads the coordinator's partition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from kafka.protocol.producer import AddPartitionsToTxnResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.cluster.coordinator.transaction.records import TRANSACTION_STATE_TOPIC, TopicPartition
from josefk.cluster.coordinator.transaction.state import TV2
from josefk.protocol import error_codes as ec
from josefk.server.network import peer as peer_module
from josefk.server.network.peer import PeerError
from josefk.server.security.client import PLAINTEXT_PEERS, PeerSecurity
from josefk.server.transactions import verification as tv

TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
TXN_PARTITION = 7
CLUSTER_AUTHORIZATION_FAILED = 31


def batch(*, transactional: bool, producer_id: int = 42, epoch: int = 3) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=0, batch_size=1 << 20)
    builder.append(0, timestamp=0, key=None, value=b"v", headers=[])
    return bytes(builder.build())


# --- stand-ins ----------------------------------------------------------------------------


@dataclass
class FakeLog:
    ongoing: dict[int, int] = field(default_factory=dict)  # producer id -> its epoch

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int | None = None
                                ) -> bool:
        return producer_id in self.ongoing and producer_epoch in (None,
                                                                   self.ongoing[producer_id])


@dataclass(eq=False)
class FakePartition:
    topic: str
    index: int
    log: FakeLog = field(default_factory=FakeLog)


@dataclass
class FakeCoordinator:
    """Answers verify_partitions with ``answer`` for every partition and records calls."""

    answer: int = ec.NONE
    calls: list[tuple[str, int, int, list[TopicPartition]]] = field(default_factory=list)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls.append((transactional_id, producer_id, producer_epoch, partitions))
        return dict.fromkeys(partitions, self.answer)


@dataclass
class FakeService:
    coordinator: FakeCoordinator = field(default_factory=FakeCoordinator)
    added: list[tuple[str, int, int, list[TopicPartition], int]] = field(default_factory=list)

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: list[TopicPartition],
                             txn_version: int = 0) -> int:
        self.added.append((transactional_id, producer_id, producer_epoch, partitions,
                           txn_version))
        return self.coordinator.answer

    def partition_for(self, transactional_id: str) -> int:
        return TXN_PARTITION


@dataclass
class FakeView:
    leader: int


@dataclass
class FakeCluster:
    endpoints: dict[int, tuple[str, int]]

    def endpoint_of(self, node_id: int) -> tuple[str, int] | None:
        return self.endpoints.get(node_id)


@dataclass
class FakeConfig:
    values: dict[str, Any] = field(default_factory=lambda: {
        "transaction.partition.verification.enable": True})
    request_timeout_ms: int = 30_000


@dataclass
class FakeBroker:
    node_id: int = 1
    leader: int = 1  # of the transactional id's __transaction_state partition
    txn_service: FakeService = field(default_factory=FakeService)
    cluster: FakeCluster | None = None
    peer_security: PeerSecurity = PLAINTEXT_PEERS
    config: FakeConfig = field(default_factory=FakeConfig)
    partitions: dict[tuple[str, int], FakePartition] = field(default_factory=dict)

    def partition_view(self, topic: str, index: int) -> FakeView | None:
        assert (topic, index) == (TRANSACTION_STATE_TOPIC, TXN_PARTITION)
        return FakeView(self.leader)

    def partition(self, topic: str, index: int) -> FakePartition | None:
        return self.partitions.get((topic, index))


class FakePeer:
    """A PeerConnection that answers AddPartitionsToTxn from ``FakePeer.answer``."""

    created: list[FakePeer] = []
    answer: Any = None  # a response, or an exception to raise

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 security: PeerSecurity = PLAINTEXT_PEERS) -> None:
        self.host, self.port = host, port
        self.security = security
        self.requests: list[tuple[Any, int]] = []
        FakePeer.created.append(self)

    async def request(self, request: Any, version: int) -> Any:
        self.requests.append((request, version))
        if isinstance(FakePeer.answer, Exception):
            raise FakePeer.answer
        return FakePeer.answer


def verify_response(codes: dict[TopicPartition, int], error_code: int = ec.NONE) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionResult(partition_index=tp.partition, partition_error_code=code))
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0, error_code=error_code, results_by_transaction=[TxnResult(
            transactional_id="t", topic_results=[
                TopicResult(name=name, results_by_partition=parts)
                for name, parts in by_topic.items()])])


@pytest.fixture
def peer(monkeypatch: pytest.MonkeyPatch) -> type[FakePeer]:
    FakePeer.created = []
    FakePeer.answer = None
    monkeypatch.setattr(peer_module, "PeerConnection", FakePeer)
    return FakePeer


def verifier(broker: FakeBroker) -> Any:
    """A TxnVerifier on the stand-in broker (typed loosely: it takes fakes)."""
    return tv.TxnVerifier(broker)


# --- transactional_producer -----------------------------------------------------------------


def test_transactional_producer() -> None:
    assert tv.transactional_producer(batch(transactional=True)) == (42, 3)
    assert tv.transactional_producer(batch(transactional=False)) is None
    assert tv.transactional_producer(None) is None
    assert tv.transactional_producer(b"") is None
    assert tv.transactional_producer(b"\x00" * 10) is None  # cut short: the append says so


# --- produce_error: the coordinator's answer per Produce version ---------------------------


@pytest.mark.parametrize("version", [3, 9, 10, 11, 12])
def test_produce_error_mapping(version: int) -> None:
    assert tv.produce_error(ec.NONE, version) == ec.NONE
    assert tv.produce_error(ec.PRODUCER_FENCED, version) == ec.INVALID_PRODUCER_EPOCH
    assert tv.produce_error(ec.INVALID_PRODUCER_EPOCH, version) == ec.INVALID_PRODUCER_EPOCH
    assert tv.produce_error(ec.INVALID_PRODUCER_ID_MAPPING, version) == \
        ec.INVALID_PRODUCER_ID_MAPPING
    assert tv.produce_error(ec.INVALID_TXN_STATE, version) == ec.INVALID_TXN_STATE
    # Retriable coordinator trouble: NOT_ENOUGH_REPLICAS, which every client retries.
    for code in (ec.CONCURRENT_TRANSACTIONS, tv.NETWORK_EXCEPTION,
                 ec.COORDINATOR_LOAD_IN_PROGRESS, ec.COORDINATOR_NOT_AVAILABLE,
                 ec.NOT_COORDINATOR):
        assert tv.produce_error(code, version) == ec.NOT_ENOUGH_REPLICAS, code
    # TRANSACTION_ABORTABLE only from Produce v11 (KIP-890); before, INVALID_TXN_STATE.
    expected = ec.TRANSACTION_ABORTABLE if version >= 11 else ec.INVALID_TXN_STATE
    assert tv.produce_error(ec.TRANSACTION_ABORTABLE, version) == expected


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_txn_offset_commit_error_mapping(version: int) -> None:
    assert tv.txn_offset_commit_error(ec.NONE, version) == ec.NONE
    assert tv.txn_offset_commit_error(ec.PRODUCER_FENCED, version) == ec.INVALID_PRODUCER_EPOCH
    assert tv.txn_offset_commit_error(ec.INVALID_PRODUCER_ID_MAPPING, version) == \
        ec.INVALID_PRODUCER_ID_MAPPING
    for code in (ec.CONCURRENT_TRANSACTIONS, tv.NETWORK_EXCEPTION, ec.NOT_COORDINATOR):
        assert tv.txn_offset_commit_error(code, version) == ec.COORDINATOR_NOT_AVAILABLE
    # TRANSACTION_ABORTABLE from TxnOffsetCommit v4, as Kafka 4.3 answers.
    expected = ec.TRANSACTION_ABORTABLE if version >= 4 else ec.INVALID_TXN_STATE
    assert tv.txn_offset_commit_error(ec.TRANSACTION_ABORTABLE, version) == expected


# --- guards ----------------------------------------------------------------------------------


def test_needs_verification_only_without_an_ongoing_transaction() -> None:
    part = FakePartition("a", 0)
    v = verifier(FakeBroker(partitions={("a", 0): part}))
    assert v.needs(part, 42)
    part.log.ongoing[42] = 3
    assert not v.needs(part, 42)
    assert not v.needs(part, 42, 3)
    assert v.needs(part, 43)
    # Transactions v2: the open transaction is the previous epoch's, its markers not in yet.
    assert v.needs(part, 42, 4)


def test_guard_holds_until_a_marker_drops_it() -> None:
    part = FakePartition("a", 0)
    broker = FakeBroker(partitions={("a", 0): part})
    v = verifier(broker)
    guard = v.start(part, 42)
    assert v.holds(part, 42, guard)
    v.on_marker("a", 1, 42)  # another partition
    v.on_marker("a", 0, 43)  # another producer
    assert v.holds(part, 42, guard)
    v.on_marker("a", 0, 42)
    assert not v.holds(part, 42, guard)
    v.release(part, 42, guard)  # harmless once dropped


def test_a_newer_guard_replaces_the_older_one() -> None:
    part = FakePartition("a", 0)
    v = verifier(FakeBroker(partitions={("a", 0): part}))
    old = v.start(part, 42)
    new = v.start(part, 42)
    assert not v.holds(part, 42, old)
    v.release(part, 42, old)  # does not drop the newer guard
    assert v.holds(part, 42, new)
    v.release(part, 42, new)
    assert not v.holds(part, 42, new)


def test_guard_fails_when_the_partition_is_replaced() -> None:
    part = FakePartition("a", 0)
    broker = FakeBroker(partitions={("a", 0): part})
    v = verifier(broker)
    guard = v.start(part, 42)
    broker.partitions[("a", 0)] = FakePartition("a", 0)  # e.g. leadership moved and back
    assert not v.holds(part, 42, guard)
    del broker.partitions[("a", 0)]
    assert not v.holds(part, 42, guard)


def test_enabled_follows_the_config() -> None:
    broker = FakeBroker()
    assert verifier(broker).enabled
    broker.config.values["transaction.partition.verification.enable"] = False
    assert not verifier(broker).enabled


# --- verify: local coordinator or the peer leading its partition ----------------------------


async def test_verify_locally_when_this_broker_is_the_coordinator(
        peer: type[FakePeer]) -> None:
    broker = FakeBroker(node_id=1, leader=1)
    broker.txn_service.coordinator.answer = ec.INVALID_PRODUCER_ID_MAPPING
    got = await verifier(broker).verify("t", 42, 3, [A0, B0])
    assert got == {A0: ec.INVALID_PRODUCER_ID_MAPPING, B0: ec.INVALID_PRODUCER_ID_MAPPING}
    assert broker.txn_service.coordinator.calls == [("t", 42, 3, [A0, B0])]
    assert peer.created == []


async def test_add_locally_for_transactions_v2(peer: type[FakePeer]) -> None:
    broker = FakeBroker(node_id=1, leader=1)
    assert await verifier(broker).verify("t", 42, 3, [A0, B0], add=True) == {
        A0: ec.NONE, B0: ec.NONE}
    assert broker.txn_service.added == [("t", 42, 3, [A0, B0], TV2)]
    assert broker.txn_service.coordinator.calls == [] and peer.created == []


async def test_add_remotely_asks_add_partitions_v5(peer: type[FakePeer]) -> None:
    broker = FakeBroker(node_id=1, leader=2, cluster=FakeCluster({2: ("10.0.0.2", 9092)}))
    peer.answer = verify_response({A0: ec.NONE})
    assert await verifier(broker).verify("t", 42, 3, [A0], add=True) == {A0: ec.NONE}
    [(request, version)] = peer.created[0].requests
    [txn] = request.transactions
    assert (version, txn.verify_only) == (tv.ADD_VERSION, False) == (5, False)


async def test_verify_one_adds_even_with_verification_off(peer: type[FakePeer]) -> None:
    part = FakePartition("__consumer_offsets", 3)
    broker = FakeBroker(node_id=1, leader=1, partitions={("__consumer_offsets", 3): part})
    broker.config.values["transaction.partition.verification.enable"] = False
    code, guard = await verifier(broker).verify_one("t", 42, 3, part, add=True)
    assert code == ec.NONE and guard is not None
    assert broker.txn_service.added == [
        ("t", 42, 3, [TopicPartition("__consumer_offsets", 3)], TV2)]


async def test_verify_without_a_coordinator_leader(peer: type[FakePeer]) -> None:
    broker = FakeBroker(leader=-1)
    assert await verifier(broker).verify("t", 42, 3, [A0]) == {
        A0: ec.COORDINATOR_NOT_AVAILABLE}
    assert broker.txn_service.coordinator.calls == [] and peer.created == []


async def test_verify_remotely_asks_add_partitions_verify_only(peer: type[FakePeer]) -> None:
    broker = FakeBroker(node_id=1, leader=2,
                        cluster=FakeCluster({2: ("10.0.0.2", 9092)}))
    peer.answer = verify_response({A0: ec.NONE, A1: ec.TRANSACTION_ABORTABLE})
    v = verifier(broker)
    got = await v.verify("t", 42, 3, [A0, A1, B0])
    # B0 missing from the answer: not verified.
    assert got == {A0: ec.NONE, A1: ec.TRANSACTION_ABORTABLE,
                   B0: ec.COORDINATOR_NOT_AVAILABLE}
    assert broker.txn_service.coordinator.calls == []
    [conn] = peer.created
    assert (conn.host, conn.port) == ("10.0.0.2", 9092)
    [(request, version)] = conn.requests
    assert version == tv.VERIFY_VERSION == 4
    [txn] = request.transactions
    assert (txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.verify_only) == (
        "t", 42, 3, True)
    assert {t.name: list(t.partitions) for t in txn.topics} == {"a": [0, 1], "b": [0]}

    # The connection is kept for the next verification with the same broker ...
    await v.verify("t", 42, 3, [A0])
    assert len(peer.created) == 1 and len(conn.requests) == 2
    # ... and replaced when that broker's endpoint changes.
    assert broker.cluster is not None
    broker.cluster.endpoints[2] = ("10.0.0.9", 9092)
    await v.verify("t", 42, 3, [A0])
    assert [(c.host, c.port) for c in peer.created] == [("10.0.0.2", 9092),
                                                       ("10.0.0.9", 9092)]


async def test_verify_remotely_top_level_error(peer: type[FakePeer]) -> None:
    broker = FakeBroker(node_id=1, leader=2, cluster=FakeCluster({2: ("h", 1)}))
    peer.answer = verify_response({}, error_code=CLUSTER_AUTHORIZATION_FAILED)
    assert await verifier(broker).verify("t", 42, 3, [A0, B0]) == {
        A0: CLUSTER_AUTHORIZATION_FAILED, B0: CLUSTER_AUTHORIZATION_FAILED}


async def test_verify_remotely_when_the_peer_fails(peer: type[FakePeer]) -> None:
    broker = FakeBroker(node_id=1, leader=2, cluster=FakeCluster({2: ("h", 1)}))
    peer.answer = PeerError("connection reset")
    got = await verifier(broker).verify("t", 42, 3, [A0])
    assert got == {A0: tv.NETWORK_EXCEPTION}
    # Which the produce answers as a retriable NOT_ENOUGH_REPLICAS.
    assert tv.produce_error(got[A0], 9) == ec.NOT_ENOUGH_REPLICAS


async def test_verify_remotely_without_an_endpoint(peer: type[FakePeer]) -> None:
    for cluster in (None, FakeCluster({})):
        broker = FakeBroker(node_id=1, leader=2, cluster=cluster)
        assert await verifier(broker).verify("t", 42, 3, [A0]) == {
            A0: ec.COORDINATOR_NOT_AVAILABLE}
    assert peer.created == []


# --- verify_one: TxnOffsetCommit's check of the group's __consumer_offsets partition --------


async def test_verify_one(peer: type[FakePeer]) -> None:
    part = FakePartition("__consumer_offsets", 3)
    broker = FakeBroker(partitions={("__consumer_offsets", 3): part})
    v = verifier(broker)
    coordinator = broker.txn_service.coordinator

    # Verified: a guard that holds until a marker drops it.
    code, guard = await v.verify_one("t", 42, 3, part)
    assert code == ec.NONE and guard is not None and v.holds(part, 42, guard)
    assert coordinator.calls == [("t", 42, 3, [TopicPartition("__consumer_offsets", 3)])]
    v.on_marker("__consumer_offsets", 3, 42)
    assert not v.holds(part, 42, guard)

    # Refused: the answer, and no guard left behind.
    coordinator.answer = ec.TRANSACTION_ABORTABLE
    code, guard = await v.verify_one("t", 42, 3, part)
    assert (code, guard) == (ec.TRANSACTION_ABORTABLE, None)
    assert v._guards == {}

    # A transaction already open there, or verification off: nothing is asked.
    coordinator.calls.clear()
    part.log.ongoing[42] = 3
    assert await v.verify_one("t", 42, 3, part) == (ec.NONE, None)
    part.log.ongoing.clear()
    broker.config.values["transaction.partition.verification.enable"] = False
    assert await v.verify_one("t", 42, 3, part) == (ec.NONE, None)
    assert coordinator.calls == []
