"""The SparkSession and the bits every example shares.

The session runs in local mode with Spark's Kafka connector from
``.cache/spark/jars`` (``tools/spark/fetch.sh``) given as ``spark.jars``, so it
needs no network beyond the broker. Memory and parallelism are kept small: the
examples move a handful of records, and a 2-core machine runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamReader, StreamingQuery

REPO = Path(__file__).resolve().parents[1]
#: Where tools/spark/fetch.sh puts the connector and the jars it needs.
JARS_DIR = Path(os.environ.get("JOSEFK_SPARK_JARS_DIR") or REPO / ".cache" / "spark" / "jars")
FETCH_SCRIPT = REPO / "tools" / "spark" / "fetch.sh"
CONNECTOR_JAR = re.compile(r"spark-sql-kafka-0-10_2\.13-(?P<version>[^/]+)\.jar$")

#: Session settings for a small local run. Each can be overridden by ``conf``.
DEFAULT_CONF: dict[str, str] = {
    # The driver is the executor in local mode; a few MB of records need little.
    "spark.driver.memory": os.environ.get("JOSEFK_SPARK_DRIVER_MEMORY", "768m"),
    # Aggregations shuffle into 2 partitions, not 200: with streaming state,
    # each shuffle partition is a state store to load and commit per batch.
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Windows and timestamps print in UTC whatever the machine's zone.
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


class SetupError(RuntimeError):
    """PySpark or the connector jars are missing or do not match."""


def connector_jars(jars_dir: Path = JARS_DIR) -> list[Path]:
    """The jars for ``spark.jars``; raises SetupError when they are not there."""
    jars = sorted(jars_dir.glob("*.jar"))
    if not any(CONNECTOR_JAR.search(j.name) for j in jars):
        raise SetupError(
            f"no spark-sql-kafka-0-10_2.13 jar in {jars_dir}: run {FETCH_SCRIPT.relative_to(REPO)}"
        )
    return jars


def connector_version(jars: Iterable[Path]) -> str:
    """The Spark version of the spark-sql-kafka jar among ``jars``."""
    for jar in jars:
        match = CONNECTOR_JAR.search(jar.name)
        if match:
            return match["version"]
    raise SetupError("no spark-sql-kafka-0-10_2.13 jar")


def kafka_clients_version(jars: Iterable[Path]) -> str | None:
    """The kafka-clients version among ``jars`` (None if there is none)."""
    for jar in jars:
        match = re.search(r"kafka-clients-(?P<version>[^/]+)\.jar$", jar.name)
        if match:
            return match["version"]
    return None


def build_session(
    app_name: str = "josefk-spark-example",
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with the Kafka connector; reuses one already running.

    Raises SetupError when PySpark is missing, the jars are missing, or their
    Spark versions differ (the connector must be built for the same Spark).
    """
    try:
        import pyspark
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the venv
        raise SetupError(f"pyspark is not installed ({exc}); pip install pyspark") from exc
    jars = connector_jars()
    version = connector_version(jars)
    if version != pyspark.__version__:
        raise SetupError(
            f"PySpark is {pyspark.__version__} but the connector in {JARS_DIR} is for Spark "
            f"{version}: install pyspark=={version} (or change tools/spark/pom.xml)"
        )
    settings = dict(DEFAULT_CONF)
    log4j2 = os.environ.get("JOSEFK_SPARK_LOG4J2")
    if log4j2:
        # e.g. tools/spark/log4j2-debug.properties: the Kafka clients' requests.
        path = Path(log4j2).resolve()
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={path}"
    # Spark binds to 127.0.0.1 anyway (spark.driver.bindAddress); this keeps it
    # from warning that the host name resolves to a loopback address.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("JOSEFK_SPARK_LOG_LEVEL", "WARN"))
    return spark


def read_stream(spark: SparkSession, bootstrap: str, **options: Any) -> DataStreamReader:
    """``spark.readStream.format("kafka")`` on ``bootstrap`` with ``options``.

    Option names are Spark's (``subscribe``, ``startingOffsets``, ...); values
    that are dicts become JSON. Nothing else of the consumer is configured.
    """
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        if value is not None:
            reader = reader.option(key, option_value(value))
    return reader


def read_batch(spark: SparkSession, bootstrap: str, **options: Any) -> DataFrame:
    """``spark.read.format("kafka")`` on ``bootstrap`` with ``options`` (see read_stream)."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        if value is not None:
            reader = reader.option(key, option_value(value))
    return reader.load()


def option_value(value: Any) -> str:
    """A Spark option value: JSON for dicts and lists, ``true``/``false`` for bools."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def offsets_json(topic: str, offsets: dict[int, int]) -> str:
    """``{"topic": {"0": 12, "1": -2}}`` as Spark's startingOffsets/endingOffsets want it.

    -2 means earliest and -1 latest; the same shape with timestamps (ms) is
    what startingOffsetsByTimestamp/endingOffsetsByTimestamp take.
    """
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


def await_query(query: StreamingQuery, timeout: float) -> None:
    """Wait for a bounded (availableNow) query to finish; stop it and raise on timeout.

    A query that failed raises its StreamingQueryException here.
    """
    finished = query.awaitTermination(timeout)
    if not finished:
        query.stop()
        raise TimeoutError(
            f"streaming query {query.name or query.id} did not finish within {timeout:.0f}s; "
            f"last progress: {json.dumps(query.lastProgress)}"
        )
    exc = query.exception()
    if exc is not None:
        raise exc


def wait_for_batches(query: StreamingQuery, batches: int, timeout: float) -> None:
    """Wait until ``query`` has completed ``batches`` micro-batches with input rows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
        done = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
        if len(done) >= batches:
            return
        time.sleep(0.1)
    raise TimeoutError(f"query did not complete {batches} non-empty batches in {timeout:.0f}s")


def progress_rows(query: StreamingQuery) -> list[tuple[int, int]]:
    """(batchId, numInputRows) of each micro-batch the query still remembers."""
    return [(p["batchId"], p["numInputRows"]) for p in query.recentProgress]


def base_parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every example takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="the broker")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    return parser


def add_trigger_options(parser: argparse.ArgumentParser) -> None:
    """--available-now (process what is there, then exit) or a processing-time trigger."""
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process the records there now, in as many micro-batches as needed, then exit "
        "(default: keep running, one micro-batch per --interval, until interrupted)",
    )
    parser.add_argument(
        "--interval", default="2 seconds", help="processing-time trigger (default: 2 seconds)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop the query after this long (default: no limit)",
    )


def apply_trigger(writer: Any, available_now: bool, interval: str | None) -> Any:
    """``trigger(availableNow=True)`` or ``trigger(processingTime=interval)``."""
    if available_now:
        return writer.trigger(availableNow=True)
    if interval:
        return writer.trigger(processingTime=interval)
    return writer


def run_until_done(query: StreamingQuery, timeout: float | None) -> None:
    """From a CLI: wait for the query (or ``timeout``), stop it cleanly on Ctrl-C."""
    try:
        finished = query.awaitTermination(timeout) if timeout else query.awaitTermination()
        if timeout and not finished:
            print(f"stopping after {timeout:.0f}s", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted, stopping the query", file=sys.stderr)
    finally:
        if query.isActive:
            query.stop()
    exc = query.exception()
    if exc is not None:
        # The first lines of Spark's message (the query plan follows them).
        message = str(exc).split("=== Streaming Query ===")[0].rstrip()
        print(f"query failed: {message}", file=sys.stderr)
        raise SystemExit(1)


def print_rows(rows: Sequence[Any], columns: Sequence[str]) -> None:
    """Rows as tab-separated lines under a header, for the examples' output."""
    print("\t".join(columns))
    for row in rows:
        print("\t".join("" if row[c] is None else str(row[c]) for c in columns))
