"""Log compaction (``cleanup.policy=compact``), as stock clients see it.

- After the cleaner runs, a consumer from the beginning sees exactly the last value
  of each key, at its original offset, in offset order; tombstones go once
  ``delete.retention.ms`` has passed since a cleaning first kept them (KIP-534: a
  later cleaning removes them, so the test keeps making the log dirty).
- A record without a key is refused with INVALID_RECORD (87) and a per-record error.
- A group's committed offsets survive the compaction of ``__consumer_offsets`` and a
  restart.
- Aborted transactional records are removed and never shadow a committed value of
  their key.

The module starts a broker of its own with ``log.cleaner.backoff.ms`` low (Kafka's
default is 15 s). Segments roll by ``segment.ms`` (Kafka 4 wants ``segment.bytes``
of at least 1 MiB): records carry CreateTimes further apart than it. Every wait
polls against a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from .clients import Rec, confluent_produce, now_ms
from .conftest import Broker, broker_of_its_own, unique_topic_name
from .rawkafka import RawConnection

INVALID_RECORD = 87
SEGMENT_MS = 100
BACKOFF_MS = 100
KEYS = 8
VERSIONS = 5
WAIT = 90.0  # seconds the cleaner may take (Kafka's checks run every BACKOFF_MS)
OFFSETS_TOPIC = "__consumer_offsets"
T = TypeVar("T")


@pytest.fixture(scope="module")
def cleaning_broker(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    overrides = {"log.cleaner.backoff.ms": str(BACKOFF_MS), "offsets.topic.num.partitions": "1"}
    with broker_of_its_own(request.config, tmp_path_factory.mktemp("compaction"),
                           "log.cleaner.backoff.ms", overrides) as broker:
        yield broker


def create_compacted(bootstrap: str, **configs: str) -> str:
    name = unique_topic_name("compat-compact")
    settings = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS),
                "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
    settings.update(configs)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        result = admin.create_topics({name: {"num_partitions": 1, "configs": settings}},
                                     timeout_ms=15_000, wait_for_metadata=True)
        [created] = result["topics"]
        assert created["error_code"] == 0, created
    finally:
        admin.close()
    return name


def read_all(bootstrap: str, topic: str, partition: int = 0
             ) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the log start to the high watermark."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=15_000,
                             client_id="compat-compaction")
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read {len(got)} records, not up to {end}"
            for records in consumer.poll(timeout_ms=200).values():
                got.extend((r.offset, r.key, r.value) for r in records)
        return got
    finally:
        consumer.close()


class Writer:
    """Produces records whose CreateTimes are SEGMENT_MS * 3 apart, so each rolls a segment."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.ts = now_ms() - 600_000
        self.sent: list[tuple[int, bytes, bytes | None]] = []

    def send(self, recs: list[tuple[bytes, bytes | None]]) -> None:
        self.ts += SEGMENT_MS * 3
        batch = [Rec(k, v, (), self.ts) for k, v in recs]
        offsets = confluent_produce(self.bootstrap, self.topic, batch)
        self.sent += [(o, k, v) for o, (k, v) in zip(offsets, recs, strict=True)]

    def last_values(self) -> list[tuple[int, bytes, bytes | None]]:
        last: dict[bytes, tuple[int, bytes, bytes | None]] = {}
        for offset, key, value in self.sent:
            last[key] = (offset, key, value)
        return sorted(last.values())


def poll_until(what: str, check: Callable[[], T], nudge: Callable[[], object] | None = None,
               seconds: float = WAIT) -> T:
    """Call ``check`` until it returns a true value (``nudge`` between tries)."""
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {seconds:.0f}s", pytrace=False)
        if nudge is not None:
            nudge()
        time.sleep(0.5)


def test_compaction_keeps_the_last_value_of_each_key(cleaning_broker: Broker) -> None:
    bootstrap = cleaning_broker.bootstrap
    topic = create_compacted(bootstrap)
    writer = Writer(bootstrap, topic)
    for version in range(VERSIONS):
        writer.send([(b"key-%d" % k, b"value-%d-%d" % (version, k)) for k in range(KEYS)])
    writer.send([(b"key-0", None), (b"key-1", None)])  # tombstones
    writer.send([(b"end", b"rolls the last segment")])
    assert len(writer.sent) == KEYS * VERSIONS + 3
    expected = [r for r in writer.last_values() if r[2] is not None]

    def compacted() -> bool:
        return [r for r in read_all(bootstrap, topic) if r[2] is not None] == expected

    poll_until("the cleaner did not leave only the last value of each key", compacted)
    got = read_all(bootstrap, topic)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(offsets)
    # Only tombstones may remain beside the live keys (until delete.retention.ms).
    assert {k for _, k, v in got if v is None} <= {b"key-0", b"key-1"}


def test_tombstones_disappear_after_delete_retention(cleaning_broker: Broker) -> None:
    bootstrap = cleaning_broker.bootstrap
    topic = create_compacted(bootstrap, **{"delete.retention.ms": "1000"})
    writer = Writer(bootstrap, topic)
    for version in range(3):
        writer.send([(b"key-%d" % k, b"v%d" % version) for k in range(KEYS)])
    writer.send([(b"key-%d" % k, None) for k in range(KEYS // 2)])
    writer.send([(b"end", b"0")])
    deleted = {b"key-%d" % k for k in range(KEYS // 2)}
    live = {k: v for _, k, v in writer.last_values() if v is not None and k != b"end"}
    nudges = iter(range(10_000))

    def gone() -> bool:
        got = read_all(bootstrap, topic)
        return (all(v is not None for _, _, v in got)
                and not deleted & {k for _, k, _ in got}
                and {k: v for _, k, v in got if k != b"end"} == live)

    # Each nudge writes one more record to a new segment: the log stays dirty, so the
    # cleaner keeps coming back and drops the tombstones once their horizon passed.
    poll_until("the tombstones were not removed", gone,
               nudge=lambda: writer.send([(b"end", b"%d" % next(nudges))]))
    offsets = [o for o, _, _ in read_all(bootstrap, topic)]
    assert offsets == sorted(offsets)


def test_replaced_segments_go_after_the_file_delete_delay(cleaning_broker: Broker) -> None:
    """The segments a cleaning replaced are renamed ``.deleted`` and removed
    ``file.delete.delay.ms`` later, not at the next retention check (every 5 minutes)."""
    assert cleaning_broker.data_dir is not None
    bootstrap = cleaning_broker.bootstrap
    topic = create_compacted(bootstrap, **{"file.delete.delay.ms": "500"})
    directory = cleaning_broker.data_dir / f"{topic}-0"
    writer = Writer(bootstrap, topic)
    for version in range(VERSIONS):
        writer.send([(b"key-%d" % k, b"value-%d-%d" % (version, k)) for k in range(KEYS)])
    writer.send([(b"end", b"rolls the last segment")])
    expected = writer.last_values()
    poll_until("the cleaner did not leave only the last value of each key",
               lambda: read_all(bootstrap, topic) == expected)
    segments = {p.name for p in directory.iterdir() if p.name.endswith(".log")}
    assert len(segments) < VERSIONS + 1  # some were replaced by cleaned ones

    def leftovers() -> list[str]:
        return sorted(p.name for p in directory.iterdir() if p.name.endswith(".deleted"))

    poll_until("replaced segments stayed on disk past file.delete.delay.ms",
               lambda: not leftovers(), seconds=20)


def test_a_record_without_a_key_is_refused(cleaning_broker: Broker) -> None:
    bootstrap = cleaning_broker.bootstrap
    topic = create_compacted(bootstrap)
    with pytest.raises(confluent_kafka.KafkaException) as caught:
        confluent_produce(bootstrap, topic, [Rec(None, b"no key")], retries=0)
    assert caught.value.args[0].code() == INVALID_RECORD
    # The raw answer carries the record's index and Kafka's message (Produce v8+).
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 16)
    builder.append(0, timestamp=now_ms(), key=b"k", value=b"1", headers=[])
    builder.append(1, timestamp=now_ms(), key=None, value=b"2", headers=[])
    records = bytes(builder.build())
    with RawConnection(bootstrap) as conn:
        version = conn.pick_version(ProduceRequest, 8, 11)
        partition = ProduceRequest.TopicProduceData.PartitionProduceData(index=0,
                                                                        records=records)
        request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=10_000,
                                 topic_data=[ProduceRequest.TopicProduceData(
                                     name=topic, partition_data=[partition])])
        response = conn.request(request, version)
    [data] = response.responses[0].partition_responses
    assert data.error_code == INVALID_RECORD
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in data.record_errors] == [
        (1, message)]
    assert data.error_message == (
        "One or more records have been rejected due to 1 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, "
        f"message='{message}')]")
    assert read_all(bootstrap, topic) == []


def _offset_records(bootstrap: str, group: str, topic: str) -> int:
    """How many offset commits of ``group`` for ``topic`` ``__consumer_offsets`` holds."""
    return sum(1 for _, key, value in read_all(bootstrap, OFFSETS_TOPIC)
               if key is not None and value is not None
               and group.encode() in key and topic.encode() in key)


def test_committed_offsets_survive_compaction_and_a_restart(cleaning_broker: Broker) -> None:
    bootstrap = cleaning_broker.bootstrap
    topic = create_compacted(bootstrap)
    Writer(bootstrap, topic).send([(b"k", b"v")])
    group = unique_topic_name("compat-compact-group")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                        "enable.auto.commit": False})
    try:
        # Creates __consumer_offsets (one partition in this module's broker).
        consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=30)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS_TOPIC, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in (("segment.ms", str(SEGMENT_MS)),
                                ("min.cleanable.dirty.ratio", "0.01"))])
        [future] = admin.incremental_alter_configs([resource], request_timeout=20).values()
        future.result(timeout=30)
        commits = 20
        for i in range(commits):
            consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, i + 1)],
                            asynchronous=False)
            time.sleep(SEGMENT_MS * 1.5 / 1000)  # each commit rolls the segment before it

        # The last commit sits in the active segment; the cleaner keeps one before it.
        poll_until("__consumer_offsets was not compacted",
                   lambda: _offset_records(bootstrap, group, topic) <= 2)
    finally:
        consumer.close()

    cleaning_broker.restart()
    again = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                     "enable.auto.commit": False})
    try:
        def committed() -> int | None:
            try:
                [tp] = again.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=10)
            except confluent_kafka.KafkaException:
                return None
            return tp.offset if tp.offset >= 0 else None

        assert poll_until("no committed offset after the restart", committed) == commits
    finally:
        again.close()


def test_aborted_transactions_never_shadow_committed_values(cleaning_broker: Broker) -> None:
    bootstrap = cleaning_broker.bootstrap
    topic = create_compacted(bootstrap, **{"delete.retention.ms": "1000"})
    writer = Writer(bootstrap, topic)
    writer.send([(b"before", b"0")])
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": f"compat-{topic}",
                                         "client.id": "compat-compaction", "linger.ms": 5})
    producer.init_transactions(30)
    # Markers are stamped with the broker's clock: records must come later, or a segment
    # starting with a marker would never roll by segment.ms.
    writer.ts = now_ms() + 5000

    def transaction(recs: list[tuple[bytes, bytes]], commit: bool) -> None:
        producer.begin_transaction()
        for key, value in recs:
            writer.ts += SEGMENT_MS * 3
            producer.produce(topic, key=key, value=value, partition=0, timestamp=writer.ts)
        assert producer.flush(30) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(30)

    transaction([(b"a", b"committed"), (b"b", b"committed")], commit=True)
    transaction([(b"a", b"aborted"), (b"c", b"aborted")], commit=False)
    transaction([(b"d", b"committed")], commit=True)  # the producer's last batch
    writer.send([(b"end", b"0")])
    expected = {b"before": b"0", b"a": b"committed", b"b": b"committed", b"d": b"committed"}
    nudges = iter(range(10_000))

    def cleaned() -> bool:
        # read_uncommitted: the aborted records must be gone from the log itself.
        got = read_all(bootstrap, topic)
        return {k: v for _, k, v in got if k != b"end"} == expected

    poll_until("the aborted records were not removed", cleaned,
               nudge=lambda: writer.send([(b"end", b"%d" % next(nudges))]))
    offsets = [o for o, _, _ in read_all(bootstrap, topic)]
    assert offsets == sorted(offsets)
