"""Kafka's sampled rate (``Rate`` over a ``WindowedSum``) and the throttle time it implies.

``quota.window.num`` samples of ``quota.window.size.seconds`` each; a sample with no
event for the whole retained span is reset; the rate divides the sum by the elapsed
span, never less than ``samples - 1`` windows (so a client's first burst is measured
against a full window, not against the milliseconds since it started).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateConfig:
    """How a rate samples: ``samples`` windows of ``window_ms`` each."""

    samples: int = 11
    window_ms: int = 1000


class _Sample:
    __slots__ = ("value", "events", "start_ms", "last_event_ms")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.events = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledRate:
    """A per-second rate over the last ``samples`` windows (Kafka's ``Rate``)."""

    __slots__ = ("config", "_samples", "_current")

    def __init__(self, config: RateConfig, now_ms: int) -> None:
        self.config = config
        self._samples = [_Sample(now_ms)]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.config.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms

    def _advance(self, now_ms: int) -> _Sample:
        # One sample more than configured: the one overlapping the window's start.
        self._current = (self._current + 1) % (self.config.samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire = self.config.samples * self.config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)

    def window_ms(self, now_ms: int) -> int:
        """The span the rate divides by (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        elapsed = now_ms - min(s.start_ms for s in self._samples)
        full = elapsed // self.config.window_ms
        least = self.config.samples - 1
        if full < least:
            elapsed += (least - full) * self.config.window_ms
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def mean(self, now_ms: int) -> float:
        """The mean recorded value (Kafka's ``Avg``); 0 with nothing recorded."""
        self._purge(now_ms)
        events = sum(s.events for s in self._samples)
        return sum(s.value for s in self._samples) / events if events else 0.0

    def measure(self, now_ms: int) -> float:
        """The rate per second."""
        total = self.total(now_ms)
        return total / (self.window_ms(now_ms) / 1000)


def throttle_time_ms(rate: SampledRate, bound: float, now_ms: int) -> int:
    """How long the client must wait for its rate to fall back to ``bound`` with nothing
    more recorded: X = (O - T) / T * W (Kafka's ``QuotaUtils.throttleTime``); 0 within."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    # Java's Math.round: half up.
    return int((observed - bound) / bound * rate.window_ms(now_ms) + 0.5)
