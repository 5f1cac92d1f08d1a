"""A producer over its quota on one broker: throttled in its answers (kafka-python's
throttle-time metric), and measured in /metrics under Kafka's JMX names."""

from __future__ import annotations

import io
import socket
import struct
import urllib.request
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest
from prometheus_client.parser import text_string_to_metric_families

from josefk.testing.inprocess import BrokerAddress
from josefk.testing.plugin import broker_fixture

quota_broker = broker_fixture("module", config={"metrics.port": "0"}, name="quota_broker")
CLIENT = "quota-metrics"


def _sample(url: str, name: str, **labels: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return next((s.value for family in text_string_to_metric_families(text)
                 for s in family.samples if s.name == name and s.labels == labels), 0.0)


def _request(bootstrap: str, request: Any, version: int) -> Any:
    """One request on its own connection, with kafka-python's classes."""
    host, port = bootstrap.rsplit(":", 1)
    request.with_header(correlation_id=1, client_id="quota-test")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request.encode(version=version, header=True, framed=True))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = sock.recv(size, socket.MSG_WAITALL)
    response_class = request.header.get_response_class()
    return response_class.decode(io.BytesIO(frame), version=version, header=True)


def _set_quota(bootstrap: str, key: str, rate: float) -> None:
    E = AlterClientQuotasRequest.EntryData
    response = _request(bootstrap, AlterClientQuotasRequest(validate_only=False, entries=[E(
        entity=[E.EntityData(entity_type="client-id", entity_name=CLIENT)],
        ops=[E.OpData(key=key, value=rate, remove=False)])]), 1)
    assert response.entries[0].error_code == 0


@pytest.mark.timeout(60)
def test_a_throttled_producer_shows_in_metrics(quota_broker: BrokerAddress) -> None:
    host, port = quota_broker.broker.broker.metrics_address
    url = f"http://{host}:{port}"
    quota_broker.create_topic("quota-metrics")
    _set_quota(quota_broker.bootstrap, "producer_byte_rate", 1024)
    producer = KafkaProducer(bootstrap_servers=quota_broker.bootstrap, client_id=CLIENT,
                             batch_size=64 * 1024, linger_ms=20)
    for _ in range(4):
        producer.send("quota-metrics", b"m" * 10_000)
    producer.flush(timeout=20)
    throttled = producer.metrics()["producer-metrics"]["throttle-time-max"]
    producer.close(timeout=0)
    assert throttled > 0
    labels = {"user": "", "client_id": CLIENT}
    assert _sample(url, "kafka_server_produce_byte_rate", **labels) > 0
    assert _sample(url, "kafka_server_produce_throttle_time", **labels) > 0
