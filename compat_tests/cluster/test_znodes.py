"""The znodes a cluster writes, read with kazoo under the cluster's chroot.

Kafka 3.9's ZooKeeper layout and JSON are the contract: a josefk broker has to
read and write them as Kafka does to share a ZooKeeper (and a cluster) with it.
Values that differ from run to run (ids, timestamps, epochs) are checked for
type and for how they relate to each other and to Metadata.
"""

from __future__ import annotations

import base64
import re
import time

from kafka.admin import ConfigResource, ConfigResourceType
from kazoo.client import KazooClient

from .harness import (
    BROKER_IDS,
    BROKER_KEYS,
    Cluster,
    metadata,
    topic_config,
    wait_until,
    znode_json,
)

TOPIC_KEYS = {"version", "topic_id", "partitions", "adding_replicas", "removing_replicas"}
# leader_recovery_state is written only while it is RECOVERING (1), never in these tests.
STATE_KEYS = {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
CONFIG_CHANGE = re.compile(r"config_change_\d{10}")


def is_millis(value: object) -> bool:
    """A wall-clock time in ms as a decimal string, within the last hour."""
    now = time.time() * 1000
    return isinstance(value, str) and value.isdigit() and now - 3_600_000 < int(value) <= now


def is_topic_id(value: object) -> bool:
    """A Kafka Uuid as ZooKeeper JSON holds it: 16 bytes, URL-safe base64 without padding."""
    return (
        isinstance(value, str) and len(value) == 22
        and len(base64.urlsafe_b64decode(value + "==")) == 16
        and value != "AAAAAAAAAAAAAAAAAAAAAA"
    )


def has_no_data(zk: KazooClient, path: str) -> bool:
    """A persistent znode holding nothing (Kafka creates these with null data)."""
    data, stat = zk.get(path)
    return not data and stat.ephemeralOwner == 0


def test_broker_registrations(cluster: Cluster, zk: KazooClient) -> None:
    assert sorted(zk.get_children("/brokers/ids")) == [str(i) for i in BROKER_IDS]
    assert has_no_data(zk, "/brokers/ids")
    owners = set()
    for broker_id in BROKER_IDS:
        doc, stat = znode_json(zk, f"/brokers/ids/{broker_id}")
        port = cluster[broker_id].port
        assert set(doc) == BROKER_KEYS, doc
        assert doc["version"] == 5
        assert (doc["host"], doc["port"]) == ("127.0.0.1", port)
        assert doc["endpoints"] == [f"PLAINTEXT://127.0.0.1:{port}"]
        assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert doc["features"] == {}
        assert doc["jmx_port"] == -1
        assert is_millis(doc["timestamp"]), doc
        assert stat.ephemeralOwner != 0
        owners.add(stat.ephemeralOwner)
    assert len(owners) == len(BROKER_IDS), "each broker registers in a session of its own"
    # Every broker lists the registered brokers in Metadata.
    for view in cluster.views().values():
        assert view.brokers == {
            i: ("127.0.0.1", cluster[i].port, None) for i in BROKER_IDS
        }


def test_controller_znodes(cluster: Cluster, zk: KazooClient) -> None:
    doc, stat = znode_json(zk, "/controller")
    assert set(doc) == {"version", "brokerid", "timestamp", "kraftControllerEpoch"}, doc
    assert doc["version"] == 2
    assert doc["brokerid"] in BROKER_IDS
    assert doc["kraftControllerEpoch"] == -1
    assert is_millis(doc["timestamp"]), doc
    # Ephemeral, in the session the controller registered itself with.
    registration = zk.get(f"/brokers/ids/{doc['brokerid']}")[1]
    assert stat.ephemeralOwner == registration.ephemeralOwner != 0

    data, epoch_stat = zk.get("/controller_epoch")
    assert data is not None and data.decode().isdigit(), data
    epoch = int(data)
    assert epoch >= 1
    # The epoch is created as 0 and bumped with a versioned setData on every election,
    # so its znode version is the epoch: controllers fence each other with it.
    assert epoch_stat.version == epoch
    assert epoch_stat.ephemeralOwner == 0
    for view in cluster.views().values():
        assert view.controller_id == doc["brokerid"]


def test_cluster_id_and_top_level_paths(cluster: Cluster, zk: KazooClient) -> None:
    doc, stat = znode_json(zk, "/cluster/id")
    assert set(doc) == {"version", "id"}, doc
    assert doc["version"] == "1", "Kafka writes the version of /cluster/id as a string"
    assert is_topic_id(doc["id"]), doc
    assert stat.ephemeralOwner == 0
    for view in cluster.views().values():
        assert view.cluster_id == doc["id"]
    for path in ("/brokers/seqid", "/brokers/topics", "/admin/delete_topics", "/config/topics",
                 "/config/changes", "/config/brokers", "/isr_change_notification"):
        assert zk.exists(path) is not None, path
        assert has_no_data(zk, path), path


def test_topic_znodes(cluster: Cluster, zk: KazooClient, topic: str) -> None:
    configs = {"retention.ms": "123456789", "cleanup.policy": "delete"}
    view = cluster.create_topic(topic, partitions=3, replication_factor=3, configs=configs)
    meta = view.topics[topic]

    doc, stat = znode_json(zk, f"/brokers/topics/{topic}")
    assert set(doc) == TOPIC_KEYS, doc
    assert doc["version"] == 3
    assert stat.ephemeralOwner == 0
    assert is_topic_id(doc["topic_id"]), doc
    assert doc["topic_id"] == meta.topic_id
    assert doc["adding_replicas"] == {} and doc["removing_replicas"] == {}
    assert set(doc["partitions"]) == {"0", "1", "2"}
    controller_epoch = cluster.controller_epoch()
    for key, replicas in doc["partitions"].items():
        p = int(key)
        assert sorted(replicas) == list(BROKER_IDS), doc
        assert list(meta.partitions[p].replicas) == replicas
        base = f"/brokers/topics/{topic}/partitions"
        assert has_no_data(zk, base) and has_no_data(zk, f"{base}/{p}")
        assert zk.get_children(f"{base}/{p}") == ["state"]
        state, state_stat = znode_json(zk, f"{base}/{p}/state")
        assert set(state) == STATE_KEYS, state
        assert state["version"] == 1
        assert state_stat.ephemeralOwner == 0
        assert state["leader"] in state["isr"] and set(state["isr"]) <= set(replicas)
        assert isinstance(state["leader_epoch"], int) and state["leader_epoch"] >= 0
        assert 1 <= state["controller_epoch"] <= controller_epoch
        got = meta.partitions[p]
        assert (got.leader, got.leader_epoch, list(got.isr)) == (
            state["leader"], state["leader_epoch"], state["isr"],
        )

    doc, stat = znode_json(zk, f"/config/topics/{topic}")
    assert doc == {"version": 1, "config": configs}
    assert stat.ephemeralOwner == 0


def test_config_change_notification(cluster: Cluster, zk: KazooClient, topic: str) -> None:
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    assert znode_json(zk, f"/config/topics/{topic}")[0] == {"version": 1, "config": {}}
    before = set(zk.get_children("/config/changes"))
    with cluster.admin() as admin:
        resource = ConfigResource(
            ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7654321"}
        )
        assert admin.alter_configs([resource], incremental=True) == {"topic": {topic: "OK"}}
    assert znode_json(zk, f"/config/topics/{topic}")[0] == {
        "version": 1, "config": {"retention.ms": "7654321"}
    }
    new = sorted(set(zk.get_children("/config/changes")) - before)
    assert len(new) == 1 and CONFIG_CHANGE.fullmatch(new[0]), new
    doc, stat = znode_json(zk, f"/config/changes/{new[0]}")
    assert doc == {"version": 2, "entity_path": f"topics/{topic}"}
    assert stat.ephemeralOwner == 0

    # Every broker picks the change up from the notification.
    wait_until(
        lambda: all(topic_config(b.bootstrap, topic, "retention.ms") == "7654321"
                    for b in cluster.running()),
        30, "every broker to describe the new retention.ms",
    )


def test_delete_topic_znodes(cluster: Cluster, zk: KazooClient, topic: str) -> None:
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    # A replica that does not answer holds the deletion open, so its znode can be seen.
    # The admin client learns the controller first, so it never picks the stopped broker.
    follower = next(b for b in cluster.running() if b.broker_id != cluster.controller_id())
    with cluster.admin() as admin:
        assert admin.list_partition_reassignments(timeout_ms=30_000) == {}
        follower.pause()
        try:
            admin.delete_topics([topic], timeout_ms=1000, raise_errors=False)
            path = f"/admin/delete_topics/{topic}"
            wait_until(lambda: zk.exists(path), 5, path)
            assert has_no_data(zk, path)
        finally:
            follower.resume()

    def gone() -> bool:
        return not any(zk.exists(p) for p in (
            f"/admin/delete_topics/{topic}", f"/brokers/topics/{topic}", f"/config/topics/{topic}"
        ))

    wait_until(gone, 60, f"the znodes of {topic} to go")
    unknown_topic = 3
    wait_until(
        lambda: all(metadata(b.bootstrap, [topic]).topics[topic].error_code == unknown_topic
                    for b in cluster.running()),
        30, f"every broker to forget {topic}",
    )
