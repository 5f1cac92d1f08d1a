"""Broker configs as Kafka describes and changes them: each value's source and synonyms
(kafka-python's describe_configs and Kafka's kafka-configs.sh --describe --all), then
dynamic changes with kafka-configs.sh --alter that take effect without a restart.

The broker (one per module) starts with static settings: for josefk from a properties
file plus ``--override``s; Apache Kafka's start-kraft.sh writes its own file, so there
they all come as ``--override``s. Either way Kafka reports them as STATIC_BROKER_CONFIG.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import DescribeConfigsRequest

from .conftest import (
    KAFKA_LIBS,
    REPO,
    RUN_CLASS,
    START_TIMEOUT,
    Broker,
    broker_command,
    free_port,
    own_kind,
    running,
    unique_topic_name,
)
from .rawkafka import RawConnection
from .test_connection_limits import answered, closed_unanswered, connect

STATIC_FILE = {"log.retention.hours": "24", "num.io.threads": "4",
               "log.retention.check.interval.ms": "1000", "some.custom.key": "x"}
STATIC_OVERRIDES = {"log.cleaner.backoff.ms": "1000", "message.max.bytes": "2000000"}
TOOL_TIMEOUT = 90.0
HOUR_MS = 3_600_000

DYN_BROKER, DYN_DEFAULT = "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"
STATIC, DEFAULT = "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"
# ConfigSource ids, for kafka-python versions that answer them as numbers.
SOURCE_NAMES = {2: DYN_BROKER, 3: DYN_DEFAULT, 4: STATIC, 5: DEFAULT}

Synonyms = list[tuple[str, "str | None", str]]
# Kafka 4.3's documented answers for the settings above: (value, source, synonyms).
EXPECTED_BROKER: dict[str, tuple[str | None, str, Synonyms]] = {
    "log.retention.hours": ("24", STATIC, [("log.retention.hours", "24", STATIC),
                                           ("log.retention.hours", "168", DEFAULT)]),
    # Synonyms start at the key itself: unset and without a default, it has none.
    "log.retention.ms": (None, DEFAULT, []),
    "log.retention.minutes": (None, DEFAULT, []),
    "num.io.threads": ("4", STATIC, [("num.io.threads", "4", STATIC),
                                     ("num.io.threads", "8", DEFAULT)]),
    "message.max.bytes": ("2000000", STATIC, [("message.max.bytes", "2000000", STATIC),
                                              ("message.max.bytes", "1048588", DEFAULT)]),
    "log.cleaner.backoff.ms": ("1000", STATIC, [("log.cleaner.backoff.ms", "1000", STATIC),
                                                ("log.cleaner.backoff.ms", "15000", DEFAULT)]),
    # A key Kafka does not know: of unknown type, so sensitive, its value hidden.
    "some.custom.key": (None, STATIC, [("some.custom.key", None, STATIC)]),
    "log.cleaner.threads": ("1", DEFAULT, [("log.cleaner.threads", "1", DEFAULT)]),
    "ssl.keystore.password": (None, DEFAULT, []),
    "log.roll.hours": ("168", DEFAULT, [("log.roll.hours", "168", DEFAULT)]),
}
EXPECTED_TOPIC: dict[str, tuple[str | None, str, Synonyms]] = {
    "retention.ms": (str(24 * HOUR_MS), DEFAULT, []),
    "max.message.bytes": ("2000000", STATIC, [("message.max.bytes", "2000000", STATIC),
                                              ("message.max.bytes", "1048588", DEFAULT)]),
    "cleanup.policy": ("delete", DEFAULT, [("log.cleanup.policy", "delete", DEFAULT)]),
    "segment.ms": ("604800000", DEFAULT, []),
}
# Each broker key's update mode as Kafka 4.3 defines it (josefk's table of config keys).
KAFKA_KEYS = json.loads((REPO / "server" / "config" / "config_keys.json").read_text())["broker"]


@pytest.fixture(scope="module")
def tools() -> Path:
    if not any(KAFKA_LIBS.glob("*.jar")):
        pytest.skip(f"no Kafka jars in {KAFKA_LIBS} (tools/kafka/fetch.sh)")
    return RUN_CLASS


@pytest.fixture(scope="module")
def config_broker(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    kind = own_kind(request.config, "static settings")
    tmp = tmp_path_factory.mktemp("dynamic-configs")
    data_dir, port = tmp / "data", free_port()
    data_dir.mkdir()
    properties = None
    overrides = {**STATIC_FILE, **STATIC_OVERRIDES}
    if kind == "josefk":  # Kafka's start-kraft.sh writes its own server.properties
        properties = tmp / "server.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in STATIC_FILE.items()))
        overrides = STATIC_OVERRIDES
    command = broker_command(kind, data_dir, port, overrides, properties)
    with running(Broker(kind, f"127.0.0.1:{port}", command, data_dir, tmp / "broker.log",
                        start_timeout=START_TIMEOUT[kind])) as broker:
        yield broker


@pytest.fixture
def admin_client(config_broker: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=config_broker.bootstrap,
                              request_timeout_ms=15_000)
    try:
        yield client
    finally:
        client.close()


def node_id(broker: Broker) -> str:
    return "1" if broker.kind == "kafka" else "0"


def kafka_configs(tools: Path, broker: Broker, *args: str, check: bool = True
                  ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256m")
    env.setdefault("KAFKA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    done = subprocess.run([str(tools), "kafka.admin.ConfigCommand", "--bootstrap-server",
                           broker.bootstrap, *args], capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT, env=env)
    if check:
        assert done.returncode == 0, f"kafka-configs {args} exited {done.returncode}:\n" \
            f"{done.stdout}\n{done.stderr}"
    return done


_LINE = re.compile(r"^\s+(\S+?)=(.*) sensitive=(true|false) synonyms=\{(.*)\}$")
_SYNONYM = re.compile(r"(?:^|, )([A-Z_]+):([^=]+)=")


def parse_describe(text: str) -> dict[str, tuple[str | None, bool, Synonyms]]:
    """kafka-configs.sh --describe output: name -> (value, sensitive, synonyms)."""
    found = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        name, value, sensitive, synonyms_text = match.groups()
        marks = list(_SYNONYM.finditer(synonyms_text))
        synonyms: Synonyms = []
        for i, mark in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(synonyms_text)
            raw = synonyms_text[mark.end():end]
            synonyms.append((mark.group(2), None if raw == "null" else raw, mark.group(1)))
        found[name] = (None if value == "null" else value, sensitive == "true", synonyms)
    return found


def described(admin: KafkaAdminClient, rtype: ConfigResourceType, name: str
              ) -> dict[str, dict[str, Any]]:
    result = admin.describe_configs([ConfigResource(rtype, name)], include_synonyms=True,
                                    config_filter="all")
    return result[rtype.name.lower()][name]


def raw_describe(broker: Broker, name: str) -> dict[str, tuple[str | None, str, Synonyms]]:
    """DescribeConfigs v1 of a BROKER resource with synonyms (``name`` "": the cluster-wide
    default, which kafka-python's admin client cannot describe)."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name=name, configuration_keys=None)
    with RawConnection(broker.bootstrap) as raw:
        [result] = raw.request(DescribeConfigsRequest(
            resources=[resource], include_synonyms=True), 1).results
    assert result.error_code == 0, result
    return {c.name: (c.value, source_name(c.config_source), [
        (s.name, s.value, source_name(s.source)) for s in c.synonyms]) for c in result.configs}


def refused(broker: Broker, source: str) -> bool:
    """A new connection from ``source`` is closed unanswered (else answered, then closed)."""
    with connect(broker, source) as sock:
        if closed_unanswered(sock):
            return True
    time.sleep(0.5)  # the broker notices the close before the next try counts
    return False


def source_name(source: Any) -> str:
    return SOURCE_NAMES.get(source, source) if isinstance(source, int) else str(source)


def view(entry: dict[str, Any]) -> tuple[str | None, str, Synonyms]:
    return entry["value"], source_name(entry["config_source"]), [
        (s["name"], s["value"], source_name(s["source"])) for s in entry["synonyms"]]


def test_describe_reports_sources_and_synonyms_as_kafka(
        config_broker: Broker, admin_client: KafkaAdminClient, tools: Path) -> None:
    broker_id = node_id(config_broker)
    entries = described(admin_client, ConfigResourceType.BROKER, broker_id)
    for name, expected in EXPECTED_BROKER.items():
        assert view(entries[name]) == expected, name
    assert entries["some.custom.key"]["is_sensitive"] is True
    for name, entry in entries.items():
        value, source, synonyms = view(entry)
        # The source is the first synonym's; a sensitive value is never answered.
        assert source == (synonyms[0][2] if synonyms else DEFAULT), name
        if entry["is_sensitive"]:
            assert value is None and all(s[1] is None for s in synonyms), name
        # Read-only unless Kafka can change the key at runtime. Keys Kafka 4.3 does not
        # define (josefk's ZooKeeper-mode and metrics keys, Kafka's harness's unknown
        # key) are read-only on both.
        if name in KAFKA_KEYS:
            assert entry["read_only"] is (KAFKA_KEYS[name]["mode"] == "read-only"), name
        elif not name.startswith("listener.name."):
            assert entry["read_only"] is True, name
    # kafka-configs.sh sees the same.
    tool = parse_describe(kafka_configs(tools, config_broker, "--describe", "--all",
                                        "--entity-type", "brokers", "--entity-name",
                                        broker_id).stdout)
    for name, (value, _, synonyms) in EXPECTED_BROKER.items():
        assert tool[name] == (value, name in ("some.custom.key", "ssl.keystore.password"),
                              synonyms), name
    # A topic without overrides inherits the broker's settings, with their synonyms.
    topic = unique_topic_name("configs")
    create(admin_client, topic)
    topic_entries = described(admin_client, ConfigResourceType.TOPIC, topic)
    for name, expected in EXPECTED_TOPIC.items():
        assert view(topic_entries[name]) == expected, name


def documentation(broker: Broker, resource_type: int, name: str, include: bool
                  ) -> dict[str, tuple[int, str | None]]:
    """DescribeConfigs v3 of one resource: name -> (config type, documentation)."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)
    with RawConnection(broker.bootstrap) as raw:
        [result] = raw.request(DescribeConfigsRequest(
            resources=[resource], include_synonyms=False, include_documentation=include),
            3).results
    assert result.error_code == 0, result
    return {c.name: (c.config_type, c.documentation) for c in result.configs}


def test_documentation_of_every_known_key_only_when_asked(
        config_broker: Broker, admin_client: KafkaAdminClient) -> None:
    topic = unique_topic_name("docs")
    create(admin_client, topic)
    for resource_type, name in ((4, node_id(config_broker)), (2, topic)):
        documented = documentation(config_broker, resource_type, name, True)
        known = {k: doc for k, (config_type, doc) in documented.items() if config_type != 0}
        assert len(known) > 30, documented
        for key, doc in known.items():
            assert isinstance(doc, str) and doc.strip(), key
        undocumented = documentation(config_broker, resource_type, name, False)
        assert undocumented.keys() == documented.keys()
        assert all(doc is None for _, doc in undocumented.values()), name
    # A key the broker does not define (UNKNOWN type) has no documentation to give.
    assert documentation(config_broker, 4, node_id(config_broker), True)[
        "some.custom.key"] == (0, None)


def create(admin: KafkaAdminClient, topic: str, configs: dict[str, str] | None = None) -> None:
    result = admin.create_topics({topic: {"num_partitions": 1, "configs": configs or {}}},
                                 timeout_ms=15_000, wait_for_metadata=True)
    assert result["topics"][0]["error_code"] == 0, result


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        time.sleep(0.2)


def beginning_offset(broker: Broker, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close()


def test_dynamic_changes_take_effect_without_a_restart(
        config_broker: Broker, admin_client: KafkaAdminClient, tools: Path) -> None:
    broker_id = node_id(config_broker)
    per_broker = ("--entity-type", "brokers", "--entity-name", broker_id)
    cluster_default = ("--entity-type", "brokers", "--entity-default")

    # log.retention.ms as the cluster-wide default: a topic without an override loses
    # its old records; one with an override keeps them.
    inherits, keeps = unique_topic_name("inherits"), unique_topic_name("keeps")
    create(admin_client, inherits)
    create(admin_client, keeps, {"retention.ms": str(24 * HOUR_MS)})
    producer = KafkaProducer(bootstrap_servers=config_broker.bootstrap)
    old = int(time.time() * 1000) - 2 * HOUR_MS
    for topic in (inherits, keeps):
        for i in range(3):
            producer.send(topic, b"old %d" % i, timestamp_ms=old)
    producer.flush(15)
    producer.close()
    time.sleep(2)  # retention checks (every second) leave both alone under 24 hours
    assert beginning_offset(config_broker, inherits) == 0
    kafka_configs(tools, config_broker, "--alter", *cluster_default,
                  "--add-config", f"log.retention.ms={HOUR_MS}")
    wait_until(lambda: beginning_offset(config_broker, inherits) == 3,
               "old segments deleted under the new default")
    assert beginning_offset(config_broker, keeps) == 0
    entries = described(admin_client, ConfigResourceType.BROKER, broker_id)
    assert view(entries["log.retention.ms"]) == (str(HOUR_MS), DYN_DEFAULT, [
        ("log.retention.ms", str(HOUR_MS), DYN_DEFAULT),
        ("log.retention.hours", "24", STATIC), ("log.retention.hours", "168", DEFAULT)])
    topic_entry = described(admin_client, ConfigResourceType.TOPIC, inherits)["retention.ms"]
    assert view(topic_entry)[:2] == (str(HOUR_MS), DYN_DEFAULT)
    defaults = raw_describe(config_broker, "")  # kafka-python cannot name it
    # Kafka 4.3 (KRaft) also keeps a min.insync.replicas=1 default it bootstraps itself.
    defaults.pop("min.insync.replicas", None)
    assert defaults == {"log.retention.ms": (
        str(HOUR_MS), DYN_DEFAULT, [("log.retention.ms", str(HOUR_MS), DYN_DEFAULT)])}

    # Per broker: the connection limit of one address refuses its next connection.
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(connect(config_broker, "127.0.0.2"))
        assert answered(first, 1)
        kafka_configs(tools, config_broker, "--alter", *per_broker, "--add-config",
                      "max.connections.per.ip.overrides=127.0.0.2:1")
        # Kafka applies a change once its metadata log reaches the broker: soon, not at once.
        wait_until(lambda: refused(config_broker, "127.0.0.2"), "the second connection refused")
        kafka_configs(tools, config_broker, "--alter", *per_broker, "--delete-config",
                      "max.connections.per.ip.overrides")
        wait_until(lambda: not refused(config_broker, "127.0.0.2"),
                   "the second connection answered")

    # The log cleaner's thread count (at most double at a time), reported per broker.
    kafka_configs(tools, config_broker, "--alter", *per_broker,
                  "--add-config", "log.cleaner.threads=2")
    entries = described(admin_client, ConfigResourceType.BROKER, broker_id)
    assert view(entries["log.cleaner.threads"]) == ("2", DYN_BROKER, [
        ("log.cleaner.threads", "2", DYN_BROKER), ("log.cleaner.threads", "1", DEFAULT)])

    # Refusals, with Kafka's messages.
    for args, message in [
            ((*per_broker, "--add-config", "log.retention.hours=2"),
             "Cannot update these configs dynamically: [log.retention.hours]"),
            ((*cluster_default, "--add-config", "listener.name.plaintext.ssl.keystore.type=PKCS12"),
             "Cannot update these configs at default cluster level, broker id must be "
             "specified: [listener.name.plaintext.ssl.keystore.type]"),
            ((*per_broker, "--add-config", "log.cleaner.threads=9"),
             "Log cleaner threads cannot be increased to more than double the current "
             "value 2")]:
        done = kafka_configs(tools, config_broker, "--alter", *args, check=False)
        assert done.returncode != 0 and message in done.stdout + done.stderr, (args, done)

    kafka_configs(tools, config_broker, "--alter", *cluster_default,
                  "--delete-config", "log.retention.ms")
    kafka_configs(tools, config_broker, "--alter", *per_broker,
                  "--delete-config", "log.cleaner.threads")
    entries = described(admin_client, ConfigResourceType.BROKER, broker_id)
    assert view(entries["log.retention.ms"]) == EXPECTED_BROKER["log.retention.ms"]
    # Only the source: Kafka 4.3.1 goes on answering the deleted value 2 (from DEFAULT_CONFIG).
    assert view(entries["log.cleaner.threads"])[1:] == (DEFAULT, [
        ("log.cleaner.threads", "1", DEFAULT)])
