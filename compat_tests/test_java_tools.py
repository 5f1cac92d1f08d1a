"""Apache Kafka's own command-line tools (Java clients) against the broker.

Run through tools/kafka/run-class.sh; skipped without Kafka's jars or java
unless JOSEFK_REQUIRE_KAFKA=1. Each JVM start costs ~2 s, so there are few.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaAdminClient

from .clients import (
    CODEC_IDS,
    CREATE_TIME,
    Rec,
    kafka_python_consume,
    now_ms,
    produce,
)
from .conftest import Broker
from .rawkafka import RawConnection

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TOOL_TIMEOUT = 60


def run_tool(
    run_class: Path, *args: str, stdin: str = "", timeout: float = TOOL_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run one Kafka tool; fails the test on a non-zero exit."""
    env = dict(os.environ)
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256m")
    # Quicker JVM start for short-lived tools.
    env.setdefault("KAFKA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    done = subprocess.run(
        [str(run_class), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert done.returncode == 0, (
        f"{args[0]} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    assert "ERROR" not in done.stderr, done.stderr
    return done


def test_console_producer(
    broker: Broker, make_topic: Callable[..., str], kafka_tools: Path
) -> None:
    topic = make_topic()
    lines = [f"key-{i}\tvalue {i} " + "z" * 200 for i in range(10)]
    before = now_ms()
    run_tool(
        kafka_tools,
        CONSOLE_PRODUCER,
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--compression-codec",
        "zstd",
        "--request-required-acks",
        "all",
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=\t",
        stdin="".join(line + "\n" for line in lines),
    )
    after = now_ms()
    got = kafka_python_consume(broker.bootstrap, topic, len(lines))
    expected = [tuple(line.encode().split(b"\t", 1)) for line in lines]
    assert [(g.key, g.value) for g in got] == expected
    assert [g.offset for g in got] == list(range(len(lines)))
    assert all(g.timestamp_type == CREATE_TIME and before <= g.timestamp <= after for g in got)
    with RawConnection(broker.bootstrap) as conn:
        batches = conn.all_batches(topic)
    assert {b.codec for b in batches} == {CODEC_IDS["zstd"]}


def test_console_consumer(
    broker: Broker, make_topic: Callable[..., str], kafka_tools: Path
) -> None:
    topic = make_topic()
    base = now_ms() - 60_000
    sent = [Rec(f"k{i}".encode(), f"v{i}".encode(), (), base + i) for i in range(7)]
    sent.append(Rec(b"k7", None, (), base + 7))  # printed as "null"
    produce(broker.bootstrap, topic, sent, compression="gzip")
    done = run_tool(
        kafka_tools,
        CONSOLE_CONSUMER,
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        str(len(sent)),
        "--timeout-ms",
        "30000",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "print.offset=true",
        "--formatter-property",
        "print.timestamp=true",
        "--formatter-property",
        "key.separator=|",
    )
    expected = [
        f"CreateTime:{r.timestamp}|Offset:{i}|{r.key.decode()}|"  # type: ignore[union-attr]
        + ("null" if r.value is None else r.value.decode())
        for i, r in enumerate(sent)
    ]
    assert done.stdout.splitlines() == expected
    assert f"Processed a total of {len(sent)} messages" in done.stderr


def describe_lines(output: str, topic: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """TopicCommand --describe output: the topic line's fields and each partition line's."""

    def fields(line: str) -> dict[str, str]:
        return dict(re.findall(r"(\w+): ?([^\t]*)", line.strip()))

    lines = [ln for ln in output.splitlines() if ln.strip()]
    head = fields(lines[0])
    assert head["Topic"] == topic, output
    return head, [fields(ln) for ln in lines[1:]]


def test_topic_command(
    broker: Broker, admin: KafkaAdminClient, topic_name: str, kafka_tools: Path
) -> None:
    common = ("--bootstrap-server", broker.bootstrap)
    created = run_tool(
        kafka_tools,
        TOPIC_COMMAND,
        *common,
        "--create",
        "--topic",
        topic_name,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=1234567",
    )
    assert created.stdout.strip() == f"Created topic {topic_name}."

    described = run_tool(kafka_tools, TOPIC_COMMAND, *common, "--describe", "--topic", topic_name)
    head, partitions = describe_lines(described.stdout, topic_name)
    assert head["PartitionCount"] == "3"
    assert head["ReplicationFactor"] == "1"
    assert "retention.ms=1234567" in head["Configs"].split(",")
    [node] = admin.describe_cluster()["brokers"]
    leader = str(node["broker_id"])
    assert [p["Partition"] for p in partitions] == ["0", "1", "2"]
    for p in partitions:
        assert (p["Topic"], p["Leader"], p["Replicas"], p["Isr"]) == (
            topic_name,
            leader,
            leader,
            leader,
        )

    listed = run_tool(kafka_tools, TOPIC_COMMAND, *common, "--list")
    assert topic_name in listed.stdout.split()

    run_tool(kafka_tools, TOPIC_COMMAND, *common, "--delete", "--topic", topic_name)
    deadline = time.monotonic() + 15
    while topic_name in admin.list_topics():
        assert time.monotonic() < deadline, f"{topic_name} still listed after --delete"
        time.sleep(0.1)
