"""Partition leadership across three brokers: placement, failover, controlled shutdown, election.

Each test leaves the cluster whole again (the fixture restarts what a test
stopped), so the module shares one cluster.
"""

from __future__ import annotations

import time

from kafka.errors import ElectionNotNeededError

from ..clients import Rec, kafka_python_consume, kafka_python_produce
from .harness import (
    BROKER_IDS,
    FAILOVER_TIMEOUT,
    Cluster,
    MetadataView,
    metadata,
    partition_state,
    wait_until,
    zk_assignment,
)

PREFERRED = 0


def leaderships(view: MetadataView, topic: str, broker_id: int) -> list[int]:
    """The partitions of ``topic`` that ``broker_id`` leads in ``view``."""
    return [p for p, leader in view.leaders(topic).items() if leader == broker_id]


def test_leaders_spread_over_brokers(cluster: Cluster, topic: str) -> None:
    view = cluster.create_topic(topic, partitions=3, replication_factor=3)
    partitions = view.topics[topic].partitions
    assert sorted(view.leaders(topic).values()) == list(BROKER_IDS)
    assignment = zk_assignment(cluster.zk, topic)
    for p, part in partitions.items():
        assert sorted(part.replicas) == list(BROKER_IDS)
        assert list(part.replicas) == assignment[p]
        # A new partition is led by its first (preferred) replica.
        assert part.leader == part.replicas[0]
    # create_topic waited until every broker answered the same; check each once more.
    for broker_id, other in cluster.views([topic]).items():
        assert other.topics == view.topics, f"Metadata from broker {broker_id} differs"


def test_sigkill_leader_fails_over_within_session_timeout(cluster: Cluster, topic: str) -> None:
    view = cluster.create_topic(topic, partitions=3, replication_factor=3)
    controller = cluster.controller_id()
    partition, victim_id = next(
        (p, leader) for p, leader in sorted(view.leaders(topic).items()) if leader != controller
    )
    recs = [Rec(f"k{i}".encode(), f"acked before the crash {i}".encode()) for i in range(50)]
    assert kafka_python_produce(cluster.bootstrap, topic, recs, partition=partition) == list(
        range(len(recs))
    )
    before = partition_state(cluster.zk, topic, partition)
    victim = cluster[victim_id]

    killed = time.monotonic()
    victim.kill()

    def new_leader() -> dict | None:
        state = partition_state(cluster.zk, topic, partition)
        return state if state["leader"] not in (victim_id, -1) else None

    state = wait_until(new_leader, FAILOVER_TIMEOUT, f"a new leader of {topic}-{partition}")
    took = time.monotonic() - killed
    assert state["leader"] in before["isr"], (before, state)
    assert victim_id not in state["isr"]
    assert state["leader_epoch"] > before["leader_epoch"]
    assert state["controller_epoch"] == cluster.controller_epoch()
    # No partition is left led by (or in sync on) the dead broker: the controller writes
    # each partition's new state in turn, so the last may land a moment after the first.
    wait_until(
        lambda: all(other["leader"] != victim_id and victim_id not in other["isr"]
                    for other in cluster.states(topic).values()),
        10, f"broker {victim_id} to leave every leadership and ISR of {topic}")

    expected = {p: (s["leader"], s["leader_epoch"]) for p, s in cluster.states(topic).items()}
    cluster.agreed_view(
        [topic],
        lambda v: {p: (x.leader, x.leader_epoch) for p, x in v.topics[topic].partitions.items()}
        == expected,
        what="the survivors' Metadata to show the new leaders",
    )
    # Every acknowledged record is there on the new leader.
    got = kafka_python_consume(cluster.bootstrap, topic, len(recs), partition=partition)
    assert [g.value for g in got] == [r.value for r in recs]
    print(f"leader of {topic}-{partition} moved {took:.1f}s after SIGKILL")

    victim.start()
    cluster.wait_in_sync(topic, 3)


def test_sigkill_controller(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    cluster[old].kill()

    def moved() -> int | None:
        if not cluster.zk.exists("/controller"):
            return None
        new = cluster.controller_id()
        return new if new != old else None

    new = wait_until(moved, FAILOVER_TIMEOUT, "another broker to become controller")
    assert new in BROKER_IDS
    data, stat = cluster.zk.get("/controller_epoch")
    assert int(data) > old_epoch
    assert stat.version == int(data)
    cluster.agreed_view([topic], lambda v: v.controller_id == new,
                        what=f"the survivors' Metadata to name controller {new}")

    # Topic admin goes through the new controller; two live brokers allow RF 2.
    other = f"{topic}-after"
    cluster.create_topic(other, partitions=1, replication_factor=2)
    assert set(zk_assignment(cluster.zk, other)[0]) == {b.broker_id for b in cluster.running()}
    with cluster.admin() as admin:
        result = admin.create_partitions({other: 3}, timeout_ms=30_000)
        assert [t.error_code for t in result.results] == [0], result
        cluster.wait_in_sync(other, 3)
        assert sorted(zk_assignment(cluster.zk, other)) == [0, 1, 2]
        result = admin.delete_topics([other], timeout_ms=30_000)
        assert [t["error_code"] for t in result["topics"]] == [0], result
    wait_until(lambda: not cluster.zk.exists(f"/brokers/topics/{other}"), 30, f"{other} deleted")
    # The topic made before the crash still has a leader for each partition.
    cluster.agreed_view([topic], lambda v: all(p.leader in (b.broker_id for b in cluster.running())
                                               for p in v.topics[topic].partitions.values()))

    cluster[old].start()
    assert cluster.controller_id() == new, "a restarted broker does not take the controller back"


def test_sigterm_moves_leaderships_before_exit(cluster: Cluster, topic: str) -> None:
    partitions = 3
    view = cluster.create_topic(topic, partitions=partitions, replication_factor=3)
    controller = cluster.controller_id()
    victim_id = next(b for b in BROKER_IDS if b != controller and leaderships(view, topic, b))
    victim = cluster[victim_id]

    took = victim.terminate()

    # Right after the exit: ZooKeeper and every survivor's Metadata already moved on.
    # (The loops below would pass on nothing, so first check there is all to check.)
    states = cluster.states(topic)
    assert sorted(states) == list(range(partitions)), states
    for p, state in states.items():
        assert state["leader"] != victim_id and victim_id not in state["isr"], (p, state)
    survivors = cluster.running()
    assert sorted(b.broker_id for b in survivors) == [b for b in BROKER_IDS if b != victim_id]
    for b in survivors:
        now = metadata(b.bootstrap, [topic]).topics[topic].partitions
        assert sorted(now) == list(range(partitions)), (b.broker_id, now)
        assert not [p for p, x in now.items() if x.leader == victim_id], (
            f"broker {b.broker_id} still names {victim_id} leader after its clean shutdown"
        )
    print(f"controlled shutdown of broker {victim_id} took {took:.1f}s")

    victim.start()
    cluster.wait_in_sync(topic, 3)


def test_preferred_leader_election(cluster: Cluster, topic: str) -> None:
    view = cluster.create_topic(topic, partitions=3, replication_factor=3)
    preferred = {p: x.replicas[0] for p, x in view.topics[topic].partitions.items()}
    victim = cluster[preferred[0]]
    victim.terminate()
    victim.start()
    view = cluster.wait_in_sync(topic, 3)
    # Back and in sync, it leads nothing until asked to.
    assert leaderships(view, topic, victim.broker_id) == []
    displaced = {p for p, leader in view.leaders(topic).items() if leader != preferred[p]}
    assert 0 in displaced
    epochs = {p: x.leader_epoch for p, x in view.topics[topic].partitions.items()}

    with cluster.admin() as admin:
        response = admin.elect_leaders(
            PREFERRED, {topic: [0, 1, 2]}, timeout_ms=30_000, raise_errors=False
        )
    assert response.error_code == 0
    [result] = response.replica_election_results
    assert result.topic == topic
    codes = {r.partition_id: r.error_code for r in result.partition_result}
    assert codes == {
        p: 0 if p in displaced else ElectionNotNeededError.errno for p in range(3)
    }, response

    view = cluster.agreed_view(
        [topic], lambda v: v.leaders(topic) == preferred, what="the preferred leaders back"
    )
    for p, part in view.topics[topic].partitions.items():
        state = partition_state(cluster.zk, topic, p)
        assert state["leader"] == zk_assignment(cluster.zk, topic)[p][0] == part.leader
        bumped = part.leader_epoch > epochs[p]
        assert bumped == (p in displaced), (p, epochs[p], part)
