"""A commit the coordinator could not replicate is never read back (a regression test
for a fault run's finding): josefk showed an OffsetCommit it had answered with an error
in OffsetFetch, then lost it with its leader, so a group's offsets went backwards.

Both followers of the group's ``__consumer_offsets`` partition are paused, so the commit
cannot reach them within ``offsets.commit.timeout.ms``; OffsetFetch must then answer the
previous offset (Kafka) or a retriable error (josefk waits for the write to be
replicated), never the refused one. Green on josefk and on Kafka 3.9.1."""

from __future__ import annotations

import time
import uuid

from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from ..rawkafka import RawConnection
from .conftest import broker_kinds, cluster_fixture
from .harness import BROKER_IDS, Cluster, partition_state, wait_until

OFFSETS_PARTITIONS = 50
RETRIABLE = {7, 14, 15, 16}  # REQUEST_TIMED_OUT, COORDINATOR_LOAD/NOT_AVAILABLE, NOT_COORDINATOR
cluster = cluster_fixture(
    broker_kinds,
    "Three brokers that give up on a commit after a second and keep slow followers.",
    {"offsets.commit.timeout.ms": "1000", "replica.lag.time.max.ms": "60000",
     "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)})


def java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (Kafka's ``partitionFor``)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):  # UTF-16 code units, as Java's chars
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str) -> int:
    """Kafka's ``partitionFor``: ``Utils.abs(hashCode) % partitions``, where ``Utils.abs``
    is ``Math.abs`` with ``Integer.MIN_VALUE`` taken to 0."""
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS


def commit(conn: RawConnection, group: str, topic: str, offset: int) -> int:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    answer = conn.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1, topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="")])]), 8)
    return int(answer.topics[0].partitions[0].error_code)


def fetched(conn: RawConnection, group: str, topic: str) -> tuple[int, int]:
    """(error, committed offset) of partition 0; the error the group's or the partition's."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    answer = conn.request(OffsetFetchRequest(
        group_id=group, topics=[T(name=topic, partition_indexes=[0])], require_stable=False), 7)
    if answer.error_code:
        return int(answer.error_code), -1
    p = answer.topics[0].partitions[0]
    return int(p.error_code), int(p.committed_offset)


def test_a_commit_that_was_not_replicated_is_not_read_back(cluster: Cluster, topic: str
                                                           ) -> None:
    cluster.create_topic(topic)
    group = f"visibility-{uuid.uuid4().hex[:8]}"
    with RawConnection(cluster.bootstrap, timeout=30) as any_broker:
        deadline = time.monotonic() + 60
        while (found := any_broker.request(FindCoordinatorRequest(key=group, key_type=0), 2)
               ).error_code:
            assert time.monotonic() < deadline, found
            time.sleep(0.5)
    state = partition_state(cluster.zk, "__consumer_offsets", offsets_partition(group))
    leader = state["leader"]
    assert leader == found.node_id, (state, found)
    wait_until(lambda: len(partition_state(cluster.zk, "__consumer_offsets",
                                           offsets_partition(group))["isr"]) == 3 or None,
               60, "every replica of the group's partition in sync")
    followers = [b for b in BROKER_IDS if b != leader]
    with RawConnection(f"{found.host}:{found.port}", timeout=30) as conn:
        wait_until(lambda: commit(conn, group, topic, 5) == 0 or None, 60, "a first commit")
        wait_until(lambda: fetched(conn, group, topic) == (0, 5) or None, 30, "5 committed")
        for b in followers:
            cluster[b].pause()
        try:
            refused = commit(conn, group, topic, 9)
            assert refused != 0, "a commit no follower could take was answered as done"
            seen = fetched(conn, group, topic)
            assert seen[1] != 9, f"the refused commit was read back: {seen}"
            assert seen == (0, 5) or seen[0] in RETRIABLE, seen
        finally:
            for b in followers:
                cluster[b].resume()
