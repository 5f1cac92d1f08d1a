"""Streaming word count: lines from one topic, running counts to another.

    python -m spark_examples.word_count --bootstrap 127.0.0.1:9092 \\
        --source lines --sink word-counts --checkpoint /tmp/wc-checkpoint

Each record value of ``--source`` is a line of text (UTF-8). Words are runs of
letters, digits and underscores, lower-cased. The query keeps a count per word
in Spark's state store and, after each micro-batch, writes every word whose
count changed to ``--sink`` with Spark's Kafka sink: key = the word, value =
its count so far as decimal text (output mode ``update``). So the last record
per key is the current count, and the sink topic can be compacted.

The checkpoint holds the source offsets and the counts: stop the job and start
it again with the same ``--checkpoint`` and it goes on where it stopped,
counting each line once. The sink is Spark's default (idempotent, acks=all)
Java producer; a micro-batch that is retried after a crash may write its
updates twice, with the same values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import (
    add_trigger_options,
    apply_trigger,
    base_parser,
    build_session,
    read_stream,
    run_until_done,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def word_counts(lines: DataFrame) -> DataFrame:
    """(word, count) from a Kafka source DataFrame whose values are lines of text."""
    from pyspark.sql import functions as F

    words = lines.select(
        F.explode(F.split(F.lower(F.col("value").cast("string")), r"[^\p{L}\p{N}_]+")).alias("word")
    ).where(F.col("word") != "")
    return words.groupBy("word").count()


def start(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    *,
    available_now: bool = False,
    interval: str | None = "2 seconds",
    starting_offsets: str = "earliest",
) -> StreamingQuery:
    """Start the word count query; returns it running."""
    from pyspark.sql import functions as F

    lines = read_stream(spark, bootstrap, subscribe=source, startingOffsets=starting_offsets).load()
    counts = word_counts(lines)
    records = counts.select(
        F.col("word").alias("key"), F.col("count").cast("string").alias("value")
    )
    writer = (
        records.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .queryName(f"word_count_{sink}".replace("-", "_"))
    )
    return apply_trigger(writer, available_now, interval).start()


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="topic of text lines")
    parser.add_argument("--sink", required=True, help="topic for (word, count) records")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new checkpoint starts: earliest (default), latest, or JSON per partition",
    )
    add_trigger_options(parser)
    args = parser.parse_args(argv)
    spark = build_session("josefk-word-count", args.master)
    query = start(
        spark,
        args.bootstrap,
        args.source,
        args.sink,
        args.checkpoint,
        available_now=args.available_now,
        interval=args.interval,
        starting_offsets=args.starting_offsets,
    )
    run_until_done(query, args.timeout)
    spark.stop()


if __name__ == "__main__":
    main()
