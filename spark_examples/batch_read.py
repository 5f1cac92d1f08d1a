"""Batch: read a range of a topic with ``spark.read.format("kafka")``.

By offsets, given per partition as JSON (-2 = earliest, -1 = latest):

    python -m spark_examples.batch_read --bootstrap 127.0.0.1:9092 --topic events \\
        --starting-offsets '{"events": {"0": 5, "1": -2}}' \\
        --ending-offsets '{"events": {"0": 10, "1": -1}}'

By timestamp (ms since the epoch), per partition: each partition starts at the
first record whose timestamp is at or after the one given (Kafka's ListOffsets
by time), and ends before the first one at or after the ending timestamp:

    python -m spark_examples.batch_read --bootstrap 127.0.0.1:9092 --topic events \\
        --starting-timestamps '{"events": {"0": 1714564800000, "1": 1714564800000}}'

Starting offsets are inclusive, ending offsets exclusive. Without options the
whole topic is read (earliest to latest). A partition with no record at or
after its starting timestamp fails the read, unless
``--timestamp-strategy latest`` says to start it at its end instead.
Prints partition, offset, timestamp, key and value of each record, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import base_parser, build_session, print_rows, read_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

COLUMNS = ("partition", "offset", "timestamp", "key", "value")


def read_range(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    *,
    starting_offsets: str | None = None,
    ending_offsets: str | None = None,
    starting_timestamps: str | None = None,
    ending_timestamps: str | None = None,
    timestamp_strategy: str | None = None,
) -> DataFrame:
    """The records of ``topic`` in the range given, keys and values as strings.

    Offsets and timestamps are Spark's JSON options: ``{"topic": {"0": n}}``.
    """
    from pyspark.sql import functions as F

    df = read_batch(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets=starting_offsets,
        endingOffsets=ending_offsets,
        startingOffsetsByTimestamp=starting_timestamps,
        endingOffsetsByTimestamp=ending_timestamps,
        startingOffsetsByTimestampStrategy=timestamp_strategy,
    )
    return df.select(
        "partition",
        "offset",
        "timestamp",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
    )


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--starting-offsets", help='JSON: {"topic": {"0": offset}}')
    parser.add_argument("--ending-offsets", help='JSON: {"topic": {"0": offset}}')
    parser.add_argument("--starting-timestamps", help='JSON: {"topic": {"0": ms}}')
    parser.add_argument("--ending-timestamps", help='JSON: {"topic": {"0": ms}}')
    parser.add_argument(
        "--timestamp-strategy",
        choices=("error", "latest"),
        help="a partition with no record at/after its starting timestamp: fail (error, "
        "the default) or start at its end (latest)",
    )
    args = parser.parse_args(argv)
    spark = build_session("josefk-batch-read", args.master)
    df = read_range(
        spark,
        args.bootstrap,
        args.topic,
        starting_offsets=args.starting_offsets,
        ending_offsets=args.ending_offsets,
        starting_timestamps=args.starting_timestamps,
        ending_timestamps=args.ending_timestamps,
        timestamp_strategy=args.timestamp_strategy,
    )
    from pyspark.sql import functions as F

    # The session's time zone is UTC (common.DEFAULT_CONF).
    shown = df.withColumn("timestamp", F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"))
    print_rows(shown.orderBy("partition", "offset").collect(), COLUMNS)
    spark.stop()


if __name__ == "__main__":
    main()
