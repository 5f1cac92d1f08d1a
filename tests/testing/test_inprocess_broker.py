"""``InProcessBroker``, the engine of ``kafka_broker``: a stop is a clean shutdown, and a
broker that cannot serve says why."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kafka import KafkaProducer

from josefk.testing.inprocess import BrokerCrashed, InProcessBroker


def test_stop_is_a_clean_shutdown_and_the_data_survives(tmp_path: Path) -> None:
    broker = InProcessBroker(tmp_path)
    producer = KafkaProducer(bootstrap_servers=broker.start())
    producer.send("kept", b"x").get(timeout=20)
    producer.close()
    broker.stop()
    assert not broker.running
    assert (tmp_path / ".kafka_cleanshutdown").exists()

    again = InProcessBroker(tmp_path)  # the same data directory
    producer = KafkaProducer(bootstrap_servers=again.start())
    try:
        assert producer.send("kept", b"y").get(timeout=20).offset == 1
    finally:
        producer.close()
        again.stop()


def test_a_busy_port_is_reported_as_a_crash_with_its_cause(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        broker = InProcessBroker(tmp_path, {"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
        with pytest.raises(BrokerCrashed, match="in use"):
            broker.start()
    assert not broker.running
