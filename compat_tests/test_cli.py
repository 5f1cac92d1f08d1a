"""``josefk topics|groups|cluster`` as subprocesses, against josefk or Apache Kafka,
checked against what stock clients see: kafka-python's KafkaAdminClient and consumer,
and Kafka's own ``kafka-consumer-groups.sh --describe`` for members and lag.

The SASL_SSL variant (``--command-config`` with SCRAM) is in
``compat_tests/security/test_cli_sasl.py``, beside the secured broker's fixtures.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.structs import OffsetAndMetadata, TopicPartition

from .clients import Rec, produce
from .conftest import REPO, Broker

CLI_TIMEOUT = 90.0
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def josefk(broker: Broker | str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """``josefk ARGS --bootstrap-server ...``; with ``ok`` it must exit 0, else 1."""
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    done = subprocess.run([sys.executable, "-m", "josefk.server", *args,
                           "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT, cwd=REPO)
    assert done.returncode == (0 if ok else 1), (
        f"josefk {' '.join(args)} exited {done.returncode}\n"
        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    assert "Traceback" not in done.stderr, done.stderr
    return done


def josefk_json(broker: Broker, *args: str) -> Any:
    return json.loads(josefk(broker, *args, "--output", "json").stdout)


def one_line_error(done: subprocess.CompletedProcess[str], error: str) -> None:
    """A failed command says what went wrong in one line on stderr, naming Kafka's error."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and error in lines[0], done.stderr


def table(output: str, first_column: str) -> list[dict[str, str]]:
    """Rows of a whitespace-aligned table whose header starts with ``first_column``."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    for i, cells in enumerate(lines):
        if cells and cells[0] == first_column:
            return [dict(zip(cells, row, strict=True)) for row in lines[i + 1:]
                    if len(row) == len(cells)]
    raise AssertionError(f"no table with {first_column} in:\n{output}")


# --- topics ------------------------------------------------------------------------------


def test_topic_create_describe_delete(broker: Broker, admin: KafkaAdminClient,
                                      topic_name: str) -> None:
    done = josefk(broker, "topics", "create", topic_name, "--partitions", "3",
                  "--replication-factor", "1", "--config", "retention.ms=123456",
                  "--config", "cleanup.policy=compact")
    assert done.stdout.strip() == f"Created topic {topic_name}."

    [seen] = admin.describe_topics([topic_name])
    described = {p["partition_index"]: (p["leader_id"], p["replica_nodes"], p["isr_nodes"])
                 for p in seen["partitions"]}
    assert len(described) == 3
    configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic_name)])["topic"][topic_name]
    assert configs["retention.ms"]["value"] == "123456"
    assert configs["cleanup.policy"]["value"] == "compact"

    [ours] = josefk_json(broker, "topics", "describe", topic_name)
    assert ours["name"] == topic_name and not ours["internal"]
    assert {p["partition"]: (p["leader"], p["replicas"], p["isr"])
            for p in ours["partitions"]} == described
    rows = table(josefk(broker, "topics", "describe", topic_name).stdout, "TOPIC")
    assert [(r["PARTITION"], r["LEADER"], r["STATUS"]) for r in rows] == [
        (str(p), str(described[p][0]), "ok") for p in range(3)]

    assert topic_name in josefk(broker, "topics", "list").stdout.split()
    assert set(admin.list_topics()) <= set(josefk_json(broker, "topics", "list"))

    again = josefk(broker, "topics", "create", topic_name, "--partitions", "1", ok=False)
    one_line_error(again, "TOPIC_ALREADY_EXISTS")

    assert josefk(broker, "topics", "delete", topic_name).stdout.strip() == \
        f"Deleted topic {topic_name}."
    assert topic_name not in admin.list_topics()
    missing = josefk(broker, "topics", "describe", topic_name, ok=False)
    one_line_error(missing, "UNKNOWN_TOPIC_OR_PARTITION")


def test_topic_create_refused_config(broker: Broker, topic_name: str,
                                     admin: KafkaAdminClient) -> None:
    done = josefk(broker, "topics", "create", topic_name, "--config", "retention.ms=soon",
                  ok=False)
    one_line_error(done, "INVALID_CONFIG")
    assert topic_name not in admin.list_topics()


# --- cluster -----------------------------------------------------------------------------


def test_cluster_matches_describe_cluster(broker: Broker, admin: KafkaAdminClient) -> None:
    theirs = admin.describe_cluster()
    ours = josefk_json(broker, "cluster")
    assert ours["cluster_id"] == theirs["cluster_id"]
    assert ours["controller_id"] == theirs["controller_id"]
    assert [(b["id"], b["host"], b["port"]) for b in ours["brokers"]] == sorted(
        (b["broker_id"], b["host"], b["port"]) for b in theirs["brokers"])
    assert ours["under_replicated"] == [] and ours["offline"] == []
    text = josefk(broker, "cluster").stdout
    assert f"Cluster id: {theirs['cluster_id']}" in text
    assert "Under-replicated partitions: 0" in text and "Offline partitions: 0" in text


# --- groups ------------------------------------------------------------------------------


def _group() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def _fill(broker: Broker, topic: str, base_ms: int | None = None) -> None:
    """6 records on partition 0 and 4 on partition 1, one second apart from ``base_ms``."""
    for partition, count in ((0, 6), (1, 4)):
        recs = [Rec(None, f"{partition}-{i}".encode(),
                    timestamp=None if base_ms is None else base_ms + i * 1000)
                for i in range(count)]
        produce(broker.bootstrap, topic, recs, partition=partition)


@pytest.fixture
def member(broker: Broker, make_topic: Callable[..., str]) -> Iterator[tuple[str, str]]:
    """A kafka-python consumer in a fresh group on a 2-partition topic, assigned both
    partitions, that committed 2 on partition 0 and 1 on partition 1; (topic, group)."""
    topic = make_topic(partitions=2)
    _fill(broker, topic)
    group = _group()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             client_id="cli-test-member", enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=30_000,
                             request_timeout_ms=40_000)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline, "the consumer never got both partitions"
            consumer.poll(timeout_ms=200, max_records=1)
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1),
                         TopicPartition(topic, 1): OffsetAndMetadata(1, "", -1)})
        yield topic, group
    finally:
        consumer.close()


@pytest.mark.timeout(180)
def test_group_describe_matches_consumer_groups_command(
        broker: Broker, admin: KafkaAdminClient, member: tuple[str, str],
        kafka_tools: Path) -> None:
    from .test_java_tools import run_tool

    topic, group = member
    ours = josefk_json(broker, "groups", "describe", group)
    theirs = admin.describe_groups([group])[group]
    assert (ours["state"], ours["protocol_type"], ours["protocol"]) == (
        theirs["group_state"], theirs["protocol_type"], theirs["protocol_data"]) == (
        "Stable", "consumer", "range")
    [m] = theirs["members"]
    assert [(x["member_id"], x["client_id"], x["host"]) for x in ours["members"]] == [
        (m["member_id"], "cli-test-member", m["client_host"].lstrip("/"))]
    assert ours["members"][0]["assignment"] == [[topic, 0], [topic, 1]]
    lag = {o["partition"]: (o["committed"], o["log_end"], o["lag"], o["member_id"])
           for o in ours["offsets"]}
    assert lag == {0: (2, 6, 4, m["member_id"]), 1: (1, 4, 3, m["member_id"])}

    columns = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
               "HOST", "CLIENT-ID")
    tool = run_tool(kafka_tools, GROUP_COMMAND, "--bootstrap-server", broker.bootstrap,
                    "--describe", "--group", group)
    ours_text = josefk(broker, "groups", "describe", group).stdout
    assert sorted(tuple(r[c] for c in columns) for r in table(ours_text, "GROUP")) == \
        sorted(tuple(r[c].lstrip("/") for c in columns) for r in table(tool.stdout, "GROUP"))

    listed = josefk_json(broker, "groups", "list")
    assert {"group_id": group, "protocol_type": "consumer", "state": "Stable"} in listed
    assert {g["group_id"] for g in admin.list_groups()} <= {g["group_id"] for g in listed}

    busy = josefk(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest",
                  "--execute", ok=False)
    one_line_error(busy, "NON_EMPTY_GROUP")
    assert _committed(admin, group) == {0: 2, 1: 1}


@pytest.mark.timeout(180)
def test_describe_a_consumer_protocol_group(broker: Broker, make_topic: Callable[..., str],
                                            kafka_tools: Path) -> None:
    """A KIP-848 group (librdkafka with ``group.protocol=consumer``) is described through
    ConsumerGroupDescribe: the same rows as ``kafka-consumer-groups.sh --describe``."""
    import confluent_kafka

    from .test_java_tools import run_tool

    topic = make_topic(partitions=2)
    _fill(broker, topic, (int(time.time()) - 60) * 1000)
    group = _group()
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group,
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "client.id": "cli-848-member"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline, "the consumer never got both partitions"
            consumer.poll(0.2)
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 2),
                                 confluent_kafka.TopicPartition(topic, 1, 1)],
                        asynchronous=False)
        ours = josefk_json(broker, "groups", "describe", group)
        assert (ours["state"], ours["protocol_type"], ours["protocol"]) == (
            "Stable", "consumer", "uniform")
        [m] = ours["members"]
        assert (m["client_id"], m["assignment"]) == (
            "cli-848-member", [[topic, 0], [topic, 1]])
        assert {o["partition"]: (o["committed"], o["log_end"], o["lag"], o["member_id"])
                for o in ours["offsets"]} == {0: (2, 6, 4, m["member_id"]),
                                              1: (1, 4, 3, m["member_id"])}
        columns = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                   "CONSUMER-ID", "HOST", "CLIENT-ID")
        tool = run_tool(kafka_tools, GROUP_COMMAND, "--bootstrap-server", broker.bootstrap,
                        "--describe", "--group", group)
        ours_text = josefk(broker, "groups", "describe", group).stdout
        assert sorted(tuple(r[c] for c in columns) for r in table(ours_text, "GROUP")) == \
            sorted(tuple(r[c].lstrip("/") for c in columns)
                   for r in table(tool.stdout, "GROUP"))
    finally:
        consumer.close()


def _committed(admin: KafkaAdminClient, group: str) -> dict[int, int]:
    offsets = admin.list_group_offsets({group: None})[group]
    return {tp.partition: om.offset for tp, om in offsets.items()}


def _reset(broker: Broker, group: str, topic: str, *how: str) -> dict[int, int]:
    out = josefk_json(broker, "groups", "reset-offsets", group, "--topic", topic, *how)
    assert out["executed"] == ("--execute" in how)
    return {o["partition"]: o["new_offset"] for o in out["offsets"]}


def test_reset_offsets_of_an_empty_group(broker: Broker, admin: KafkaAdminClient,
                                         make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=2)
    base_ms = (int(time.time()) - 3600) * 1000
    _fill(broker, topic, base_ms)
    group = _group()
    admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(5, "", -1),
                                      TopicPartition(topic, 1): OffsetAndMetadata(2, "", -1)})
    assert _committed(admin, group) == {0: 5, 1: 2}

    dry = josefk(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert {(r["PARTITION"], r["NEW-OFFSET"]) for r in table(dry.stdout, "GROUP")} == {
        ("0", "0"), ("1", "0")}
    assert "--execute" in dry.stderr
    assert _committed(admin, group) == {0: 5, 1: 2}  # a dry run commits nothing

    assert _reset(broker, group, topic, "--to-earliest", "--execute") == {0: 0, 1: 0}
    assert _committed(admin, group) == {0: 0, 1: 0}
    assert _reset(broker, group, topic, "--to-offset", "3", "--execute") == {0: 3, 1: 3}
    assert _committed(admin, group) == {0: 3, 1: 3}
    # Beyond the log end: the log end, as Kafka's tool does.
    assert _reset(broker, group, topic, "--to-offset", "100", "--execute") == {0: 6, 1: 4}
    assert _committed(admin, group) == {0: 6, 1: 4}
    when = datetime.datetime.fromtimestamp((base_ms + 2500) / 1000, datetime.UTC)
    assert _reset(broker, group, topic, "--to-datetime", when.isoformat(), "--execute") == {
        0: 3, 1: 3}
    assert _committed(admin, group) == {0: 3, 1: 3}
    assert _reset(broker, group, topic, "--to-latest", "--execute") == {0: 6, 1: 4}
    assert _committed(admin, group) == {0: 6, 1: 4}

    described = josefk_json(broker, "groups", "describe", group)
    assert described["state"] == "Empty" and described["members"] == []
    assert [(o["partition"], o["committed"], o["lag"], o["member_id"])
            for o in described["offsets"]] == [(0, 6, 0, None), (1, 4, 0, None)]


# --- errors ------------------------------------------------------------------------------


def test_clear_errors(broker: Broker, tmp_path: Path) -> None:
    from .conftest import free_port

    unreachable = josefk(f"127.0.0.1:{free_port()}", "cluster", ok=False)
    one_line_error(unreachable, "NETWORK_EXCEPTION")
    one_line_error(josefk("no-port", "cluster", ok=False), "INVALID_CONFIG")
    one_line_error(josefk(broker, "groups", "describe", _group(), ok=False),
                   "GROUP_ID_NOT_FOUND")
    missing = josefk(broker, "cluster", "--command-config", str(tmp_path / "nope"), ok=False)
    one_line_error(missing, "INVALID_CONFIG")
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=KERBEROS-ISH\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
                      ' required username="u" password="hunter2-secret";\n')
    refused = josefk(broker, "cluster", "--command-config", str(config), ok=False)
    one_line_error(refused, "sasl.mechanism")
    assert "hunter2" not in refused.stderr + refused.stdout
