"""Source options users rely on, one subcommand each.

``headers`` — ``includeHeaders``: each record's headers as a column
``headers: array<struct<key: string, value: binary>>``, in the order the
producer sent them, repeated keys included (null when a record has none)::

    python -m spark_examples.options headers --bootstrap 127.0.0.1:9092 --topic t

``rate-limit`` — ``maxOffsetsPerTrigger``: at most N records per micro-batch,
split over the partitions in proportion to their backlog. With
``--available-now`` a backlog is worked off in several batches and the query
stops; the per-batch row counts are printed::

    python -m spark_examples.options rate-limit --bootstrap ... --source t \\
        --max-offsets 5 --output /tmp/out --checkpoint /tmp/ck --available-now

``min-partitions`` — ``minPartitions``: Spark splits Kafka partitions' offset
ranges so that at least N Spark tasks read them (a Kafka partition is read by
one task otherwise). Prints each Spark partition's offset range::

    python -m spark_examples.options min-partitions --bootstrap ... --topic t --min-partitions 6

``pattern`` — ``subscribePattern``: every topic whose name matches a Java
regular expression, including topics created after the query started (they
are read from their beginning)::

    python -m spark_examples.options pattern --bootstrap ... --pattern 'orders-.*' \\
        --output /tmp/out --checkpoint /tmp/ck

``data-loss`` — ``failOnDataLoss``: when records the query has not read yet are
gone from Kafka (DeleteRecords, retention) before it reads them, ``true`` (the
default) fails the query with an error that says data may have been lost, and
``false`` logs a warning and goes on with the first record still there::

    python -m spark_examples.options data-loss --bootstrap ... --source t \\
        --fail-on-data-loss false --output /tmp/out --checkpoint /tmp/ck

The streaming subcommands copy records (topic, partition, offset, key, value)
into parquet files under ``--output`` with a checkpoint, as
``exactly_once_files`` does.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import (
    add_trigger_options,
    apply_trigger,
    build_session,
    print_rows,
    progress_rows,
    read_batch,
    read_stream,
    run_until_done,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def read_with_headers(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """Batch read of ``topic`` with ``includeHeaders``: partition, offset, key, value, headers."""
    from pyspark.sql import functions as F

    df = read_batch(spark, bootstrap, subscribe=topic, includeHeaders=True)
    return df.select(
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        "headers",
    )


def format_headers(headers: list[Any] | None) -> str:
    """``k=v, k=v`` of a headers column value (values as UTF-8, escaped when not)."""
    if not headers:
        return ""
    return ", ".join(
        f"{h.key}={bytes(h.value).decode('utf-8', 'backslashreplace')}" for h in headers
    )


def read_min_partitions(
    spark: SparkSession, bootstrap: str, topic: str, min_partitions: int
) -> DataFrame:
    """Batch read of ``topic`` with ``minPartitions``; adds the Spark partition of each row."""
    from pyspark.sql import functions as F

    df = read_batch(spark, bootstrap, subscribe=topic, minPartitions=min_partitions)
    return df.select(
        F.spark_partition_id().alias("spark_partition"),
        "partition",
        "offset",
        F.col("value").cast("string").alias("value"),
    )


def start_copy(
    spark: SparkSession,
    bootstrap: str,
    output: str,
    checkpoint: str,
    *,
    subscribe: str | None = None,
    subscribe_pattern: str | None = None,
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool | None = None,
    available_now: bool = True,
    interval: str | None = None,
) -> StreamingQuery:
    """Copy the records of ``subscribe`` (topics, comma-separated) or ``subscribe_pattern``
    into parquet files under ``output``; options left None are Spark's defaults."""
    from pyspark.sql import functions as F

    if (subscribe is None) == (subscribe_pattern is None):
        raise ValueError("give exactly one of subscribe and subscribe_pattern")
    records = read_stream(
        spark,
        bootstrap,
        subscribe=subscribe,
        subscribePattern=subscribe_pattern,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=max_offsets_per_trigger,
        failOnDataLoss=fail_on_data_loss,
    ).load()
    rows = records.select(
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
    )
    writer = (
        rows.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
    )
    return apply_trigger(writer, available_now, interval).start()


def _streaming_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", required=True, help="directory of the parquet files")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    add_trigger_options(parser)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="the broker")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("headers", help="includeHeaders: print each record's headers")
    p.add_argument("--topic", required=True)
    p = sub.add_parser("rate-limit", help="maxOffsetsPerTrigger: bounded micro-batches")
    p.add_argument("--source", required=True)
    p.add_argument("--max-offsets", type=int, required=True)
    _streaming_args(p)
    p = sub.add_parser("min-partitions", help="minPartitions: split partitions into tasks")
    p.add_argument("--topic", required=True)
    p.add_argument("--min-partitions", type=int, required=True)
    p = sub.add_parser("pattern", help="subscribePattern: topics matching a regex")
    p.add_argument("--pattern", required=True, help="Java regular expression")
    _streaming_args(p)
    p = sub.add_parser("data-loss", help="failOnDataLoss: fail or skip deleted records")
    p.add_argument("--source", required=True)
    p.add_argument("--fail-on-data-loss", choices=("true", "false"), default="true")
    _streaming_args(p)
    args = parser.parse_args(argv)

    spark = build_session(f"josefk-options-{args.command}", args.master)
    if args.command == "headers":
        df = read_with_headers(spark, args.bootstrap, args.topic)
        rows = [
            {**row.asDict(), "headers": format_headers(row.headers)}
            for row in df.orderBy("partition", "offset").collect()
        ]
        print_rows(rows, df.columns)
    elif args.command == "min-partitions":
        from pyspark.sql import functions as F

        df = read_min_partitions(spark, args.bootstrap, args.topic, args.min_partitions)
        print(f"spark partitions: {df.rdd.getNumPartitions()}")
        ranges = df.groupBy("spark_partition", "partition").agg(
            F.min("offset").alias("from_offset"),
            F.max("offset").alias("to_offset"),
            F.count("*").alias("records"),
        )
        cols = ("spark_partition", "partition", "from_offset", "to_offset", "records")
        print_rows(ranges.orderBy("spark_partition").collect(), cols)
    else:
        query = start_copy(
            spark,
            args.bootstrap,
            args.output,
            args.checkpoint,
            subscribe=getattr(args, "source", None),
            subscribe_pattern=getattr(args, "pattern", None),
            max_offsets_per_trigger=getattr(args, "max_offsets", None),
            fail_on_data_loss=(
                args.fail_on_data_loss == "true" if args.command == "data-loss" else None
            ),
            available_now=args.available_now,
            interval=None if args.available_now else args.interval,
        )
        run_until_done(query, args.timeout)
        print_rows([{"batch": b, "rows": n} for b, n in progress_rows(query)], ("batch", "rows"))
    spark.stop()


if __name__ == "__main__":
    main()
