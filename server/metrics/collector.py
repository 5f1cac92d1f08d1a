"""The metric families of one broker, built at scrape time from its state and counters.

Names follow Kafka's JMX metrics as the usual JMX-exporter rules translate them
(``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t`` becomes
``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``), so dashboards written
for Kafka read them. Consumer lag is named as kafka_exporter names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from josefk.server.metrics.loop import IdleInstrument
from josefk.server.metrics.quotas import quota_metrics
from josefk.server.metrics.recorder import PHASES, Recorder

TP = tuple[str, int]


class MetricsHost(Protocol):
    """What the collector reads of the broker (all of it plain state, no I/O)."""

    node_id: int
    peer_security: Any  # how to reach the other brokers (lag of partitions led there)
    partitions: Any  # (topic, index) -> Partition
    cluster: Any  # ClusterNode | None
    connection_listeners: Any  # Connection -> listener name
    group_coordinator: Any
    txn_service: Any
    log_cleaner: Any
    log_manager: Any  # LogManager (its offline log directories)
    client_quotas: Any  # ClientQuotas
    replication_quotas: Any  # ReplicationQuotas


class Lag:
    """One committed offset of a group against the partition's high watermark (None:
    the watermark could not be learned)."""

    __slots__ = ("group", "topic", "partition", "committed", "high_watermark")

    def __init__(self, group: str, topic: str, partition: int, committed: int,
                 high_watermark: int | None) -> None:
        self.group, self.topic, self.partition = group, topic, partition
        self.committed, self.high_watermark = committed, high_watermark


class BrokerCollector:
    """A prometheus_client collector of one broker; `lags` is set by the scrape
    handler just before it renders (gathering them may ask other brokers)."""

    def __init__(self, host: MetricsHost, recorder: Recorder, idle: IdleInstrument) -> None:
        self.host = host
        self.recorder = recorder
        self.idle = idle
        self.lags: list[Lag] = []

    def describe(self) -> list[Metric]:
        return []  # unchecked registration: families are only known at scrape

    def collect(self) -> Iterator[Metric]:
        self.recorder.fold()
        yield from self._traffic()
        yield from self._requests()
        yield from self._network()
        yield from self._replicas()
        yield from self._controller()
        yield from self._logs()
        yield from self._coordinators()
        yield from self._cleaner()
        yield from self._lag()
        yield from quota_metrics(self.host.client_quotas, self.host.replication_quotas)

    # --- the request path -------------------------------------------------------------

    def _traffic(self) -> Iterable[Metric]:
        prefix = "kafka_server_brokertopicmetrics_"
        bytes_in = CounterMetricFamily(prefix + "bytesin", "Bytes appended by producers, "
                                       "per topic (BytesInPerSec).", labels=["topic"])
        bytes_out = CounterMetricFamily(prefix + "bytesout", "Record bytes sent to consumers, "
                                        "per topic (BytesOutPerSec).", labels=["topic"])
        messages = CounterMetricFamily(prefix + "messagesin", "Records appended by producers, "
                                       "per topic (MessagesInPerSec).", labels=["topic"])
        for topic, t in list(self.recorder.topics.items()):
            bytes_in.add_metric([topic], t.bytes_in)
            bytes_out.add_metric([topic], t.bytes_out)
            messages.add_metric([topic], t.messages_in)
        replication = CounterMetricFamily(prefix + "replicationbytesout", "Record bytes sent "
                                          "to followers (ReplicationBytesOutPerSec).",
                                          value=self.recorder.replication_bytes_out)
        return bytes_in, bytes_out, messages, replication

    def _requests(self) -> Iterable[Metric]:
        prefix = "kafka_network_requestmetrics_"
        requests = CounterMetricFamily(prefix + "requests", "Requests handled, per API and "
                                       "version (RequestsPerSec).", labels=["request", "version"])
        for (name, version), count in list(self.recorder.requests.items()):
            requests.add_metric([name, str(version)], count)
        errors = CounterMetricFamily(prefix + "errors", "Error codes answered, per API "
                                     "(ErrorsPerSec).", labels=["request", "error"])
        for (name, error), count in list(self.recorder.errors.items()):
            errors.add_metric([name, error], count)
        yield requests
        yield errors
        docs = ("Time from reading a request to its handler starting",
                "Time the handler worked itself", "Time the handler waited in the "
                "purgatory (for replicas, or a long poll)", "Time from the answer being "
                "ready to its last byte written", "Total time of a request")
        times = list(self.recorder.times.items())
        for i, (phase, doc) in enumerate(zip(PHASES, docs, strict=True)):
            family = HistogramMetricFamily(prefix + phase, doc + ", in ms.", labels=["request"])
            for name, t in times:
                h = t.phases[i]
                family.add_metric([name], h.cumulative(), h.sum_ms)
            yield family

    def _network(self) -> Iterable[Metric]:
        idle = GaugeMetricFamily(
            "kafka_network_socketserver_networkprocessoravgidlepercent",
            "Share of time the event loop waited for I/O (1: idle), sampled over 1 s "
            "every 10 s.")
        if self.idle.ratio is not None:
            idle.add_metric([], self.idle.ratio)
        active = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                   "Open client connections, per listener.",
                                   labels=["listener"])
        counts: dict[str, int] = {}
        for listener in list(self.host.connection_listeners.values()):
            counts[listener] = counts.get(listener, 0) + 1
        created = CounterMetricFamily("kafka_server_socket_server_metrics_connection_creation",
                                      "Connections accepted, per listener.",
                                      labels=["listener"])
        for listener, n in list(self.recorder.connections_created.items()):
            created.add_metric([listener], n)
            counts.setdefault(listener, 0)
        for listener, n in counts.items():
            active.add_metric([listener], n)
        return idle, active, created

    # --- broker state -----------------------------------------------------------------

    def _replicas(self) -> Iterable[Metric]:
        partitions = list(self.host.partitions.values())
        led = [p for p in partitions if p.is_leader]
        under = sum(1 for p in led if len(p.isr) < len(p.replicas))
        under_min = sum(1 for p in led if len(p.isr) < p.log.config.min_insync_replicas)
        isr = getattr(self.host.cluster, "isr_updates", None)
        prefix = "kafka_server_replicamanager_"
        return (
            GaugeMetricFamily(prefix + "underreplicatedpartitions", "Partitions led here with "
                              "fewer in-sync replicas than replicas.", value=under),
            GaugeMetricFamily(prefix + "underminisrpartitioncount", "Partitions led here with "
                              "fewer in-sync replicas than min.insync.replicas.",
                              value=under_min),
            GaugeMetricFamily(prefix + "partitioncount", "Replicas hosted here.",
                              value=len(partitions)),
            GaugeMetricFamily(prefix + "leadercount", "Partitions led here.", value=len(led)),
            CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks this broker made as leader.",
                                value=getattr(isr, "shrinks", 0)),
            CounterMetricFamily(prefix + "isrexpands", "ISR expansions this broker made as "
                                "leader.", value=getattr(isr, "expands", 0)),
        )

    def _controller(self) -> Iterable[Metric]:
        cluster = self.host.cluster
        if cluster is None:  # a single broker is its own controller, never offline
            active, offline = 1, 0
        else:
            active = int(cluster.controller is not None)
            cache = cluster.cache
            offline = sum(1 for info in list(cache.partitions.values())
                          if info.leader not in cache.brokers) if active else 0
        prefix = "kafka_controller_kafkacontroller_"
        return (GaugeMetricFamily(prefix + "activecontrollercount", "1 on the active "
                                  "controller.", value=active),
                GaugeMetricFamily(prefix + "offlinepartitionscount", "Partitions without a "
                                  "live leader (on the active controller).", value=offline))

    def _logs(self) -> Iterable[Metric]:
        flushes = self.recorder.flushes
        flush = HistogramMetricFamily("kafka_log_logflushstats_logflushrateandtimems",
                                      "Log flushes (fsync) and their time, in ms.")
        flush.add_metric([], flushes.cumulative(), flushes.sum_ms)
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log here.",
                                 labels=["topic", "partition"])
        for (topic, index), p in list(self.host.partitions.items()):
            size.add_metric([topic, str(index)], p.log.size_in_bytes())
        offline = GaugeMetricFamily(
            "kafka_log_logmanager_offlinelogdirectorycount", "Log directories offline after "
            "an I/O error (OfflineLogDirectoryCount).",
            value=len(self.host.log_manager.failures.offline_dirs))
        return flush, size, offline

    def _coordinators(self) -> Iterable[Metric]:
        for kind, times in (("group", self.host.group_coordinator.load_times_ms),
                            ("transaction", self.host.txn_service.load_times_ms)):
            prefix = f"kafka_server_{kind}_coordinator_metrics_partition_load_time_"
            values = list(times.values())
            yield GaugeMetricFamily(prefix + "max", f"Longest load of a {kind} coordinator "
                                    "partition led here, in ms.",
                                    value=max(values, default=0.0))
            yield GaugeMetricFamily(prefix + "avg", f"Average load of a {kind} coordinator "
                                    "partition led here, in ms.",
                                    value=sum(values) / len(values) if values else 0.0)

    def _cleaner(self) -> Iterable[Metric]:
        cleaner = self.host.log_cleaner
        stats = cleaner.last_stats
        prefix = "kafka_log_logcleaner_"
        read = CounterMetricFamily(prefix + "read_bytes", "Log bytes the cleaner read (josefk; "
                                   "Kafka logs it per pass).", value=cleaner.bytes_read)
        written = CounterMetricFamily(prefix + "written_bytes", "Log bytes the cleaner wrote "
                                      "(josefk).", value=cleaner.bytes_written)
        recopy = max_time = utilization = 0.0
        if stats is not None:
            recopy = 100 * stats.bytes_written / max(stats.bytes_read, 1)
            max_time = max(stats.end - stats.start, 0.0)
            utilization = 100 * stats.buffer_utilization
        return (read, written,
                GaugeMetricFamily(prefix + "cleaner_recopy_percent", "Share of the bytes read "
                                  "that the last pass wrote back.", value=recopy),
                GaugeMetricFamily(prefix + "max_clean_time_secs", "Duration of the last pass.",
                                  value=max_time),
                GaugeMetricFamily(prefix + "max_buffer_utilization_percent", "Share of the "
                                  "offset map the last pass used.", value=utilization),
                GaugeMetricFamily("kafka_log_logcleanermanager_max_dirty_percent", "Highest "
                                  "dirty ratio of a compacted log here, in percent.",
                                  value=100 * cleaner.max_dirty_ratio()))

    def _lag(self) -> Iterable[Metric]:
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "A group's committed "
                                    "offset (groups coordinated here).", labels=labels)
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus committed "
                                "offset (groups coordinated here).", labels=labels)
        for x in self.lags:
            key = [x.group, x.topic, str(x.partition)]
            current.add_metric(key, x.committed)
            if x.high_watermark is not None:
                lag.add_metric(key, x.high_watermark - x.committed)
        return current, lag
