"""Client quotas as clients see them: set with Kafka's own ``kafka-configs.sh``
(``kafka.admin.ConfigCommand``), described and validated as Kafka 4.3 answers
DescribeClientQuotas and AlterClientQuotas, and enforced: a kafka-python producer and
consumer are held to their ``producer_byte_rate`` / ``consumer_byte_rate`` within 10 %
and see the throttle time in their metrics.

A quota's rate is sampled over 11 windows of 1 s, so a client that can go faster than
its quota goes in cycles of about that span: a burst of a whole span's worth as soon as
the oldest samples roll out of the rate, then throttled until they roll out again (on
Apache Kafka as on josefk). The rate is measured over whole cycles, from the second
burst to the last (or, should the flow settle, from a span after the last burst), over a
run of ``JOSEFK_QUOTA_RUN_S`` seconds (36 by default; ``make bench-quotas`` runs 100).
Quotas are set on client ids of each test's own, so the shared broker's other tests are
not throttled.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)
from kafka.protocol.metadata import MetadataRequest

from .conftest import Broker
from .rawkafka import RawConnection
from .test_java_tools import run_tool

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
INVALID_REQUEST = 42
RUN_S = float(os.environ.get("JOSEFK_QUOTA_RUN_S", "36"))  # three cycles and a bit
SPAN_S = 12.0  # quota.window.num × quota.window.size.seconds, and a bit
RATE = 256 * 1024  # bytes per second
VALUE = b"q" * 8192
TOLERANCE = 0.10
ENFORCEMENT_TIMEOUT = 150 + 2 * RUN_S
BACKLOG = 64  # records sent and not yet acknowledged


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def configs(broker: Broker, kafka_tools: Path) -> Callable[..., str]:
    """Run kafka-configs.sh against the broker; its standard output."""

    def run(*args: str) -> str:
        return run_tool(kafka_tools, CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap,
                        *args).stdout
    return run


@pytest.fixture
def raw(broker: Broker) -> Iterator[RawConnection]:
    with RawConnection(broker.bootstrap, timeout=15.0) as conn:
        yield conn


# --- kafka-configs.sh ------------------------------------------------------------------

@pytest.mark.timeout(300)  # seven JVM starts of kafka-configs.sh
def test_kafka_configs_sets_describes_and_deletes_quotas(broker: Broker,
                                                         configs: Callable[..., str]) -> None:
    client, user = unique("qc-client"), unique("qc-user")
    configs("--alter", "--entity-type", "clients", "--entity-name", client,
            "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    configs("--alter", "--entity-type", "users", "--entity-name", user,
            "--add-config", "request_percentage=25.5")
    configs("--alter", "--entity-type", "users", "--entity-name", user,
            "--entity-type", "clients", "--entity-name", client,
            "--add-config", "producer_byte_rate=4096")

    described = configs("--describe", "--entity-type", "clients", "--entity-name", client)
    assert (f"Quota configs for client-id '{client}' are consumer_byte_rate=2097152.0, "
            "producer_byte_rate=1048576.0") in described
    described = configs("--describe", "--entity-type", "users", "--entity-name", user)
    assert f"Quota configs for user-principal '{user}' are request_percentage=25.5" in described
    described = configs("--describe", "--entity-type", "users", "--entity-name", user,
                        "--entity-type", "clients", "--entity-name", client)
    assert (f"Quota configs for user-principal '{user}', client-id '{client}' are "
            "producer_byte_rate=4096.0") in described

    configs("--alter", "--entity-type", "clients", "--entity-name", client,
            "--delete-config", "producer_byte_rate")
    with RawConnection(broker.bootstrap, timeout=15.0) as raw:
        assert _describe(raw, [("client-id", 0, client)], strict=True) == {
            (("client-id", client),): {"consumer_byte_rate": 2097152.0}}
        _alter(raw, {"client-id": client}, [("consumer_byte_rate", None)])
        _alter(raw, {"user": user}, [("request_percentage", None)])
        _alter(raw, {"user": user, "client-id": client}, [("producer_byte_rate", None)])
        assert _describe(raw, [("user", 0, user)]) == {}
        assert _describe(raw, [("client-id", 0, client)]) == {}


# --- AlterClientQuotas and DescribeClientQuotas on the wire ----------------------------

def _alter(raw: RawConnection, entity: dict[str, str | None],
           ops: list[tuple[str, float | None]], validate_only: bool = False
           ) -> tuple[int, str | None]:
    E = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(validate_only=validate_only, entries=[E(
        entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[E.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops])])
    [entry] = raw.request(request, 1).entries
    return entry.error_code, entry.error_message


def _describe(raw: RawConnection, components: list[tuple[str, int, str | None]],
              strict: bool = False) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    C = DescribeClientQuotasRequest.ComponentData
    response = raw.request(DescribeClientQuotasRequest(strict=strict, components=[
        C(entity_type=t, match_type=m, match=n) for t, m, n in components]), 1)
    assert response.error_code == 0, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def test_alter_client_quotas_refuses_what_kafka_refuses(raw: RawConnection) -> None:
    client = {"client-id": unique("qv")}
    assert _alter(raw, client, [("producer_byte_rate", -5.0)]) == (
        INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0")
    assert _alter(raw, client, [("no_such_quota", 5.0)]) == (
        INVALID_REQUEST, "Invalid configuration key no_such_quota")
    assert _alter(raw, client, [("producer_byte_rate", 1.5)]) == (
        INVALID_REQUEST, "producer_byte_rate cannot be a fractional value.")
    assert _alter(raw, {}, [("producer_byte_rate", 5.0)]) == (
        INVALID_REQUEST, "Invalid empty client quota entity")
    assert _alter(raw, {"client-id": ""}, [("producer_byte_rate", 5.0)]) == (
        INVALID_REQUEST, "Empty client-id not supported")
    assert _alter(raw, {"group": "g"}, [("producer_byte_rate", 5.0)])[0] == INVALID_REQUEST
    # validate_only checks and keeps nothing.
    assert _alter(raw, client, [("request_percentage", 12.5)], validate_only=True) == (0, None)
    assert _describe(raw, [("client-id", 0, client["client-id"])]) == {}


def test_describe_client_quotas_filters(raw: RawConnection) -> None:
    user, client = unique("qf-user"), unique("qf-client")
    made = [({"user": user}, 100.0), ({"user": user, "client-id": client}, 200.0),
            ({"client-id": client}, 300.0), ({"user": user, "client-id": None}, 400.0)]
    try:
        for entity, rate in made:
            assert _alter(raw, entity, [("producer_byte_rate", rate)]) == (0, None)
        exact_user = _describe(raw, [("user", 0, user)])
        assert exact_user == {(("user", user),): {"producer_byte_rate": 100.0},
                              (("client-id", client), ("user", user)):
                                  {"producer_byte_rate": 200.0},
                              (("client-id", None), ("user", user)):
                                  {"producer_byte_rate": 400.0}}
        assert _describe(raw, [("user", 0, user)], strict=True) == {
            (("user", user),): {"producer_byte_rate": 100.0}}
        assert _describe(raw, [("user", 0, user), ("client-id", 1, None)]) == {
            (("client-id", None), ("user", user)): {"producer_byte_rate": 400.0}}
        specified = _describe(raw, [("user", 0, user), ("client-id", 2, None)])
        assert set(specified) == {(("client-id", client), ("user", user)),
                                  (("client-id", None), ("user", user))}
        assert _describe(raw, [("client-id", 0, client)], strict=True) == {
            (("client-id", client),): {"producer_byte_rate": 300.0}}
    finally:
        for entity, _ in made:
            _alter(raw, entity, [("producer_byte_rate", None)])
    assert _describe(raw, [("user", 0, user)]) == {}


def test_describe_client_quotas_refuses_a_bad_filter(raw: RawConnection) -> None:
    C = DescribeClientQuotasRequest.ComponentData
    response = raw.request(DescribeClientQuotasRequest(strict=False, components=[
        C(entity_type="user", match_type=0, match=None)]), 1)
    assert (response.error_code, response.error_message) == (
        INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
    response = raw.request(DescribeClientQuotasRequest(strict=False, components=[
        C(entity_type="user", match_type=2, match=None),
        C(entity_type="user", match_type=1, match=None)]), 1)
    assert response.error_code == INVALID_REQUEST


# --- enforcement -----------------------------------------------------------------------

class Acks:
    """Acknowledged bytes with the time each came back."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.times: list[tuple[float, int]] = []

    def add(self, size: int) -> None:
        with self.lock:
            self.times.append((time.monotonic(), size))

    def bursts(self) -> list[float]:
        """When each burst began: a transfer after a pause of half a second or more that
        brings two seconds' quota within a second (a burst is a span's worth)."""
        with self.lock:
            times = list(self.times)
        starts = []
        for i, (t, _) in enumerate(times):
            if i > 0 and t - times[i - 1][0] < 0.5:
                continue
            if sum(size for u, size in times[i:] if u < t + 1.0) >= 2 * RATE:
                starts.append(t)
        return starts

    def rate_over_cycles(self) -> float:
        """The rate from the second burst to the last (the first is the new client's
        allowance of a whole span); once the flow settles without bursts, the steady
        rate from a span after the last one."""
        starts = self.bursts()
        with self.lock:
            times = list(self.times)
        if len(starts) >= 3:
            start, end = starts[1], starts[-1]
            print(f"{len(starts) - 2} cycles over {end - start:.1f} s")
        else:
            start, end = starts[-1] + SPAN_S, times[-1][0]
            assert end - start >= SPAN_S, f"neither cycles nor a steady flow: bursts {starts}"
            print(f"steady over {end - start:.1f} s")
        done = sum(size for t, size in times if start <= t < end)
        return done / (end - start)


def _throttle_max(metrics: dict[str, dict[str, float]], group: str) -> float:
    return max(metrics[group].get("throttle-time-max", 0.0),
               metrics[group].get("produce-throttle-time-max", 0.0),
               metrics[group].get("fetch-throttle-time-max", 0.0))


def _within(measured: float, quota: float) -> None:
    print(f"measured {measured:.0f} B/s against a quota of "
          f"{quota:.0f} B/s: {measured / quota:.3f}")
    assert abs(measured - quota) <= TOLERANCE * quota, (
        f"measured {measured:.0f} B/s against a quota of {quota:.0f} B/s "
        f"({measured / quota - 1:+.1%})")


@pytest.mark.timeout(ENFORCEMENT_TIMEOUT)
def test_producer_is_held_to_producer_byte_rate(broker: Broker, make_topic: Callable[..., str],
                                                configs: Callable[..., str]) -> None:
    topic = make_topic()
    client = unique("qp")
    configs("--alter", "--entity-type", "clients", "--entity-name", client,
            "--add-config", f"producer_byte_rate={RATE}")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id=client,
                             batch_size=32 * 1024, linger_ms=5, max_block_ms=60_000,
                             request_timeout_ms=60_000)
    acks = Acks()
    try:
        began = time.monotonic()
        end = began + RUN_S
        sent = 0
        while time.monotonic() < end:
            # A bounded backlog: what is acknowledged is what the broker let through.
            if sent - len(acks.times) < BACKLOG:
                future = producer.send(topic, VALUE)
                future.add_callback(lambda _: acks.add(len(VALUE)))
                sent += 1
            else:
                time.sleep(0.005)
        _within(acks.rate_over_cycles(), RATE)
        assert _throttle_max(producer.metrics(), "producer-metrics") > 0
    finally:
        producer.close(timeout=30)
        with RawConnection(broker.bootstrap, timeout=15.0) as raw:
            _alter(raw, {"client-id": client}, [("producer_byte_rate", None)])


@pytest.mark.timeout(ENFORCEMENT_TIMEOUT)
def test_consumer_is_held_to_consumer_byte_rate(broker: Broker, make_topic: Callable[..., str],
                                                configs: Callable[..., str]) -> None:
    topic = make_topic()
    total = int(RATE * RUN_S * 1.5)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id=unique("qfill"),
                             batch_size=64 * 1024, linger_ms=20)
    for _ in range(total // len(VALUE)):
        producer.send(topic, VALUE)
    producer.flush(timeout=60)
    producer.close()
    client = unique("qcons")
    configs("--alter", "--entity-type", "clients", "--entity-name", client,
            "--add-config", f"consumer_byte_rate={RATE}")
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, client_id=client,
                             group_id=None, auto_offset_reset="earliest",
                             max_partition_fetch_bytes=1024, fetch_max_bytes=1024)
    # Limits below one batch: each fetch answers one whole batch (KIP-74), so the bytes
    # counted against the quota are the records the consumer gets, in steps of 64 KiB.
    got = Acks()
    try:
        began = time.monotonic()
        end = began + RUN_S
        while time.monotonic() < end:
            for records in consumer.poll(timeout_ms=200).values():
                got.add(sum(len(r.value) for r in records))
        assert got.times, "the consumer read nothing"
        _within(got.rate_over_cycles(), RATE)
        assert _throttle_max(consumer.metrics(), "consumer-metrics") > 0
    finally:
        consumer.close()
        with RawConnection(broker.bootstrap, timeout=15.0) as raw:
            _alter(raw, {"client-id": client}, [("consumer_byte_rate", None)])


@pytest.mark.timeout(180)
def test_request_percentage_throttles_a_busy_client(broker: Broker,
                                                    configs: Callable[..., str]) -> None:
    client = unique("qr")
    configs("--alter", "--entity-type", "clients", "--entity-name", client,
            "--add-config", "request_percentage=0.01")
    try:
        with RawConnection(broker.bootstrap, timeout=15.0, client_id=client) as raw:
            deadline = time.monotonic() + 60
            throttled = 0
            while not throttled and time.monotonic() < deadline:
                response = raw.request(MetadataRequest(
                    topics=[], allow_auto_topic_creation=False), 9)
                throttled = response.throttle_time_ms
        # Kafka bounds a request-time throttle by one quota window.
        assert 0 < throttled <= 1000
    finally:
        with RawConnection(broker.bootstrap, timeout=15.0) as raw:
            _alter(raw, {"client-id": client}, [("request_percentage", None)])


# --- connection creation rate per address (IP entities) -----------------------------------

IP_RATE = 2


def _answered_from(broker: Broker, source: str, correlation_id: int) -> bool:
    """A connection from ``source`` gets its ApiVersions answered (False: the broker
    closed it unanswered)."""
    from .test_connection_limits import answered, connect

    with connect(broker, source) as sock:
        sock.settimeout(15)
        return answered(sock, correlation_id)


@pytest.mark.timeout(300)
def test_an_address_over_its_connection_creation_rate_is_closed(
        broker: Broker, configs: Callable[..., str], raw: RawConnection) -> None:
    """``kafka-configs.sh --entity-type ips``: connections from that address over its rate
    are accepted and closed unanswered; other addresses are not held back."""
    source = "127.0.0.7"
    configs("--alter", "--entity-type", "ips", "--entity-name", source,
            "--add-config", f"connection_creation_rate={IP_RATE}")
    try:
        described = configs("--describe", "--entity-type", "ips", "--entity-name", source)
        assert f"Quota configs for ip '{source}' are connection_creation_rate={IP_RATE}" \
            in described
        assert _describe(raw, [("ip", 0, source)]) == {
            (("ip", source),): {"connection_creation_rate": float(IP_RATE)}}
        assert _alter(raw, {"ip": source}, [("producer_byte_rate", 5.0)]) == (
            INVALID_REQUEST, "Invalid configuration key producer_byte_rate")
        assert _alter(raw, {"ip": source, "user": "u"}, [("connection_creation_rate", 5.0)]
                      )[0] == INVALID_REQUEST
        # Kafka's rate spans ten windows at least: 10 * IP_RATE come at once, then no more.
        outcomes = [_answered_from(broker, source, i) for i in range(10 * IP_RATE + 5)]
        assert not all(outcomes), "no connection over the rate was closed"
        assert sum(outcomes) >= 10 * IP_RATE - 2, outcomes
        assert _answered_from(broker, "127.0.0.8", 99), "another address was held back"
    finally:
        configs("--alter", "--entity-type", "ips", "--entity-name", source,
                "--delete-config", "connection_creation_rate")
    assert _describe(raw, [("ip", 0, source)]) == {}


# --- controller_mutation_rate (KIP-599) ----------------------------------------------------

MUTATION_RATE = 2.0  # partitions a second; the bucket holds 11 seconds of it: 22
THROTTLING_QUOTA_EXCEEDED = 89


def _create_topics(conn: RawConnection, version: int, topics: dict[str, int]
                   ) -> tuple[int, list[tuple[str, int]]]:
    from kafka.protocol.admin import CreateTopicsRequest

    T = CreateTopicsRequest.CreatableTopic
    response = conn.request(CreateTopicsRequest[version](topics=[
        T(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
        for n, p in topics.items()], timeout_ms=30_000, validate_only=False), version)
    return response.throttle_time_ms, [(t.name, t.error_code) for t in response.topics]


@pytest.mark.timeout(180)
def test_controller_mutation_rate_refuses_then_throttles(broker: Broker,
                                                         raw: RawConnection) -> None:
    """A client's partition creations draw a token bucket of 11 seconds of its
    ``controller_mutation_rate``: CreateTopics v6+ refuses the topic that finds it empty
    (THROTTLING_QUOTA_EXCEEDED, with the throttle time); v5 creates it and throttles."""
    client = unique("mutator")
    assert _alter(raw, {"client-id": client}, [("controller_mutation_rate",
                                                 MUTATION_RATE)]) == (0, None)
    names = [unique("mut") for _ in range(4)]
    try:
        with RawConnection(broker.bootstrap, timeout=30.0, client_id=client) as conn:
            throttle, results = _create_topics(conn, 7, {names[0]: 20, names[1]: 10})
            assert results == [(names[0], 0), (names[1], 0)]  # 22 - 20 - 10 = -8 tokens
            assert throttle == 0  # nothing refused, nothing throttled: the bucket had some
        with RawConnection(broker.bootstrap, timeout=30.0, client_id=client) as conn:
            throttle, results = _create_topics(conn, 7, {names[2]: 1})
            assert results == [(names[2], THROTTLING_QUOTA_EXCEEDED)]
            # About 8 tokens short at 2 a second: some 4 s, less what has elapsed.
            assert 1000 <= throttle <= 4000, throttle
        with RawConnection(broker.bootstrap, timeout=30.0, client_id=client) as conn:
            throttle, results = _create_topics(conn, 5, {names[3]: 1})
            assert results == [(names[3], 0)] and throttle > 0
    finally:
        with RawConnection(broker.bootstrap, timeout=30.0) as conn:
            from kafka.protocol.admin import DeleteTopicsRequest
            conn.request(DeleteTopicsRequest[4](topic_names=names, timeout_ms=30_000), 4)
        _alter(raw, {"client-id": client}, [("controller_mutation_rate", None)])
