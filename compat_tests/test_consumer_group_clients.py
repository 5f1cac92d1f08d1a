"""KIP-848 consumer groups with stock clients: Kafka 4.3.1's Java consumer (the console
consumer, ``group.protocol=consumer``), librdkafka (confluent-kafka) and
``kafka-consumer-groups.sh``. Consumers share a topic's partitions, rebalance as they
come and go, commit, and go on from their commits after the broker restarts. Green on
josefk and with ``--kafka``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from kafka import KafkaAdminClient

from josefk.cluster.coordinator.group.consumer.records import (
    METADATA,
    REGULAR_EXPRESSION,
    ConsumerKey,
    TopicMetadata,
)
from josefk.cluster.coordinator.group.consumer.subscriptions import group_hash
from josefk.cluster.coordinator.group.records import decode_key, decode_value, encode_record
from josefk.protocol.schemas.consumer_groups import ConsumerGroupDescribeRequest

from .clients import Rec, produce
from .conftest import Broker
from .rawkafka import RawConnection
from .test_group_migration import group_records
from .test_java_tools import run_tool

CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS = 4
WAIT = 60.0


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    for p in range(PARTITIONS):
        produce(bootstrap, topic, [Rec(None, v.encode()) for v in values[p::PARTITIONS]],
                partition=p)


def _members(bootstrap: str, group: str) -> dict[str, list[int]] | None:
    """Each member's partitions when the group is Stable, else None."""
    with RawConnection(bootstrap, timeout=15.0) as conn:
        g = conn.request(ConsumerGroupDescribeRequest[0](
            group_ids=[group], include_authorized_operations=False), 0).groups[0]
    if g.error_code or g.group_state != "Stable":
        return None
    return {m.member_id: sorted(p for tp in m.assignment.topic_partitions
                                for p in tp.partitions) for m in g.members}


def _wait_for_members(bootstrap: str, group: str, count: int) -> list[list[int]]:
    """The members' partitions once ``count`` members share all partitions, stably."""
    deadline = time.monotonic() + WAIT
    last = None
    while time.monotonic() < deadline:
        last = _members(bootstrap, group)
        if last is not None and len(last) == count and \
                sorted(p for ps in last.values() for p in ps) == list(range(PARTITIONS)):
            return sorted(last.values(), key=len)
        time.sleep(0.5)
    raise AssertionError(f"{group} never had {count} members sharing the topic: {last}")


def _committed(admin: KafkaAdminClient, group: str, topic: str) -> dict[int, int]:
    offsets = admin.list_group_offsets(group)[group]
    return {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == topic}


def _wait_for_commits(admin: KafkaAdminClient, group: str, topic: str, each: int) -> None:
    deadline = time.monotonic() + WAIT
    while (got := _committed(admin, group, topic)) != dict.fromkeys(range(PARTITIONS), each):
        assert time.monotonic() < deadline, got
        time.sleep(0.5)


# --- Java: the console consumer ---------------------------------------------------------


class JavaConsumer:
    """A console consumer in the group, printing each value on a line of its own."""

    def __init__(self, run_class: Path, bootstrap: str, topic: str, group: str, out: Path,
                 *extra: str) -> None:
        env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx192m",
                   KAFKA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        self.out = out
        self.process = subprocess.Popen(
            [str(run_class), CONSOLE_CONSUMER, "--bootstrap-server", bootstrap,
             "--topic", topic, "--group", group, "--from-beginning",
             "--consumer-property", "group.protocol=consumer",
             "--consumer-property", "auto.commit.interval.ms=200", *extra],
            stdout=out.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def values(self) -> list[str]:
        return [line for line in self.out.read_text().splitlines()
                if line.startswith("v") and " " not in line]

    def stop(self) -> None:
        """SIGTERM: the consumer closes, leaving the group (and committing)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def java_consumers(kafka_tools: Path, tmp_path: Path) -> Iterator[Callable[..., JavaConsumer]]:
    started: list[JavaConsumer] = []

    def start(bootstrap: str, topic: str, group: str, *extra: str) -> JavaConsumer:
        c = JavaConsumer(kafka_tools, bootstrap, topic, group,
                         tmp_path / f"consumer-{len(started)}.out", *extra)
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


@pytest.mark.timeout(360)
def test_java_consumers_share_rebalance_commit_and_resume(
        owned_broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient,
        java_consumers: Callable[..., JavaConsumer], kafka_tools: Path) -> None:
    bootstrap = owned_broker.bootstrap
    topic = make_topic(partitions=PARTITIONS)
    group = f"java-{uuid.uuid4().hex[:8]}"
    values = [f"v{i}" for i in range(40)]
    _produce(bootstrap, topic, values)

    first = java_consumers(bootstrap, topic, group)
    assert [len(ps) for ps in _wait_for_members(bootstrap, group, 1)] == [4]
    second = java_consumers(bootstrap, topic, group)
    assert [len(ps) for ps in _wait_for_members(bootstrap, group, 2)] == [2, 2]
    third = java_consumers(bootstrap, topic, group)
    assert [len(ps) for ps in _wait_for_members(bootstrap, group, 3)] == [1, 1, 2]
    first.stop()
    assert [len(ps) for ps in _wait_for_members(bootstrap, group, 2)] == [2, 2]
    _wait_for_commits(admin, group, topic, 10)

    # kafka-consumer-groups.sh sees the members and their offsets.
    described = run_tool(kafka_tools, GROUP_COMMAND, "--bootstrap-server", bootstrap,
                         "--describe", "--group", group).stdout
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    assert sorted(int(r[2]) for r in rows) == list(range(PARTITIONS))
    assert all(r[3] == "10" and r[5] == "0" and r[6] != "-" for r in rows), described
    listed = run_tool(kafka_tools, GROUP_COMMAND, "--bootstrap-server", bootstrap,
                      "--list", "--type").stdout
    assert [group, "Consumer"] in [line.split() for line in listed.splitlines()]

    second.stop()
    third.stop()
    seen = first.values() + second.values() + third.values()
    assert set(seen) == set(values)

    owned_broker.restart()
    more = [f"v{i}" for i in range(40, 48)]
    _produce(bootstrap, topic, more)
    again = java_consumers(bootstrap, topic, group, "--max-messages", "8",
                           "--timeout-ms", "60000")
    again.process.wait(timeout=120)
    assert sorted(again.values()) == sorted(more)  # from the commits, not the beginning


# --- librdkafka ------------------------------------------------------------------------------


def _confluent(bootstrap: str, group: str) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "client.id": "compat-confluent-848"})


def _poll_all(consumers: list[confluent_kafka.Consumer], until: Callable[[], bool],
              got: list[str]) -> None:
    deadline = time.monotonic() + WAIT
    while not until():
        assert time.monotonic() < deadline, [c.assignment() for c in consumers]
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
                c.commit(message=m, asynchronous=False)


@pytest.mark.timeout(300)
def test_librdkafka_consumers_share_rebalance_commit_and_resume(
        owned_broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient) -> None:
    bootstrap = owned_broker.bootstrap
    topic = make_topic(partitions=PARTITIONS)
    group = f"rdkafka-{uuid.uuid4().hex[:8]}"
    values = [f"v{i}" for i in range(40)]
    _produce(bootstrap, topic, values)
    one, two = _confluent(bootstrap, group), _confluent(bootstrap, group)
    got: list[str] = []
    try:
        for c in (one, two):
            c.subscribe([topic])

        def shared() -> bool:
            return sorted(len(c.assignment()) for c in (one, two)) == [2, 2] and \
                set(got) == set(values)
        _poll_all([one, two], shared, got)
        assert sorted(p.partition for c in (one, two) for p in c.assignment()) == \
            list(range(PARTITIONS))
        one.close()
        _poll_all([two], lambda: len(two.assignment()) == PARTITIONS, got)
        _wait_for_commits(admin, group, topic, 10)
    finally:
        two.close()

    owned_broker.restart()
    more = [f"v{i}" for i in range(40, 48)]
    _produce(bootstrap, topic, more)
    again = _confluent(bootstrap, group)
    resumed: list[str] = []
    try:
        again.subscribe([topic])
        _poll_all([again], lambda: len(resumed) >= len(more), resumed)
        assert sorted(resumed) == sorted(more)
        # A new admin client: the old one backs off from the broker it saw go away.
        fresh = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
        try:
            _wait_for_commits(fresh, group, topic, 12)
        finally:
            fresh.close()
    finally:
        again.close()


@pytest.mark.timeout(300)
def test_librdkafka_follows_new_topics_partitions_and_regex(
        broker: Broker, admin: KafkaAdminClient) -> None:
    """The target assignment follows the cluster: a subscribed topic created later, new
    partitions of a subscribed topic, topics a regular expression matches."""
    from kafka.admin import NewPartitions, NewTopic

    tag = uuid.uuid4().hex[:8]
    now, later, matched = f"now-{tag}", f"later-{tag}", f"rx-{tag}-one"
    admin.create_topics([NewTopic(now, 1, 1), NewTopic(matched, 2, 1)])
    by_name = _confluent(broker.bootstrap, f"names-{tag}")
    by_regex = _confluent(broker.bootstrap, f"regex-{tag}")
    got: list[str] = []
    try:
        by_name.subscribe([now, later])
        by_regex.subscribe([f"^rx-{tag}-.*"])
        produce(broker.bootstrap, now, [Rec(None, b"n0")])
        produce(broker.bootstrap, matched, [Rec(None, b"r0")], partition=1)
        _poll_all([by_name, by_regex], lambda: {"n0", "r0"} <= set(got), got)

        admin.create_topics([NewTopic(later, 1, 1), NewTopic(f"rx-{tag}-two", 1, 1)])
        admin.create_partitions({now: NewPartitions(2)})
        produce(broker.bootstrap, later, [Rec(None, b"l0")])
        produce(broker.bootstrap, now, [Rec(None, b"n1")], partition=1)
        produce(broker.bootstrap, f"rx-{tag}-two", [Rec(None, b"r1")])
        _poll_all([by_name, by_regex], lambda: {"l0", "n1", "r1"} <= set(got), got)
        assert sorted((p.topic, p.partition) for p in by_name.assignment()) == \
            [(later, 0), (now, 0), (now, 1)]
        assert sorted((p.topic, p.partition) for p in by_regex.assignment()) == \
            [(matched, 0), (matched, 1), (f"rx-{tag}-two", 0)]
        _check_regex_records(broker.bootstrap, admin, f"regex-{tag}", f"^rx-{tag}-.*",
                             {matched: 2, f"rx-{tag}-two": 1})
    finally:
        by_name.close()
        by_regex.close()


def _check_regex_records(bootstrap: str, admin: KafkaAdminClient, group: str, regex: str,
                         topics: dict[str, int]) -> None:
    """The regular expression's records as josefk's codec writes them, the last one
    with the topics it matches (sorted), and the last group epoch with their hash."""
    records = [(k, v) for k, v in group_records(bootstrap, group)
               if isinstance(decode_key(k), ConsumerKey)]
    for raw_key, raw_value in records:
        key = decode_key(raw_key)
        assert encode_record((key, decode_value(key, raw_value))) == (raw_key, raw_value), key
    values = [(key, decode_value(key, v)) for k, v in records
              if (key := decode_key(k)).type in (METADATA, REGULAR_EXPRESSION)]
    resolved = [v for key, v in values if key.type == REGULAR_EXPRESSION]
    # One expression: the one the client sent (librdkafka's form of what it was given).
    [sent] = {key.regex for key, _ in values if key.regex is not None}
    assert resolved and regex.lstrip("^") in sent, values
    assert resolved[-1].topics == tuple(sorted(topics)), resolved
    ids = {t["name"]: uuid.UUID(str(t["topic_id"])) for t in admin.describe_topics(list(topics))}
    epochs = [v for key, v in values if key.type == METADATA]
    assert epochs[-1].metadata_hash == group_hash(
        TopicMetadata(ids[name], name, n) for name, n in topics.items()), epochs


def _group_epoch(bootstrap: str, group: str) -> tuple[int, list[str]]:
    with RawConnection(bootstrap, timeout=15.0) as conn:
        g = conn.request(ConsumerGroupDescribeRequest[0](
            group_ids=[group], include_authorized_operations=False), 0).groups[0]
    return g.group_epoch, sorted(m.member_id for m in g.members)


@pytest.mark.timeout(300)
def test_a_member_goes_on_through_a_broker_restart(
        owned_broker: Broker, make_topic: Callable[..., str]) -> None:
    """The group is in ``__consumer_offsets``: after a restart the same member goes on
    at the same group epoch, from its commits, without a rebalance."""
    bootstrap = owned_broker.bootstrap
    topic = make_topic(partitions=PARTITIONS)
    group = f"restart-{uuid.uuid4().hex[:8]}"
    _produce(bootstrap, topic, [f"v{i}" for i in range(8)])
    consumer = _confluent(bootstrap, group)
    got: list[str] = []
    try:
        consumer.subscribe([topic])
        _poll_all([consumer], lambda: len(got) >= 8, got)
        before = _group_epoch(bootstrap, group)
        owned_broker.restart()
        _produce(bootstrap, topic, [f"w{i}" for i in range(8)])
        _poll_all([consumer], lambda: len(got) >= 16, got)
        assert sorted(got) == sorted([f"v{i}" for i in range(8)] + [f"w{i}" for i in range(8)])
        assert _group_epoch(bootstrap, group) == before
    finally:
        consumer.close()


@pytest.mark.timeout(300)
def test_an_empty_group_changes_protocol_and_keeps_its_offsets(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    """Classic, then consumer, then classic again: each new consumer goes on from the
    offsets the previous one committed."""
    bootstrap = broker.bootstrap
    topic = make_topic(partitions=1)
    group = f"switch-{uuid.uuid4().hex[:8]}"
    for round_, protocol in enumerate(("classic", "consumer", "classic")):
        produce(bootstrap, topic, [Rec(None, f"r{round_}-{i}".encode()) for i in range(3)])
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            **({"session.timeout.ms": 10000} if protocol == "classic" else {})})
        got: list[str] = []
        try:
            consumer.subscribe([topic])
            _poll_all([consumer], lambda got=got: len(got) >= 3, got)
            assert got == [f"r{round_}-{i}" for i in range(3)], protocol
        finally:
            consumer.close()


@pytest.mark.timeout(300)
def test_a_static_member_comes_back_to_its_partitions(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    """``group.instance.id``: a static member that closes keeps its place (epoch -2) and
    its successor with the same instance id gets its partitions back, without moving the
    other member's."""
    bootstrap = broker.bootstrap
    topic = make_topic(partitions=PARTITIONS)
    group = f"static-{uuid.uuid4().hex[:8]}"

    def static(instance: str) -> confluent_kafka.Consumer:
        c = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "group.instance.id": instance, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        return c

    first, other = static("one"), static("two")
    try:
        _poll_all([first, other], lambda: sorted(
            len(c.assignment()) for c in (first, other)) == [2, 2], [])
        mine = sorted(p.partition for p in first.assignment())
        theirs = sorted(p.partition for p in other.assignment())
        first.close()
        with RawConnection(bootstrap, timeout=15.0) as conn:
            described = conn.request(ConsumerGroupDescribeRequest[0](
                group_ids=[group], include_authorized_operations=False), 0).groups[0]
        # Still a member, away (epoch -2), its partitions kept for it.
        assert sorted((m.instance_id, m.member_epoch) for m in described.members)[0] == \
            ("one", -2)
        first = static("one")
        _poll_all([first, other], lambda: len(first.assignment()) == 2, [])
        assert sorted(p.partition for p in first.assignment()) == mine
        assert sorted(p.partition for p in other.assignment()) == theirs
    finally:
        first.close()
        other.close()
