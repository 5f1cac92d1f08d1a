"""The soak's assessment of its samples: slopes per broker process after the warm-up, and
stalls counted only outside the faults aimed at that broker."""

from __future__ import annotations

from typing import Any

import pytest

from .soak_health import MB, assess, slope_per_hour


def _sample(t: float, pid: int | None, rss_mb: float, fds: int, rtt: float | None,
            error: str | None = None, broker: int = 1) -> dict[str, Any]:
    return {"t": t, "broker": broker, "pid": pid, "rss": int(rss_mb * MB) if pid else 0,
            "fds": fds, "rtt": rtt, "error": error, "late": 0.001}


def test_a_slope_is_per_hour() -> None:
    assert slope_per_hour([(0.0, 10.0), (1800.0, 15.0), (3600.0, 20.0)]) == pytest.approx(10.0)
    assert slope_per_hour([(5.0, 1.0), (5.0, 2.0)]) == 0.0


def test_slopes_fit_the_longest_process_after_its_warm_up() -> None:
    # Process 10 grows fast while warming up (0-100 s), then 1 MB and 2 fds an hour; it is
    # killed at 400 s and process 11 runs for a short while, growing fast.
    samples = [_sample(t, 10, 50 + (t / 10 if t < 100 else 10 + t / 3600), 100 + int(t >= 100)
                       * 2 * t // 3600, 0.002) for t in range(0, 400, 5)]
    samples += [_sample(400.0, None, 0, 0, None, "ConnectionRefusedError")]
    samples += [_sample(t, 11, 40 + t, 90, 0.002) for t in range(405, 500, 5)]
    [health] = assess(samples, [], warmup=100.0)
    assert health.processes == 2
    assert health.rss_slope == pytest.approx(1.0, abs=0.01)
    assert health.fds == (100, 100) and health.fitted_s == pytest.approx(295.0)


def test_the_anonymous_part_gets_a_slope_of_its_own() -> None:
    """RSS grows 4 MB an hour, of which the heap (anonymous pages) 1 MB; samples of an
    older sampler, without ``anon``, get no anonymous slope."""
    samples = [{**_sample(t, 10, 50 + 4 * t / 3600, 100, 0.002),
                "anon": int((30 + t / 3600) * MB)} for t in range(0, 600, 5)]
    [health] = assess(samples, [], warmup=0.0)
    assert health.rss_slope == pytest.approx(4.0, abs=0.01)
    assert health.anon_slope == pytest.approx(1.0, abs=0.01)
    assert "anonymous +1.0 MB/h" in health.line()
    for s in samples:
        del s["anon"]
    [health] = assess(samples, [], warmup=0.0)
    assert health.anon_slope is None and "anonymous" not in health.line()


def test_stalls_inside_the_brokers_own_faults_do_not_count() -> None:
    events = [{"t": 10.0, "type": "nemesis", "f": "start", "fault": "pause", "targets": [1]},
              {"t": 20.0, "type": "nemesis", "f": "stop", "fault": "pause", "targets": [1]},
              {"t": 40.0, "type": "nemesis", "f": "start", "fault": "pause", "targets": [2]},
              {"t": 50.0, "type": "nemesis", "f": "stop", "fault": "pause", "targets": [2]}]
    samples = [_sample(5.0, 10, 50, 100, 0.01), _sample(15.0, 10, 50, 100, None, "TimeoutError"),
               _sample(25.0, 10, 50, 100, 0.9),  # within the grace after its own pause
               _sample(45.0, 10, 50, 100, 0.4),  # another broker's pause: counts
               _sample(60.0, 10, 50, 100, None, "ConnectionResetError")]
    [health] = assess(samples, events, warmup=0.0)
    assert (health.worst_stall, health.worst_stall_at) == (0.4, 45.0)
    assert health.unanswered == 1 and health.rss_slope is None  # too few samples to fit
    timed_out = assess([*samples, _sample(70.0, 10, 50, 100, None, "TimeoutError")], events,
                       warmup=0.0)[0]
    assert timed_out.worst_stall == 5.0 and timed_out.worst_stall_at == 70.0
