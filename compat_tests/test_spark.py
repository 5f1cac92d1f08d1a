"""Spark Structured Streaming over format("kafka"), end to end (spark_examples/).

Each test runs one example of ``spark_examples`` in Spark local mode against
the broker under test and checks exactly what came out: the records of the
sink topic, the parquet rows, the offsets read. Queries run bounded
(``trigger(availableNow=True)``, or stopped after a number of micro-batches),
so every test ends on its own; one test kills ``python -m
spark_examples.exactly_once_files`` mid-stream and restarts it.

One SparkSession (one JVM) serves the whole module. Needs pyspark and the
connector jars from tools/spark/fetch.sh; skips without them unless
JOSEFK_REQUIRE_SPARK=1. Select or deselect with ``-m spark`` / ``-m "not spark"``.

Spark's own log (WARN and up) goes to stderr and shows with a failing test;
``JOSEFK_SPARK_LOG4J2=tools/spark/log4j2-debug.properties`` logs the Kafka
clients' requests too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartition

from spark_examples import (
    batch_read,
    common,
    event_time,
    exactly_once_files,
    options,
    read_committed,
    word_count,
)

from .clients import Rec, produce
from .conftest import REPO, Broker, env_flag
from .rawkafka import RawConnection
from .spark_helpers import (
    java_version,
    key_values,
    read_topic,
    spark_missing,
    stop_spark,
    versions,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

#: A bounded (availableNow) query must end within this.
QUERY_TIMEOUT = 120.0


@pytest.fixture(scope="session")
def spark(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SparkSession (local[2]) with the Kafka connector, for the whole session."""
    missing = spark_missing()
    if missing:
        if env_flag("JOSEFK_REQUIRE_SPARK"):
            pytest.fail(f"{missing} (JOSEFK_REQUIRE_SPARK=1)", pytrace=False)
        pytest.skip(missing)
    # Spark 4's ArtifactManager makes ``artifacts/spark-<uuid>`` in the JVM's working
    # directory; the JVM starts in a scratch one so that it is not the checkout.
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("spark-cwd"))
        session = common.build_session("josefk-compat-spark")
    sys.stderr.write(f"spark: {versions()}; {java_version()}; broker {broker.kind}\n")
    try:
        yield session
    finally:
        stop_spark(session)


def _ms(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 UTC time."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _lines(bootstrap: str, topic: str, partition: int, lines: list[str]) -> list[int]:
    return produce(
        bootstrap, topic, [Rec(None, line.encode()) for line in lines], partition=partition
    )


def _expected_counts(lines: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(w for w in re.split(r"[^\w]+", line.lower()) if w)
    return counts


# --- 1. streaming word count, Kafka to Kafka -------------------------------------------


def test_word_count(
    spark: Any, broker: Broker, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = make_topic(partitions=2)
    sink = make_topic(partitions=1)
    checkpoint = str(tmp_path / "checkpoint")
    first = {
        0: ["the quick brown fox", "jumps over the lazy dog", ""],
        1: ["The Fox, the DOG; and the cat.", "Grüße aus Köln — grüße!"],
    }
    second = {0: ["the end"], 1: ["a fox and a dog", "köln"]}
    for partition, lines in first.items():
        _lines(broker.bootstrap, source, partition, lines)

    query = word_count.start(spark, broker.bootstrap, source, sink, checkpoint, available_now=True)
    common.await_query(query, QUERY_TIMEOUT)
    counts1 = _expected_counts(first[0] + first[1])
    assert counts1["the"] == 5 and counts1["grüße"] == 2  # the test's own arithmetic
    out1 = read_topic(broker.bootstrap, sink)
    # One micro-batch, output mode update: each word once, with its count.
    assert sorted(key_values(out1)) == sorted((w, str(n)) for w, n in counts1.items())

    # Restart from the checkpoint: only the new lines are read, and only the
    # words they contain are written again, with their new totals.
    for partition, lines in second.items():
        _lines(broker.bootstrap, source, partition, lines)
    query = word_count.start(spark, broker.bootstrap, source, sink, checkpoint, available_now=True)
    common.await_query(query, QUERY_TIMEOUT)
    counts2 = counts1 + _expected_counts(second[0] + second[1])
    out2 = read_topic(broker.bootstrap, sink)[len(out1) :]
    new_words = _expected_counts(second[0] + second[1])
    assert sorted(key_values(out2)) == sorted((w, str(counts2[w])) for w in new_words)
    latest = dict(key_values(out1 + out2))
    assert latest == {w: str(n) for w, n in counts2.items()}
    # Records read by the second run: exactly the 3 new lines.
    assert sum(p["numInputRows"] for p in query.recentProgress) == 3
    # The sink is the Java producer with its defaults: idempotent (a producer
    # id and sequence numbers on every batch).
    with RawConnection(broker.bootstrap) as conn:
        batches = conn.all_batches(sink, 0)
    assert sum(b.record_count for b in batches) == len(out1) + len(out2)
    assert all(b.producer_id >= 0 and b.base_sequence >= 0 for b in batches), batches


# --- 2. event time: windows, watermark, late events ------------------------------------


def _event(ts: str, kind: str, user: str = "u1") -> Rec:
    return Rec(None, json.dumps({"ts": ts, "kind": kind, "user": user}).encode())


def _window(start: str, kind: str, count: int) -> tuple[str, dict[str, Any]]:
    start_ms = _ms(f"2024-05-01T{start}:00Z")
    value = {
        "window_start": _utc(start_ms),
        "window_end": _utc(start_ms + 60_000),
        "kind": kind,
        "count": count,
    }
    return f"{_utc(start_ms)} {kind}", value


def test_event_time_windows(
    spark: Any, broker: Broker, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = make_topic(partitions=1)
    sink = make_topic(partitions=1)
    checkpoint = str(tmp_path / "checkpoint")
    day = "2024-05-01T"

    def run() -> Any:
        query = event_time.start(
            spark,
            broker.bootstrap,
            source,
            sink,
            checkpoint,
            window="1 minute",
            watermark="10 seconds",
            available_now=True,
        )
        common.await_query(query, QUERY_TIMEOUT)
        return query

    def windows(records: list[Any]) -> list[tuple[str, dict[str, Any]]]:
        return sorted((k, json.loads(v)) for k, v in key_values(records))

    produce(
        broker.bootstrap,
        source,
        [
            _event(f"{day}12:00:05Z", "click"),
            _event(f"{day}12:00:30Z", "click", "u2"),
            _event(f"{day}12:00:50Z", "view"),
            Rec(None, b"not json"),
            Rec(None, b'{"kind": "click"}'),  # no event time: dropped
            _event(f"{day}12:01:10Z", "click"),
            _event(f"{day}12:02:30Z", "click"),
        ],
    )
    run()
    # Largest event time 12:02:30, watermark 12:02:20: the windows ending by
    # then are final and written; 12:02-12:03 stays open.
    out1 = read_topic(broker.bootstrap, sink)
    assert windows(out1) == sorted(
        [_window("12:00", "click", 2), _window("12:00", "view", 1), _window("12:01", "click", 1)]
    )

    produce(
        broker.bootstrap,
        source,
        [
            _event(f"{day}12:00:40Z", "click"),  # its window was final: dropped
            _event(f"{day}12:02:10Z", "click"),  # late but its window is open: counted
            _event(f"{day}12:02:50Z", "view"),
            _event(f"{day}12:04:00Z", "view"),  # watermark -> 12:03:50
        ],
    )
    query = run()
    out2 = read_topic(broker.bootstrap, sink)[len(out1) :]
    assert windows(out2) == sorted([_window("12:02", "click", 2), _window("12:02", "view", 1)])
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in query.recentProgress
        for op in p.get("stateOperators", [])
    )
    assert dropped == 1
    assert query.lastProgress["eventTime"]["watermark"] == "2024-05-01T12:03:50.000Z"


# --- 3. batch reads by offsets and by timestamps ----------------------------------------

# Record timestamps start an hour ago: records older than the broker's
# retention (log.retention.hours=168) would be deleted by its retention check,
# which Apache Kafka first runs 30 s after it starts.
BASE_TS = (int(time.time()) - 3600) * 1000


@pytest.fixture
def two_partitions(broker: Broker, make_topic: Callable[..., str]) -> str:
    """Partition 0: 10 records one second apart; partition 1: 6 records two seconds apart."""
    topic = make_topic(partitions=2)
    p0 = [Rec(f"k{i}".encode(), f"p0-{i}".encode(), (), BASE_TS + i * 1000) for i in range(10)]
    p1 = [Rec(f"k{i}".encode(), f"p1-{i}".encode(), (), BASE_TS + i * 2000) for i in range(6)]
    assert produce(broker.bootstrap, topic, p0, partition=0) == list(range(10))
    assert produce(broker.bootstrap, topic, p1, partition=1) == list(range(6))
    return topic


def _rows(df: Any) -> list[tuple[int, int, int, str, str]]:
    """(partition, offset, timestamp ms, key, value), sorted."""
    from pyspark.sql import functions as F

    rows = df.select(
        "partition", "offset", F.unix_millis("timestamp").alias("ts"), "key", "value"
    ).collect()
    return sorted((r.partition, r.offset, r.ts, r.key, r.value) for r in rows)


def _expected(partition: int, offsets: range) -> list[tuple[int, int, int, str, str]]:
    step = 1000 if partition == 0 else 2000
    return [(partition, o, BASE_TS + o * step, f"k{o}", f"p{partition}-{o}") for o in offsets]


def test_batch_offsets(spark: Any, broker: Broker, two_partitions: str) -> None:
    topic = two_partitions
    everything = batch_read.read_range(spark, broker.bootstrap, topic)
    assert _rows(everything) == _expected(0, range(10)) + _expected(1, range(6))

    df = batch_read.read_range(
        spark,
        broker.bootstrap,
        topic,
        starting_offsets=common.offsets_json(topic, {0: 3, 1: -2}),
        ending_offsets=common.offsets_json(topic, {0: 7, 1: -1}),
    )
    assert _rows(df) == _expected(0, range(3, 7)) + _expected(1, range(6))

    df = batch_read.read_range(
        spark,
        broker.bootstrap,
        topic,
        starting_offsets=common.offsets_json(topic, {0: 9, 1: 4}),
        ending_offsets=common.offsets_json(topic, {0: 10, 1: 5}),
    )
    assert _rows(df) == _expected(0, range(9, 10)) + _expected(1, range(4, 5))


def test_batch_timestamps(spark: Any, broker: Broker, two_partitions: str) -> None:
    topic = two_partitions
    # Partition 0 from the first record at/after +4.5 s (offset 5) to before
    # the first at/after +8 s (offset 8); partition 1 from +3 s (offset 2, at
    # +4 s) to a time after its last record: no offset for it, so latest.
    df = batch_read.read_range(
        spark,
        broker.bootstrap,
        topic,
        starting_timestamps=common.offsets_json(topic, {0: BASE_TS + 4500, 1: BASE_TS + 3000}),
        ending_timestamps=common.offsets_json(topic, {0: BASE_TS + 8000, 1: BASE_TS + 99_000}),
    )
    assert _rows(df) == _expected(0, range(5, 8)) + _expected(1, range(2, 6))

    # An exact hit is inclusive; a time before everything starts at offset 0.
    df = batch_read.read_range(
        spark,
        broker.bootstrap,
        topic,
        starting_timestamps=common.offsets_json(topic, {0: BASE_TS + 9000, 1: BASE_TS - 60_000}),
    )
    assert _rows(df) == _expected(0, range(9, 10)) + _expected(1, range(6))

    # No record at/after the starting time in partition 1: an error by
    # default, the partition's end with startingOffsetsByTimestampStrategy=latest.
    late = common.offsets_json(topic, {0: BASE_TS + 7000, 1: BASE_TS + 99_000})
    from pyspark.errors import IllegalArgumentException

    no_offset = rf"No offset matched from request of topic-partition {topic}-1 and timestamp"
    with pytest.raises(IllegalArgumentException, match=no_offset):
        batch_read.read_range(spark, broker.bootstrap, topic, starting_timestamps=late).collect()
    df = batch_read.read_range(
        spark, broker.bootstrap, topic, starting_timestamps=late, timestamp_strategy="latest"
    )
    assert _rows(df) == _expected(0, range(7, 10))


# --- 4. exactly once into parquet files across a stop and a restart ---------------------


def test_exactly_once_files(
    spark: Any, broker: Broker, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = make_topic(partitions=2)
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    sent: set[tuple[int, int, str]] = set()

    def send(partition: int, values: range) -> None:
        recs = [Rec(f"k{v}".encode(), f"v{partition}-{v}".encode()) for v in values]
        offsets = produce(broker.bootstrap, source, recs, partition=partition)
        sent.update(
            (partition, off, f"v{partition}-{v}") for off, v in zip(offsets, values, strict=True)
        )

    send(0, range(0, 30))
    send(1, range(0, 30))
    # Running on a processing-time trigger, 8 records per micro-batch: stop it
    # after two batches, while it has more to read (and maybe mid-batch).
    query = exactly_once_files.start(
        spark,
        broker.bootstrap,
        source,
        output,
        checkpoint,
        max_offsets_per_trigger=8,
        interval="500 milliseconds",
    )
    try:
        common.wait_for_batches(query, 2, QUERY_TIMEOUT)
    finally:
        query.stop()
    assert query.exception() is None

    def committed() -> list[tuple[int, int, str]]:
        rows = exactly_once_files.read_output(spark, output).collect()
        return [(r.partition, r.offset, r.value) for r in rows]

    first = committed()
    assert 16 <= len(first) < 60, "the query should stop with records still to read"
    assert len(set(first)) == len(first) and set(first) <= sent
    # Whole micro-batches only: per partition, the offsets from 0 without a hole.
    for partition in (0, 1):
        got = sorted(off for p, off, _ in first if p == partition)
        assert got == list(range(len(got))), (partition, got)

    # More records while it is stopped, then a restart on the same checkpoint.
    send(0, range(30, 40))
    send(1, range(30, 35))
    query = exactly_once_files.start(
        spark,
        broker.bootstrap,
        source,
        output,
        checkpoint,
        max_offsets_per_trigger=8,
        available_now=True,
    )
    common.await_query(query, QUERY_TIMEOUT)
    final = committed()
    assert Counter(final) == Counter(sent)  # every record, each exactly once
    assert len(final) == 75
    rows = exactly_once_files.read_output(spark, output).select("topic", "key").collect()
    assert {r.topic for r in rows} == {source}


# --- 5. options: includeHeaders, maxOffsetsPerTrigger, minPartitions, ... ---------------


def test_include_headers(spark: Any, broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=1)
    headers = [
        (),
        (("trace", b"t-1"),),
        (("a", b"1"), ("b", b""), ("a", b"2")),  # repeated key, empty value, order kept
        (("ключ", "значение".encode()), ("bin", bytes(range(256)))),
    ]
    recs = [Rec(f"k{i}".encode(), f"v{i}".encode(), h) for i, h in enumerate(headers)]
    assert produce(broker.bootstrap, topic, recs) == [0, 1, 2, 3]
    rows = options.read_with_headers(spark, broker.bootstrap, topic).orderBy("offset").collect()
    got = [
        (
            r.offset,
            r.key,
            r.value,
            None if r.headers is None else tuple((h.key, bytes(h.value)) for h in r.headers),
        )
        for r in rows
    ]
    assert got == [(i, f"k{i}", f"v{i}", tuple(h) if h else None) for i, h in enumerate(headers)]


def test_max_offsets_per_trigger(
    spark: Any, broker: Broker, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    produce(broker.bootstrap, topic, [Rec(None, f"a{i}".encode()) for i in range(13)], partition=0)
    produce(broker.bootstrap, topic, [Rec(None, f"b{i}".encode()) for i in range(10)], partition=1)
    query = options.start_copy(
        spark,
        broker.bootstrap,
        str(tmp_path / "out"),
        str(tmp_path / "checkpoint"),
        subscribe=topic,
        max_offsets_per_trigger=5,
    )
    common.await_query(query, QUERY_TIMEOUT)
    sizes = [n for _, n in common.progress_rows(query) if n]
    assert sum(sizes) == 23
    assert max(sizes) <= 5 and len(sizes) >= 5, sizes
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.partition, r.offset, r.value) for r in rows) == [
        (0, i, f"a{i}") for i in range(13)
    ] + [(1, i, f"b{i}") for i in range(10)]


def test_min_partitions(spark: Any, broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=2)
    produce(broker.bootstrap, topic, [Rec(None, f"a{i}".encode()) for i in range(12)], partition=0)
    produce(broker.bootstrap, topic, [Rec(None, f"b{i}".encode()) for i in range(12)], partition=1)
    plain = options.read_min_partitions(spark, broker.bootstrap, topic, 1)
    assert plain.rdd.getNumPartitions() == 2
    df = options.read_min_partitions(spark, broker.bootstrap, topic, 6)
    assert df.rdd.getNumPartitions() == 6
    rows = df.collect()
    assert sorted((r.partition, r.offset, r.value) for r in rows) == [
        (0, i, f"a{i}") for i in range(12)
    ] + [(1, i, f"b{i}") for i in range(12)]
    # Each Kafka partition's 12 offsets split into 3 tasks of 4 consecutive offsets.
    ranges: dict[int, list[tuple[int, int]]] = {}
    for r in rows:
        ranges.setdefault(r.spark_partition, []).append((r.partition, r.offset))
    spans = sorted((min(v)[0], min(v)[1], max(v)[1], len(v)) for v in ranges.values())
    assert spans == [(p, s, s + 3, 4) for p in (0, 1) for s in (0, 4, 8)]


def test_subscribe_pattern(
    spark: Any,
    broker: Broker,
    make_topic: Callable[..., str],
    topic_name: str,
    tmp_path: Path,
) -> None:
    prefix = topic_name
    a = make_topic(partitions=2, name=f"{prefix}-a")
    b = make_topic(partitions=1, name=f"{prefix}-b")
    other = make_topic(partitions=1, name=f"{prefix}x-other")
    for t in (a, b, other):
        produce(broker.bootstrap, t, [Rec(None, f"{t}/{i}".encode()) for i in range(3)])
    produce(broker.bootstrap, a, [Rec(None, f"{a}/p1".encode())], partition=1)
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    pattern = re.escape(prefix) + "-.*"

    def run() -> list[tuple[str, int, int, str]]:
        query = options.start_copy(
            spark, broker.bootstrap, output, checkpoint, subscribe_pattern=pattern
        )
        common.await_query(query, QUERY_TIMEOUT)
        rows = spark.read.parquet(output).collect()
        return sorted((r.topic, r.partition, r.offset, r.value) for r in rows)

    first = [(a, 0, i, f"{a}/{i}") for i in range(3)] + [(a, 1, 0, f"{a}/p1")]
    first += [(b, 0, i, f"{b}/{i}") for i in range(3)]
    assert run() == sorted(first)

    # A topic created after the first run matches too, and is read from its start.
    c = make_topic(partitions=1, name=f"{prefix}-c")
    produce(broker.bootstrap, c, [Rec(None, f"{c}/{i}".encode()) for i in range(2)])
    produce(broker.bootstrap, b, [Rec(None, f"{b}/3".encode())])
    second = first + [(c, 0, i, f"{c}/{i}") for i in range(2)] + [(b, 0, 3, f"{b}/3")]
    assert run() == sorted(second)


def test_fail_on_data_loss(
    spark: Any,
    broker: Broker,
    make_topic: Callable[..., str],
    admin: KafkaAdminClient,
    tmp_path: Path,
) -> None:
    topic = make_topic(partitions=1)
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run(fail_on_data_loss: bool | None) -> Any:
        query = options.start_copy(
            spark,
            broker.bootstrap,
            output,
            checkpoint,
            subscribe=topic,
            fail_on_data_loss=fail_on_data_loss,
        )
        common.await_query(query, QUERY_TIMEOUT)
        return query

    def offsets() -> list[int]:
        return sorted(r.offset for r in spark.read.parquet(output).collect())

    produce(broker.bootstrap, topic, [Rec(None, f"v{i}".encode()) for i in range(5)])
    run(None)
    assert offsets() == list(range(5))

    # Offsets 5-14 arrive, and 5-9 are deleted before the query reads them.
    produce(broker.bootstrap, topic, [Rec(None, f"v{i}".encode()) for i in range(5, 15)])
    tp = TopicPartition(topic, 0)
    result = admin.delete_records({tp: 10}, timeout_ms=15_000)
    assert result[tp]["error_code"] == 0 and result[tp]["low_watermark"] == 10

    # failOnDataLoss=true (Spark's default): the query fails, writes nothing.
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException) as failed:
        run(True)
    message = str(failed.value)
    assert "Some data may have been lost" in message, message[:2000]
    assert f"Could not read records in offset [5, 15) for topic partition {topic}-0" in message
    assert offsets() == list(range(5))

    # failOnDataLoss=false: the same checkpoint goes on at the new log start.
    run(False)
    assert offsets() == list(range(5)) + list(range(10, 15))


# --- read_committed: aborted transactions are skipped ----------------------------------


def test_read_committed_skips_aborted_transactions(
    spark: Any, broker: Broker, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=2)
    transactions = read_committed.demo_transactions(count=6, size=3)
    read_committed.write_transactions(broker.bootstrap, topic, transactions, partitions=2)
    committed = [v for values, commit in transactions if commit for v in values]
    everything = [v for values, _ in transactions for v in values]
    assert len(committed) == 9 and len(everything) == 18  # the test's own arithmetic

    def rows(isolation: str) -> list[tuple[int, int, str]]:
        df = read_committed.read_isolated(spark, broker.bootstrap, topic, isolation)
        return sorted((r.partition, r.offset, r.value) for r in df.collect())

    seen = rows("read_committed")
    assert sorted(v for _, _, v in seen) == sorted(committed)
    # In each partition, in the order written, with gaps where the aborted records and
    # the markers are.
    for partition in (0, 1):
        mine = [(o, v) for p, o, v in seen if p == partition]
        # Value "c<n>-<i>" went to partition i % 2.
        assert [v for _, v in mine] == [v for v in committed
                                        if int(v.split("-")[1]) % 2 == partition]
        offsets = [o for o, _ in mine]
        assert offsets == sorted(set(offsets))
        assert offsets[-1] - offsets[0] + 1 > len(offsets), offsets
    assert sorted(v for _, _, v in rows("read_uncommitted")) == sorted(everything)


# --- the examples as commands -----------------------------------------------------------

EXAMPLES = ("word_count", "event_time", "batch_read", "exactly_once_files", "options",
            "read_committed")


@pytest.mark.parametrize("name", EXAMPLES)
def test_cli_help(name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", f"spark_examples.{name}", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "--bootstrap" in out.stdout


def test_exactly_once_files_after_crash(
    spark: Any, broker: Broker, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``python -m spark_examples.exactly_once_files`` killed (SIGKILL) mid-stream, then
    restarted on its checkpoint: the parquet output has every record exactly once."""
    source = make_topic(partitions=2)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    sent = set()
    for partition in (0, 1):
        recs = [Rec(None, f"v{partition}-{i}".encode()) for i in range(40)]
        offsets = produce(broker.bootstrap, source, recs, partition=partition)
        sent.update((partition, o, f"v{partition}-{i}") for i, o in enumerate(offsets))
    log = tmp_path / "example.log"
    command = [
        sys.executable,
        "-m",
        "spark_examples.exactly_once_files",
        "--bootstrap",
        broker.bootstrap,
        "--source",
        source,
        "--output",
        str(output),
        "--checkpoint",
        str(checkpoint),
        "--max-offsets",
        "6",
        "--interval",
        "300 milliseconds",
    ]
    # Spark's scratch directories of the killed driver stay in tmp_path.
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_LOCAL_DIRS": str(tmp_path / "local")}
    with open(log, "wb") as out:
        # Spark 4 makes ``artifacts/spark-<uuid>`` in the driver's working directory.
        proc = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        # Kill the driver (Python and its JVM) once the file sink committed two
        # micro-batches (_spark_metadata/0 and /1). Polled this often, the kill
        # usually lands before the checkpoint's commits/1: the sink has batch 1
        # and the checkpoint does not, so the restart runs batch 1 again and the
        # sink must skip it. Wherever the kill lands, the checks below hold.
        deadline = time.monotonic() + 180
        while not (output / "_spark_metadata" / "1").exists():
            assert proc.poll() is None, log.read_text(errors="replace")[-5000:]
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-5000:]
            time.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def committed() -> list[tuple[int, int, str]]:
        rows = exactly_once_files.read_output(spark, str(output)).collect()
        return [(r.partition, r.offset, r.value) for r in rows]

    first = committed()
    assert 12 <= len(first) < 80, len(first)
    assert len(set(first)) == len(first) and set(first) <= sent

    query = exactly_once_files.start(
        spark,
        broker.bootstrap,
        source,
        str(output),
        str(checkpoint),
        max_offsets_per_trigger=6,
        available_now=True,
    )
    common.await_query(query, QUERY_TIMEOUT)
    assert Counter(committed()) == Counter(sent)
