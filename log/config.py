"""Per-log configuration, with Kafka's topic-level names and defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")


class InvalidConfigError(ValueError):
    """A config value Kafka would reject with INVALID_CONFIG."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The topic configs that shape one partition's log (Kafka defaults)."""

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1: forever)
    retention_bytes: int = -1  # retention.bytes (-1: no limit)
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    max_message_bytes: int = 1048588  # max.message.bytes
    cleanup_policy: str = "delete"  # cleanup.policy
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = INT64_MAX  # max.compaction.lag.ms
    min_insync_replicas: int = 1  # min.insync.replicas
    message_timestamp_before_max_ms: int = INT64_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 3_600_000  # message.timestamp.after.max.ms (Kafka 4)
    flush_messages: int = INT64_MAX  # flush.messages
    flush_ms: int = INT64_MAX  # flush.ms
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms

    @property
    def flushes_by_policy(self) -> bool:
        """``flush.messages`` or ``flush.ms`` set: appends alone can make a flush due."""
        return self.flush_messages < INT64_MAX or self.flush_ms < INT64_MAX

    def __post_init__(self) -> None:
        _at_least("segment.bytes", self.segment_bytes, 14)
        _at_most("segment.bytes", self.segment_bytes, INT32_MAX)
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("segment.index.bytes", self.segment_index_bytes, 12)
        _at_most("segment.index.bytes", self.segment_index_bytes, INT32_MAX)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        _at_least("retention.bytes", self.retention_bytes, -1)
        _at_least("max.message.bytes", self.max_message_bytes, 0)
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)
        _at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1)
        # Written as Kafka's check is, so NaN passes (and then never triggers a clean).
        if self.min_cleanable_dirty_ratio < 0 or self.min_cleanable_dirty_ratio > 1:
            raise InvalidConfigError(f"min.cleanable.dirty.ratio must be in [0, 1], not "
                                     f"{self.min_cleanable_dirty_ratio}")
        _at_least("min.insync.replicas", self.min_insync_replicas, 1)
        _at_least("message.timestamp.before.max.ms", self.message_timestamp_before_max_ms, 0)
        _at_least("message.timestamp.after.max.ms", self.message_timestamp_after_max_ms, 0)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise InvalidConfigError(
                f"message.timestamp.type must be one of {TIMESTAMP_TYPES}, "
                f"not {self.message_timestamp_type!r}"
            )
        policies = [p.strip() for p in self.cleanup_policy.split(",")]
        if not policies or any(p not in CLEANUP_POLICIES for p in policies):
            raise InvalidConfigError(f"cleanup.policy must be delete and/or compact, not "
                                     f"{self.cleanup_policy!r}")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def kafka_names(cls) -> dict[str, str]:
        """Kafka config key → field name, e.g. ``segment.bytes`` → ``segment_bytes``."""
        return {f.name.replace("_", "."): f.name for f in fields(cls)}

    def with_kafka_configs(self, configs: dict[str, Any]) -> LogConfig:
        """A copy with Kafka-named overrides applied; unknown keys or bad values raise."""
        names = self.kafka_names()
        changes: dict[str, Any] = {}
        for key, value in configs.items():
            if key not in names:
                raise InvalidConfigError(f"unknown topic config {key!r}")
            field = names[key]
            default = getattr(self, field)
            changes[field] = _coerce(key, value, type(default))
        return replace(self, **changes)


def _coerce(key: str, value: Any, kind: type) -> Any:
    if kind is float:
        try:
            return float(str(value).strip())
        except ValueError:
            raise InvalidConfigError(f"{key} must be a number, not {value!r}") from None
    if kind is int:
        try:
            return int(str(value).strip())
        except ValueError:
            raise InvalidConfigError(f"{key} must be an integer, not {value!r}") from None
    return str(value).strip()


def _at_least(key: str, value: int, low: int) -> None:
    if value < low:
        raise InvalidConfigError(f"{key} must be at least {low}, not {value}")


def _at_most(key: str, value: int, high: int) -> None:
    if value > high:
        raise InvalidConfigError(f"{key} must be at most {high}, not {value}")
