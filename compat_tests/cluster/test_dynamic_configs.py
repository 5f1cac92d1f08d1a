"""Dynamic broker configs in a cluster: a cluster-wide default set through one broker
(Kafka 3.9's kafka-configs.sh --entity-default, stored in ZooKeeper's
/config/brokers/<default> with a /config/changes notification) applies on every
broker without a restart; a per-broker setting applies on that broker only;
``unclean.leader.election.enable`` turned on as the default has the controller elect
an offline partition's out-of-sync replica."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from ..test_java_tools import run_tool
from .conftest import broker_kinds, cluster_fixture
from .harness import (
    BROKER_IDS,
    FAILOVER_TIMEOUT,
    KAFKA39_RUN_CLASS,
    Cluster,
    partition_state,
    wait_until,
    znode_json,
)

HOUR_MS = 3_600_000
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
# Retention checks every second, so a new default shows within the test's patience.
cluster = cluster_fixture(
    broker_kinds,
    "Three brokers of the target kind that check retention every second.",
    broker_config={"log.retention.check.interval.ms": "1000"})


def source_name(source: object) -> str:
    names = {2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
             4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}
    return names.get(source, str(source)) if isinstance(source, int) else str(source)


def broker_value(cluster: Cluster, broker_id: int, key: str) -> tuple[str | None, str]:
    """``key`` of broker ``broker_id`` as that broker describes it: (value, source)."""
    with cluster.admin() as admin:
        result = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER,
                                                        str(broker_id))], config_filter="all")
    entry = result["broker"][str(broker_id)][key]
    return entry["value"], source_name(entry["config_source"])


def beginning_offsets(cluster: Cluster, topic: str, partitions: int) -> list[int]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        offsets = consumer.beginning_offsets(tps)
        return [offsets[tp] for tp in tps]
    finally:
        consumer.close()


def configs_tool(cluster: Cluster, via: int, *args: str) -> None:
    run_tool(KAFKA39_RUN_CLASS, CONFIG_COMMAND, "--bootstrap-server",
             cluster[via].bootstrap, "--alter", "--entity-type", "brokers", *args)


def test_a_default_set_through_one_broker_applies_on_every_broker(
        cluster: Cluster, topic: str) -> None:
    # One partition led by each broker, each holding records two hours old.
    cluster.create_topic(topic, assignments={0: [1], 1: [2], 2: [3]})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    old = int(time.time() * 1000) - 2 * HOUR_MS
    for partition in range(3):
        for i in range(3):
            producer.send(topic, b"old %d" % i, partition=partition, timestamp_ms=old)
    producer.flush(30)
    producer.close()
    time.sleep(2)  # a few retention checks under the default 168 hours: nothing goes
    assert beginning_offsets(cluster, topic, 3) == [0, 0, 0]

    configs_tool(cluster, 1, "--entity-default", "--add-config", f"log.retention.ms={HOUR_MS}")
    try:
        wait_until(lambda: beginning_offsets(cluster, topic, 3) == [3, 3, 3] or None, 60.0,
                   "old segments deleted on every broker")
        for broker_id in BROKER_IDS:
            assert broker_value(cluster, broker_id, "log.retention.ms") == (
                str(HOUR_MS), "DYNAMIC_DEFAULT_BROKER_CONFIG")
        data, _ = znode_json(cluster.zk, "/config/brokers/<default>")
        assert data == {"version": 1, "config": {"log.retention.ms": str(HOUR_MS)}}

        # A per-broker setting, made through another broker, is that broker's only.
        configs_tool(cluster, 1, "--entity-name", "2", "--add-config", "log.cleaner.backoff.ms=500")
        wait_until(lambda: broker_value(cluster, 2, "log.cleaner.backoff.ms") == (
            "500", "DYNAMIC_BROKER_CONFIG") or None, 30.0, "broker 2's own setting")
        assert broker_value(cluster, 3, "log.cleaner.backoff.ms") == ("15000", "DEFAULT_CONFIG")
    finally:
        configs_tool(cluster, 1, "--entity-default", "--delete-config", "log.retention.ms")
        configs_tool(cluster, 1, "--entity-name", "2", "--delete-config",
                     "log.cleaner.backoff.ms")


def test_unclean_election_enabled_as_the_default_elects_an_offline_partition(
        cluster: Cluster, topic: str) -> None:
    controller = cluster.controller_id()
    leader_id, follower_id = (b for b in BROKER_IDS if b != controller)
    cluster.create_topic(topic, assignments={0: [leader_id, follower_id]})
    # The follower leaves the ISR (a controlled shutdown), then the leader dies: the
    # partition is offline, and the follower, back but not in sync, may not lead.
    cluster[follower_id].terminate()
    wait_until(lambda: partition_state(cluster.zk, topic, 0)["isr"] == [leader_id] or None,
               FAILOVER_TIMEOUT, "the ISR without the stopped follower")
    cluster[leader_id].kill()
    cluster[follower_id].start()
    wait_until(lambda: partition_state(cluster.zk, topic, 0)["leader"] == -1 or None,
               FAILOVER_TIMEOUT, "the partition offline")
    time.sleep(2)
    assert partition_state(cluster.zk, topic, 0)["leader"] == -1

    configs_tool(cluster, controller, "--entity-default", "--add-config",
                 "unclean.leader.election.enable=true")
    try:
        wait_until(lambda: partition_state(cluster.zk, topic, 0)["leader"] == follower_id
                   or None, 60.0, "the follower elected uncleanly")
    finally:
        configs_tool(cluster, controller, "--entity-default", "--delete-config",
                     "unclean.leader.election.enable")
        cluster[leader_id].start_after_crash()
