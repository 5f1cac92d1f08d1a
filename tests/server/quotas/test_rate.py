"""Kafka's sampled rate and throttle time (``Rate``, ``SampledStat``, ``QuotaUtils``),
with the numbers Kafka's own tests use."""

from __future__ import annotations

import pytest

from josefk.server.quotas.rate import RateConfig, SampledRate, throttle_time_ms

CONFIG = RateConfig(samples=11, window_ms=1000)


def test_a_first_burst_is_measured_over_at_least_samples_minus_one_windows() -> None:
    rate = SampledRate(CONFIG, 0)
    rate.record(1000, 0)
    assert rate.window_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)


def test_the_window_grows_with_elapsed_time_up_to_all_samples() -> None:
    rate = SampledRate(CONFIG, 0)
    for second in range(15):
        rate.record(500, second * 1000)
    # 11 samples retained, the oldest started 10 s ago: 10 full windows, 10.5 s span.
    assert rate.window_ms(14_500) == 10_500
    assert rate.measure(14_500) == pytest.approx(11 * 500 / 10.5)


def test_samples_idle_for_the_whole_span_are_reset() -> None:
    rate = SampledRate(CONFIG, 0)
    rate.record(10_000, 0)
    assert rate.total(10_999) == 10_000
    assert rate.total(11_000) == 0  # samples * window since its last event


def test_throttle_time_brings_the_rate_back_to_the_bound() -> None:
    # Kafka's ClientQuotaManagerTest: 500 bytes/s for 10 s (window 10 s), quota 500: fine;
    # then 2300 more bytes at once: O = 7300/10 = 730, X = (730 - 500)/500 * 10 s = 4.6 s.
    rate = SampledRate(CONFIG, 0)
    for second in range(10):
        rate.record(500, second * 1000)
        assert throttle_time_ms(rate, 500, second * 1000) == 0
    rate.record(2300, 9_000)
    assert throttle_time_ms(rate, 500, 9_000) == 4600
    # Waited out, with nothing more recorded, the rate is the bound.
    assert rate.total(9_000) / ((rate.window_ms(9_000) + 4600) / 1000) == pytest.approx(500)


def test_negative_values_take_a_recording_back() -> None:
    rate = SampledRate(CONFIG, 0)
    rate.record(800, 100)
    rate.record(-800, 200)
    assert rate.measure(200) == 0


def test_mean_is_the_average_recorded_value() -> None:
    mean = SampledRate(RateConfig(2, 30_000), 0)
    assert mean.mean(0) == 0
    mean.record(100, 10)
    mean.record(300, 20)
    assert mean.mean(20) == 200
