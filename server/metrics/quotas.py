"""Quota metrics as Kafka's JMX exporter rules name them: per user and client id,
``kafka.server:type=Produce|Fetch|Request,user=,client-id=`` (byte-rate or request-time,
and throttle-time), and the replication quotas' byte rates
(``type=LeaderReplication|FollowerReplication``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from josefk.log.clock import now_ms


def quota_metrics(client_quotas: Any, replication_quotas: Any) -> Iterator[Metric]:
    """The families of the broker's client quota managers and replication quotas."""
    now = now_ms()
    if client_quotas is not None:
        for manager in (client_quotas.produce, client_quotas.fetch, client_quotas.request):
            kind = manager.type
            prefix = f"kafka_server_{kind.jmx_type.lower()}_"
            rate = GaugeMetricFamily(prefix + kind.metric.replace("-", "_"),
                                     f"Tracking {kind.metric} per user/client-id.",
                                     labels=["user", "client_id"])
            throttle = GaugeMetricFamily(prefix + "throttle_time", "Tracking average "
                                         "throttle-time per user/client-id (ms).",
                                         labels=["user", "client_id"])
            for tags, value, mean_throttle in manager.sensors(now):
                rate.add_metric([tags.user, tags.client], value)
                throttle.add_metric([tags.user, tags.client], mean_throttle)
            yield rate
            yield throttle
    if replication_quotas is not None:
        for quota, name in ((replication_quotas.leader, "leaderreplication"),
                            (replication_quotas.follower, "followerreplication")):
            yield GaugeMetricFamily(f"kafka_server_{name}_byte_rate", "Throttled "
                                    "replication bytes per second.",
                                    value=quota.rate.measure(now))
