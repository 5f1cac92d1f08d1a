"""The metrics HTTP server against hostile clients: an oversized head, a slow client,
garbage. Each is answered with an error status where it can still read one, closed and
logged in one line; the broker keeps serving scrapes and Kafka clients throughout."""

from __future__ import annotations

import logging
import socket
import urllib.error
import urllib.request

import pytest
from kafka import KafkaProducer
from metrics_scrape import scrape, value

from josefk.server.metrics import http
from josefk.testing.inprocess import BrokerAddress
from josefk.testing.plugin import broker_fixture

http_broker = broker_fixture("module", config={"metrics.port": "0"}, name="http_broker")


def _address(broker: BrokerAddress) -> tuple[str, int]:
    return broker.broker.broker.metrics_address


def _exchange(address: tuple[str, int], payload: bytes, timeout: float = 10.0) -> bytes:
    """Send ``payload``, then read until the server closes."""
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(payload)
        return _read_to_end(sock)


def _read_to_end(sock: socket.socket) -> bytes:
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def _still_serving(broker: BrokerAddress) -> None:
    host, port = _address(broker)
    assert value(scrape(f"http://{host}:{port}"),
                 "kafka_controller_kafkacontroller_activecontrollercount") == 1
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("metrics-http", b"still here").get(timeout=20)
    producer.close()


@pytest.mark.timeout(60)
def test_oversized_head_is_refused(http_broker: BrokerAddress,
                                   caplog: pytest.LogCaptureFixture) -> None:
    http_broker.create_topic("metrics-http")
    caplog.set_level(logging.INFO, logger="josefk.server.metrics.http")
    head = b"GET /metrics HTTP/1.1\r\nX-Filler: " + b"a" * (2 * http.MAX_HEAD)
    try:
        answer = _exchange(_address(http_broker), head)
    except ConnectionResetError:  # closed with unread bytes: the kernel may reset
        answer = b""
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 ")
    assert any("request head over" in r.getMessage() for r in caplog.records)
    _still_serving(http_broker)


@pytest.mark.timeout(60)
def test_garbage_is_a_bad_request(http_broker: BrokerAddress,
                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="josefk.server.metrics.http")
    answer = _exchange(_address(http_broker), b"\x16\x03\x01\x02\x00\xff\xfe garbage\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert any("malformed request line" in r.getMessage() for r in caplog.records)
    assert "Traceback" not in caplog.text
    _still_serving(http_broker)


@pytest.mark.timeout(60)
def test_slow_client_is_cut_off_while_others_are_served(
        http_broker: BrokerAddress, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO, logger="josefk.server.metrics.http")
    monkeypatch.setattr(http, "READ_TIMEOUT_S", 1.0)  # the broker runs in this process
    with socket.create_connection(_address(http_broker), timeout=10) as slow:
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
        _still_serving(http_broker)  # meanwhile
        answer = _read_to_end(slow)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert any("not received within" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(30)
def test_unknown_path_and_method(http_broker: BrokerAddress) -> None:
    host, port = _address(http_broker)
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://{host}:{port}/no-such-page", timeout=10)
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as posted:
        urllib.request.urlopen(f"http://{host}:{port}/metrics", data=b"x=1", timeout=10)
    assert posted.value.code == 405


def test_where_metrics_are_served() -> None:
    """Off by default; metrics.port on the first listener's host; metrics.listener wins;
    a malformed listener is a config error naming the key."""
    from josefk.server.config.broker import BrokerConfig
    from josefk.server.config.values import ConfigError

    def endpoint(**props: str) -> tuple[str, int] | None:
        values = BrokerConfig.from_properties(
            {k.replace("_", "."): v for k, v in props.items()}).values
        return http.metrics_endpoint(values, "10.0.0.7")

    assert endpoint() is None
    assert endpoint(metrics_port="0") == ("10.0.0.7", 0)
    assert endpoint(metrics_port="9404", metrics_listener="http://[::1]:9500") == ("::1", 9500)
    assert endpoint(metrics_listener="http://:9404") == ("", 9404)
    with pytest.raises(ConfigError, match="metrics.listener"):
        endpoint(metrics_listener="ftp://host:21")
    with pytest.raises(ConfigError, match="metrics.port"):
        endpoint(metrics_port="70000")


@pytest.mark.timeout(30)
def test_console_is_mounted_beside_metrics(http_broker: BrokerAddress) -> None:
    host, port = _address(http_broker)
    with urllib.request.urlopen(f"http://{host}:{port}/", timeout=10) as page:
        assert page.status == 200
        assert page.headers["Content-Type"].startswith("text/html")
