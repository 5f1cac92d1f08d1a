"""Helpers of the Spark tests: is Spark usable here, and what a topic holds.

Spark itself runs in the test process (PySpark starts one JVM for the
session); records go in and come out through kafka-python, so what a test
checks is what any client would read.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from spark_examples.common import (
    JARS_DIR,
    SetupError,
    connector_jars,
    connector_version,
    kafka_clients_version,
)

READ_TIMEOUT = 30.0


@dataclass(frozen=True)
class Out:
    """A record read back from a topic."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def spark_missing() -> str | None:
    """Why Spark cannot run here (None when it can): pyspark, java, connector jars."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (.venv/bin/pip install pyspark==<connector version>)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "java not found (Spark 4 needs Java 17+)"
    try:
        jars = connector_jars()
    except SetupError as exc:
        return str(exc)
    import pyspark

    version = connector_version(jars)
    if version != pyspark.__version__:
        return (
            f"PySpark {pyspark.__version__} does not match the connector in {JARS_DIR} "
            f"(Spark {version}): pip install pyspark=={version}"
        )
    return None


def versions() -> str:
    """PySpark, connector and kafka-clients versions, for the test report header."""
    import pyspark

    jars = connector_jars()
    return (
        f"pyspark {pyspark.__version__}, spark-sql-kafka-0-10_2.13 {connector_version(jars)}, "
        f"kafka-clients {kafka_clients_version(jars)}"
    )


def java_version() -> str:
    java = "java"
    if os.environ.get("JAVA_HOME"):
        java = os.path.join(os.environ["JAVA_HOME"], "bin", "java")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "?"


def stop_spark(session: Any) -> None:
    """Stop the session and end its JVM.

    ``SparkSession.stop`` leaves the JVM running until Python exits, with the
    connector's cached Kafka producers in it; they would go on trying to reach
    the broker after the suite stopped it.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    with contextlib.suppress(Exception):
        gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        # The JVM's PythonGatewayServer exits when its stdin closes.
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def read_topic(bootstrap: str, topic: str, timeout: float = READ_TIMEOUT) -> list[Out]:
    """Every record of every partition of ``topic``, up to the end offsets of now.

    Sorted by (partition, offset). Fails if the records up to the end offsets
    do not arrive within ``timeout``.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=15_000,
        client_id="compat-spark-reader",
    )
    try:
        deadline = time.monotonic() + timeout
        partitions = None
        while not partitions:
            partitions = consumer.partitions_for_topic(topic)
            if not partitions and time.monotonic() > deadline:
                raise AssertionError(f"topic {topic} has no partitions in metadata")
            if not partitions:
                time.sleep(0.2)
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got: list[Out] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"read {len(got)} records of {topic} in {timeout:.0f}s; end offsets {ends}, "
                    f"positions { {tp.partition: consumer.position(tp) for tp in tps} }"
                )
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(
                    Out(
                        m.partition,
                        m.offset,
                        m.key,
                        m.value,
                        tuple(m.headers or ()),
                        m.timestamp,
                    )
                    for m in records
                    if m.offset < ends[TopicPartition(topic, m.partition)]
                )
        return sorted(got, key=lambda o: (o.partition, o.offset))
    finally:
        consumer.close()


def key_values(records: Sequence[Out]) -> list[tuple[str, str]]:
    """(key, value) of each record, decoded as UTF-8."""
    return [
        (
            "" if r.key is None else r.key.decode(),
            "" if r.value is None else r.value.decode(),
        )
        for r in records
    ]
