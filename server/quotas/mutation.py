"""Controller mutation quotas (KIP-599): ``controller_mutation_rate`` partitions created
or deleted per second, per user and client id, as Kafka's
``ControllerMutationQuotaManager`` counts them: a token bucket holding up to
``quota.window.num`` × ``quota.window.size.seconds`` seconds of the rate, refilled at the
rate, drawn by the partitions each topic creation, deletion or partition increase adds
or removes.

CreateTopics from v6, CreatePartitions from v3 and DeleteTopics from v5 are strict: once
the bucket is empty the next topic is refused with THROTTLING_QUOTA_EXCEEDED (what was
done before it stands). Older versions are permissive: everything is done and the client
is only throttled. Either way the answer carries the throttle time and the connection is
muted for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from josefk.server.quotas.entities import MetricTags
from josefk.server.quotas.rate import RateConfig

#: Errors.THROTTLING_QUOTA_EXCEEDED's message.
THROTTLED_MESSAGE = "The throttling quota has been exceeded."


class ThrottlingQuotaExceeded(Exception):
    """A strict quota's bucket was already empty (THROTTLING_QUOTA_EXCEEDED)."""

    def __init__(self, throttle_ms: int) -> None:
        super().__init__(THROTTLED_MESSAGE)
        self.throttle_ms = throttle_ms


@dataclass(slots=True)
class TokenBucket:
    """Kafka's ``TokenBucket`` stat: empty at first but refilled from time zero, so full."""

    tokens: float = 0.0
    last_ms: int = -(1 << 62)

    def refill(self, rate: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + rate * (now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return self.tokens

    def take(self, rate: float, burst: float, permits: float, now_ms: int) -> None:
        self.refill(rate, burst, now_ms)
        self.tokens = min(burst, self.tokens - permits)


class MutationQuota:
    """One request's view of its client's bucket (Kafka's Strict/Permissive
    ControllerMutationQuota); ``rate`` None: no quota, nothing counted."""

    def __init__(self, bucket: TokenBucket | None, rate: float | None, config: RateConfig,
                 strict: bool) -> None:
        self._bucket = bucket
        self._rate = rate
        self._burst = 0.0 if rate is None else rate * config.samples * config.window_ms / 1000
        self._strict = strict
        self._throttle_ms = 0
        self._throttled_at = 0

    def record(self, permits: float) -> None:
        """Draw ``permits`` partitions; ThrottlingQuotaExceeded (nothing drawn) when
        strict and the bucket was already empty."""
        if self._bucket is None or self._rate is None:
            return
        now = _now_ms()
        tokens = self._bucket.refill(self._rate, self._burst, now)
        if tokens < 0 and self._strict:
            self._note(tokens, now)
            raise ThrottlingQuotaExceeded(self._throttle_ms)
        self._bucket.take(self._rate, self._burst, permits, now)
        if not self._strict and self._bucket.tokens < 0:
            self._note(self._bucket.tokens, now)

    def refund(self, permits: float) -> None:
        """Give back what a mutation that failed after all had drawn."""
        if self._bucket is not None and self._rate is not None:
            self._bucket.take(self._rate, self._burst, -permits, _now_ms())

    def _note(self, tokens: float, now_ms: int) -> None:
        self._throttle_ms = round(-tokens / self._rate * 1000) if self._rate else 0
        self._throttled_at = now_ms

    @property
    def throttle_ms(self) -> int:
        """The throttle time earned, less the time since it was (Kafka's
        ``AbstractControllerMutationQuota.throttleTime``)."""
        if not self._throttle_ms:
            return 0
        return max(0, self._throttle_ms - (_now_ms() - self._throttled_at))


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class MutationBuckets:
    """The token buckets of the clients, by the metric tags their quota is measured under."""

    def __init__(self) -> None:
        self._buckets: dict[MetricTags, TokenBucket] = {}

    def bucket(self, tags: MetricTags) -> TokenBucket:
        found = self._buckets.get(tags)
        if found is None:
            if len(self._buckets) >= 10_000:
                self._buckets.clear()  # a bound; a forgotten client starts with a full bucket
            found = self._buckets[tags] = TokenBucket()
        return found
