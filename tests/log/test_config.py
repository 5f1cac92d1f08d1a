"""LogConfig: Kafka's topic config names, defaults and validation."""

from __future__ import annotations

import pytest

from josefk.log.config import InvalidConfigError, LogConfig

KAFKA_DEFAULTS = {
    "segment.bytes": 1073741824,
    "segment.ms": 604800000,
    "segment.index.bytes": 10485760,
    "index.interval.bytes": 4096,
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "message.timestamp.type": "CreateTime",
    "max.message.bytes": 1048588,
    "cleanup.policy": "delete",
    "delete.retention.ms": 86400000,
    "min.insync.replicas": 1,
    "flush.messages": 9223372036854775807,
    "flush.ms": 9223372036854775807,
    "file.delete.delay.ms": 60000,
}


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    names = LogConfig.kafka_names()
    for key, value in KAFKA_DEFAULTS.items():
        assert getattr(config, names[key]) == value, key
    assert not config.log_append_time
    assert config.delete and not config.compact


def test_kafka_named_overrides_from_strings() -> None:
    config = LogConfig().with_kafka_configs({
        "segment.bytes": "1048576", "retention.ms": " -1 ", "cleanup.policy": "compact,delete",
        "message.timestamp.type": "LogAppendTime", "index.interval.bytes": 0})
    assert (config.segment_bytes, config.retention_ms, config.index_interval_bytes) == (
        1048576, -1, 0)
    assert config.compact and config.delete and config.log_append_time
    assert LogConfig().segment_bytes == 1 << 30  # the original is unchanged


@pytest.mark.parametrize("configs", [
    {"segment.bytes": "13"}, {"segment.bytes": str(1 << 31)}, {"segment.ms": "0"},
    {"retention.ms": "-2"}, {"segment.bytes": "1GB"}, {"no.such.config": "1"},
    {"message.timestamp.type": "createtime"}, {"cleanup.policy": "delete,forever"},
    {"flush.messages": "0"}, {"min.insync.replicas": "0"}, {"index.interval.bytes": "-1"}])
def test_invalid_values_are_rejected(configs: dict[str, str]) -> None:
    with pytest.raises(InvalidConfigError):
        LogConfig().with_kafka_configs(configs)
