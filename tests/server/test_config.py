"""Broker configuration: server.properties parsing, Kafka's keys and defaults, DescribeConfigs."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest
from conftest import require_kafka_jars
from hypothesis import given
from hypothesis import strategies as st

from josefk.log.config import LogConfig
from josefk.server.config import broker as cfg
from josefk.server.config import values as config_values
from josefk.server.config.broker import (
    BrokerConfig,
    load_config,
    topic_config_entries,
    topic_config_values,
    validate_topic_configs,
)
from josefk.server.config.keys import BROKER_KEYS, TOPIC_KEYS
from josefk.server.config.listeners import Listener
from josefk.server.config.properties import parse_properties
from josefk.server.config.values import ConfigError, ConfigSource, ConfigType, to_string

REPO = Path(__file__).resolve().parents[2]
KAFKA_LIBS = REPO / ".cache" / "kafka" / "libs"
HOUR, MINUTE = 3_600_000, 60_000
INT64_MAX = (1 << 63) - 1

# Kafka 4.3's LogConfig.nonInternalConfigNames(): what DescribeConfigs(TOPIC) lists.
KAFKA_TOPIC_CONFIGS = [
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
]


def config(**props: str) -> BrokerConfig:
    return load_config(None, {k.replace("_", "."): v for k, v in props.items()})


# --- properties files ----------------------------------------------------------------------

PROPERTIES_CASES = [
    ("a=b", {"a": "b"}),
    ("a:b", {"a": "b"}),
    ("a b", {"a": "b"}),
    ("  a  =  b  ", {"a": "b  "}),
    ("a = = b", {"a": "= b"}),
    ("a == b", {"a": "= b"}),
    ("a := b", {"a": "= b"}),
    ("a\t\f:\tb", {"a": "b"}),
    ("a", {"a": ""}),
    ("a=", {"a": ""}),
    ("=b", {"": "b"}),
    ("# comment\n! also\n   # indented\na=1", {"a": "1"}),
    ("a=1 # not a comment", {"a": "1 # not a comment"}),
    ("a=1\na=2", {"a": "2"}),
    ("a\\=b=c", {"a=b": "c"}),
    ("a\\:b\\ c=d", {"a:b c": "d"}),
    ("k=\\t\\n\\r\\f\\\\\\x\\u00e9\\u20AC", {"k": "\t\n\r\f\\x\u00e9\u20ac"}),
    ("k=one \\\n     two \\\n\tthree", {"k": "one two three"}),
    ("k=a\\\\\nb=c", {"k": "a\\", "b": "c"}),
    ("k=a\\\\\\\n  b", {"k": "a\\b"}),
    ("k=a\\\n# not a comment", {"k": "a# not a comment"}),
    ("k=a\\\n\nb=c", {"k": "a", "b": "c"}),
    ("k=a\\", {"k": "a"}),
    ("# comment \\\nk=v", {"k": "v"}),
    ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
    ("\n\n   \n\ta=1\n\n", {"a": "1"}),
    ("log.dirs=/data/a,\\\n         /data/b", {"log.dirs": "/data/a,/data/b"}),
    ("k=caf\u00e9 \u2603", {"k": "caf\u00e9 \u2603"}),
]


@pytest.mark.parametrize(("text", "expected"), PROPERTIES_CASES)
def test_parse_properties(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text", ["k=\\u12", "k=\\u12G4", "k\\uXYZW=v"])
def test_malformed_unicode_escape(text: str) -> None:
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties(text)


def _java_escape(s: str, key: bool) -> str:
    """Escape like java.util.Properties.store does (without the \\uXXXX for non-ASCII)."""
    out = []
    for i, c in enumerate(s):
        if c == " " and (key or i == 0):
            out.append("\\ ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@given(st.dictionaries(texts, texts, max_size=6))
def test_escaped_properties_round_trip(props: dict[str, str]) -> None:
    text = "\n".join(f"{_java_escape(k, True)}={_java_escape(v, False)}" for k, v in props.items())
    assert parse_properties(text) == props


def test_load_config_reads_file_and_overrides_win(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# broker\nnode.id=4\nnum.partitions=3\nlog.dirs=/d1, /d2\n"
                    "listeners=PLAINTEXT://127.0.0.1:19092\n")
    c = load_config(path, {"num.partitions": "7"})
    assert (c.node_id, c.num_partitions) == (4, 7)
    assert c.log_dirs == (Path("/d1"), Path("/d2"))
    assert c.listeners == (Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 19092),)
    assert dict(c.originals) == {"node.id": "4", "num.partitions": "7", "log.dirs": "/d1, /d2",
                                 "listeners": "PLAINTEXT://127.0.0.1:19092"}


def test_latin1_file_is_read_as_java_would(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(b"log.dir=/data/caf\xe9\n")
    assert load_config(path).log_dirs == (Path("/data/caf\u00e9"),)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.properties", {})


# --- defaults --------------------------------------------------------------------------------


def test_defaults_without_any_file() -> None:
    c = load_config(None, {})
    assert c.node_id == 0
    assert c.listeners == (Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),)
    assert c.advertised_listeners == c.listeners
    assert c.log_dirs == (Path("./josefk-data"),)
    assert c.zookeeper_connect is None and c.cluster_id is None
    expected = {
        "num_partitions": 1, "default_replication_factor": 1, "auto_create_topics_enable": True,
        "delete_topic_enable": True, "message_max_bytes": 1048588,
        "socket_request_max_bytes": 104857600, "max_connections": 2147483647,
        "connections_max_idle_ms": 600000, "request_timeout_ms": 30000,
        "num_network_threads": 3, "num_io_threads": 8,
        "log_segment_bytes": 1073741824, "log_roll_ms": 168 * HOUR, "log_roll_jitter_ms": 0,
        "log_retention_ms": 168 * HOUR, "log_retention_bytes": -1,
        "log_retention_check_interval_ms": 300000, "log_index_interval_bytes": 4096,
        "log_index_size_max_bytes": 10485760, "log_flush_interval_messages": INT64_MAX,
        "log_flush_interval_ms": INT64_MAX, "log_flush_scheduler_interval_ms": INT64_MAX,
        "log_flush_offset_checkpoint_interval_ms": 60000,
        "log_flush_start_offset_checkpoint_interval_ms": 60000,
        "log_segment_delete_delay_ms": 60000, "log_message_timestamp_type": "CreateTime",
        "log_cleanup_policy": ("delete",), "log_preallocate": False, "log_cleaner_enable": True,
        "min_insync_replicas": 1, "compression_type": "producer",
        "unclean_leader_election_enable": False, "auto_leader_rebalance_enable": True,
        "replica_lag_time_max_ms": 30000, "replica_fetch_max_bytes": 1048576,
        "offsets_topic_num_partitions": 50, "offsets_topic_replication_factor": 3,
        "offsets_topic_segment_bytes": 104857600, "offsets_retention_minutes": 10080,
        "offsets_retention_check_interval_ms": 600000,
        "transaction_state_log_num_partitions": 50,
        "transaction_state_log_replication_factor": 3, "transaction_state_log_min_isr": 2,
        "transactional_id_expiration_ms": 604800000, "transaction_max_timeout_ms": 900000,
        "group_initial_rebalance_delay_ms": 3000, "group_min_session_timeout_ms": 6000,
        "group_max_session_timeout_ms": 1800000, "producer_id_expiration_ms": 86400000,
    }
    assert {name: getattr(c, name) for name in expected} == expected
    assert c.values["log.retention.ms"] is None and c.values["log.retention.hours"] == 168
    assert c.unknown == {}


def test_default_log_config_is_kafkas_topic_defaults() -> None:
    assert load_config(None, {}).default_log_config() == LogConfig()


def test_default_log_config_follows_broker_log_settings() -> None:
    c = config(log_segment_bytes="2097152", log_roll_hours="2", log_retention_minutes="30",
               log_retention_bytes="5000000", log_index_interval_bytes="100",
               log_index_size_max_bytes="4096", log_flush_interval_messages="10",
               log_flush_scheduler_interval_ms="500", log_message_timestamp_type="LogAppendTime",
               log_cleanup_policy="compact,delete", message_max_bytes="2000",
               min_insync_replicas="2", log_segment_delete_delay_ms="7",
               log_cleaner_delete_retention_ms="9")
    assert c.default_log_config() == LogConfig(
        segment_bytes=2097152, segment_ms=2 * HOUR, segment_index_bytes=4096,
        index_interval_bytes=100, retention_ms=30 * MINUTE, retention_bytes=5000000,
        message_timestamp_type="LogAppendTime", max_message_bytes=2000,
        cleanup_policy="compact,delete", delete_retention_ms=9, min_insync_replicas=2,
        flush_messages=10, flush_ms=500, file_delete_delay_ms=7)


def test_log_config_applies_topic_overrides_over_broker_defaults() -> None:
    c = config(log_retention_hours="1", log_segment_bytes="2097152")
    log = c.log_config({"retention.ms": "-1", "cleanup.policy": "compact"})
    assert (log.retention_ms, log.segment_bytes, log.cleanup_policy) == (-1, 2097152, "compact")
    with pytest.raises(ConfigError):
        c.log_config({"segment.bytes": "12"})


# --- node id ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("props", "node_id"), [
    ({"node.id": "3"}, 3), ({"broker.id": "5"}, 5), ({"node.id": "2", "broker.id": " 2 "}, 2),
])
def test_node_id_and_broker_id_are_synonyms(props: dict[str, str], node_id: int) -> None:
    c = load_config(None, props)
    assert c.node_id == node_id
    assert c.values["node.id"] == c.values["broker.id"] == node_id


def test_node_id_and_broker_id_must_agree() -> None:
    with pytest.raises(ConfigError, match="node.id.*broker.id"):
        config(node_id="1", broker_id="2")


@pytest.mark.parametrize("key", ["node.id", "broker.id"])
def test_negative_node_id_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match=f"Invalid value -1 for configuration {key}"):
        load_config(None, {key: "-1"})


# --- listeners -------------------------------------------------------------------------------


def test_listener_names_and_security_protocol_map() -> None:
    c = load_config(None, {
        "listeners": "internal://10.0.0.1:9093 , PLAINTEXT://[::1]:9092",
        "listener.security.protocol.map": "INTERNAL:plaintext,PLAINTEXT:PLAINTEXT"})
    assert c.listeners == (Listener("INTERNAL", "PLAINTEXT", "10.0.0.1", 9093),
                           Listener("PLAINTEXT", "PLAINTEXT", "::1", 9092))
    assert [str(x) for x in c.listeners] == ["INTERNAL://10.0.0.1:9093", "PLAINTEXT://[::1]:9092"]


def test_advertised_listeners_default_to_listeners() -> None:
    c = config(listeners="PLAINTEXT://broker1.example:9092")
    assert c.advertised_listeners == c.listeners
    assert c.values["advertised.listeners"] is None


@pytest.mark.parametrize("host", ["", "0.0.0.0"])
def test_wildcard_listener_is_advertised_under_the_host_name(
        monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    monkeypatch.setattr(cfg, "_local_hostname", lambda: "box.example")
    c = config(listeners=f"PLAINTEXT://{host}:9092")
    assert c.listeners[0].host == (None if host == "" else "0.0.0.0")
    assert c.listeners[0].bind_host == "0.0.0.0"
    assert c.advertised_listeners == (Listener("PLAINTEXT", "PLAINTEXT", "box.example", 9092),)


def test_explicit_advertised_listeners(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cfg, "_local_hostname", lambda: "box.example")
    c = config(listeners="PLAINTEXT://0.0.0.0:9092,INTERNAL://:9093",
               listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
               advertised_listeners="PLAINTEXT://public.example:19092,INTERNAL://:9093")
    assert [str(x) for x in c.advertised_listeners] == [
        "PLAINTEXT://public.example:19092", "INTERNAL://box.example:9093"]


def test_controller_listeners_are_not_broker_listeners() -> None:
    c = config(listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
               controller_listener_names="CONTROLLER",
               listener_security_protocol_map="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT")
    assert [x.name for x in c.listeners] == [x.name for x in c.advertised_listeners] == [
        "PLAINTEXT"]


@pytest.mark.parametrize(("props", "message"), [
    ({"listeners": "PLAINTEXT://h"}, "Unable to parse PLAINTEXT://h"),
    ({"listeners": "PLAINTEXT//h:1"}, "Unable to parse"),
    ({"listeners": "PLAINTEXT://h:65536"}, "port 65536"),
    ({"listeners": "PLAINTEXT://h:-1"}, "port -1"),
    ({"listeners": ""}, "listeners"),
    ({"listeners": "SSL://h:9093",
      "listener.security.protocol.map": "SSL:TLS"}, "listener.security.protocol.map"),
    ({"listeners": "FOO://h:9093"}, "No security protocol defined for listener FOO"),
    ({"listeners": "PLAINTEXT://h:1", "listener.security.protocol.map": "PLAINTEXT:GOPHER"},
     "listener.security.protocol.map"),
    ({"listeners": "PLAINTEXT://a:1,plaintext://b:2"}, "different name"),
    ({"listeners": "PLAINTEXT://a:1,X://b:1", "listener.security.protocol.map":
      "PLAINTEXT:PLAINTEXT,X:PLAINTEXT"}, "different port"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "0.0.0.0"),
    ({"advertised.listeners": "OTHER://h:9092", "listener.security.protocol.map":
      "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"}, "subset"),
    ({"listeners": "C://h:1", "controller.listener.names": "C",
      "listener.security.protocol.map": "C:PLAINTEXT"}, "no broker listener"),
])
def test_bad_listeners(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_config(None, props)
    assert err.value.name is not None


def test_same_port_for_ipv4_and_ipv6_is_allowed() -> None:
    c = config(listeners="PLAINTEXT://127.0.0.1:9092,V6://[::1]:9092",
               listener_security_protocol_map="PLAINTEXT:PLAINTEXT,V6:PLAINTEXT")
    assert [x.port for x in c.listeners] == [9092, 9092]


def test_port_zero_may_repeat() -> None:
    c = config(listeners="PLAINTEXT://127.0.0.1:0,B://127.0.0.1:0",
               listener_security_protocol_map="PLAINTEXT:PLAINTEXT,B:PLAINTEXT")
    assert [x.port for x in c.listeners] == [0, 0]


# --- log dirs and log times ------------------------------------------------------------------


def test_log_dirs_win_over_log_dir_and_are_deduplicated() -> None:
    assert config(log_dir="/x").log_dirs == (Path("/x"),)
    assert config(log_dir="/x", log_dirs="/a, /b,/a").log_dirs == (Path("/a"), Path("/b"))


@pytest.mark.parametrize("props", [{"log.dirs": ""}, {"log.dir": " "}, {"log.dirs": "/a,,/b"}])
def test_empty_log_dirs_are_refused(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="log.dir"):
        load_config(None, props)


@pytest.mark.parametrize(("props", "retention"), [
    ({}, 168 * HOUR),
    ({"log.retention.hours": "24"}, 24 * HOUR),
    ({"log.retention.minutes": "10", "log.retention.hours": "1"}, 10 * MINUTE),
    ({"log.retention.ms": "1234", "log.retention.minutes": "10"}, 1234),
    ({"log.retention.ms": "-1"}, -1),
    ({"log.retention.hours": "-5"}, -1),
    ({"log.retention.ms": "-100", "log.retention.hours": "5"}, -1),
])
def test_retention_ms_wins_over_minutes_over_hours(props: dict[str, str], retention: int) -> None:
    assert load_config(None, props).log_retention_ms == retention


@pytest.mark.parametrize("props", [{"log.retention.ms": "0"}, {"log.retention.minutes": "0"},
                                   {"log.retention.hours": "0"}])
def test_zero_retention_is_refused(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="unlimited"):
        load_config(None, props)


def test_roll_jitter_and_flush_fallbacks() -> None:
    c = config(log_roll_hours="3", log_roll_jitter_hours="1", log_flush_scheduler_interval_ms="9")
    assert (c.log_roll_ms, c.log_roll_jitter_ms, c.log_flush_interval_ms) == (3 * HOUR, HOUR, 9)
    c = config(log_roll_ms="5", log_roll_hours="3", log_roll_jitter_ms="2",
               log_flush_interval_ms="7", log_flush_scheduler_interval_ms="9")
    assert (c.log_roll_ms, c.log_roll_jitter_ms, c.log_flush_interval_ms) == (5, 2, 7)


@pytest.mark.parametrize(("props", "message"), [
    ({"log.roll.ms": "0"}, "log.roll.ms"),
    ({"log.roll.hours": "0"}, "log.roll.hours"),
    ({"log.roll.jitter.ms": "-1"}, "log.roll.jitter.ms"),
    ({"log.flush.interval.ms": "-1"}, "log.flush.interval.ms"),
])
def test_bad_log_times(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, props)


# --- value checking --------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("num.partitions", "many", "Not a number of type INT"),
    ("num.partitions", "0", "at least 1"),
    ("num.partitions", "2147483648", "Not a number of type INT"),
    ("num.partitions", "1_000", "Not a number of type INT"),
    ("num.partitions", "\u0661", "Not a number of type INT"),
    ("default.replication.factor", "0", "at least 1"),
    ("offsets.topic.replication.factor", "32768", "Not a number of type SHORT"),
    ("log.retention.bytes", "9223372036854775808", "Not a number of type LONG"),
    ("message.max.bytes", "-1", "at least 0"),
    ("socket.request.max.bytes", "0", "at least 1"),
    ("max.connections", "-5", "at least 0"),
    ("log.segment.bytes", "1048575", "at least 1048576"),
    ("auto.create.topics.enable", "yes", "either true or false"),
    ("log.message.timestamp.type", "createtime", "String must be one of: CreateTime"),
    ("log.cleanup.policy", "delete,shred", "String must be one of: compact, delete"),
    ("compression.type", "brotli", "String must be one of"),
    ("compression.gzip.level", "0", "between 1 and 9 or equal to -1"),
    ("compression.zstd.level", "23", "no more than 22"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "no more than 1"),
    ("log.cleaner.min.cleanable.ratio", "half", "Not a number of type DOUBLE"),
    ("zookeeper.session.timeout.ms", "0", "at least 1"),
])
def test_invalid_values_name_key_and_value(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, {key: value})
    assert str(err.value).startswith(f"Invalid value {value} for configuration {key}: ")
    assert reason in str(err.value)
    assert (err.value.name, err.value.value) == (key, value)
    assert err.value.error_code == 40


@pytest.mark.parametrize(("key", "value", "parsed"), [
    ("num.partitions", " +3 ", 3),
    ("auto.create.topics.enable", " FALSE ", False),
    ("log.cleanup.policy", " compact , delete ", ["compact", "delete"]),
    ("log.cleaner.min.cleanable.ratio", "1e-1", 0.1),
    ("log.cleaner.io.buffer.load.factor", "2d", 2.0),
    ("zookeeper.connect", " zk1:2181,zk2:2181/kafka ", "zk1:2181,zk2:2181/kafka"),
    ("cluster.id", "MkU3OEVBNTcwNTJENDM2Qk", "MkU3OEVBNTcwNTJENDM2Qk"),
])
def test_values_are_parsed_as_kafka_does(key: str, value: str, parsed: object) -> None:
    assert load_config(None, {key: value}).values[key] == parsed


def test_unknown_keys_are_kept_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="josefk.server.config.broker"):
        c = config(num_partitions="2", **{"ssl.keystore.lokation": "/k", "foo": "bar"})
    assert c.unknown == {"ssl.keystore.lokation": "/k", "foo": "bar"}
    assert c.num_partitions == 2
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "'ssl.keystore.lokation'" in warned and "'foo'" in warned
    assert "num.partitions" not in warned


def test_kraft_keys_of_a_stock_server_properties_are_known(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\nnode.id=1\n"
        "controller.quorum.bootstrap.servers=localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ninter.broker.listener.name=PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL\n"
        "num.network.threads=3\nnum.io.threads=8\nsocket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\nsocket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kraft-combined-logs\nnum.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\noffsets.topic.replication.factor=1\n"
        "share.coordinator.state.topic.replication.factor=1\n"
        "share.coordinator.state.topic.min.isr=1\ntransaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\nlog.retention.hours=168\n"
        "log.segment.bytes=1073741824\nlog.retention.check.interval.ms=300000\n")
    c = load_config(path, {})
    assert c.unknown == {}
    assert [str(x) for x in c.advertised_listeners] == ["PLAINTEXT://localhost:9092"]
    assert c.node_id == 1


# --- DescribeConfigs(BROKER) -----------------------------------------------------------------


def test_describe_lists_every_known_broker_key_once() -> None:
    entries = load_config(None, {}).describe()
    assert [e.name for e in entries] == sorted(BROKER_KEYS)
    for e in entries:
        spec = BROKER_KEYS[e.name]
        assert e.config_type == spec.type and e.read_only is not spec.dynamic
        assert e.source == ConfigSource.DEFAULT_CONFIG and e.is_default
        assert e.is_sensitive is (spec.type == ConfigType.PASSWORD)


def test_describe_values_sources_and_synonyms() -> None:
    c = config(node_id="7", log_retention_hours="24", num_io_threads="4",
               log_cleanup_policy="compact, delete", **{"unknown.key": "x"})
    entries = {e.name: e for e in c.describe()}
    # As Kafka: a key it does not know is listed, of unknown type, so sensitive.
    assert (entries["unknown.key"].value, entries["unknown.key"].is_sensitive) == (None, True)
    assert entries["unknown.key"].config_type == ConfigType.UNKNOWN

    def view(name: str) -> tuple[object, ...]:
        e = entries[name]
        return (e.value, e.source, [(s.name, s.value, s.source) for s in e.synonyms])

    static, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
    assert view("node.id") == ("7", static, [("node.id", "7", static), ("node.id", "0", default)])
    assert view("broker.id") == ("7", static, [("broker.id", "7", static),
                                               ("broker.id", "0", default)])
    assert view("num.io.threads") == ("4", static, [("num.io.threads", "4", static),
                                                    ("num.io.threads", "8", default)])
    assert view("log.cleanup.policy")[:2] == ("compact,delete", static)
    # As in Kafka, a key's synonyms are only those from the key itself on: log.retention.ms
    # is unset, so it is a null default even though log.retention.hours is set.
    assert view("log.retention.ms") == (None, default, [])
    assert view("log.retention.hours") == ("24", static, [
        ("log.retention.hours", "24", static), ("log.retention.hours", "168", default)])
    assert view("log.retention.minutes") == (None, default, [])
    assert view("log.flush.interval.ms") == (None, default, [])
    assert view("log.cleaner.io.max.bytes.per.second")[0] == "1.7976931348623157E308"
    assert view("listeners")[0] == "PLAINTEXT://127.0.0.1:9092"
    assert view("advertised.listeners") == (None, default, [])
    assert entries["message.max.bytes"].read_only is False
    assert entries["log.retention.hours"].read_only is True
    assert entries["num.io.threads"].documentation == BROKER_KEYS["num.io.threads"].doc


def test_describe_of_the_cluster_default_resource_lists_the_dynamic_defaults_only() -> None:
    c = config(num_io_threads="4").with_dynamic({"log.retention.ms": "1000"},
                                                {"log.retention.ms": "2000"})
    [entry] = c.describe(per_broker=False)
    dynamic_default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert (entry.name, entry.value, entry.source) == ("log.retention.ms", "1000", dynamic_default)
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.retention.ms", "1000", dynamic_default)]
    assert config(num_io_threads="4").describe(per_broker=False) == []


def test_config_enums_carry_kafkas_numbers() -> None:
    # DescribeConfigsResponse.ConfigSource's ids on the wire.
    assert [(s.name, s.value) for s in ConfigSource][1:7] == [
        ("DYNAMIC_TOPIC_CONFIG", 1), ("DYNAMIC_BROKER_CONFIG", 2),
        ("DYNAMIC_DEFAULT_BROKER_CONFIG", 3), ("STATIC_BROKER_CONFIG", 4),
        ("DEFAULT_CONFIG", 5), ("DYNAMIC_BROKER_LOGGER_CONFIG", 6)]
    assert [(t.name, t.value) for t in ConfigType][1:] == [
        ("BOOLEAN", 1), ("STRING", 2), ("INT", 3), ("SHORT", 4), ("LONG", 5), ("DOUBLE", 6),
        ("LIST", 7), ("CLASS", 8), ("PASSWORD", 9)]


@pytest.mark.parametrize(("value", "text"), [
    (0.5, "0.5"), (0.9, "0.9"), (1.0, "1.0"), (0.001, "0.001"), (0.0001, "1.0E-4"),
    (1e7, "1.0E7"), (1234567.0, "1234567.0"), (-2.5e-10, "-2.5E-10"), (0.0, "0.0"),
    (1.7976931348623157e308, "1.7976931348623157E308"), (float("inf"), "Infinity"),
    (float("nan"), "NaN"),
])
def test_doubles_print_as_java_does(value: float, text: str) -> None:
    assert config_values._java_double(value) == text


# --- topic configs ---------------------------------------------------------------------------


def test_topic_config_names_are_kafka_4s() -> None:
    assert sorted(TOPIC_KEYS) == KAFKA_TOPIC_CONFIGS
    assert "message.downconversion.enable" not in TOPIC_KEYS  # removed in Kafka 4.0


def test_topic_entries_with_defaults() -> None:
    entries = topic_config_entries({}, load_config(None, {}))
    assert [e.name for e in entries] == KAFKA_TOPIC_CONFIGS
    values = {e.name: e.value for e in entries}
    assert values == {
        "cleanup.policy": "delete", "compression.gzip.level": "-1", "compression.lz4.level": "9",
        "compression.type": "producer", "compression.zstd.level": "3",
        "delete.retention.ms": "86400000", "file.delete.delay.ms": "60000",
        "flush.messages": str(INT64_MAX), "flush.ms": str(INT64_MAX),
        "follower.replication.throttled.replicas": "", "index.interval.bytes": "4096",
        "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2",
        "local.retention.ms": "-2", "max.compaction.lag.ms": str(INT64_MAX),
        "max.message.bytes": "1048588", "message.timestamp.after.max.ms": "3600000",
        "message.timestamp.before.max.ms": str(INT64_MAX),
        "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.5",
        "min.compaction.lag.ms": "0", "min.insync.replicas": "1", "preallocate": "false",
        "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
        "remote.storage.enable": "false", "retention.bytes": "-1", "retention.ms": "604800000",
        "segment.bytes": "1073741824", "segment.index.bytes": "10485760",
        "segment.jitter.ms": "0", "segment.ms": "604800000",
        "unclean.leader.election.enable": "false",
    }
    for e in entries:
        assert e.source == ConfigSource.DEFAULT_CONFIG
        assert not e.read_only and not e.is_sensitive
        assert e.config_type == TOPIC_KEYS[e.name].type
    syn = {e.name: [(s.name, s.value) for s in e.synonyms] for e in entries}
    # As Kafka 4.3: synonyms start at the primary broker key (log.retention.ms,
    # log.roll.ms), which has no default, so the hours defaults are dropped too.
    assert syn["retention.ms"] == []
    assert syn["segment.ms"] == []
    assert syn["max.message.bytes"] == [("message.max.bytes", "1048588")]
    assert syn["remote.storage.enable"] == []


def test_topic_entries_with_overrides_and_broker_settings() -> None:
    broker = config(log_retention_hours="24", message_max_bytes="2000", log_roll_ms="1000",
                    log_flush_scheduler_interval_ms="50")
    overrides = {"cleanup.policy": " compact , delete ", "preallocate": "TRUE",
                 "segment.ms": "500"}
    entries = {e.name: e for e in topic_config_entries(overrides, broker)}

    def view(name: str) -> tuple[object, ...]:
        e = entries[name]
        return (e.value, e.source, [(s.name, s.value, s.source) for s in e.synonyms])

    topic, static = ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.STATIC_BROKER_CONFIG
    default = ConfigSource.DEFAULT_CONFIG
    assert view("cleanup.policy") == ("compact,delete", topic, [
        ("cleanup.policy", "compact,delete", topic), ("log.cleanup.policy", "delete", default)])
    assert view("preallocate")[:2] == ("true", topic)
    assert view("segment.ms") == ("500", topic, [
        ("segment.ms", "500", topic), ("log.roll.ms", "1000", static),
        ("log.roll.hours", "168", default)])
    # Kafka 4.3.1 answers so (its kafka-configs.sh shows retention.ms=86400000 with
    # synonyms={} under log.retention.hours=24): synonyms start at log.retention.ms.
    assert view("retention.ms") == (str(24 * HOUR), default, [])
    assert view("max.message.bytes") == ("2000", static, [
        ("message.max.bytes", "2000", static), ("message.max.bytes", "1048588", default)])
    assert view("flush.ms") == ("50", default, [])
    assert view("segment.bytes")[:2] == ("1073741824", default)


def test_topic_config_values_are_effective_and_typed() -> None:
    values = topic_config_values({"retention.ms": "10"}, config(log_retention_bytes="99"))
    assert values["retention.ms"] == 10 and values["retention.bytes"] == 99
    assert values["cleanup.policy"] == ["delete"] and values["preallocate"] is False
    assert topic_config_values({}, None)["segment.ms"] == 604800000


@pytest.mark.parametrize("configs", [
    {},
    {"cleanup.policy": "compact"}, {"cleanup.policy": "delete,compact"},
    {"retention.ms": "-1"}, {"retention.bytes": "-5"}, {"segment.bytes": "1048576"},
    {"message.timestamp.type": "LogAppendTime"}, {"min.insync.replicas": "2"},
    {"max.message.bytes": "0"}, {"min.cleanable.dirty.ratio": "1"},
    {"leader.replication.throttled.replicas": "0:1, 1:2"},
    {"follower.replication.throttled.replicas": "*"},
    {"compression.type": "zstd", "compression.zstd.level": "-5"},
    {"local.retention.ms": "-2"}, {"remote.storage.enable": "false"},
    {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"},
])
def test_valid_topic_configs(configs: dict[str, str]) -> None:
    validate_topic_configs(configs)


@pytest.mark.parametrize(("configs", "message"), [
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"message.downconversion.enable": "true"}, "Unknown topic config name"),
    ({"log.retention.ms": "1"}, "Unknown topic config name"),
    ({"retention.ms": None}, "Null value"),
    ({"retention.ms": "forever"}, "Not a number of type LONG"),
    ({"retention.ms": "-2"}, "at least -1"),
    ({"segment.bytes": "1048575"}, "at least 1048576"),
    ({"segment.ms": "0"}, "at least 1"),
    ({"cleanup.policy": "Delete"}, "String must be one of: compact, delete"),
    ({"cleanup.policy": ""}, "cleanup.policy"),  # Kafka allows it; josefk's LogConfig does not
    ({"message.timestamp.type": "create"}, "CreateTime, LogAppendTime"),
    ({"min.insync.replicas": "0"}, "at least 1"),
    ({"max.message.bytes": "-1"}, "at least 0"),
    ({"max.message.bytes": "2147483648"}, "Not a number of type INT"),
    ({"preallocate": "yes"}, "either true or false"),
    ({"min.cleanable.dirty.ratio": "2"}, "no more than 1"),
    ({"compression.lz4.level": "18"}, "no more than 17"),
    ({"local.retention.bytes": "-3"}, "at least -2"),
    ({"leader.replication.throttled.replicas": "0:x"}, "literal '*'"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict"),
])
def test_invalid_topic_configs(configs: dict[str, str | None], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        validate_topic_configs(configs)
    assert err.value.error_code == 40


def test_topic_validation_merges_with_the_broker_defaults() -> None:
    broker = config(log_cleaner_max_compaction_lag_ms="100")
    validate_topic_configs({"min.compaction.lag.ms": "50"}, broker=broker)
    with pytest.raises(ConfigError, match="conflict"):
        validate_topic_configs({"min.compaction.lag.ms": "500"}, broker=broker)
    validate_topic_configs({"min.compaction.lag.ms": "500"})


# --- against Apache Kafka 4.3 itself ---------------------------------------------------------

KAFKA_PROGRAM = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.config.ConfigSynonym;
import org.apache.kafka.server.config.DynamicBrokerConfig;
import org.apache.kafka.server.config.ServerTopicConfigSynonyms;
import org.apache.kafka.storage.internals.log.LogConfig;

public class ConfigCheck {
    static String hex(String s) {
        StringBuilder b = new StringBuilder("x");
        for (byte x : s.getBytes(StandardCharsets.UTF_8)) b.append(String.format("%02x", x));
        return b.toString();
    }
    static String dflt(ConfigDef.ConfigKey k) {
        if (!k.hasDefault()) return "<none>";
        if (k.defaultValue == null) return "<null>";
        return ConfigDef.convertToString(k.defaultValue, k.type);
    }
    public static void main(String[] args) throws Exception {
        for (String name : LogConfig.nonInternalConfigNames()) {
            ConfigDef.ConfigKey k = LogConfig.configKeys().get(name);
            System.out.println("TOPIC\t" + name + "\t" + k.type + "\t" + dflt(k));
        }
        ConfigDef kc = kafka.server.KafkaConfig$.MODULE$.configDef();
        for (ConfigDef.ConfigKey k : kc.configKeys().values())
            System.out.println("BROKER\t" + k.name + "\t" + k.type + "\t" + dflt(k));
        for (String name : DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS)
            System.out.println("DYNAMIC\t" + name);
        for (Map.Entry<String, List<ConfigSynonym>> e :
                ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS.entrySet()) {
            StringBuilder b = new StringBuilder();
            for (ConfigSynonym s : e.getValue())
                b.append(b.length() == 0 ? "" : ",").append(s.name());
            System.out.println("SYN\t" + e.getKey() + "\t" + b);
        }
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            p.load(r);
        }
        for (String key : p.stringPropertyNames())
            System.out.println("PROP\t" + hex(key) + "\t" + hex(p.getProperty(key)));
        List<String> cases = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
        for (int i = 0; i < cases.size(); i++) {
            String[] kv = cases.get(i).split("\t", 2);
            Map<String, String> m = new HashMap<>();
            m.put(kv[0], kv[1]);
            String verdict = "OK";
            try { LogConfig.validate(Map.of(), m, Map.of(), false); }
            catch (Exception e) { verdict = "ERR"; }
            System.out.println("CASE\t" + i + "\t" + verdict);
        }
    }
}
"""

# (topic config, value): Kafka and josefk must agree on accepting or refusing each.
DIFFERENTIAL_CASES = [
    ("cleanup.policy", "compact, delete"), ("cleanup.policy", "delete,delete"),
    ("cleanup.policy", "Delete"), ("cleanup.policy", "delete;compact"),
    ("segment.bytes", "1048575"), ("segment.bytes", " 1048576 "), ("segment.bytes", "+1048576"),
    ("segment.bytes", "2147483648"), ("segment.bytes", "1e6"), ("segment.bytes", "0x100000"),
    ("retention.ms", "-1"), ("retention.ms", "-2"), ("retention.bytes", "-5"),
    ("retention.ms", "9223372036854775807"), ("retention.ms", "9223372036854775808"),
    ("preallocate", "TRUE"), ("preallocate", "yes"), ("preallocate", " false "),
    ("min.cleanable.dirty.ratio", "1e-1"), ("min.cleanable.dirty.ratio", "NaN"),
    ("min.cleanable.dirty.ratio", "1.01"), ("min.cleanable.dirty.ratio", ".5"),
    ("min.cleanable.dirty.ratio", "-0.0"), ("min.cleanable.dirty.ratio", "half"),
    ("foo.bar", "1"), ("message.downconversion.enable", "true"), ("retention.ms", "1 000"),
    ("leader.replication.throttled.replicas", "*"),
    ("leader.replication.throttled.replicas", "0:1, 1:2"),
    ("leader.replication.throttled.replicas", "0:x"),
    ("follower.replication.throttled.replicas", "1:1,*"),
    ("compression.gzip.level", "0"), ("compression.gzip.level", "-1"),
    ("compression.gzip.level", "9"), ("compression.zstd.level", "-131072"),
    ("compression.zstd.level", "-131073"), ("compression.lz4.level", "17"),
    ("compression.type", "gzip"), ("compression.type", "GZIP"), ("compression.type", "none"),
    ("message.timestamp.type", "LogAppendTime"), ("message.timestamp.type", "createtime"),
    ("segment.ms", "0"), ("segment.ms", "1"), ("segment.jitter.ms", "-1"),
    ("segment.index.bytes", "3"), ("segment.index.bytes", "4"),
    ("max.message.bytes", "2147483647"), ("max.message.bytes", "-1"),
    ("local.retention.ms", "-3"), ("local.retention.bytes", "-2"),
    ("min.insync.replicas", "0"), ("max.compaction.lag.ms", "0"), ("flush.messages", "0"),
    ("flush.ms", "0"), ("index.interval.bytes", "-1"), ("delete.retention.ms", "-1"),
    ("message.timestamp.after.max.ms", "-1"), ("unclean.leader.election.enable", "True"),
    ("remote.log.copy.disable", "true"), ("remote.log.delete.on.disable", "1"),
]


def _java() -> str:
    require_kafka_jars()
    return "java"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[list[str]]]:
    """What Kafka 4.3 says, by line kind."""
    java = _java()
    tmp = tmp_path_factory.mktemp("kafka-config")
    (tmp / "ConfigCheck.java").write_text(KAFKA_PROGRAM)
    (tmp / "tricky.properties").write_text("\n".join(text for text, _ in PROPERTIES_CASES))
    (tmp / "cases.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in DIFFERENTIAL_CASES))
    proc = subprocess.run(
        [java, "-cp", f"{KAFKA_LIBS}/*", str(tmp / "ConfigCheck.java"),
         str(tmp / "tricky.properties"), str(tmp / "cases.tsv")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, list[list[str]]] = {}
    for line in proc.stdout.splitlines():
        kind, *rest = line.split("\t")
        out.setdefault(kind, []).append(rest)
    return out


def _kafka_default(spec_default: object, kind: ConfigType) -> str:
    return "<null>" if spec_default is None else str(to_string(spec_default, kind))


def test_topic_configs_match_kafka(kafka: dict[str, list[list[str]]]) -> None:
    theirs = {name: (kind, default) for name, kind, default in kafka["TOPIC"]}
    ours = {name: (spec.type.name, _kafka_default(spec.default, spec.type))
            for name, spec in TOPIC_KEYS.items()}
    assert ours == theirs
    synonyms = {name: tuple(names.split(",")) for name, names in kafka["SYN"]}
    assert {name: spec.synonyms for name, spec in TOPIC_KEYS.items() if spec.synonyms} == synonyms


# Where josefk's broker defaults knowingly differ from Kafka's.
BROKER_DEFAULT_DEVIATIONS = {"node.id", "broker.id", "listeners", "log.dir"}
# Kafka 3.9's ZooKeeper-mode keys, gone from Kafka 4.
JOSEFK_ONLY_KEYS = {"zookeeper.connect", "zookeeper.session.timeout.ms", "cluster.id",
                    "zookeeper.connection.timeout.ms", "controlled.shutdown.max.retries",
                    "controlled.shutdown.retry.backoff.ms", "inter.broker.protocol.version",
                    "leader.imbalance.per.broker.percentage", "password.encoder.secret",
                    "password.encoder.old.secret", "password.encoder.keyfactory.algorithm",
                    "password.encoder.cipher.algorithm", "password.encoder.key.length",
                    "password.encoder.iterations",
                    # The authorizer's own configs (AclAuthorizer and StandardAuthorizer read
                    # them from the properties; KafkaConfig does not define them).
                    "super.users", "allow.everyone.if.no.acl.found",
                    # josefk's Prometheus endpoint (Kafka has JMX).
                    "metrics.port", "metrics.listener"}


def test_broker_keys_match_kafka(kafka: dict[str, list[list[str]]]) -> None:
    theirs = {name: (kind, default) for name, kind, default in kafka["BROKER"]}
    assert set(BROKER_KEYS) - set(theirs) == JOSEFK_ONLY_KEYS
    for name, spec in BROKER_KEYS.items():
        if name in JOSEFK_ONLY_KEYS:
            continue
        kind, default = theirs[name]
        assert spec.type.name == kind, name
        ours = _kafka_default(spec.default, spec.type)
        if name not in BROKER_DEFAULT_DEVIATIONS:
            assert ours == default.replace("<none>", "<null>"), name
    dynamic = {name for (name,) in kafka["DYNAMIC"]}
    assert {n for n, spec in BROKER_KEYS.items() if spec.dynamic} == dynamic & set(BROKER_KEYS)


def test_properties_parse_as_java_does(kafka: dict[str, list[list[str]]]) -> None:
    theirs = {bytes.fromhex(k[1:]).decode(): bytes.fromhex(v[1:]).decode()
              for k, v in kafka["PROP"]}
    text = "\n".join(text for text, _ in PROPERTIES_CASES)
    assert parse_properties(text) == theirs


# Cases where josefk knowingly refuses what Kafka accepts: its indexes need room for an
# entry (Kafka rounds a 4-byte index down to none and rolls on every batch).
KNOWN_REFUSALS = {("segment.index.bytes", "4")}


def test_topic_validation_agrees_with_kafka(kafka: dict[str, list[list[str]]]) -> None:
    verdicts = {int(i): verdict for i, verdict in kafka["CASE"]}
    for i, case in enumerate(DIFFERENTIAL_CASES):
        if case in KNOWN_REFUSALS:
            assert verdicts[i] == "OK"
            verdicts[i] = "ERR"
    disagreements = []
    for i, (name, value) in enumerate(DIFFERENTIAL_CASES):
        try:
            validate_topic_configs({name: value})
            ours = "OK"
        except ConfigError:
            ours = "ERR"
        if ours != verdicts[i]:
            disagreements.append((name, value, ours, verdicts[i]))
    assert disagreements == []
