"""One quota type's sensors: Kafka's ``ClientQuotaManager`` (and its request-time
subclass), without the metrics registry around it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from josefk.server.quotas.entities import MetricTags, QuotaEntity, metric_tags, quota_limit
from josefk.server.quotas.rate import RateConfig, SampledRate, throttle_time_ms

# Sensors of a user/client quiet this long are dropped (Kafka's
# InactiveSensorExpirationTimeSeconds).
SENSOR_EXPIRY_MS = 3600 * 1000
# Kafka's throttle-time sensor is an Avg over the default MetricConfig: 2 × 30 s.
THROTTLE_AVG = RateConfig(samples=2, window_ms=30_000)


class QuotaType(Enum):
    """The client quota types and the config key each is set with."""

    PRODUCE = ("Produce", "producer_byte_rate", "byte-rate", True)
    FETCH = ("Fetch", "consumer_byte_rate", "byte-rate", True)
    REQUEST = ("Request", "request_percentage", "request-time", False)
    CONTROLLER_MUTATION = ("ControllerMutation", "controller_mutation_rate", "mutation-rate",
                           False)

    def __init__(self, jmx_type: str, key: str, metric: str, integral: bool) -> None:
        self.jmx_type = jmx_type
        self.key = key
        self.metric = metric
        self.integral = integral  # a LONG config in Kafka (else a DOUBLE)


@dataclass(slots=True)
class Sensor:
    """The usage of the clients measured under one set of metric tags."""

    rate: SampledRate
    throttle: SampledRate  # of throttle times, for their mean
    last_ms: int


class ClientQuotaManager:
    """Measures each (user, client id) against its quota, and says how long to throttle.

    ``max_throttle_ms`` bounds the throttle time (the request quota's is one window);
    byte-rate quotas are unbounded, as in Kafka.
    """

    def __init__(self, quota_type: QuotaType, config: RateConfig,
                 max_throttle_ms: int | None = None) -> None:
        self.type = quota_type
        self.config = config
        self.max_throttle_ms = max_throttle_ms
        self.quotas: dict[QuotaEntity, float] = {}
        self._sensors: dict[MetricTags, Sensor] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.quotas)

    def update(self, entity: QuotaEntity, bound: float | None) -> None:
        """Set (or, with None, remove) the quota of ``entity``."""
        if bound is None:
            self.quotas.pop(entity, None)
        else:
            self.quotas[entity] = bound

    def tags(self, user: str, client: str) -> MetricTags:
        return metric_tags(user, client, self.quotas.__contains__)

    def bound(self, user: str, client: str) -> float | None:
        return quota_limit(self.tags(user, client), self.quotas)

    def record(self, user: str, client: str, value: float, now_ms: int) -> int:
        """Record ``value`` for the client; the throttle time in ms it earned (0: none)."""
        tags = self.tags(user, client)
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(value, now_ms)
        bound = quota_limit(tags, self.quotas)
        if bound is None:
            return 0
        throttle = throttle_time_ms(sensor.rate, bound, now_ms)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return throttle

    def throttled(self, user: str, client: str, throttle_ms: int, now_ms: int) -> None:
        """Note a throttle for the throttle-time metric."""
        self._sensor(self.tags(user, client), now_ms).throttle.record(throttle_ms, now_ms)

    def max_value_in_window(self, user: str, client: str) -> float:
        """The most one request may use without being throttled for sure (Kafka bounds a
        consumer's fetch size by it); infinite without a quota."""
        bound = self.bound(user, client) if self.enabled else None
        if bound is None:
            return float("inf")
        return bound * (self.config.samples - 1) * self.config.window_ms / 1000

    def _sensor(self, tags: MetricTags, now_ms: int) -> Sensor:
        sensor = self._sensors.get(tags)
        if sensor is None:
            self._expire(now_ms)
            sensor = self._sensors[tags] = Sensor(SampledRate(self.config, now_ms),
                                                  SampledRate(THROTTLE_AVG, now_ms), now_ms)
        sensor.last_ms = now_ms
        return sensor

    def _expire(self, now_ms: int) -> None:
        idle = [t for t, s in self._sensors.items() if now_ms - s.last_ms > SENSOR_EXPIRY_MS]
        for tags in idle:
            del self._sensors[tags]

    def sensors(self, now_ms: int) -> Iterator[tuple[MetricTags, float, float]]:
        """(tags, rate per second, mean throttle ms) of every live sensor."""
        for tags, sensor in list(self._sensors.items()):
            yield tags, sensor.rate.measure(now_ms), sensor.throttle.mean(now_ms)
