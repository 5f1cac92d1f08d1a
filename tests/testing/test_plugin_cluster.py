"""The ``kafka_cluster`` fixture: ZooKeeper and three josefk broker processes that a test
kills, pauses and restarts, seen through stock clients.

The module's brokers drop a follower from the ISR after 2 s without fetching
(``replica.lag.time.max.ms``), well inside their 6 s ZooKeeper session, so a paused
follower leaves the ISR through the leader's lag check.
"""

from __future__ import annotations

import socket
import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.errors import KafkaError
from kazoo.client import KazooClient

from josefk.testing.polling import wait_until

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def kafka_cluster_config() -> dict[str, str]:
    return {"replica.lag.time.max.ms": "2000"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def partition_0(bootstrap: str, topic: str) -> dict[str, Any]:
    """Partition 0 of ``topic`` as kafka-python's admin client describes it."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5_000)
    try:
        [described] = admin.describe_topics([topic])
    finally:
        admin.close()
    return next(p for p in described["partitions"] if p["partition_index"] == 0)


def producer_on(bootstrap: str, acks: str = "all") -> Producer:
    """A confluent-kafka producer, idempotent with acks=all."""
    return Producer({"bootstrap.servers": bootstrap, "acks": acks,
                     "enable.idempotence": acks == "all", "message.timeout.ms": 60_000})


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str = "all",
            producer: Producer | None = None) -> None:
    """Produce ``values`` (with ``producer``, or a new one); every one must be
    acknowledged."""
    errors: list[Any] = []
    producer = producer or producer_on(bootstrap, acks)
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(90) == 0, "messages still unacknowledged"
    assert not errors, errors


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


def test_three_brokers_on_a_zookeeper_chroot_of_their_own(kafka_cluster: Any) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    ports = {b["broker_id"]: b["port"] for b in described["brokers"]}
    assert ports == {i: int(b.bootstrap.rsplit(":", 1)[1])
                     for i, b in kafka_cluster.brokers.items()}
    assert described["controller_id"] == kafka_cluster.controller_id()
    assert kafka_cluster.bootstrap.split(",") == [b.bootstrap
                                                  for b in kafka_cluster.brokers.values()]

    zk = KazooClient(hosts=kafka_cluster.zookeeper_connect)
    zk.start(timeout=20)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
    finally:
        zk.stop()
        zk.close()

    for broker in kafka_cluster.brokers.values():
        with urllib.request.urlopen(broker.metrics_url + "/metrics", timeout=10) as response:
            assert response.status == 200


def test_a_killed_leader_is_replaced_while_a_producer_keeps_writing(kafka_cluster: Any) -> None:
    topic = unique("failover")
    kafka_cluster.create_topic(topic, partitions=1, replication_factor=3,
                               config={"min.insync.replicas": "2"})
    first = [f"before-{i}".encode() for i in range(50)]
    then = [f"after-{i}".encode() for i in range(50)]
    producer = producer_on(kafka_cluster.bootstrap)
    produce(kafka_cluster.bootstrap, topic, first, producer=producer)

    old = kafka_cluster.leader(topic)
    old.kill()
    try:
        assert not old.running
        produce(kafka_cluster.bootstrap, topic, then, producer=producer)
        survivors = ",".join(b.bootstrap for b in kafka_cluster.brokers.values() if b.running)
        new_leader = partition_0(survivors, topic)["leader_id"]
        assert new_leader != old.id and new_leader == kafka_cluster.leader(topic).id
        assert read_all(survivors, topic, 100) == first + then
    finally:
        old.restart()
    assert old.running


def test_a_paused_follower_leaves_the_isr_and_rejoins_after_resume(kafka_cluster: Any) -> None:
    topic = unique("paused")
    kafka_cluster.create_topic(topic)
    leader, controller = kafka_cluster.leader(topic).id, kafka_cluster.controller_id()
    follower = next(b for i, b in kafka_cluster.brokers.items() if i not in (leader, controller))
    running = ",".join(b.bootstrap for i, b in kafka_cluster.brokers.items() if i != follower.id)

    def isr() -> list[int]:
        return partition_0(running, topic)["isr_nodes"]

    follower.pause()
    try:
        produce(kafka_cluster.brokers[leader].bootstrap, topic, [b"while paused"], acks="1")
        # The admin client may ask the paused broker, and time out: ask again.
        wait_until(lambda: follower.id not in isr(), 30, f"broker {follower.id} to leave "
                   "the ISR", interval=0.5, not_yet=(KafkaError, OSError))
    finally:
        follower.resume()
    wait_until(lambda: follower.id in isr(), 60, f"broker {follower.id} back in the ISR",
               interval=0.5, not_yet=(KafkaError, OSError))


def test_a_stopped_broker_restarts_and_serves_again(kafka_cluster: Any) -> None:
    broker = kafka_cluster.brokers[2]
    broker.stop()
    assert not broker.running
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", broker.port), 5)
    broker.restart()
    topic = unique("after-restart")
    kafka_cluster.create_topic(topic, replication_factor=3)
    produce(broker.bootstrap, topic, [b"again"])
