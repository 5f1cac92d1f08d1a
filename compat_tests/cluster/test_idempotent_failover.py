"""A producer's retry reaching a new leader is a duplicate there, not a new write.

The chaos runs (``make chaos``) found values written twice, on Apache Kafka and josefk
alike, whenever a leader changed under librdkafka with several requests in flight:
the client had bumped its producer epoch and re-sent batches already written under
the old one (confluentinc/librdkafka#4953; the log showed the second copy with
epoch + 1 and sequence 0). What the broker owes the client is tested here with raw
requests: a retry with the same producer id, epoch and sequence, sent to the leader
elected after the first one was SIGKILLed, answers with the offset of the copy the
old leader replicated, and appends nothing.
"""

from __future__ import annotations

import time

from ..rawkafka import RawConnection
from ..test_idempotence import idempotent_batch, init_producer_id, produce_raw
from .harness import FAILOVER_TIMEOUT, Cluster, partition_state, wait_until

BATCH = 3


def test_retry_after_leader_sigkill_is_a_duplicate(cluster: Cluster, topic: str) -> None:
    ids = sorted(cluster.brokers)
    victim, rest = ids[0], ids[1:]
    cluster.create_topic(topic, configs={"min.insync.replicas": "2"},
                         assignments={0: [victim, *rest]})
    leader = cluster[victim]
    ts = int(time.time() * 1000)
    batches = []
    with RawConnection(leader.bootstrap, timeout=20.0) as conn:
        pid, epoch = init_producer_id(conn)
        for n in range(2):
            values = [f"v{n * BATCH + i}".encode() for i in range(BATCH)]
            batches.append(idempotent_batch(pid, epoch, n * BATCH, values, ts + n * BATCH))
        acks = [produce_raw(conn, topic, batch) for batch in batches]
    assert [a.error_code for a in acks] == [0, 0], acks
    assert [a.base_offset for a in acks] == [0, BATCH], acks

    leader.kill()
    state = wait_until(
        lambda: (s := partition_state(cluster.zk, topic, 0))["leader"] in rest and s,
        FAILOVER_TIMEOUT, f"a new leader of {topic}-0")
    new_leader = cluster[state["leader"]]

    def on_new_leader(batch: bytes) -> tuple[int, int]:
        with RawConnection(new_leader.bootstrap, timeout=20.0) as conn:
            ack = produce_raw(conn, topic, batch)
        return ack.error_code, ack.base_offset

    # The new leader may take a moment to learn it leads (NOT_LEADER_OR_FOLLOWER, 6).
    first = wait_until(lambda: (a := on_new_leader(batches[0]))[0] != 6 and a,
                       FAILOVER_TIMEOUT, f"{new_leader!r} to take produce requests")
    assert first == (0, 0), first
    assert on_new_leader(batches[1]) == (0, BATCH)
    values = [f"v{2 * BATCH + i}".encode() for i in range(BATCH)]
    assert on_new_leader(idempotent_batch(pid, epoch, 2 * BATCH, values, ts)) == (0, 2 * BATCH)

    with RawConnection(new_leader.bootstrap, timeout=10.0) as conn:
        batches_read = conn.all_batches(topic, 0)
    assert [(b.base_offset, b.producer_id) for b in batches_read] == [
        (0, pid), (BATCH, pid), (2 * BATCH, pid)]
