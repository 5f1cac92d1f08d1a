"""Batch: read a topic with aborted transactions with ``kafka.isolation.level``.

    python -m spark_examples.read_committed --bootstrap 127.0.0.1:9092 --topic txns \\
        --write-demo

With ``--write-demo`` the topic is first filled by a confluent-kafka transactional
producer with committed and aborted transactions interleaved (values ``c<n>-<i>`` are
committed, ``a<n>-<i>`` aborted); the topic must exist. Then the whole topic is read
with ``spark.read.format("kafka")`` and ``kafka.isolation.level=read_committed`` (the
default here; ``--isolation-level read_uncommitted`` shows the aborted records too).
Read committed, Spark's Kafka source sees only the committed records: the aborted ones
and the commit/abort markers leave gaps in the offsets, which it skips. Prints
partition, offset and value of each record, in order.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .common import base_parser, build_session, print_rows, read_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

COLUMNS = ("partition", "offset", "value")
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
#: One transaction: the values it writes, and whether it commits (else it aborts).
Transaction = tuple[Sequence[str], bool]


def demo_transactions(count: int = 6, size: int = 3) -> list[Transaction]:
    """``count`` transactions of ``size`` values, committed and aborted in turn."""
    out: list[Transaction] = []
    for n in range(count):
        commit = n % 2 == 0
        out.append(([f"{'c' if commit else 'a'}{n}-{i}" for i in range(size)], commit))
    return out


def _end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                         "group.id": f"read-committed-{uuid.uuid4().hex}",
                                         "isolation.level": isolation,
                                         "enable.auto.commit": False})
    try:
        return [consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p),
                                               timeout=10, cached=False)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def wait_until_stable(bootstrap: str, topic: str, partitions: int,
                      timeout: float = 60.0) -> None:
    """Wait until every partition's last stable offset is its high watermark: the
    markers of the transactions ended are written (EndTxn answers before they are)."""
    deadline = time.monotonic() + timeout
    while True:
        stable = _end_offsets(bootstrap, topic, partitions, "read_committed")
        high = _end_offsets(bootstrap, topic, partitions, "read_uncommitted")
        if stable == high:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: last stable offsets {stable}, high watermarks {high}")
        time.sleep(0.2)


def write_transactions(bootstrap: str, topic: str, transactions: Sequence[Transaction],
                       partitions: int = 1, transactional_id: str | None = None,
                       timeout: float = 60.0) -> None:
    """Write ``transactions`` in order with one confluent-kafka transactional producer,
    the values of each spread round-robin over ``partitions``; returns once every
    transaction's markers are written."""
    import confluent_kafka

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id or f"spark-read-committed-{uuid.uuid4().hex}",
    })
    producer.init_transactions(timeout)
    for values, commit in transactions:
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(topic, value=value.encode(), partition=i % partitions)
        if producer.flush(timeout) != 0:
            raise TimeoutError(f"{topic}: records of a transaction not delivered")
        if commit:
            producer.commit_transaction(timeout)
        else:
            producer.abort_transaction(timeout)
    wait_until_stable(bootstrap, topic, partitions, timeout)


def read_isolated(spark: SparkSession, bootstrap: str, topic: str,
                  isolation_level: str = "read_committed") -> DataFrame:
    """The whole of ``topic`` (earliest to latest) as ``isolation_level`` sees it:
    partition, offset and value (as a string)."""
    from pyspark.sql import functions as F

    if isolation_level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation level {isolation_level!r}, not one of {ISOLATION_LEVELS}")
    df = read_batch(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                    endingOffsets="latest", **{"kafka.isolation.level": isolation_level})
    return df.select("partition", "offset", F.col("value").cast("string").alias("value"))


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--isolation-level", choices=ISOLATION_LEVELS,
                        default="read_committed")
    parser.add_argument("--write-demo", action="store_true",
                        help="first write committed and aborted transactions to the topic")
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions --write-demo spreads the records over (default 1)")
    args = parser.parse_args(argv)
    if args.write_demo:
        write_transactions(args.bootstrap, args.topic, demo_transactions(),
                           partitions=args.partitions)
    spark = build_session("josefk-read-committed", args.master)
    df = read_isolated(spark, args.bootstrap, args.topic, args.isolation_level)
    print_rows(df.orderBy("partition", "offset").collect(), COLUMNS)
    spark.stop()


if __name__ == "__main__":
    main()
