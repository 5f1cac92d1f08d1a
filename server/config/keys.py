"""The config keys josefk knows: Kafka 4.3's broker keys (``KafkaConfig``) and topic
configs (``LogConfig``), each with its type, default, validator, update mode and synonyms."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from types import MappingProxyType
from typing import Any

from josefk.server.config.listeners import SECURITY_PROTOCOLS, parse_http_endpoint
from josefk.server.config.values import INT32_MAX, INT64_MAX, ConfigType, Validator

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092
DEFAULT_LOG_DIR = "./josefk-data"
DEFAULT_LISTENERS = f"PLAINTEXT://{DEFAULT_HOST}:{DEFAULT_PORT}"
DEFAULT_SECURITY_PROTOCOL_MAP = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
NO_EFFECT = "Accepted for compatibility; josefk ignores it."
TLS_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer",
               "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def _at_least(low: float) -> Validator:
    return lambda v: None if v >= low else f"Value must be at least {low}"


def _between(low: float, high: float) -> Validator:
    def check(v: Any) -> str | None:
        if v < low:
            return f"Value must be at least {low}"
        return f"Value must be no more than {high}" if v > high else None
    return check


def _one_of(*options: str) -> Validator:
    return lambda v: None if v in options else f"String must be one of: {', '.join(options)}"


def _each_one_of(*options: str) -> Validator:
    one = _one_of(*options)

    def check(values: list[str]) -> str | None:
        return next((r for r in map(one, values) if r is not None), None)
    return check


def _non_empty(v: list[str]) -> str | None:
    return None if v and all(v) else "must be a non-empty list of non-empty values"


def _http_endpoint(v: str) -> str | None:
    try:
        parse_http_endpoint(v)
    except ValueError as e:
        return str(e)
    return None


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9 or equal to -1"


def _throttled_replicas(name: str) -> Validator:
    def check(v: list[str]) -> str | None:
        ok = v == ["*"] or all(re.fullmatch(r"\s*[0-9]+\s*:\s*[0-9]+\s*", x) for x in v)
        return None if ok else (f"{name} must be the literal '*' or a list of replicas in the "
                                "following format: [partitionId]:[brokerId],"
                                "[partitionId]:[brokerId],...")
    return check


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One known config: its Kafka type, default (parsed), validator and update mode."""

    name: str
    type: ConfigType
    default: Any
    validator: Validator | None = None
    dynamic: bool = False  # Kafka can change it at runtime (read_only=False in DescribeConfigs)
    doc: str | None = None
    synonyms: tuple[str, ...] = ()  # topic configs: the broker keys that give the default


BOOL, STR, INT, SHORT, LONG, DBL, LIST, CLASS, PASSWORD = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG,
    ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD)
_DYN = True


def _table(*keys: ConfigKey) -> Mapping[str, ConfigKey]:
    return MappingProxyType({k.name: k for k in keys})


K = ConfigKey
#: Every broker key josefk knows, with Kafka 4.3's type, default and validator.
BROKER_KEYS: Mapping[str, ConfigKey] = _table(
    # identity, listeners, network
    K("node.id", INT, 0, _at_least(0), doc="josefk defaults it to 0; Kafka requires it."),
    K("broker.id", INT, 0, _at_least(0), doc="Synonym of node.id."),
    K("cluster.id", STR, None, doc="josefk only: the cluster id to report."),
    K("process.roles", LIST, None, _each_one_of("broker", "controller"), doc=NO_EFFECT),
    K("listeners", LIST, [DEFAULT_LISTENERS], _non_empty, _DYN),
    K("advertised.listeners", LIST, None),
    K("listener.security.protocol.map", STR, DEFAULT_SECURITY_PROTOCOL_MAP, dynamic=_DYN),
    K("controller.listener.names", LIST, None, doc=NO_EFFECT),
    K("controller.quorum.voters", LIST, [], doc=NO_EFFECT),
    K("controller.quorum.bootstrap.servers", LIST, [], doc=NO_EFFECT),
    K("metadata.log.dir", STR, None, doc=NO_EFFECT),
    K("inter.broker.listener.name", STR, None),
    K("security.inter.broker.protocol", STR, "PLAINTEXT", _one_of(*SECURITY_PROTOCOLS)),
    K("broker.rack", STR, None),
    K("zookeeper.connect", STR, None,
      doc="Kafka 3.9: host:port[,host:port]/chroot; set, it turns cluster mode on."),
    K("zookeeper.session.timeout.ms", INT, 18000, _at_least(1), doc="Kafka 3.9."),
    K("zookeeper.connection.timeout.ms", INT, None, doc="Kafka 3.9: default the session "
      "timeout."),
    K("controlled.shutdown.enable", BOOL, True, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("controlled.shutdown.max.retries", INT, 3, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("controlled.shutdown.retry.backoff.ms", LONG, 5000, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("controller.socket.timeout.ms", INT, 30000, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("inter.broker.protocol.version", STR, "3.9", doc="Kafka 3.9 (ZooKeeper mode); josefk "
      "speaks 3.9's inter-broker protocol whatever it says."),
    K("num.network.threads", INT, 3, _at_least(1), _DYN, NO_EFFECT),
    K("num.io.threads", INT, 8, _at_least(1), _DYN, NO_EFFECT),
    K("background.threads", INT, 10, _at_least(1), _DYN, NO_EFFECT),
    K("num.recovery.threads.per.data.dir", INT, 2, _at_least(1), _DYN,
      "Logs flushed and closed at once per log dir at shutdown."),
    K("num.replica.fetchers", INT, 1, _at_least(1), _DYN, NO_EFFECT),
    K("socket.send.buffer.bytes", INT, 102400),
    K("socket.receive.buffer.bytes", INT, 102400),
    K("socket.request.max.bytes", INT, 104857600, _at_least(1)),
    K("socket.listen.backlog.size", INT, 50, _at_least(1)),
    K("max.connections", INT, INT32_MAX, _at_least(0), _DYN),
    K("max.connections.per.ip", INT, INT32_MAX, _at_least(0), _DYN),
    K("max.connections.per.ip.overrides", STR, "", dynamic=_DYN),
    K("max.connection.creation.rate", INT, INT32_MAX, _at_least(0), _DYN),
    K("connections.max.idle.ms", LONG, 600000),
    K("queued.max.requests", INT, 500, _at_least(1)),
    K("queued.max.request.bytes", LONG, -1),
    K("request.timeout.ms", INT, 30000),
    K("message.max.bytes", INT, 1048588, _at_least(0), _DYN),
    K("fetch.max.bytes", INT, 57671680, _at_least(1024)),
    K("max.incremental.fetch.session.cache.slots", INT, 1000, _at_least(0)),
    K("fetch.purgatory.purge.interval.requests", INT, 1000, doc=NO_EFFECT),
    K("producer.purgatory.purge.interval.requests", INT, 1000, doc=NO_EFFECT),
    K("delete.records.purgatory.purge.interval.requests", INT, 1, doc=NO_EFFECT),
    # topics
    K("auto.create.topics.enable", BOOL, True),
    K("delete.topic.enable", BOOL, True),
    K("num.partitions", INT, 1, _at_least(1)),
    K("default.replication.factor", INT, 1, _at_least(1)),
    K("min.insync.replicas", INT, 1, _at_least(1), _DYN),
    K("unclean.leader.election.enable", BOOL, False, dynamic=_DYN),
    K("auto.leader.rebalance.enable", BOOL, True),
    K("leader.imbalance.check.interval.seconds", LONG, 300, _at_least(1)),
    K("leader.imbalance.per.broker.percentage", INT, 10, doc="Kafka 3.9 (ZooKeeper mode)."),
    K("compression.type", STR, "producer", _one_of(*COMPRESSION_TYPES), _DYN),
    K("compression.gzip.level", INT, -1, _gzip_level, _DYN),
    K("compression.lz4.level", INT, 9, _between(1, 17), _DYN),
    K("compression.zstd.level", INT, 3, _between(-131072, 22), _DYN),
    # replication
    K("replica.lag.time.max.ms", LONG, 30000),
    K("replica.fetch.max.bytes", INT, 1048576, _at_least(0)),
    K("replica.fetch.min.bytes", INT, 1),
    K("replica.fetch.wait.max.ms", INT, 500),
    K("replica.fetch.backoff.ms", INT, 1000, _at_least(0)),
    K("replica.fetch.response.max.bytes", INT, 10485760, _at_least(0)),
    K("replica.socket.timeout.ms", INT, 30000),
    K("replica.socket.receive.buffer.bytes", INT, 65536),
    K("replica.high.watermark.checkpoint.interval.ms", LONG, 5000),
    # client and replication quotas (josefk.server.quotas)
    K("quota.window.num", INT, 11, _at_least(1)),
    K("quota.window.size.seconds", INT, 1, _at_least(1)),
    K("replication.quota.window.num", INT, 11, _at_least(1)),
    K("replication.quota.window.size.seconds", INT, 1, _at_least(1)),
    # log
    K("log.dir", LIST, [DEFAULT_LOG_DIR], _non_empty),
    K("log.dirs", LIST, None, _non_empty),
    K("log.segment.bytes", INT, 1 << 30, _at_least(1 << 20), _DYN),
    K("log.roll.ms", LONG, None, dynamic=_DYN),
    K("log.roll.hours", INT, 168, _at_least(1)),
    K("log.roll.jitter.ms", LONG, None, dynamic=_DYN),
    K("log.roll.jitter.hours", INT, 0, _at_least(0)),
    K("log.retention.ms", LONG, None, dynamic=_DYN),
    K("log.retention.minutes", INT, None),
    K("log.retention.hours", INT, 168),
    K("log.retention.bytes", LONG, -1, dynamic=_DYN),
    K("log.retention.check.interval.ms", LONG, 300000, _at_least(1)),
    K("log.cleanup.policy", LIST, ["delete"], _each_one_of("compact", "delete"), _DYN),
    K("log.index.size.max.bytes", INT, 10485760, _at_least(4), _DYN),
    K("log.index.interval.bytes", INT, 4096, _at_least(0), _DYN),
    K("log.flush.interval.messages", LONG, INT64_MAX, _at_least(1), _DYN),
    K("log.flush.interval.ms", LONG, None, dynamic=_DYN),
    K("log.flush.scheduler.interval.ms", LONG, INT64_MAX),
    K("log.flush.offset.checkpoint.interval.ms", INT, 60000, _at_least(0)),
    K("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, _at_least(0)),
    K("log.segment.delete.delay.ms", LONG, 60000, _at_least(0), _DYN),
    K("log.preallocate", BOOL, False, dynamic=_DYN),
    K("log.message.timestamp.type", STR, "CreateTime", _one_of(*TIMESTAMP_TYPES), _DYN),
    K("log.message.timestamp.before.max.ms", LONG, INT64_MAX, _at_least(0), _DYN),
    K("log.message.timestamp.after.max.ms", LONG, 3600000, _at_least(0), _DYN),
    K("log.local.retention.ms", LONG, -2, _at_least(-2), _DYN),
    K("log.local.retention.bytes", LONG, -2, _at_least(-2), _DYN),
    K("log.dir.failure.timeout.ms", LONG, 30000, _at_least(1)),
    K("log.cleaner.enable", BOOL, True),
    K("log.cleaner.threads", INT, 1, _at_least(0), _DYN),
    K("log.cleaner.dedupe.buffer.size", LONG, 134217728, dynamic=_DYN),
    K("log.cleaner.io.buffer.size", INT, 524288, _at_least(0), _DYN),
    K("log.cleaner.io.buffer.load.factor", DBL, 0.9, dynamic=_DYN),
    K("log.cleaner.io.max.bytes.per.second", DBL, 1.7976931348623157e308, dynamic=_DYN),
    K("log.cleaner.backoff.ms", LONG, 15000, _at_least(0), _DYN),
    K("log.cleaner.min.cleanable.ratio", DBL, 0.5, _between(0, 1), _DYN),
    K("log.cleaner.delete.retention.ms", LONG, 86400000, _at_least(0), _DYN),
    K("log.cleaner.min.compaction.lag.ms", LONG, 0, _at_least(0), _DYN),
    K("log.cleaner.max.compaction.lag.ms", LONG, INT64_MAX, _at_least(1), _DYN),
    # group coordinator
    K("offsets.topic.num.partitions", INT, 50, _at_least(1)),
    K("offsets.topic.replication.factor", SHORT, 3, _at_least(1)),
    K("offsets.topic.segment.bytes", INT, 104857600, _at_least(1)),
    K("offsets.topic.compression.codec", INT, 0),
    K("offsets.retention.minutes", INT, 10080, _at_least(1)),
    K("offsets.retention.check.interval.ms", LONG, 600000, _at_least(1)),
    K("offsets.commit.timeout.ms", INT, 5000, _at_least(1)),
    K("offsets.load.buffer.size", INT, 5242880, _at_least(1)),
    K("offset.metadata.max.bytes", INT, 4096),
    K("group.initial.rebalance.delay.ms", INT, 3000),
    K("group.min.session.timeout.ms", INT, 6000),
    K("group.max.session.timeout.ms", INT, 1800000),
    K("group.max.size", INT, INT32_MAX, _at_least(1)),
    # KIP-848 consumer groups
    K("group.consumer.session.timeout.ms", INT, 45000, _at_least(1)),
    K("group.consumer.min.session.timeout.ms", INT, 45000, _at_least(1)),
    K("group.consumer.max.session.timeout.ms", INT, 60000, _at_least(1)),
    K("group.consumer.heartbeat.interval.ms", INT, 5000, _at_least(1)),
    K("group.consumer.min.heartbeat.interval.ms", INT, 5000, _at_least(1)),
    K("group.consumer.max.heartbeat.interval.ms", INT, 15000, _at_least(1)),
    K("group.consumer.max.size", INT, INT32_MAX, _at_least(1)),
    K("group.consumer.assignment.interval.ms", INT, 1000, _at_least(0)),
    K("group.consumer.regex.refresh.interval.ms", INT, 600000, _at_least(1)),
    K("group.consumer.min.assignment.interval.ms", INT, 0, _at_least(0)),
    K("group.consumer.max.assignment.interval.ms", INT, 15000, _at_least(0)),
    K("group.consumer.assignors", LIST, ["uniform", "range"],
      _each_one_of("uniform", "range",
                   "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                   "org.apache.kafka.coordinator.group.assignor.RangeAssignor")),
    K("group.consumer.migration.policy", STR, "bidirectional",
      _one_of("disabled", "downgrade", "upgrade", "bidirectional")),
    K("group.coordinator.rebalance.protocols", LIST, ["classic", "consumer", "streams"],
      _each_one_of("classic", "consumer", "streams", "share"), doc=NO_EFFECT),
    # transactions
    K("transaction.state.log.num.partitions", INT, 50, _at_least(1)),
    K("transaction.state.log.replication.factor", SHORT, 3, _at_least(1)),
    K("transaction.state.log.min.isr", INT, 2, _at_least(1)),
    K("transaction.state.log.segment.bytes", INT, 104857600, _at_least(1)),
    K("transaction.state.log.load.buffer.size", INT, 5242880, _at_least(1)),
    K("transactional.id.expiration.ms", INT, 604800000, _at_least(1)),
    K("transaction.max.timeout.ms", INT, 900000, _at_least(1)),
    K("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, _at_least(1)),
    K("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, _at_least(1)),
    K("transaction.partition.verification.enable", BOOL, True, dynamic=_DYN),
    K("producer.id.expiration.ms", INT, 86400000, _at_least(1), _DYN),
    K("producer.id.expiration.check.interval.ms", INT, 600000, _at_least(1)),
    K("share.coordinator.state.topic.replication.factor", SHORT, 3, _at_least(1), doc=NO_EFFECT),
    K("share.coordinator.state.topic.min.isr", SHORT, 2, _at_least(1), doc=NO_EFFECT),
    # security: TLS (each may also be set as listener.name.<listener>.<key>)
    K("ssl.protocol", STR, "TLSv1.3", dynamic=_DYN),
    K("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"], _each_one_of(*TLS_PROTOCOLS),
      dynamic=_DYN),
    K("ssl.cipher.suites", LIST, [], dynamic=_DYN),
    K("ssl.keystore.type", STR, "JKS", _one_of("JKS", "PKCS12", "PEM"), dynamic=_DYN),
    K("ssl.keystore.location", STR, None, dynamic=_DYN),
    K("ssl.keystore.password", PASSWORD, None, dynamic=_DYN),
    K("ssl.key.password", PASSWORD, None, dynamic=_DYN),
    K("ssl.keystore.key", PASSWORD, None, dynamic=_DYN),
    K("ssl.keystore.certificate.chain", PASSWORD, None, dynamic=_DYN),
    K("ssl.truststore.type", STR, "JKS", _one_of("JKS", "PKCS12", "PEM"), dynamic=_DYN),
    K("ssl.truststore.location", STR, None, dynamic=_DYN),
    K("ssl.truststore.password", PASSWORD, None, dynamic=_DYN),
    K("ssl.truststore.certificates", PASSWORD, None, dynamic=_DYN),
    K("ssl.client.auth", STR, "none", _one_of("required", "requested", "none"), dynamic=_DYN),
    K("ssl.endpoint.identification.algorithm", STR, "https", dynamic=_DYN),
    K("ssl.principal.mapping.rules", STR, "DEFAULT"),
    # Kafka 3.9's ZooKeeper mode: dynamic password configs stored encrypted
    K("password.encoder.secret", PASSWORD, None),
    K("password.encoder.old.secret", PASSWORD, None),
    K("password.encoder.keyfactory.algorithm", STR, None),
    K("password.encoder.cipher.algorithm", STR, "AES/CBC/PKCS5Padding"),
    K("password.encoder.key.length", INT, 128, _at_least(8)),
    K("password.encoder.iterations", INT, 4096, _at_least(1024)),
    K("ssl.keymanager.algorithm", STR, "SunX509", doc=NO_EFFECT, dynamic=_DYN),
    K("ssl.trustmanager.algorithm", STR, "PKIX", doc=NO_EFFECT, dynamic=_DYN),
    K("ssl.secure.random.implementation", STR, None, doc=NO_EFFECT, dynamic=_DYN),
    K("ssl.provider", STR, None, doc=NO_EFFECT, dynamic=_DYN),
    K("ssl.engine.factory.class", CLASS, None, doc=NO_EFFECT, dynamic=_DYN),
    K("ssl.allow.dn.changes", BOOL, False, doc=NO_EFFECT),
    K("ssl.allow.san.changes", BOOL, False, doc=NO_EFFECT),
    # security: SASL
    K("sasl.enabled.mechanisms", LIST, ["GSSAPI"], dynamic=_DYN),
    K("sasl.mechanism.inter.broker.protocol", STR, "GSSAPI", dynamic=_DYN),
    K("sasl.jaas.config", PASSWORD, None, dynamic=_DYN),
    K("sasl.server.max.receive.size", INT, 524288),
    K("connections.max.reauth.ms", LONG, 0),
    K("connection.failed.authentication.delay.ms", INT, 100, _at_least(0)),
    K("principal.builder.class", CLASS,
      "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
      doc=NO_EFFECT, dynamic=_DYN),
    # security: authorization (Kafka 3.9's AclAuthorizer, Kafka 4's StandardAuthorizer)
    K("authorizer.class.name", STR, "", _one_of("", *AUTHORIZERS)),
    K("super.users", STR, None, doc="Principals allowed everything, separated by ';'."),
    K("allow.everyone.if.no.acl.found", BOOL, False,
      doc="Whether a resource without any ACL is open to every principal (else only to "
      "super.users)."),
    # josefk only: Prometheus metrics and the console page over HTTP
    K("metrics.port", INT, -1, _between(-1, 65535),
      doc="josefk only: serve /metrics (Prometheus) and the console here; -1: off, 0: an "
      "ephemeral port; bound on the host of the first listener."),
    K("metrics.listener", STR, None, _http_endpoint,
      doc="josefk only: http://host:port of /metrics and the console; overrides metrics.port."),
)

#: Every topic config Kafka 4.3 lists for DescribeConfigs(TOPIC), with the broker keys
#: (in priority order) that supply its default (``ServerTopicConfigSynonyms``).
TOPIC_KEYS: Mapping[str, ConfigKey] = _table(
    K("cleanup.policy", LIST, ["delete"], _each_one_of("compact", "delete"),
      synonyms=("log.cleanup.policy",)),
    K("compression.gzip.level", INT, -1, _gzip_level, synonyms=("compression.gzip.level",)),
    K("compression.lz4.level", INT, 9, _between(1, 17), synonyms=("compression.lz4.level",)),
    K("compression.type", STR, "producer", _one_of(*COMPRESSION_TYPES),
      synonyms=("compression.type",)),
    K("compression.zstd.level", INT, 3, _between(-131072, 22),
      synonyms=("compression.zstd.level",)),
    K("delete.retention.ms", LONG, 86400000, _at_least(0),
      synonyms=("log.cleaner.delete.retention.ms",)),
    K("file.delete.delay.ms", LONG, 60000, _at_least(0), synonyms=("log.segment.delete.delay.ms",)),
    K("flush.messages", LONG, INT64_MAX, _at_least(1), synonyms=("log.flush.interval.messages",)),
    K("flush.ms", LONG, INT64_MAX, _at_least(0),
      synonyms=("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    K("follower.replication.throttled.replicas", LIST, [],
      _throttled_replicas("follower.replication.throttled.replicas")),
    K("index.interval.bytes", INT, 4096, _at_least(0), synonyms=("log.index.interval.bytes",)),
    K("leader.replication.throttled.replicas", LIST, [],
      _throttled_replicas("leader.replication.throttled.replicas")),
    K("local.retention.bytes", LONG, -2, _at_least(-2), synonyms=("log.local.retention.bytes",)),
    K("local.retention.ms", LONG, -2, _at_least(-2), synonyms=("log.local.retention.ms",)),
    K("max.compaction.lag.ms", LONG, INT64_MAX, _at_least(1),
      synonyms=("log.cleaner.max.compaction.lag.ms",)),
    K("max.message.bytes", INT, 1048588, _at_least(0), synonyms=("message.max.bytes",)),
    K("message.timestamp.after.max.ms", LONG, 3600000, _at_least(0),
      synonyms=("log.message.timestamp.after.max.ms",)),
    K("message.timestamp.before.max.ms", LONG, INT64_MAX, _at_least(0),
      synonyms=("log.message.timestamp.before.max.ms",)),
    K("message.timestamp.type", STR, "CreateTime", _one_of(*TIMESTAMP_TYPES),
      synonyms=("log.message.timestamp.type",)),
    K("min.cleanable.dirty.ratio", DBL, 0.5, _between(0, 1),
      synonyms=("log.cleaner.min.cleanable.ratio",)),
    K("min.compaction.lag.ms", LONG, 0, _at_least(0),
      synonyms=("log.cleaner.min.compaction.lag.ms",)),
    K("min.insync.replicas", INT, 1, _at_least(1), synonyms=("min.insync.replicas",)),
    K("preallocate", BOOL, False, synonyms=("log.preallocate",)),
    K("remote.log.copy.disable", BOOL, False),
    K("remote.log.delete.on.disable", BOOL, False),
    K("remote.storage.enable", BOOL, False),
    K("retention.bytes", LONG, -1, synonyms=("log.retention.bytes",)),
    K("retention.ms", LONG, 604800000, _at_least(-1),
      synonyms=("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    K("segment.bytes", INT, 1 << 30, _at_least(1 << 20), synonyms=("log.segment.bytes",)),
    K("segment.index.bytes", INT, 10485760, _at_least(4), synonyms=("log.index.size.max.bytes",)),
    K("segment.jitter.ms", LONG, 0, _at_least(0),
      synonyms=("log.roll.jitter.ms", "log.roll.jitter.hours")),
    K("segment.ms", LONG, 604800000, _at_least(1), synonyms=("log.roll.ms", "log.roll.hours")),
    K("unclean.leader.election.enable", BOOL, False, synonyms=("unclean.leader.election.enable",)),
)
del K


def _with_table(keys: Mapping[str, ConfigKey], table: Mapping[str, Any]
                ) -> Mapping[str, ConfigKey]:
    """Each key with its documentation and update mode from ``config_keys.json`` (a topic
    config's is always dynamic) where the table has the key."""
    return _table(*(replace(k, doc=table[k.name]["doc"],
                            dynamic=table[k.name].get("mode", "dynamic") != "read-only")
                    if k.name in table else k for k in keys.values()))


# A hand-maintained table: each key's type and update mode (read-only, per-broker,
# cluster-wide) as Kafka 4.3 defines them, with our own documentation of the key.
_TABLE = json.loads(resources.files(__package__).joinpath("config_keys.json").read_text())
BROKER_KEYS = _with_table(BROKER_KEYS, _TABLE["broker"])
TOPIC_KEYS = _with_table(TOPIC_KEYS, _TABLE["topic"])  # their dynamic flag: unused
#: Dynamic keys Kafka updates per broker only (refused for the cluster-wide default).
PER_BROKER_KEYS = frozenset(n for n, v in _TABLE["broker"].items() if v["mode"] == "per-broker")
#: Key and trust store keys: dynamic only as listener.name.<listener>.<key>.
LISTENER_ONLY_KEYS = frozenset(_TABLE["security"])
del _TABLE

# DynamicBrokerConfig.brokerConfigSynonyms: keys that stand in for one another.
_BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    if name == "log.flush.scheduler.interval.ms":
        return (name,)
    return next((g for g in _BROKER_SYNONYM_GROUPS if name in g), (name,))
