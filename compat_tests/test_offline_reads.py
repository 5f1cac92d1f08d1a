"""Every read of a partition in a failed log directory answers KAFKA_STORAGE_ERROR (56),
Kafka's answer for a ``HostedPartition.Offline``: ListOffsets whatever the timestamp
(earliest, latest, max timestamp, by time), Fetch (v4-5: NOT_LEADER_OR_FOLLOWER, Kafka's
answer to clients older than the code), OffsetForLeaderEpoch, DescribeProducers and
DeleteRecords; the partitions of the other directory answer as before.

One broker with two log directories, the second on the FUSE file system of
`compat_tests.chaos.disk` switched to answer EIO (root only). The requests are
kafka-python's protocol classes sent raw: no client exposes OffsetForLeaderEpoch, nor a
partition's error code without retrying it. The same on josefk and Apache Kafka 4.3.1
(``--kafka``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.protocol.admin.topics import DeleteRecordsRequest
from kafka.protocol.admin.transactions import DescribeProducersRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest

from .chaos import disk
from .rawkafka import RawConnection
from .test_log_dir_failure import dir_errors, partitions_in, two_dir_broker

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(disk.available() is not None, reason=disk.available() or "")]

STORAGE_ERROR = 56
NOT_LEADER_OR_FOLLOWER = 6
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
PARTITIONS = 4

#: What each read answers for an offline partition (Kafka's ReplicaManager).
OFFLINE_ANSWERS = {
    "ListOffsets earliest": STORAGE_ERROR, "ListOffsets latest": STORAGE_ERROR,
    "ListOffsets max timestamp": STORAGE_ERROR, "ListOffsets by time": STORAGE_ERROR,
    "Fetch v12": STORAGE_ERROR, "Fetch v5": NOT_LEADER_OR_FOLLOWER,
    "OffsetForLeaderEpoch": STORAGE_ERROR, "DescribeProducers": STORAGE_ERROR,
    "DeleteRecords": STORAGE_ERROR}
#: ... and for one whose directory failed before the broker started: no log was made for
#: it, and the controller took its only replica offline (Kafka 4.3.1, one node).
LEADERLESS_ANSWERS = dict.fromkeys(OFFLINE_ANSWERS, NOT_LEADER_OR_FOLLOWER)
LEADER_NOT_AVAILABLE = 5


def list_offsets_error(raw: RawConnection, topic: str, partition: int, timestamp: int) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
    [t] = raw.request(request, 7).topics
    return t.partitions[0].error_code


def fetch_error(raw: RawConnection, topic: str, partition: int, version: int) -> int:
    part = FetchRequest.FetchTopic.FetchPartition(
        partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20)
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])])
    [t] = raw.request(request, version).responses
    return t.partitions[0].error_code


def epoch_end_offset_error(raw: RawConnection, topic: str, partition: int) -> int:
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=partition, current_leader_epoch=-1, leader_epoch=0)])])
    [t] = raw.request(request, 4).topics
    return t.partitions[0].error_code


def describe_producers_error(raw: RawConnection, topic: str, partition: int) -> int:
    request = DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])])
    [t] = raw.request(request, 0).topics
    return t.partitions[0].error_code


def delete_records_error(raw: RawConnection, topic: str, partition: int) -> int:
    request = DeleteRecordsRequest(timeout_ms=5000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[
            DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(
                partition_index=partition, offset=1)])])
    [t] = raw.request(request, 2).topics
    return t.partitions[0].error_code


def read_answers(raw: RawConnection, topic: str, partition: int, timestamp: int
                 ) -> dict[str, int]:
    """Every read path's error code for one partition (DeleteRecords last: it deletes)."""
    answers = {f"ListOffsets {kind}": list_offsets_error(raw, topic, partition, ts)
               for kind, ts in (("earliest", EARLIEST), ("latest", LATEST),
                                ("max timestamp", MAX_TIMESTAMP), ("by time", timestamp))}
    answers |= {"Fetch v12": fetch_error(raw, topic, partition, 12),
                "Fetch v5": fetch_error(raw, topic, partition, 5),
                "OffsetForLeaderEpoch": epoch_end_offset_error(raw, topic, partition),
                "DescribeProducers": describe_producers_error(raw, topic, partition),
                "DeleteRecords": delete_records_error(raw, topic, partition)}
    return answers


@pytest.fixture
def eio(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the backing directory, the EIO-on-demand file system over it)."""
    with disk.eio_fs(tmp_path) as dirs:
        yield dirs


def produce(bootstrap: str, topic: str, partition: int, values: list[bytes],
            timestamp_ms: int | None = None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=0)
    try:
        for value in values:
            producer.send(topic, value, partition=partition,
                          timestamp_ms=timestamp_ms).get(timeout=30)
    finally:
        producer.close(timeout=5)


def create_placed(admin: KafkaAdminClient, topic: str, partitions: int
                  ) -> dict[str, set[int]]:
    """Create the topic; DescribeLogDirs once every partition's log is made: log dir ->
    partitions."""
    admin.create_topics([NewTopic(topic, partitions, 1)])
    deadline = time.monotonic() + 60
    while sum(map(len, (placed := partitions_in(admin, topic)).values())) < partitions:
        assert time.monotonic() < deadline, placed  # logs are made asynchronously
        time.sleep(0.2)
    return placed


def test_every_read_of_an_offline_partition_answers_storage_error(
        request: pytest.FixtureRequest, tmp_path: Path, eio: tuple[Path, Path]) -> None:
    healthy, failing = tmp_path / "healthy", eio[1]
    topic = f"offline-reads-{time.time_ns()}"
    with two_dir_broker(request, tmp_path, [healthy, failing]) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            placed = create_placed(admin, topic, PARTITIONS)
            on_failing, on_healthy = placed[str(failing)], placed[str(healthy)]
            assert on_failing and on_healthy, placed
            stamp = int(time.time() * 1000) - 60_000
            for p in range(PARTITIONS):
                produce(broker.bootstrap, topic, p, [b"a", b"b", b"c"], timestamp_ms=stamp)

            disk.set_eio(eio[0], True)
            deadline = time.monotonic() + 60
            while (errors := dir_errors(admin))[str(failing)] != STORAGE_ERROR:
                assert time.monotonic() < deadline, errors
                try:  # an append fails: the directory goes offline
                    produce(broker.bootstrap, topic, min(on_failing), [b"lost"])
                except KafkaError:
                    time.sleep(0.2)
        finally:
            admin.close()
        with RawConnection(broker.bootstrap) as raw:
            for p in sorted(on_failing):
                assert read_answers(raw, topic, p, stamp) == OFFLINE_ANSWERS, p
            assert set(read_answers(raw, topic, min(on_healthy), stamp).values()) == {0}
        # Metadata: the failed directory's partitions have no leader (Kafka's controller
        # hears of the directory with the broker's next heartbeat), the others are led.
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            deadline = time.monotonic() + 30
            while any(leaders(admin, topic)[p][1] >= 0 for p in on_failing):
                assert time.monotonic() < deadline, leaders(admin, topic)
                time.sleep(0.5)
            described = leaders(admin, topic)
        finally:
            admin.close()
        node = described[min(on_healthy)][1]
        for p in range(PARTITIONS):
            error, leader, offline = described[p]
            if p in on_failing:
                assert (error, leader, offline) == (LEADER_NOT_AVAILABLE, -1, [node]), p
            else:
                assert (error, leader, offline) == (0, node, []), p


def leaders(admin: KafkaAdminClient, topic: str) -> dict[int, tuple[int, int, list[int]]]:
    """Metadata: partition -> (error code, leader, offline replicas)."""
    [described] = admin.describe_topics([topic])
    return {p["partition_index"]: (p["error_code"], p["leader_id"], p["offline_replicas"])
            for p in described["partitions"]}


def test_a_dir_failing_at_startup_keeps_its_partitions_offline(
        request: pytest.FixtureRequest, tmp_path: Path, eio: tuple[Path, Path]) -> None:
    """Kafka's getOrCreateLog: no log made afresh in the healthy directory for a
    partition that is not new while a directory is offline (it has no leader until a
    restart with the directory repaired); a new topic goes there."""
    healthy, failing = tmp_path / "healthy", eio[1]
    topic = f"offline-start-{time.time_ns()}"
    with two_dir_broker(request, tmp_path, [healthy, failing]) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            on_failing = create_placed(admin, topic, PARTITIONS)[str(failing)]
        finally:
            admin.close()
        assert on_failing
        for p in range(PARTITIONS):
            produce(broker.bootstrap, topic, p, [f"before-{p}".encode()])
        broker.stop()

        disk.set_eio(eio[0], True)  # it fails at start-up
        broker.start()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            assert dir_errors(admin)[str(failing)] == STORAGE_ERROR
            with RawConnection(broker.bootstrap) as raw:
                for p in sorted(on_failing):
                    assert read_answers(raw, topic, p, 0) == LEADERLESS_ANSWERS, p
            described = leaders(admin, topic)
            for p in range(PARTITIONS):
                error, leader, offline = described[p]
                if p in on_failing:
                    assert (error, leader) == (LEADER_NOT_AVAILABLE, -1) and offline, p
                else:
                    assert (error, offline) == (0, []) and leader >= 0, p
            assert not partitions_in(admin, topic).get(str(healthy), set()) & on_failing
            assert create_placed(admin, f"{topic}-new", 2)[str(healthy)] == {0, 1}
        finally:
            admin.close()
        broker.stop()

        disk.set_eio(eio[0], False)  # repaired: the records come back
        broker.start()
        with RawConnection(broker.bootstrap) as raw:
            for p in sorted(on_failing):
                assert raw.fetch(topic, p, 0).error_code == 0
                assert len(raw.all_batches(topic, p)) == 1, p
