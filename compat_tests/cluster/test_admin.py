"""Replica reassignment (the admin API and kafka-reassign-partitions.sh) and kafka-topics.sh.

Apache Kafka 3.9's own tools (tools/kafka39/run-class.sh) run against the cluster
through --bootstrap-server, as its users would.
"""

from __future__ import annotations

import json
from pathlib import Path

from kafka import TopicPartition

from ..clients import Rec, kafka_python_consume, kafka_python_produce
from ..test_java_tools import describe_lines, run_tool
from .harness import (
    BROKER_IDS,
    KAFKA39_RUN_CLASS,
    Cluster,
    MetadataView,
    wait_until,
    zk_assignment,
    znode_json,
)

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
REASSIGN_TIMEOUT = 60.0


def settled(cluster: Cluster, topic: str, target: dict[int, list[int]]) -> MetadataView:
    """Metadata once every broker shows ``target`` as the replicas, all of them in sync."""

    def done(view: MetadataView) -> bool:
        parts = view.topics[topic].partitions
        return {p: list(x.replicas) for p, x in parts.items()} == target and all(
            set(x.isr) == set(x.replicas) for x in parts.values()
        )

    return cluster.agreed_view([topic], done, REASSIGN_TIMEOUT, f"{topic} on {target}")


def test_alter_partition_reassignments(cluster: Cluster, topic: str) -> None:
    controller = cluster.controller_id()
    mover, leaver = (b for b in BROKER_IDS if b != controller)
    cluster.create_topic(topic, assignments={0: [controller, leaver]})
    recs = [Rec(f"k{i}".encode(), f"before the move {i}".encode() * 20) for i in range(200)]
    kafka_python_produce(cluster.bootstrap, topic, recs)
    target = [mover, controller]
    tp = TopicPartition(topic, 0)

    # The new replica does not fetch while stopped (its ZooKeeper session outlives
    # the pause), so the reassignment stays in progress where it can be seen. The
    # admin client learns the controller first, so it never picks the stopped broker.
    with cluster.admin() as admin:
        assert admin.list_partition_reassignments(timeout_ms=30_000) == {}
        cluster[mover].pause()
        try:
            assert admin.alter_partition_reassignments({tp: target}, timeout_ms=30_000) == {
                tp: None
            }
            ongoing = admin.list_partition_reassignments(timeout_ms=30_000)
            doc = znode_json(cluster.zk, f"/brokers/topics/{topic}")[0]
        finally:
            cluster[mover].resume()
    assert set(ongoing) == {tp}, ongoing
    assert ongoing[tp]["adding_replicas"] == [mover]
    assert ongoing[tp]["removing_replicas"] == [leaver]
    assert set(ongoing[tp]["replicas"]) == {mover, controller, leaver}
    assert doc["adding_replicas"] == {"0": [mover]}
    assert doc["removing_replicas"] == {"0": [leaver]}
    assert doc["partitions"]["0"] == ongoing[tp]["replicas"]

    def finished() -> bool:
        with cluster.admin() as admin:
            return admin.list_partition_reassignments(timeout_ms=30_000) == {}

    wait_until(finished, REASSIGN_TIMEOUT, "the reassignment to finish")
    settled(cluster, topic, {0: target})
    doc = znode_json(cluster.zk, f"/brokers/topics/{topic}")[0]
    assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"]) == (
        {"0": target}, {}, {}
    )
    got = kafka_python_consume(cluster.bootstrap, topic, len(recs))
    assert [g.value for g in got] == [r.value for r in recs]


def test_topics_tool_describe(cluster: Cluster, topic: str, kafka39_tools: None) -> None:
    view = cluster.create_topic(topic, partitions=3, replication_factor=3,
                                configs={"retention.ms": "4321000"})
    described = run_tool(
        KAFKA39_RUN_CLASS, TOPIC_COMMAND, "--bootstrap-server", cluster.bootstrap,
        "--describe", "--topic", topic,
    )
    head, partitions = describe_lines(described.stdout, topic)
    meta = view.topics[topic]
    assert head["TopicId"] == meta.topic_id == znode_json(cluster.zk, f"/brokers/topics/{topic}")[
        0]["topic_id"]
    assert (head["PartitionCount"], head["ReplicationFactor"]) == ("3", "3")
    assert "retention.ms=4321000" in head["Configs"].split(",")
    got = {
        int(p["Partition"]): (int(p["Leader"]), p["Replicas"], p["Isr"]) for p in partitions
    }
    assert got == {
        p: (x.leader, ",".join(map(str, x.replicas)), ",".join(map(str, x.isr)))
        for p, x in meta.partitions.items()
    }, described.stdout


def test_reassign_partitions_tool(
    cluster: Cluster, topic: str, tmp_path: Path, kafka39_tools: None
) -> None:
    cluster.create_topic(topic, partitions=2, replication_factor=2)
    current = zk_assignment(cluster.zk, topic)
    # Each partition moves to the pair it is not on yet: one replica stays, one moves.
    target = {
        p: [next(b for b in BROKER_IDS if b not in replicas), replicas[0]]
        for p, replicas in current.items()
    }
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for p, r in target.items()
    ]}))
    common = ("--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan))

    executed = run_tool(KAFKA39_RUN_CLASS, REASSIGN_COMMAND, *common, "--execute")
    assert "Successfully started partition reassignment" in executed.stdout, executed.stdout

    def verified() -> str | None:
        out = run_tool(KAFKA39_RUN_CLASS, REASSIGN_COMMAND, *common, "--verify").stdout
        done = all(f"Reassignment of partition {topic}-{p} is completed" in out for p in target)
        return out if done else None

    wait_until(verified, REASSIGN_TIMEOUT, "--verify to report every partition completed")
    settled(cluster, topic, target)
    assert zk_assignment(cluster.zk, topic) == target
