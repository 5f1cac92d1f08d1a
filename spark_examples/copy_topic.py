"""Copy a topic to another topic: every record, key and value unchanged.

    python -m spark_examples.copy_topic --bootstrap 127.0.0.1:9092 \\
        --source orders --sink orders-copy --checkpoint /tmp/copy-checkpoint

Reads ``--source`` with Spark's Kafka source (from the earliest offsets on a
new checkpoint, ``failOnDataLoss=true``: the query fails rather than skip
records that are gone) and writes each record's key and value, as they are,
to ``--sink`` with Spark's Kafka sink. Headers, timestamps and partitions are
not copied: the sink's producer picks the partition from the key (its default
partitioner). One micro-batch per ``--interval`` (default 2 seconds), until
interrupted; ``--available-now`` copies what is there now and exits.

Give every broker of a cluster in ``--bootstrap`` (comma-separated) and the
query rides out broker crashes: the source's consumer and the sink's
idempotent acks=all producer (the Java client's defaults; nothing else of them
is configured) retry on the partitions' new leaders. The checkpoint holds the
source offsets: stop the job and start it again with the same
``--checkpoint`` and it goes on where it stopped. The Kafka sink is
at-least-once: a micro-batch that runs again (after the job was killed before
the batch's commit, or a task retry on a cluster with ``spark.task.maxFailures``
above 1) writes its records again. In local mode a failed task fails the query.
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
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def start(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    *,
    available_now: bool = False,
    interval: str = "2 seconds",
) -> StreamingQuery:
    """Start copying ``source`` to ``sink``; returns the query running."""
    records = read_stream(
        spark, bootstrap, subscribe=source, startingOffsets="earliest", failOnDataLoss=True
    ).load()
    writer = (
        records.select("key", "value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .queryName(f"copy_{source}_to_{sink}".replace("-", "_").replace(".", "_"))
    )
    return apply_trigger(writer, available_now, interval).start()


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="topic to copy")
    parser.add_argument("--sink", required=True, help="topic the records are written to")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    add_trigger_options(parser)
    args = parser.parse_args(argv)
    spark = build_session("josefk-copy-topic", args.master)
    query = start(
        spark,
        args.bootstrap,
        args.source,
        args.sink,
        args.checkpoint,
        available_now=args.available_now,
        interval=args.interval,
    )
    run_until_done(query, args.timeout)
    spark.stop()


if __name__ == "__main__":
    main()
