"""``/metrics`` of one broker while kafka-python produces and consumes: the byte and
message counters and the request histograms move as the traffic does."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from metrics_scrape import Samples, scrape, total, value

from josefk.testing.inprocess import BrokerAddress
from josefk.testing.plugin import broker_fixture
from josefk.testing.polling import wait_until

metrics_broker = broker_fixture("module", config={"metrics.port": "0"}, name="metrics_broker")

RECORDS = 300
PAYLOAD = 200


def metrics_url(address: BrokerAddress) -> str:
    host, port = address.broker.broker.metrics_address
    return f"http://{host}:{port}"


def _count(samples: Samples, phase: str, request: str) -> float:
    return value(samples, f"kafka_network_requestmetrics_{phase}_count", request=request)


def _sum(samples: Samples, phase: str, request: str) -> float:
    return value(samples, f"kafka_network_requestmetrics_{phase}_sum", request=request)


@pytest.mark.timeout(120)
def test_counters_and_histograms_follow_the_traffic(metrics_broker: BrokerAddress) -> None:
    url = metrics_url(metrics_broker)
    topic = "metrics-traffic"
    metrics_broker.create_topic(topic, partitions=1)
    before = scrape(url)
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 0

    producer = KafkaProducer(bootstrap_servers=metrics_broker.bootstrap, acks=1, linger_ms=5)
    for i in range(RECORDS):
        producer.send(topic, value=bytes([i % 256]) * PAYLOAD)
    producer.flush()
    producer.close()
    produced = scrape(url)

    # Every record counted once; the bytes are the batches appended, i.e. the log.
    assert value(produced, "kafka_server_brokertopicmetrics_messagesin_total",
                 topic=topic) == RECORDS
    log_size = value(produced, "kafka_log_log_size", topic=topic, partition="0")
    bytes_in = value(produced, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in == log_size
    assert bytes_in > RECORDS * PAYLOAD  # payloads plus record and batch overhead
    produce_requests = (total(produced, "kafka_network_requestmetrics_requests_total",
                              request="Produce")
                        - total(before, "kafka_network_requestmetrics_requests_total",
                                request="Produce"))
    assert produce_requests >= 1
    for phase in ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems",
                  "totaltimems"):
        # Each request handled and answered lands once in each histogram.
        assert _count(produced, phase, "Produce") - _count(before, phase, "Produce") \
            == produce_requests, phase
    assert _sum(produced, "localtimems", "Produce") > _sum(before, "localtimems", "Produce")
    assert value(produced, "kafka_network_requestmetrics_totaltimems_bucket",
                 request="Produce", le="+Inf") == _count(produced, "totaltimems", "Produce")

    consumer = KafkaConsumer(bootstrap_servers=metrics_broker.bootstrap,
                             fetch_max_wait_ms=300, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    received = 0
    for _ in range(60):
        received += sum(len(batch) for batch in consumer.poll(500).values())
        if received >= RECORDS:
            break
    assert received == RECORDS
    consumer.poll(1000)  # caught up: a long poll that waits in the purgatory
    consumer.close()
    consumed = scrape(url)

    bytes_out = value(consumed, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
    assert bytes_out >= log_size  # the whole log went out at least once
    assert _count(consumed, "totaltimems", "FetchConsumer") > _count(produced, "totaltimems",
                                                                     "FetchConsumer")
    # The long poll's wait is remote time, not local time.
    remote = _sum(consumed, "remotetimems", "FetchConsumer") - _sum(produced, "remotetimems",
                                                                    "FetchConsumer")
    assert remote >= 200
    local = _sum(consumed, "localtimems", "FetchConsumer") - _sum(produced, "localtimems",
                                                                  "FetchConsumer")
    assert local < remote
    assert total(consumed, "kafka_server_socket_server_metrics_connection_creation_total") \
        > total(before, "kafka_server_socket_server_metrics_connection_creation_total")
    # The event loop's idle share, sampled over its first second.
    idle_name = "kafka_network_socketserver_networkprocessoravgidlepercent"
    sampled = wait_until(lambda: (idle_name, frozenset()) in (got := scrape(url)) and got,
                         10, "the idle share's first sample")
    assert 0 < value(sampled, idle_name) <= 1


@pytest.mark.timeout(60)
def test_errors_are_counted_by_request_and_error(metrics_broker: BrokerAddress) -> None:
    """A JoinGroup with a session timeout below group.min.session.timeout.ms (6 s) is
    answered INVALID_SESSION_TIMEOUT."""
    url = metrics_url(metrics_broker)
    topic = "metrics-errors"
    metrics_broker.create_topic(topic, partitions=1)
    name = "kafka_network_requestmetrics_errors_total"
    labels = {"request": "JoinGroup", "error": "INVALID_SESSION_TIMEOUT"}
    before = value(scrape(url), name, **labels)
    consumer = KafkaConsumer(topic, bootstrap_servers=metrics_broker.bootstrap,
                             group_id="metrics-errors", session_timeout_ms=1000,
                             heartbeat_interval_ms=300)
    with pytest.raises(KafkaError):
        for _ in range(20):
            consumer.poll(250)
    consumer.close()
    assert value(scrape(url), name, **labels) > before
