"""Exactly once to files: a topic to parquet, across stops and restarts.

    python -m spark_examples.exactly_once_files --bootstrap 127.0.0.1:9092 \\
        --source events --output /tmp/events-parquet --checkpoint /tmp/events-checkpoint

Every record of ``--source`` becomes one parquet row: topic, partition,
offset, timestamp, key and value (as strings). Stop the job at any moment —
Ctrl-C, ``--timeout``, a crash in the middle of a micro-batch — and start it
again with the same ``--checkpoint`` and ``--output``: the output then holds
every record exactly once.

Why: the checkpoint's offset log records each micro-batch's offset range
before the batch runs, and Spark's file sink commits the files a batch wrote
to ``<output>/_spark_metadata`` only once the batch is done. A restarted query
re-runs the last uncommitted batch over the same offsets; files of a batch
that never committed are not in the metadata log, and readers that go through
it (``spark.read.parquet(output)``) never see them. ``--max-offsets`` bounds
the records per micro-batch (maxOffsetsPerTrigger), so a backlog is worked
off in several batches.

    python -m spark_examples.exactly_once_files --bootstrap ... --output DIR --show

prints what the output holds (through the metadata log), per partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import (
    add_trigger_options,
    apply_trigger,
    base_parser,
    build_session,
    print_rows,
    read_stream,
    run_until_done,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")


def start(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    output: str,
    checkpoint: str,
    *,
    max_offsets_per_trigger: int | None = None,
    available_now: bool = False,
    interval: str | None = "2 seconds",
) -> StreamingQuery:
    """Start copying ``source`` into parquet files under ``output``; returns the query."""
    from pyspark.sql import functions as F

    records = read_stream(
        spark,
        bootstrap,
        subscribe=source,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=max_offsets_per_trigger,
    ).load()
    rows = records.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
    )
    writer = (
        rows.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .queryName(f"exactly_once_{source}".replace("-", "_"))
    )
    return apply_trigger(writer, available_now, interval).start()


def read_output(spark: SparkSession, output: str) -> DataFrame:
    """What the sink committed: ``spark.read.parquet`` goes through ``_spark_metadata``."""
    return spark.read.parquet(output)


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="directory of the parquet files")
    parser.add_argument("--source", help="topic to copy")
    parser.add_argument("--checkpoint", help="checkpoint directory")
    parser.add_argument(
        "--max-offsets", type=int, default=None, help="records per micro-batch at most"
    )
    parser.add_argument("--show", action="store_true", help="print the committed output and exit")
    add_trigger_options(parser)
    args = parser.parse_args(argv)
    if not args.show and not (args.source and args.checkpoint):
        parser.error("--source and --checkpoint are needed (or --show)")
    spark = build_session("josefk-exactly-once-files", args.master)
    if args.show:
        from pyspark.sql import functions as F

        out = read_output(spark, args.output)
        summary = out.groupBy("topic", "partition").agg(
            F.count("*").alias("rows"),
            F.countDistinct("offset").alias("distinct_offsets"),
            F.min("offset").alias("min_offset"),
            F.max("offset").alias("max_offset"),
        )
        cols = ("topic", "partition", "rows", "distinct_offsets", "min_offset", "max_offset")
        print_rows(summary.orderBy("topic", "partition").collect(), cols)
    else:
        query = start(
            spark,
            args.bootstrap,
            args.source,
            args.output,
            args.checkpoint,
            max_offsets_per_trigger=args.max_offsets,
            available_now=args.available_now,
            interval=args.interval,
        )
        run_until_done(query, args.timeout)
    spark.stop()


if __name__ == "__main__":
    main()
