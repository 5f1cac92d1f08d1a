"""Online migration of a group with members between the classic and the consumer
(KIP-848) protocols: classic kafka-python consumers share a topic; a librdkafka consumer
with ``group.protocol=consumer`` joins and the group becomes a consumer group whose
classic members go on speaking the classic protocol; it leaves and the group is classic
again. No partition is owned twice, no record is skipped. Green on josefk and with
``--kafka``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.protocol.admin import ListGroupsRequest

from josefk.cluster.coordinator.group.consumer.records import (
    ConsumerKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    TopicMetadata,
)
from josefk.cluster.coordinator.group.consumer.subscriptions import group_hash
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    decode_key,
    decode_value,
    encode_record,
)
from josefk.protocol.schemas.consumer_groups import ConsumerGroupDescribeRequest

from .clients import Rec, produce
from .conftest import Broker
from .rawkafka import RawConnection
from .test_java_tools import run_tool

PARTITIONS = 6
WAIT = 90.0
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # ConsumerGroupDescribe v1's MemberType


class ClassicMember(threading.Thread):
    """A kafka-python consumer polling in a thread of its own, noting what it reads."""

    def __init__(self, bootstrap: str, topic: str, group: str,
                 instance_id: str | None = None) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            auto_commit_interval_ms=200, session_timeout_ms=10000, heartbeat_interval_ms=500,
            client_id=f"classic-{uuid.uuid4().hex[:6]}", group_instance_id=instance_id)
        self.values: list[str] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.error: BaseException | None = None
        self.retried: list[KafkaError] = []

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    with self.lock:
                        batches = self.consumer.poll(timeout_ms=200)
                except KafkaError as e:
                    # kafka-python's poll can raise a retriable error (the broker
                    # restarting: ECONNREFUSED); an application polls on.
                    if not e.retriable:
                        raise
                    self.retried.append(e)
                    time.sleep(0.2)
                    continue
                for records in batches.values():
                    self.values += [r.value.decode() for r in records]
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def partitions(self) -> set[int]:
        with self.lock:
            return {tp.partition for tp in self.consumer.assignment()}

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        self.consumer.close()


def _group_type(bootstrap: str, group: str) -> str | None:
    with RawConnection(bootstrap, timeout=15.0) as conn:
        groups = conn.request(ListGroupsRequest[5](states_filter=[], types_filter=[]), 5).groups
    return next((g.group_type for g in groups if g.group_id == group), None)


def _described(bootstrap: str, group: str) -> object:
    with RawConnection(bootstrap, timeout=15.0) as conn:
        return conn.request(ConsumerGroupDescribeRequest[1](
            group_ids=[group], include_authorized_operations=False), 1).groups[0]


def group_records(bootstrap: str, group: str) -> list[tuple[bytes, bytes | None]]:
    """The raw (key, value) records of ``group`` in ``__consumer_offsets``, in order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition("__consumer_offsets", p)
                      for p in consumer.partitions_for_topic("__consumer_offsets")]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(partitions)
        found: list[tuple[bytes, bytes | None]] = []
        deadline = time.monotonic() + WAIT
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, "__consumer_offsets was not read to its end"
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    key = decode_key(r.key)
                    if key is not None and key.group == group:
                        found.append((r.key, r.value))
        return found
    finally:
        consumer.close()


def _check_upgrade_records(bootstrap: str, group: str, topic: TopicMetadata) -> None:
    """The upgrade as Kafka writes it: the classic group's tombstone, then each member's
    metadata (with its ClassicMemberMetadata), the group epoch, the target assignment,
    its epoch and the current assignments; every group record byte for byte as josefk's
    codec writes it, every group epoch with the hash of ``topic``'s metadata, every
    partition's assignment epoch no later than its member's."""
    records = [(key, k, v) for k, v in group_records(bootstrap, group)
               if isinstance(key := decode_key(k), (ConsumerKey, GroupMetadataKey))]
    for key, raw_key, raw_value in records:
        assert encode_record((key, decode_value(key, raw_value))) == (raw_key, raw_value), key
    values = [decode_value(key, v) for key, _, v in records if v is not None]
    hashes = {v.metadata_hash for v in values if isinstance(v, GroupEpochValue)}
    assert hashes == {group_hash([topic])}, hashes
    current = [v for v in values if isinstance(v, CurrentAssignmentValue)]
    assert any(v.epochs for v in current), current
    assert all(0 <= e <= v.member_epoch for v in current for e in v.epochs.values()), current
    kinds = [key.type if isinstance(key, ConsumerKey) else
             "tombstone" if isinstance(key, GroupMetadataKey) and value is None else "other"
             for key, _, value in records]
    start = kinds.index("tombstone")
    assert kinds[start + 1:start + 9] == [5, 5, 3, 7, 7, 6, 8, 8], kinds
    classic = [decode_value(key, value).classic for key, _, value in records[start + 1:start + 3]]
    assert all(c is not None and c.protocols for c in classic), classic


def _wait(what: str, condition: Callable[[], bool], poll: Callable[[], None] = lambda: None
          ) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        poll()
        time.sleep(0.2)


def _committed(admin: KafkaAdminClient, group: str, topic: str) -> dict[int, int]:
    offsets = admin.list_group_offsets(group)[group]
    return {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == topic}


def _values(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


class MixedGroup:
    """Two classic members in a group on a topic, and a consumer-protocol one to come."""

    def __init__(self, bootstrap: str, topic: str,
                 instance_ids: tuple[str | None, ...] = (None, None)) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.group = f"migrate-{uuid.uuid4().hex[:8]}"
        self.classic = [ClassicMember(bootstrap, topic, self.group, instance_id)
                        for instance_id in instance_ids]
        for member in self.classic:
            member.start()
        self.new: confluent_kafka.Consumer | None = None
        self.new_values: list[str] = []

    def send(self, prefix: str, n: int) -> list[str]:
        values = _values(prefix, n)
        for p in range(PARTITIONS):
            produce(self.bootstrap, self.topic,
                    [Rec(None, v.encode()) for v in values[p::PARTITIONS]], partition=p)
        return values

    def read(self) -> set[str]:
        return {v for m in self.classic for v in m.values} | set(self.new_values)

    def classic_share(self) -> bool:
        return sorted(len(m.partitions()) for m in self.classic) == [3, 3]

    def join_consumer_member(self) -> None:
        self.new = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "group.protocol": "consumer", "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 200})
        self.new.subscribe([self.topic])
        _wait("the group becomes a consumer group",
              lambda: _group_type(self.bootstrap, self.group) == "consumer", self.poll_new)

    def poll_new(self) -> None:
        if self.new is not None:
            message = self.new.poll(0.2)
            if message is not None and message.error() is None:
                self.new_values.append(message.value().decode())

    def all_share(self) -> bool:
        """Three members, Stable, each with partitions, each partition once."""
        g = _described(self.bootstrap, self.group)
        owned = [p for m in g.members for tp in m.assignment.topic_partitions
                 for p in tp.partitions]
        return g.group_state == "Stable" and len(g.members) == 3 and \
            sorted(owned) == list(range(PARTITIONS)) and \
            all(tp.partitions for m in g.members for tp in m.assignment.topic_partitions)

    def close_consumer_member(self) -> None:
        if self.new is not None:
            self.new.close()
            self.new = None

    def close(self) -> None:
        self.close_consumer_member()
        for member in self.classic:
            member.stop()


@pytest.mark.timeout(400)
def test_a_mixed_group_upgrades_and_downgrades(broker: Broker, make_topic: Callable[..., str],
                                               kafka_tools: Path,
                                               admin: KafkaAdminClient) -> None:
    bootstrap = broker.bootstrap
    topic = make_topic(partitions=PARTITIONS)
    mixed = MixedGroup(bootstrap, topic)
    group, classic = mixed.group, mixed.classic
    try:
        first = mixed.send("a", 60)
        _wait("two classic members share the topic", mixed.classic_share)
        _wait("the classic members read the first records", lambda: set(first) <= mixed.read())
        assert _group_type(bootstrap, group) == "classic"

        mixed.join_consumer_member()
        second = mixed.send("b", 120)
        _wait("three members, two classic, share the partitions", mixed.all_share,
              mixed.poll_new)
        g = _described(bootstrap, group)
        assert len({m.member_epoch for m in g.members}) == 1
        assert sorted(m.member_type for m in g.members) == \
            [CLASSIC_MEMBER, CLASSIC_MEMBER, CONSUMER_MEMBER]
        described_topic = admin.describe_topics([topic])[0]
        _check_upgrade_records(bootstrap, group, TopicMetadata(
            uuid.UUID(str(described_topic["topic_id"])), topic, PARTITIONS))
        described = run_tool(kafka_tools, GROUP_COMMAND, "--bootstrap-server", bootstrap,
                             "--describe", "--members", "--group", group).stdout
        assert len([line for line in described.splitlines()
                    if line.startswith(group + " ")]) == 3, described
        # What the clients hold: each partition once (the classic members as the
        # coordinator answered their SyncGroup, the new one as its heartbeats told it).
        new = mixed.new
        assert new is not None
        _wait("every member holds its partitions", lambda: len(new.assignment()) > 0 and all(
            m.partitions() for m in classic), mixed.poll_new)
        held = [p for m in classic for p in m.partitions()] + \
            [tp.partition for tp in new.assignment()]
        assert sorted(held) == list(range(PARTITIONS))
        _wait("the records so far are read", lambda: set(first + second) <= mixed.read(),
              mixed.poll_new)
        # Both kinds of member commit what they read (the classic ones at their generation).
        _wait("every partition's records are committed", lambda: _committed(
            admin, group, topic) == dict.fromkeys(range(PARTITIONS), 30), mixed.poll_new)

        mixed.close_consumer_member()
        _wait("the group is classic again", lambda: _group_type(bootstrap, group) == "classic")
        third = mixed.send("c", 60)
        _wait("the classic members share the topic again", mixed.classic_share)
        _wait("the classic members read on", lambda: set(third) <= {
            v for m in classic for v in m.values})
        assert set(first + second + third) <= mixed.read()
        assert all(m.error is None for m in classic), [m.error for m in classic]
    finally:
        mixed.close()


@pytest.mark.timeout(400)
def test_a_restart_mid_migration_goes_on(owned_broker: Broker,
                                         make_topic: Callable[..., str]) -> None:
    """The broker killed while the group is mixed: it comes back a consumer group with
    its classic members, which go on reading, and still downgrades after."""
    bootstrap = owned_broker.bootstrap
    topic = make_topic(partitions=PARTITIONS)
    mixed = MixedGroup(bootstrap, topic)
    try:
        first = mixed.send("a", 60)
        _wait("two classic members share the topic", mixed.classic_share)
        mixed.join_consumer_member()
        _wait("three members share the partitions", mixed.all_share, mixed.poll_new)
        owned_broker.restart(kill=True)
        _wait("the group is loaded, still a consumer group",
              lambda: _group_type(bootstrap, mixed.group) == "consumer", mixed.poll_new)
        second = mixed.send("b", 60)
        _wait("the records are read after the restart",
              lambda: set(first + second) <= mixed.read(), mixed.poll_new)
        _wait("three members share the partitions again", mixed.all_share, mixed.poll_new)
        mixed.close_consumer_member()
        _wait("the group is classic again",
              lambda: _group_type(bootstrap, mixed.group) == "classic")
        third = mixed.send("c", 60)
        _wait("the classic members read on", lambda: set(third) <= mixed.read())
        assert all(m.error is None for m in mixed.classic), [m.error for m in mixed.classic]
    finally:
        mixed.close()


def _static_members(bootstrap: str, group: str) -> dict[str, str]:
    """Instance id -> member id of the group's static members."""
    return {m.instance_id: m.member_id for m in _described(bootstrap, group).members
            if m.instance_id is not None}


@pytest.mark.timeout(400)
def test_a_static_classic_member_started_again_replaces_its_instance(
        broker: Broker, make_topic: Callable[..., str]) -> None:
    """In a mixed group, a classic consumer with a ``group.instance.id`` started again
    (the old client still running) takes its instance's place under a new member id, as
    Kafka 4 replaces static members; the group keeps three members and reads on."""
    bootstrap = broker.bootstrap
    topic = make_topic(partitions=PARTITIONS)
    mixed = MixedGroup(bootstrap, topic, instance_ids=("static-0", "static-1"))
    try:
        first = mixed.send("a", 60)
        _wait("two classic members share the topic", mixed.classic_share)
        mixed.join_consumer_member()
        _wait("three members share the partitions", mixed.all_share, mixed.poll_new)
        old_id = _static_members(bootstrap, mixed.group)["static-0"]
        old = mixed.classic[0]
        mixed.classic[0] = ClassicMember(bootstrap, topic, mixed.group, "static-0")
        mixed.classic[0].start()
        _wait("the instance has a new member id", lambda: _static_members(
            bootstrap, mixed.group).get("static-0") not in (None, old_id), mixed.poll_new)
        old.stop()
        second = mixed.send("b", 60)
        _wait("three members share the partitions again", mixed.all_share, mixed.poll_new)
        assert set(_static_members(bootstrap, mixed.group)) == {"static-0", "static-1"}
        _wait("the records are read", lambda: set(first + second) <= mixed.read() | set(
            old.values), mixed.poll_new)
        assert all(m.error is None for m in mixed.classic), [m.error for m in mixed.classic]
    finally:
        mixed.close()
