"""Spark Structured Streaming copies a topic, record for record, while the leaders crash.

``python -m spark_examples.copy_topic`` (Spark's built-in ``format("kafka")``
source with ``failOnDataLoss=true`` and the Kafka sink, every Kafka client
with its defaults: the sink is the idempotent acks=all Java producer) runs
against the three brokers of the cluster and copies an input topic to an
output topic, both with 3 partitions, 3 replicas and min.insync.replicas=2,
one micro-batch a second. Meanwhile the test writes the input in chunks
(kafka-python, acks=all, idempotent, unique values) and, one after the other,
SIGKILLs the broker leading input partition 0, 1, 2, starts it again and waits
until every replica is back in sync before the next kill. Then:

- the query never failed: the job process is alive and its log has no failed
  query, task or job;
- the input topic holds exactly what the producer was told was written;
- the output topic holds exactly the input's (key, value) records: none lost,
  none twice.

Spark's Kafka sink is at-least-once: a task that is retried writes its records
again. In local mode (``local[2]``) Spark does not retry a failed task (the
job, and so the query, fails), so no duplicate can come from a sink retry
here and any duplicate is an error; a failed task would show as a failed query.

The input producer needs Metadata as Kafka answers it: a partition whose leader
is not among the live brokers has leader -1 and LEADER_NOT_AVAILABLE (a new
controller first sends UpdateMetadata with the live brokers and the old
leaders, then elects new ones). Given a leader that the same response does not
list among its brokers, kafka-python 3.0's producer thread fails on every turn
and its metadata is not refreshed before metadata.max.age.ms (5 minutes); the
chunk then fails with the producer's view of the cluster.

The job runs as its own process, as a user would run it (``--interval "1
seconds"``); its output is ``<tmp_path>/copy_topic.log``. Needs pyspark and the
connector jars (tools/spark/fetch.sh); skips without them unless
JOSEFK_REQUIRE_SPARK=1. ``-m spark`` selects it with the other Spark tests.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from ..conftest import REPO, env_flag
from ..rawkafka import RawConnection
from ..spark_helpers import key_values, read_topic, spark_missing
from .harness import FAILOVER_TIMEOUT, Cluster, partition_state, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(540)]

PARTITIONS = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
#: Records per chunk of input; 8 chunks in all (first, before and during each outage, last).
CHUNK = 200
TRIGGER_SECONDS = 1
#: JVM start, session, first micro-batches on a loaded two-CPU machine.
JOB_START_TIMEOUT = 180.0
#: kafka-python's flush of one chunk, a failover included.
PRODUCE_TIMEOUT = 90.0
IN_SYNC_TIMEOUT = 90.0
#: From the last chunk acknowledged to the output holding as many records.
CATCH_UP_TIMEOUT = 180.0
#: After the counts matched: micro-batches that would write anything more.
SETTLE_SECONDS = 4 * TRIGGER_SECONDS
READ_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0
#: Lines of the job's log that mean a failed query, job or task (or a retried task).
FAILURE = re.compile(
    r"query failed|terminated with error|StreamingQueryException|Exception in task|Lost task"
    r"|Job aborted|Task \S+ failed|Traceback"
)


@pytest.fixture(scope="session")
def spark_ready() -> None:
    """Skip (or fail with JOSEFK_REQUIRE_SPARK=1) without pyspark, java or the jars."""
    missing = spark_missing()
    if missing:
        if env_flag("JOSEFK_REQUIRE_SPARK"):
            pytest.fail(f"{missing} (JOSEFK_REQUIRE_SPARK=1)", pytrace=False)
        pytest.skip(missing)


class Job:
    """``python -m spark_examples.copy_topic`` as a process (group) of its own."""

    def __init__(self, bootstrap: str, source: str, sink: str, home: Path) -> None:
        self.log = home / "copy_topic.log"
        self.command = [
            sys.executable, "-m", "spark_examples.copy_topic",
            "--bootstrap", bootstrap, "--source", source, "--sink", sink,
            "--checkpoint", str(home / "checkpoint"),
            "--interval", f"{TRIGGER_SECONDS} seconds",
        ]
        # Spark's scratch directories stay in the test's directory.
        self.env = {**os.environ, "PYTHONPATH": str(REPO),
                    "SPARK_LOCAL_DIRS": str(home / "spark-local")}
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_status: int | None = None

    def start(self) -> None:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                self.command, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 80) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def failures(self) -> list[str]:
        return [line for line in self.text().splitlines() if FAILURE.search(line)]

    def check_running(self, when: str) -> None:
        """The process is alive and its log shows no failed query, job or task.

        Fails the test with pytest.fail, which harness.wait_until does not take for
        "not yet".
        """
        assert self.proc is not None
        status = self.proc.poll()
        if status is not None:
            pytest.fail(f"the copy job exited (status {status}) {when}; its log ends with:\n"
                        f"{self.tail()}", pytrace=False)
        failures = self.failures()
        if failures:
            pytest.fail(f"the copy job's log shows failures {when}:\n" + "\n".join(failures[:30])
                        + f"\n--- log tail:\n{self.tail()}", pytrace=False)

    def stop(self) -> None:
        """SIGTERM to the group (the JVM runs its shutdown hooks), SIGKILL after STOP_TIMEOUT.

        Not SIGINT: PySpark's SIGINT handler calls into the JVM while the main
        thread waits in awaitTermination, and py4j fails with a reentrant call.
        The test has checked everything of the running job before it stops it.
        """
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, 30.0)):
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=wait)
        self.exit_status = self.proc.poll()
        # Anything else of the group (the JVM, when Python went first) goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


class FirstOnly(logging.Filter):
    """Let through the first ``limit`` records of each message template, then drop them.

    kafka-python logs every refused connection to a killed broker, and its producer
    thread logs a traceback on each turn of a loop it cannot leave; pytest keeps
    every record of a failing test.
    """

    def __init__(self, limit: int = 20) -> None:
        super().__init__()
        self.limit = limit
        self.seen: Counter[tuple[str, str]] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        self.seen[key] += 1
        return self.seen[key] <= self.limit


@pytest.fixture
def quiet_kafka_python() -> Iterator[FirstOnly]:
    """FirstOnly on the loggers kafka-python repeats itself on."""
    loggers = [logging.getLogger(f"kafka.{name}") for name in (
        "producer.sender", "net.manager", "net.connection", "net.transport", "net.selector",
        "client_async", "conn", "cluster",
    )]
    quiet = FirstOnly()
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield quiet
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)
        dropped = {k: n - quiet.limit for k, n in quiet.seen.items() if n > quiet.limit}
        for (name, msg), n in sorted(dropped.items(), key=lambda kv: -kv[1])[:5]:
            print(f"kafka-python: {n} more of {name}: {msg!r} not shown")


class Input:
    """One idempotent acks=all kafka-python producer for the whole test; what it wrote."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
            client_id="spark-cluster-input",
        )
        self.acked: list[tuple[bytes | None, bytes]] = []

    def chunk(self, tag: str, count: int = CHUNK) -> None:
        """``count`` records, keys k0..k22 (every 10th none), values ``<tag>-<i>``; all acked."""
        began = time.monotonic()
        futures = []
        for i in range(count):
            key = None if i % 10 == 0 else f"k{i % 23}".encode()
            value = f"{tag}-{i}".encode()
            futures.append(((key, value), self.producer.send(self.topic, key=key, value=value)))
        try:
            self.producer.flush(timeout=PRODUCE_TIMEOUT)
        except KafkaTimeoutError:
            pytest.fail(f"kafka-python (acks=all, idempotent) did not get chunk {tag} acked "
                        f"within {PRODUCE_TIMEOUT:.0f}s; {self.known()}", pytrace=False)
        for record, future in futures:
            future.get(timeout=1)  # raises what the producer got, if it gave up
            self.acked.append(record)
        print(f"chunk {tag}: {count} records acked in {time.monotonic() - began:.1f}s")

    def known(self) -> str:
        """The producer's view of the cluster: brokers, and each partition's leader."""
        cluster = getattr(self.producer, "_metadata", None)  # kafka-python's ClusterMetadata
        if cluster is None:
            return "(no metadata of the producer to show)"
        brokers = sorted(b.node_id for b in cluster.brokers())
        leaders = {p: cluster.leader_for_partition(TopicPartition(self.topic, p))
                   for p in sorted(cluster.partitions_for_topic(self.topic) or ())}
        strays = {p: leader for p, leader in leaders.items()
                  if leader is not None and leader >= 0 and leader not in brokers}
        return (f"its metadata lists brokers {brokers} and leaders {leaders}"
                + (f"; leaders that are not among the brokers: {strays} (a Metadata "
                   f"response named a leader it did not list)" if strays else ""))

    def close(self) -> None:
        self.producer.close(timeout=10)


def decoded(pairs: list[tuple[bytes | None, bytes]]) -> list[tuple[str, str]]:
    """As spark_helpers.key_values decodes what it reads (no key: "")."""
    return [("" if k is None else k.decode(), v.decode()) for k, v in pairs]


def records_in(cluster: Cluster, topic: str) -> int:
    """The sum of the partitions' high watermarks, as each partition's leader answers.

    A fresh connection to the leader ZooKeeper names, each time: a client kept
    across the crashes (kafka-python's KafkaConsumer.end_offsets) can stay stuck
    on what it knew before them.
    """
    total = 0
    for p in range(PARTITIONS):
        leader = cluster.brokers[partition_state(cluster.zk, topic, p)["leader"]]
        with RawConnection(leader.bootstrap, timeout=5.0, client_id="spark-cluster-hw") as conn:
            got = conn.fetch(topic, p, 0, max_bytes=1)
        assert got.error_code == 0, (topic, p, leader, got.error_code)
        total += got.high_watermark
    return total


def leaders(cluster: Cluster, topics: list[str]) -> dict[str, list[int]]:
    return {
        t: [partition_state(cluster.zk, t, p)["leader"] for p in range(PARTITIONS)] for t in topics
    }


def difference(want: Counter[tuple[str, str]], got: Counter[tuple[str, str]]) -> str:
    missing = want - got
    extra = got - want
    return (
        f"{sum(missing.values())} missing (first {sorted(missing)[:10]}), "
        f"{sum(extra.values())} extra (first {sorted(extra)[:10]})"
    )


def test_copy_topic_through_leader_crashes(
    spark_ready: None, quiet_kafka_python: FirstOnly, cluster: Cluster, topic: str,
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    source, sink = f"{topic}-in", f"{topic}-out"
    for name in (source, sink):
        cluster.create_topic(name, PARTITIONS, 3, configs=TOPIC_CONFIG)
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())
    print(f"leaders at the start: {leaders(cluster, [source, sink])}")

    job = Job(bootstrap, source, sink, tmp_path)
    producer = Input(bootstrap, source)
    try:
        producer.chunk("first")
        job.start()
        # The query is under way: the first chunk made it to the output.
        wait_until(
            lambda: job.check_running("before the first kill")
            or records_in(cluster, sink) >= CHUNK,
            JOB_START_TIMEOUT, "the copy job to copy the first chunk",
        )
        print(f"first chunk copied {time.monotonic() - began:.0f}s into the test")

        for round_, partition in enumerate(range(PARTITIONS)):
            victim = cluster.leader_of(source, partition)
            producer.chunk(f"before-kill-{round_}")
            t0 = time.monotonic()
            victim.kill()
            # Written while the leader is dead: the producer retries on the new leaders.
            producer.chunk(f"leader-{victim.broker_id}-down-{round_}")

            def moved(victim_id: int = victim.broker_id) -> bool:
                return all(victim_id not in ps for ps in leaders(cluster, [source, sink]).values())

            wait_until(moved, FAILOVER_TIMEOUT + 10,
                       f"leaders off the killed broker {victim.broker_id}")
            t1 = time.monotonic()
            victim.start_after_crash()
            for name in (source, sink):
                cluster.wait_in_sync(name, PARTITIONS, timeout=IN_SYNC_TIMEOUT)
            t2 = time.monotonic()
            print(
                f"round {round_}: killed broker {victim.broker_id} "
                f"(leader of {source}-{partition}); leaders moved after {t1 - t0:.1f}s, "
                f"back in sync after {t2 - t0:.1f}s; "
                f"leaders now {leaders(cluster, [source, sink])}"
            )
            job.check_running(f"after round {round_}")
        producer.chunk("last")
        sent = len(producer.acked)

        # The output catches up with the input, and nothing more arrives.
        def caught_up() -> bool:
            job.check_running("while the output caught up")
            return records_in(cluster, sink) >= sent

        wait_until(caught_up, CATCH_UP_TIMEOUT, f"{sent} records in {sink}")
        time.sleep(SETTLE_SECONDS)
        job.check_running("after the output caught up")
        copied = records_in(cluster, sink)
        print(f"{copied} records in {sink} for {sent} sent, "
              f"{time.monotonic() - began:.0f}s into the test")
    finally:
        try:
            job.stop()
        finally:
            # A producer stuck on what it knows of the cluster raises from close().
            with contextlib.suppress(Exception):
                producer.close()
    # What the job logged at WARN, per logger (NetworkClient: a broker down; Sender: the
    # sink's producer retrying; ProcessingTimeExecutor: a micro-batch longer than 1 s).
    warnings = Counter(
        m[1] for line in job.text().splitlines() if (m := re.search(r" WARN (\S+?):", line))
    )
    print(f"the copy job was stopped (exit status {job.exit_status}); WARN lines per "
          f"logger: {dict(warnings)}")

    want = Counter(decoded(producer.acked))
    assert len(want) == len(producer.acked)  # the test's own values are unique
    got_in = Counter(key_values(read_topic(bootstrap, source, READ_TIMEOUT)))
    assert got_in == want, f"input topic vs acknowledged: {difference(want, got_in)}"
    got_out = Counter(key_values(read_topic(bootstrap, sink, READ_TIMEOUT)))
    assert got_out == got_in, f"output topic vs input topic: {difference(got_in, got_out)}"
    print(f"{sum(got_out.values())} records copied exactly once; "
          f"{time.monotonic() - began:.0f}s in all")
