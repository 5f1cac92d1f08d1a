"""This broker's cumulative bytes in and out, from the counters its metrics keep
(``josefk.server.metrics.recorder``), for the page's throughput chart: the page turns two
readings into a rate."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol


class TopicBytes(Protocol):
    bytes_in: int
    bytes_out: int


class TrafficCounters(Protocol):
    """The part of the metrics recorder read here: Kafka's BrokerTopicMetrics by topic."""

    topics: Mapping[str, TopicBytes]


Traffic = Callable[[Any], "dict[str, int] | None"]


def traffic(broker: Any) -> dict[str, int] | None:
    """``bytes_in``, ``bytes_out`` (all topics, since the broker started) and ``time_ms``
    of the reading, or None when the broker keeps no metrics."""
    counters: TrafficCounters | None = getattr(broker, "metrics", None)
    if counters is None:
        return None
    topics = list(counters.topics.values())
    return {"bytes_in": sum(t.bytes_in for t in topics),
            "bytes_out": sum(t.bytes_out for t in topics),
            "time_ms": int(time.time() * 1000)}
