"""Incremental fetch sessions (KIP-227) for consumers, checked on the wire.

A broker of its own advertises a tap (`wiretap.FetchTap`) that reads every Fetch
passing through it. kafka-python 3.0.12 and the Java consumer open sessions (librdkafka
2.16 sends session id 0, epoch -1: no session); over 1,000 partitions each sends one
full Fetch, then incremental ones in the session the answer opened, with epochs
counting up and a fraction of the full request's size. The session rules no client
shows (unknown session, wrong epoch, topic names switched for ids, a session that
outlives its connection, closing one) are checked with raw requests.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from .clients import kafka_python_consumer
from .conftest import START_KRAFT, Broker, free_port, unique_topic_name
from .rawkafka import RawConnection
from .test_java_tools import CONSOLE_CONSUMER, run_tool
from .wiretap import FetchExchange, FetchTap

PARTITIONS = 1000
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106
NEWEST_FETCH = 18  # Kafka 4.3's Fetch


@dataclass
class TappedBroker:
    """A broker of its own whose advertised address is ``tap``'s."""

    broker: Broker
    tap: FetchTap

    @property
    def bootstrap(self) -> str:
        return self.tap.address


@pytest.fixture(scope="module")
def tapped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[TappedBroker]:
    if request.config.getoption("bootstrap"):
        pytest.skip("needs a broker of its own (advertising the tap); --bootstrap given")
    kind = "kafka" if request.config.getoption("kafka") else "josefk"
    tmp = tmp_path_factory.mktemp("tapped")
    data_dir = tmp / "data"
    data_dir.mkdir()
    port = free_port()
    tap = FetchTap(("127.0.0.1", port)).start()
    advertised = f"advertised.listeners=PLAINTEXT://{tap.address}"
    if kind == "kafka":
        command = [str(START_KRAFT), str(data_dir), str(port), "--override", advertised]
    else:
        command = [sys.executable, "-m", "josefk.server", "serve",
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                   "--override", advertised, "--override", f"log.dirs={data_dir}"]
    broker = Broker(kind, f"127.0.0.1:{port}", command, data_dir, tmp / "broker.log",
                    start_timeout=90.0 if kind == "kafka" else 20.0)
    try:
        broker.start()
        yield TappedBroker(broker, tap)
    finally:
        broker.stop()
        tap.close()
    assert not tap.errors, tap.errors


def create_topic(bootstrap: str, partitions: int) -> str:
    name = unique_topic_name("compat-sessions")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        result = admin.create_topics({name: {"num_partitions": partitions, "configs": {}}},
                                     timeout_ms=30_000, wait_for_metadata=True)
        [created] = result["topics"]
        assert created["error_code"] == 0, created
    finally:
        admin.close()
    return name


def produce_one_each(bootstrap: str, topic: str, partitions: range) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, request_timeout_ms=30_000)
    try:
        for p in partitions:
            producer.send(topic, value=b"v%d" % p, partition=p)
        producer.flush(timeout=30)
    finally:
        producer.close()


def assert_incremental(fetches: list[FetchExchange], partitions: int) -> None:
    """A full Fetch of (at least) ``partitions`` partitions opens a session; the rest
    continue it, one epoch after another, smaller than the full one and most of them
    by far. A consumer that closes may close its session too: a last Fetch with epoch
    -1 (the Java consumer's)."""
    assert len(fetches) >= 4, fetches
    full, rest = fetches[0], fetches[1:]
    if rest[-1].session_epoch == -1:
        closing = rest.pop()
        assert closing.session_id == full.response_session_id, closing
        assert closing.response_session_id in (None, 0), closing
    assert (full.session_id, full.session_epoch) == (0, 0) and full.partitions >= partitions, full
    session_id = full.response_session_id
    assert full.response_error == 0 and session_id, full
    answered = [f for f in rest if f.response_error is not None]
    assert answered and all(f.response_error == 0 for f in answered), answered
    assert [f.session_id for f in rest] == [session_id] * len(rest)
    assert [f.session_epoch for f in rest] == list(range(1, len(rest) + 1))
    assert all(f.response_session_id == session_id for f in answered), answered
    sizes = sorted(f.size for f in rest)
    assert sizes[-1] < full.size and sizes[len(sizes) // 2] * 10 < full.size, (full.size, sizes)


@pytest.mark.timeout(240)
def test_kafka_python_fetches_incrementally_over_1000_partitions(tapped: TappedBroker) -> None:
    topic = create_topic(tapped.bootstrap, PARTITIONS)
    produce_one_each(tapped.bootstrap, topic, range(0, PARTITIONS, 50))
    client_id = unique_topic_name("kp-sessions")
    consumer = kafka_python_consumer(tapped.bootstrap, client_id=client_id, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(got) < PARTITIONS // 50
                                               or len(tapped.tap.fetches(client_id)) < 8):
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"v%d" % p for p in range(0, PARTITIONS, 50))
    fetches = tapped.tap.fetches(client_id)
    assert all(f.version <= 12 for f in fetches)  # kafka-python: topic names
    assert_incremental(fetches, PARTITIONS)


@pytest.mark.timeout(240)
def test_java_consumer_fetches_incrementally_at_the_newest_version(
        tapped: TappedBroker, kafka_tools: Path) -> None:
    with RawConnection(tapped.broker.bootstrap) as conn:
        assert conn.api_versions()[FetchRequest.API_KEY][1] == NEWEST_FETCH
    topic = create_topic(tapped.bootstrap, PARTITIONS)
    client_id = unique_topic_name("java-sessions")
    wanted = range(0, PARTITIONS, 100)
    stop = threading.Event()

    def trickle() -> None:
        """One record every 0.3 s once the consumer fetches: it fetches a while."""
        deadline = time.monotonic() + 120
        while not tapped.tap.fetches(client_id) and time.monotonic() < deadline:
            if stop.wait(0.05):
                return
        for p in wanted:
            if stop.wait(0.3):
                return
            produce_one_each(tapped.bootstrap, topic, [p])

    producer = threading.Thread(target=trickle, daemon=True)
    producer.start()
    try:
        done = run_tool(
            kafka_tools, CONSOLE_CONSUMER, "--bootstrap-server", tapped.bootstrap,
            "--topic", topic, "--from-beginning", "--max-messages", str(len(wanted)),
            "--timeout-ms", "60000", "--group", unique_topic_name("java-sessions"),
            "--command-property", f"client.id={client_id}",
            "--command-property", "fetch.max.wait.ms=200", timeout=150)
    finally:
        stop.set()
        producer.join(timeout=30)
    assert sorted(done.stdout.split()) == sorted(f"v{p}" for p in wanted)
    fetches = tapped.tap.fetches(client_id)
    assert {f.version for f in fetches} == {NEWEST_FETCH}  # by topic id
    # Its first Fetch may go before every partition has a position (904 of 1,000 seen
    # on Kafka 4.3.1): the others join the session in the next ones.
    assert_incremental(fetches, PARTITIONS // 2)
    assert sum(f.partitions for f in fetches) >= PARTITIONS


# --- what no client shows: raw requests ---------------------------------------------


def fetch_request(topic: str, partitions: list[tuple[int, int]], session_id: int, epoch: int,
                  forgotten: tuple[int, ...] = (), topic_id: Any = None) -> Any:
    FetchTopic = FetchRequest.FetchTopic
    parts = [FetchTopic.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=o,
                                       last_fetched_epoch=-1, log_start_offset=-1,
                                       partition_max_bytes=1 << 20) for p, o in partitions]
    kw = {"topic": topic} if topic_id is None else {"topic_id": topic_id}
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=0,
        session_id=session_id, session_epoch=epoch,
        topics=[FetchTopic(partitions=parts, **kw)] if parts else [],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(partitions=list(forgotten), **kw)]
        if forgotten else [],
        rack_id="")


def answered(response: Any) -> dict[int, tuple[int, int]]:
    """Partition -> (error code, high watermark) of a Fetch answer."""
    return {p.partition_index: (p.error_code, p.high_watermark)
            for t in response.responses for p in t.partitions}


def test_sessions_as_kafka_keeps_them(tapped: TappedBroker) -> None:
    topic = create_topic(tapped.bootstrap, 3)
    produce_one_each(tapped.bootstrap, topic, range(3))
    everything = [(0, 0), (1, 0), (2, 0)]
    with RawConnection(tapped.broker.bootstrap) as conn:
        unknown = conn.request(fetch_request(topic, everything, 12345, 1), 12)
        assert (unknown.error_code, unknown.session_id, unknown.responses) == (
            FETCH_SESSION_ID_NOT_FOUND, 0, [])
        full = conn.request(fetch_request(topic, everything, 0, 0), 12)
        assert full.error_code == 0 and full.session_id != 0
        assert answered(full) == {0: (0, 1), 1: (0, 1), 2: (0, 1)}
        session = full.session_id
    # The connection is gone, the session is not: a client may reconnect and go on.
    with RawConnection(tapped.broker.bootstrap) as conn:
        # Consumed the records: the new offsets, and nothing new to answer.
        moved = conn.request(fetch_request(topic, [(0, 1), (1, 1), (2, 1)], session, 1), 12)
        assert (moved.error_code, moved.session_id, answered(moved)) == (0, session, {})
        again = conn.request(fetch_request(topic, [], session, 1), 12)
        assert (again.error_code, again.session_id) == (INVALID_FETCH_SESSION_EPOCH, 0)
        topic_ids = conn.request(fetch_request(topic, [], session, 2,
                                               topic_id=_topic_id(conn, topic)), 13)
        assert topic_ids.error_code == FETCH_SESSION_TOPIC_ID_ERROR
        quiet = conn.request(fetch_request(topic, [], session, 2), 12)
        assert (quiet.error_code, quiet.session_id, answered(quiet)) == (0, session, {})
        produce_one_each(tapped.bootstrap, topic, [1])
        news = conn.request(fetch_request(topic, [], session, 3), 12)
        assert (news.session_id, answered(news)) == (session, {1: (0, 2)})  # only what moved
        # Forgetting every partition closes the session.
        closed = conn.request(fetch_request(topic, [], session, 4, forgotten=(0, 1, 2)), 12)
        assert (closed.error_code, closed.session_id, answered(closed)) == (0, 0, {})
        gone = conn.request(fetch_request(topic, [], session, 5), 12)
        assert gone.error_code == FETCH_SESSION_ID_NOT_FOUND
        # Epoch -1: a full fetch without a session; with a session id, it closes it.
        other = conn.request(fetch_request(topic, everything, 0, 0), 12).session_id
        sessionless = conn.request(fetch_request(topic, everything, other, -1), 12)
        assert (sessionless.error_code, sessionless.session_id) == (0, 0)
        assert answered(sessionless) == {0: (0, 1), 1: (0, 2), 2: (0, 1)}
        after = conn.request(fetch_request(topic, [], other, 1), 12)
        assert after.error_code == FETCH_SESSION_ID_NOT_FOUND


def _topic_id(conn: RawConnection, topic: str) -> Any:
    response = conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name=topic)], allow_auto_topic_creation=False), 12)
    return response.topics[0].topic_id


def test_librdkafka_fetches_without_a_session(tapped: TappedBroker) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = create_topic(tapped.bootstrap, 4)
    produce_one_each(tapped.bootstrap, topic, range(4))
    client_id = unique_topic_name("rdkafka")
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": tapped.bootstrap, "group.id": client_id, "client.id": client_id,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(4)])
        got = [m for m in consumer.consume(4, timeout=30) if m.error() is None]
        deadline = time.monotonic() + 10
        while len(tapped.tap.fetches(client_id)) < 3 and time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert len(got) == 4
    fetches = tapped.tap.fetches(client_id)
    assert fetches and {(f.session_id, f.session_epoch) for f in fetches} == {(0, -1)}
    assert {f.response_session_id for f in fetches if f.response_error is not None} == {0}
