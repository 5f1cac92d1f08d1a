"""Event time: JSON events, counted per window and kind, with a watermark.

    python -m spark_examples.event_time --bootstrap 127.0.0.1:9092 \\
        --source events --sink event-counts --checkpoint /tmp/ev-checkpoint \\
        --window "1 minute" --watermark "10 seconds"

Each record value of ``--source`` is a JSON object such as
``{"ts": "2024-05-01T12:00:05Z", "kind": "click", "user": "u1"}``; ``ts`` is
the event time (ISO 8601; epoch seconds work too), not the Kafka timestamp.
Records that are not JSON or have no ``ts`` are dropped.

The query counts events per tumbling ``--window`` and ``kind``. The watermark
is the largest event time seen so far minus ``--watermark``; it moves at the
end of each micro-batch. A window is written once, in output mode ``append``,
when the watermark passes its end: its count is final then, and events that
arrive later for it (older than the watermark) are dropped. Each output record
has key ``<window start> <kind>`` and a JSON value:

    {"window_start":"2024-05-01T12:00:00Z","window_end":"2024-05-01T12:01:00Z",
     "kind":"click","count":2}

Times are UTC. The checkpoint keeps the offsets, the open windows and the
watermark, so a restarted query neither loses nor repeats a window (as long as
the producer of the sink does not retry a whole micro-batch after a crash).
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

EVENT_SCHEMA = "ts TIMESTAMP, kind STRING, user STRING"
TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss'Z'"


def windowed_counts(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """(window_start, window_end, kind, count) from a Kafka source of JSON events."""
    from pyspark.sql import functions as F

    parsed = events.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")
    ).select("e.*")
    return (
        parsed.where(F.col("ts").isNotNull())
        .withWatermark("ts", watermark)
        .groupBy(F.window("ts", window).alias("w"), F.col("kind"))
        .count()
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "kind",
            "count",
        )
    )


def to_records(counts: DataFrame) -> DataFrame:
    """(key, value) records for the Kafka sink, as the module docstring shows them."""
    from pyspark.sql import functions as F

    start = F.date_format("window_start", TIME_FORMAT)
    end = F.date_format("window_end", TIME_FORMAT)
    return counts.select(
        F.concat_ws(" ", start, F.coalesce(F.col("kind"), F.lit(""))).alias("key"),
        F.to_json(
            F.struct(
                start.alias("window_start"),
                end.alias("window_end"),
                F.col("kind"),
                F.col("count"),
            )
        ).alias("value"),
    )


def start(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    *,
    window: str = "1 minute",
    watermark: str = "10 seconds",
    available_now: bool = False,
    interval: str | None = "2 seconds",
) -> StreamingQuery:
    """Start the windowed count; returns it running."""
    events = read_stream(spark, bootstrap, subscribe=source, startingOffsets="earliest").load()
    records = to_records(windowed_counts(events, window, watermark))
    writer = (
        records.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .queryName(f"event_time_{sink}".replace("-", "_"))
    )
    return apply_trigger(writer, available_now, interval).start()


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="topic of JSON events")
    parser.add_argument("--sink", required=True, help="topic for the window counts")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    parser.add_argument("--window", default="1 minute", help="window length (1 minute)")
    parser.add_argument(
        "--watermark", default="10 seconds", help="how late an event may be (10 seconds)"
    )
    add_trigger_options(parser)
    args = parser.parse_args(argv)
    spark = build_session("josefk-event-time", args.master)
    query = start(
        spark,
        args.bootstrap,
        args.source,
        args.sink,
        args.checkpoint,
        window=args.window,
        watermark=args.watermark,
        available_now=args.available_now,
        interval=args.interval,
    )
    run_until_done(query, args.timeout)
    spark.stop()


if __name__ == "__main__":
    main()
