"""Controller mutation quotas (``server.quotas.mutation``): Kafka's token bucket, strict
and permissive requests, refunds."""

from __future__ import annotations

import pytest

from josefk.server.quotas import mutation
from josefk.server.quotas.mutation import MutationQuota, ThrottlingQuotaExceeded, TokenBucket
from josefk.server.quotas.rate import RateConfig

CONFIG = RateConfig(samples=11, window_ms=1000)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    now = [5_000_000]
    monkeypatch.setattr(mutation, "_now_ms", lambda: now[0])
    return now


def test_a_new_bucket_is_full_and_refills_at_the_rate() -> None:
    bucket = TokenBucket()
    assert bucket.refill(2.0, 22.0, 1_000) == 22.0
    bucket.take(2.0, 22.0, 30.0, 1_000)
    assert bucket.tokens == -8.0
    assert bucket.refill(2.0, 22.0, 3_000) == -4.0
    assert bucket.refill(2.0, 22.0, 100_000) == 22.0  # never above the burst


def test_strict_refuses_once_empty_and_reports_the_wait(clock: list[int]) -> None:
    bucket = TokenBucket()
    quota = MutationQuota(bucket, 2.0, CONFIG, strict=True)
    quota.record(20)
    quota.record(10)  # the bucket had tokens left: allowed, now 8 short
    assert quota.throttle_ms == 0
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        quota.record(1)
    assert refused.value.throttle_ms == quota.throttle_ms == 4000
    clock[0] += 1500
    assert quota.throttle_ms == 2500  # less the time since
    quota.refund(30)
    quota.record(1)  # refunded: allowed again


def test_permissive_does_everything_and_throttles(clock: list[int]) -> None:
    quota = MutationQuota(TokenBucket(), 2.0, CONFIG, strict=False)
    quota.record(30)
    quota.record(4)
    assert quota.throttle_ms == 6000  # 12 short at 2 a second


def test_without_a_quota_nothing_is_counted(clock: list[int]) -> None:
    quota = MutationQuota(None, None, CONFIG, strict=True)
    for _ in range(100):
        quota.record(1000)
    assert quota.throttle_ms == 0
