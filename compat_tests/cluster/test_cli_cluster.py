"""``josefk topics|cluster`` against three brokers on ZooKeeper (josefk, or Apache Kafka
3.9.1 with ``--kafka``): a created topic is on every broker's Metadata when the command
returns, and a paused follower's partitions show as under-replicated, then recover."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ..test_cli import josefk
from .conftest import broker_kinds, cluster_fixture
from .harness import (
    BROKER_IDS,
    Cluster,
    metadata,
    wait_until,
)

REPLICA_LAG_MS = 4_000
CONFIG = {"replica.lag.time.max.ms": str(REPLICA_LAG_MS)}
ISR_TIMEOUT = REPLICA_LAG_MS / 1000 * 1.5 + 20


cluster = cluster_fixture(
    broker_kinds,
    "Three brokers of the target kind that drop a silent follower from the ISR soon.",
    CONFIG)


def summary(bootstrap: str) -> dict[str, Any]:
    return json.loads(josefk(bootstrap, "cluster", "--output", "json").stdout)


def under_replicated(out: dict[str, Any], topic: str) -> dict[int, dict[str, Any]]:
    return {p["partition"]: p for p in out["under_replicated"] if p["topic"] == topic}


@pytest.mark.timeout(300)
def test_topic_on_every_broker_and_a_paused_follower(cluster: Cluster, topic: str) -> None:
    josefk(cluster.bootstrap, "topics", "create", topic, "--partitions", "3",
           "--replication-factor", "3")
    for broker_id, view in cluster.views([topic]).items():  # no waiting: already there
        seen = view.topics[topic]
        assert seen.error_code == 0 and len(seen.partitions) == 3, broker_id
        assert all(p.leader >= 0 for p in seen.partitions.values()), broker_id
    cluster.wait_in_sync(topic, 3)

    out = summary(cluster.bootstrap)
    assert [b["id"] for b in out["brokers"]] == sorted(BROKER_IDS)
    assert out["controller_id"] == cluster.controller_id()
    assert under_replicated(out, topic) == {} and out["offline"] == []

    paused_id = next(b for b in BROKER_IDS if b != cluster.controller_id())
    leaders = {p: s["leader"] for p, s in cluster.states(topic).items()}
    followed = {p for p, leader in leaders.items() if leader != paused_id}
    running = ",".join(cluster[b].bootstrap for b in BROKER_IDS if b != paused_id)
    cluster[paused_id].pause()
    try:
        def shrunk() -> dict[str, Any] | None:
            o = summary(running)
            return o if followed <= set(under_replicated(o, topic)) else None

        out = wait_until(shrunk, ISR_TIMEOUT, f"partitions {sorted(followed)} under-replicated")
        # The same broker's Metadata, read directly (a kafka-python client would also
        # try the paused broker and time out).
        seen = metadata(running.split(",")[0], [topic]).topics[topic]
        isr = {index: sorted(p.isr) for index, p in seen.partitions.items()}
        for partition, p in under_replicated(out, topic).items():
            assert paused_id in p["replicas"] and paused_id not in p["isr"]
            assert sorted(p["isr"]) == isr[partition]
        text = josefk(running, "cluster").stdout
        [count] = [int(line.split(":")[1]) for line in text.splitlines()
                   if line.startswith("Under-replicated partitions:")]
        assert count >= len(followed)  # the paused leader's own may follow, its session over
    finally:
        cluster[paused_id].resume()
    wait_until(lambda: under_replicated(summary(cluster.bootstrap), topic) == {},
               ISR_TIMEOUT + 30, "the ISR whole again")

    josefk(cluster.bootstrap, "topics", "delete", topic)
    for broker_id, view in cluster.views([topic]).items():  # no waiting: already gone
        assert view.topics[topic].error_code == 3, broker_id
