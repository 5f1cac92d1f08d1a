"""Client quotas in a cluster: set through one broker, they are kept where Kafka 3.9
keeps them (``/config/clients/<id>`` plus a ``/config/changes`` notification) and hold
on another broker, which learns them from the notification."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)
from kazoo.client import KazooClient

from ..rawkafka import RawConnection
from .harness import BROKER_IDS, Cluster, MetadataView, wait_until

RATE = 4096  # bytes per second: one 64 KiB produce is well over it
VALUE = b"c" * 16384


def _alter(bootstrap: str, client: str, key: str, value: float | None) -> int:
    E = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(validate_only=False, entries=[E(
        entity=[E.EntityData(entity_type="client-id", entity_name=client)],
        ops=[E.OpData(key=key, value=value or 0.0, remove=value is None)])])
    with RawConnection(bootstrap, timeout=15.0) as raw:
        [entry] = raw.request(request, 1).entries
    return entry.error_code


def _described(bootstrap: str, client: str) -> dict[str, float]:
    C = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(strict=True, components=[
        C(entity_type="client-id", match_type=0, match=client)])
    with RawConnection(bootstrap, timeout=15.0) as raw:
        response = raw.request(request, 1)
    assert response.error_code == 0, response.error_message
    return {v.key: v.value for entry in response.entries for v in entry.values}


def test_a_quota_set_through_one_broker_holds_on_another(cluster: Cluster, zk: KazooClient,
                                                         topic: str) -> None:
    setter, leader = BROKER_IDS[0], BROKER_IDS[1]
    cluster.create_topic(topic, assignments={0: [leader]})
    client = f"cq-{uuid.uuid4().hex[:10]}"
    assert _alter(cluster[setter].bootstrap, client, "producer_byte_rate", RATE) == 0
    # Kept as Kafka 3.9 keeps it, with the notification every broker follows.
    data, _ = zk.get(f"/config/clients/{client}")
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": str(RATE)}}
    changes = [json.loads(zk.get(f"/config/changes/{c}")[0])
               for c in zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": f"clients/{client}"} in changes
    wait_until(lambda: _described(cluster[leader].bootstrap, client) == {
        "producer_byte_rate": float(RATE)} or None, 30.0, "the quota on the other broker")

    producer = KafkaProducer(bootstrap_servers=cluster[leader].bootstrap, client_id=client,
                             batch_size=64 * 1024, linger_ms=50, request_timeout_ms=60_000)
    try:
        for _ in range(8):
            producer.send(topic, VALUE)
        producer.flush(timeout=60)
        throttle = producer.metrics()["producer-metrics"]
        assert max(throttle.get("throttle-time-max", 0.0),
                   throttle.get("produce-throttle-time-max", 0.0)) > 0, throttle
    finally:
        producer.close(timeout=5)
    assert _alter(cluster[setter].bootstrap, client, "producer_byte_rate", None) == 0
    wait_until(lambda: _described(cluster[leader].bootstrap, client) == {} or None, 30.0,
               "the quota gone from the other broker")


# --- replication quotas --------------------------------------------------------------

THROTTLED_RATE = 100_000  # bytes per second
BACKLOG_BYTES = 4_000_000


def _set_broker_configs(zk: KazooClient, broker_id: int, configs: dict[str, str]) -> None:
    """A dynamic broker config as Kafka 3.9's AdminZkClient writes it (kafka-configs.sh
    --zookeeper): the entity znode, then the change notification every broker follows."""
    path = f"/config/brokers/{broker_id}"
    data = json.dumps({"version": 1, "config": configs}).encode()
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)
    zk.create("/config/changes/config_change_", json.dumps(
        {"version": 2, "entity_path": f"brokers/{broker_id}"}).encode(), sequence=True)


def _catch_up_seconds(cluster: Cluster, topic: str, leader: int, newcomer: int) -> float:
    """Seconds for ``newcomer``, added to the partition by a reassignment, to join the ISR."""
    began = time.monotonic()
    with cluster.admin() as admin:
        assert admin.alter_partition_reassignments(
            {TopicPartition(topic, 0): [leader, newcomer]}, timeout_ms=30_000) == {
                TopicPartition(topic, 0): None}
    both = {leader, newcomer}

    def caught_up(view: MetadataView) -> bool:
        partition = view.topics[topic].partitions[0]
        return set(partition.replicas) == both and set(partition.isr) == both

    cluster.agreed_view([topic], caught_up, 120.0, f"{topic} on {sorted(both)}, in sync")
    return time.monotonic() - began


def _fill(cluster: Cluster, topic: str, leader: int) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster[leader].bootstrap, acks=1,
                             batch_size=256 * 1024, linger_ms=20)
    for _ in range(BACKLOG_BYTES // len(VALUE)):
        producer.send(topic, VALUE)
    producer.flush(timeout=60)
    producer.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_throttled_replica_catches_up_at_the_throttled_rate(
        cluster: Cluster, zk: KazooClient, topic_name: str, side: str) -> None:
    leader, newcomer = BROKER_IDS[0], BROKER_IDS[2]
    topic = f"{topic_name}-{side}"
    throttled = leader if side == "leader" else newcomer
    cluster.create_topic(topic, assignments={0: [leader]})
    _fill(cluster, topic, leader)
    # Set as kafka-reassign-partitions.sh --throttle sets it: altered, not at creation (a
    # Kafka 3.9 broker learns a topic's throttled replicas from the change notification).
    with cluster.admin() as admin:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={
            f"{side}.replication.throttled.replicas": f"0:{throttled}"})])
    _set_broker_configs(zk, throttled, {f"{side}.replication.throttled.rate":
                                        str(THROTTLED_RATE)})
    try:
        seconds = _catch_up_seconds(cluster, topic, leader, newcomer)
    finally:
        _set_broker_configs(zk, throttled, {})
    # At the throttled rate the backlog takes 40 s, less the first burst the sampled rate
    # lets through (its span is 10 s at least: a megabyte, and one fetch of up to
    # replica.fetch.max.bytes over it): over 20 s. Unthrottled: a second or two.
    print(f"{side} throttle: caught up in {seconds:.1f} s")
    assert seconds >= 10.0, seconds
