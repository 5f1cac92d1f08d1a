"""Clock jumps (``clock.py``) on one real broker under libfaketime: josefk, or Apache Kafka
3.9.1 in ZooKeeper mode with ``--kafka``.

The broker starts within the usual time, its wall clock follows its offset file forward
and back (a topic with LogAppendTime shows the broker's clock in every record it
acknowledges), and it keeps serving produce and fetch through the jumps.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ..cluster.conftest import need_jars, target
from ..cluster.harness import CLUSTER_START_TIMEOUT, Cluster, ZooKeeperServer, wait_until
from . import clock

TOPIC = "stepped-clock"
# Where the broker's clock stands, in seconds from ours: the chaos nemesis's largest jump
# either way, then the true time again.
JUMPS = (0, 900, -900, 0)
# A stamp counts as the new clock within this much: libfaketime reads the offset file
# again only after its cache (FAKETIME_CACHE_DURATION) expires.
SLACK_S = 30
# How long the broker may take to show a new offset in its stamps.
SEEN_WITHIN_S = 30


@pytest.fixture
def faked_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """ZooKeeper and broker 1 of the target kind, the broker under libfaketime."""
    if request.config.getoption("bootstrap"):
        pytest.skip("this test starts its own broker; --bootstrap given")
    reason = clock.available()
    if reason is not None:
        pytest.skip(reason)
    kind = target(request.config)
    need_jars(request.config, kafka=kind == "kafka")
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper", tmp_path / "zookeeper.log")
    zookeeper.start()
    home = tmp_path / "cluster"
    try:
        # The usual start-up time: a JVM whose timed waits spin under libfaketime misses it.
        cluster = Cluster(zookeeper, home, {1: kind}, CLUSTER_START_TIMEOUT[kind],
                          {"offsets.topic.replication.factor": "1"},
                          lambda b: {"wrap": functools.partial(clock.wrap, home, b)})
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
    finally:
        zookeeper.stop()


@pytest.mark.timeout(300)
def test_a_broker_follows_its_stepped_wall_clock_and_keeps_serving(
    faked_broker: Cluster,
) -> None:
    cluster = faked_broker
    cluster.create_topic(TOPIC, replication_factor=1,
                         configs={"message.timestamp.type": "LogAppendTime"})
    acknowledged: dict[int, int] = {}  # offset -> the broker's append time (ms)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        for offset_s in JUMPS:
            clock.jump(cluster.home, 1, offset_s)

            def stamped(offset_s: int = offset_s) -> bool | None:
                sent = producer.send(TOPIC, str(offset_s).encode()).get(timeout=30)
                acknowledged[sent.offset] = sent.timestamp
                return abs(sent.timestamp / 1000 - time.time() - offset_s) < SLACK_S or None

            wait_until(stamped, SEEN_WITHIN_S, f"append times {offset_s:+d}s from ours")
    finally:
        producer.close()

    partition = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        consumer.assign([partition])
        read: dict[int, tuple[int, int]] = {}

        def all_read() -> bool:
            for record in consumer.poll(timeout_ms=1000).get(partition, []):
                read[record.offset] = (record.timestamp, record.timestamp_type)
            return len(read) >= len(acknowledged)

        wait_until(all_read, 60, f"the {len(acknowledged)} acknowledged records read back")
    finally:
        consumer.close()
    # timestamp_type 1: LogAppendTime, the broker's own clock.
    assert read == {offset: (stamp, 1) for offset, stamp in acknowledged.items()}
    assert not cluster[1].died, cluster[1].log_tail()
