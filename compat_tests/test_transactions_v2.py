"""Transactions v2 (KIP-890 part 2) from Apache Kafka's Java 4.x producer.

The broker finalizes the ``transaction.version`` feature at level 2 in ApiVersions (a
one-node Kafka 4 does so from its format; josefk on a single broker too), so the Java
transactional producer takes its newest path: no AddPartitionsToTxn nor AddOffsetsToTxn
requests (the partition leaders and the group coordinator add the partitions), Produce
v12+, TxnOffsetCommit v5, and EndTxn v5, which bumps the producer epoch on every
transaction and answers the new one.

Proved here through the client's own log (its NetworkClient at DEBUG names every request
it sends with its version, and every response): the versions above, no AddPartitionsToTxn
or AddOffsetsToTxn, EndTxn answers with the same producer id and an epoch one higher each
time. And through stock consumers: a read_committed consumer sees exactly the committed
transactions' records in order, a read_uncommitted one sees the aborted ones too, and the
group's committed offset is the last committed transaction's.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, TopicPartition

from .clients import confluent_consumer, confluent_poll
from .conftest import KAFKA_LIBS, Broker

PROGRAM = Path(__file__).parent / "java" / "TxnV2Producer.java"
TRANSACTIONS = 6
PER_PARTITION = 3
RUN_TIMEOUT = 180.0
# The client's NetworkClient at DEBUG, everything else at WARN, to stderr.
LOG4J2 = """\
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
logger.network.name = org.apache.kafka.clients.NetworkClient
logger.network.level = debug
"""
SENT = re.compile(r"Sending (\w+) request with header RequestHeader\(apiKey=\w+, apiVersion=(\d+)")
END_TXN_ANSWER = re.compile(
    r"EndTxnResponseData\(throttleTimeMs=\d+, errorCode=(-?\d+), producerId=(-?\d+), "
    r"producerEpoch=(-?\d+)\)")


def run_producer(broker: Broker, topic: str, txn_id: str, group: str, tmp: Path
                 ) -> subprocess.CompletedProcess[str]:
    if not any(KAFKA_LIBS.glob("*.jar")):
        pytest.skip(f"no Kafka jars in {KAFKA_LIBS} (make kafka-jars)")
    config = tmp / "log4j2.properties"
    config.write_text(LOG4J2)
    done = subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
         f"-Dlog4j2.configurationFile={config}", "-cp", f"{KAFKA_LIBS}/*", str(PROGRAM),
         broker.bootstrap, topic, txn_id, str(TRANSACTIONS), group],
        capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
        env={**os.environ, "JAVA_TOOL_OPTIONS": ""})
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-5000:]}"
    return done


def committed(t: int) -> bool:
    return t % 2 == 0


def values(partition: int, transactions: list[int]) -> list[bytes]:
    return [f"t{t}-p{partition}-{i}".encode() for t in transactions
            for i in range(PER_PARTITION)]


def read(broker: Broker, topic: str, partition: int, isolation: str, count: int
         ) -> list[bytes | None]:
    import confluent_kafka

    consumer = confluent_consumer(broker.bootstrap, **{"isolation.level": isolation})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, 0)])
        got = confluent_poll(consumer, count, 30.0)
        got += confluent_poll(consumer, 1_000, 2.0)
        return [g.value for g in got]
    finally:
        consumer.close()


@pytest.mark.timeout(300)
def test_java_producer_uses_transactions_v2(
    broker: Broker, make_topic: Callable[..., str], admin: KafkaAdminClient, tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    suffix = uuid.uuid4().hex[:8]
    group, txn_id = f"compat-txn-v2-{suffix}", f"compat-txn-v2-{suffix}"
    done = run_producer(broker, topic, txn_id, group, tmp_path)
    assert done.stdout.split("\n")[:-1] == [
        f"{'committed' if committed(t) else 'aborted'} {t}" for t in range(TRANSACTIONS)]

    sent: dict[str, set[int]] = {}
    for api, version in SENT.findall(done.stderr):
        sent.setdefault(api, set()).add(int(version))
    # The newest path: partitions and offsets added by the brokers, not the client.
    assert "ADD_PARTITIONS_TO_TXN" not in sent, sent
    assert "ADD_OFFSETS_TO_TXN" not in sent, sent
    assert sent["END_TXN"] == {5}, sent
    assert sent["TXN_OFFSET_COMMIT"] == {5}, sent
    assert min(sent["PRODUCE"]) >= 12, sent
    # EndTxn v5: the same producer id, the epoch one higher after every transaction.
    answers = [tuple(map(int, a)) for a in END_TXN_ANSWER.findall(done.stderr)]
    assert len(answers) == TRANSACTIONS, done.stderr[-5000:]
    assert {error for error, _, _ in answers} == {0}
    assert len({pid for _, pid, _ in answers}) == 1
    epochs = [epoch for _, _, epoch in answers]
    assert epochs == list(range(epochs[0], epochs[0] + TRANSACTIONS)) and epochs[0] >= 1

    kept = [t for t in range(TRANSACTIONS) if committed(t)]
    for p in (0, 1):
        expected = values(p, kept)
        assert read(broker, topic, p, "read_committed", len(expected)) == expected
        everything = values(p, list(range(TRANSACTIONS)))
        assert sorted(read(broker, topic, p, "read_uncommitted", len(everything))) == sorted(
            everything)
    offsets = admin.list_group_offsets(group)[group]
    assert offsets[TopicPartition(topic, 0)].offset == kept[-1] + 1
