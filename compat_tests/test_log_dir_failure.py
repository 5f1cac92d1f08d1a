"""One broker with two log directories, one of them a small tmpfs that fills up (a real
ENOSPC): the full directory goes offline as Kafka's does — its partitions answer
KAFKA_STORAGE_ERROR (or NOT_LEADER_OR_FOLLOWER once no replica leads them), the broker
keeps serving the other directory, DescribeLogDirs names the failed one with
KAFKA_STORAGE_ERROR, and a restart with the directory repaired brings every
acknowledged record back. With its only directory failed the broker stops.

Root only (mount); the same on josefk and Apache Kafka 4.3.1 (``--kafka``)."""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, KafkaStorageError, NotLeaderForPartitionError

from .chaos import disk
from .conftest import (
    REPO,
    RUN_CLASS,
    START_TIMEOUT,
    Broker,
    broker_command,
    free_port,
    own_kind,
    running,
)

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(disk.available() is not None, reason=disk.available() or "")]

SMALL_BYTES = 4 << 20
PARTITIONS = 4
# What a client may be told about a partition in a failed directory.
OFFLINE_ERRORS = (KafkaStorageError, NotLeaderForPartitionError)
STORAGE_ERROR = 56


@contextlib.contextmanager
def two_dir_broker(request: pytest.FixtureRequest, tmp: Path, dirs: list[Path]
                   ) -> Iterator[Broker]:
    kind = own_kind(request.config, "log directories")
    port = free_port()
    command = broker_command(kind, dirs[0], port, {"log.dirs": ",".join(map(str, dirs))})
    if kind == "kafka":
        controller_port = free_port()
        if len(dirs) > 1:
            format_kafka_dirs(tmp, dirs, port, controller_port)
        command = ["env", f"CONTROLLER_PORT={controller_port}", *command]
    with running(Broker(kind, f"127.0.0.1:{port}", command, dirs[0], tmp / "broker.log",
                        start_timeout=START_TIMEOUT[kind])) as broker:
        yield broker


def format_kafka_dirs(tmp: Path, dirs: list[Path], port: int, controller_port: int) -> None:
    """Kafka 4 starts only on formatted log directories: format them all as the node
    start-kraft.sh runs (its first run formats only the first)."""
    config = tmp / "format.properties"
    config.write_text((REPO / "tools" / "kafka" / "server.properties").read_text() + "\n".join([
        "", "node.id=1",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        f"log.dirs={','.join(map(str, dirs))}", ""]))
    cluster_id = base64.urlsafe_b64encode(b"\x10" + os.urandom(15)).decode().rstrip("=")
    subprocess.run([str(RUN_CLASS), "kafka.tools.StorageTool", "format", "--config",
                    str(config), "--cluster-id", cluster_id], check=True, capture_output=True,
                   timeout=120, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    disk.mount_tmpfs(mount, SMALL_BYTES)
    try:
        yield mount
    finally:
        disk.umount(mount)


def partitions_in(admin: KafkaAdminClient, topic: str) -> dict[str, set[int]]:
    """DescribeLogDirs: log dir -> the topic's partitions in it (online dirs only)."""
    found: dict[str, set[int]] = {}
    for broker in admin.describe_log_dirs([topic]):
        for log_dir in broker["log_dirs"]:
            found.setdefault(log_dir["log_dir"], set()).update(
                p["partition_index"] for t in log_dir["topics"] if t["name"] == topic
                for p in t["partitions"])
    return found


def dir_errors(admin: KafkaAdminClient) -> dict[str, int]:
    return {log_dir["log_dir"]: log_dir["error_code"]
            for broker in admin.describe_log_dirs() for log_dir in broker["log_dirs"]}


def produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0)
    try:
        for value in values:
            producer.send(topic, value, partition=partition).get(timeout=30)
    finally:
        producer.close(timeout=5)


def first_refusal(bootstrap: str, topic: str, partition: int, limit: int = 20_000
                  ) -> tuple[list[bytes], KafkaError]:
    """Produce to the partition until the broker refuses: (the values acknowledged,
    the error)."""
    acked: list[bytes] = []
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0,
                             max_block_ms=30_000)
    try:
        for i in range(limit):
            value = f"{partition}:{i}:".encode() + b"x" * 2000
            try:
                producer.send(topic, value, partition=partition).get(timeout=30)
            except KafkaError as e:
                return acked, e
            acked.append(value)
    finally:
        producer.close(timeout=5)
    raise AssertionError(f"{limit} records fitted in a full file system")


def read_all(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10_000,
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        for message in consumer:
            got.append(message.value)
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


def test_a_full_log_dir_goes_offline_and_comes_back_repaired(
        request: pytest.FixtureRequest, tmp_path: Path, small_fs: Path) -> None:
    healthy = tmp_path / "healthy"
    topic = f"dirfail-{time.time_ns()}"
    with two_dir_broker(request, tmp_path, [healthy, small_fs]) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
            deadline = time.monotonic() + 60
            while sum(map(len, (placed := partitions_in(admin, topic)).values())) < PARTITIONS:
                assert time.monotonic() < deadline, placed  # logs are made asynchronously
                time.sleep(0.2)
            on_small, on_healthy = placed[str(small_fs)], placed[str(healthy)]
            assert on_small and on_healthy, placed
            before = {p: [f"before-{p}-{i}".encode() for i in range(5)]
                      for p in range(PARTITIONS)}
            for p, values in before.items():
                produce(broker.bootstrap, topic, p, values)

            disk.fill(small_fs)
            victim = min(on_small)
            acked, error = first_refusal(broker.bootstrap, topic, victim)

            assert isinstance(error, OFFLINE_ERRORS), repr(error)
            assert broker.proc is not None and broker.proc.poll() is None
            # The directory goes offline just after the failed write (Kafka: on the
            # LogDirFailureHandler thread; josefk: on its event loop).
            deadline = time.monotonic() + 30
            while (errors := dir_errors(admin))[str(small_fs)] != STORAGE_ERROR:
                assert time.monotonic() < deadline, errors
                time.sleep(0.2)
            assert errors[str(healthy)] == 0
            # The other directory serves as before.
            for p in on_healthy:
                produce(broker.bootstrap, topic, p, [b"after"])
                assert read_all(broker.bootstrap, topic, p, 6) == [*before[p], b"after"]
        finally:
            admin.close()
        broker.stop()
        disk.free(small_fs)
        broker.start()
        # Repaired and restarted: every acknowledged record of the failed directory is back.
        assert read_all(broker.bootstrap, topic, victim, 5 + len(acked)) == [
            *before[victim], *acked]
        produce(broker.bootstrap, topic, victim, [b"again"])


def test_the_broker_stops_when_its_only_log_dir_fails(
        request: pytest.FixtureRequest, tmp_path: Path, small_fs: Path) -> None:
    topic = f"dirfail-only-{time.time_ns()}"
    with two_dir_broker(request, tmp_path, [small_fs]) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])
        finally:
            admin.close()
        time.sleep(1)
        disk.fill(small_fs)
        with contextlib.suppress(KafkaError, AssertionError):
            first_refusal(broker.bootstrap, topic, 0, limit=2000)
        assert broker.proc is not None
        deadline = time.monotonic() + 60
        while broker.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert broker.proc.poll() not in (None, 0), broker.log_tail()
