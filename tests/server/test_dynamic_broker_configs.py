"""Dynamic broker configs on a running broker, through kafka-python's admin client:
stored in the entity config store, applied without a restart (log defaults, log
cleaner, connection quotas, listener TLS), kept across a restart; BROKER_LOGGER
log levels."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trustme
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import for_code
from kafka.protocol.admin import IncrementalAlterConfigsRequest

from josefk.server.broker import Broker
from josefk.server.config.broker import load_config

BROKER, LOGGER = ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER


@pytest.fixture
async def run_broker(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start brokers on one data dir (with extra settings); all stop at the end."""
    async with trio.open_nursery() as nursery:
        async def start(**settings: str) -> Broker:
            config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                        "log.dirs": str(tmp_path / "data"), **settings})
            return await nursery.start(Broker(config).serve)
        yield start
        nursery.cancel_scope.cancel()


class Refused(Exception):
    """A resource the broker refused to alter: kafka-python's ``[Error n] Name: message``."""


async def admin(broker: Broker, call: Callable[[KafkaAdminClient], Any]) -> Any:
    def run() -> Any:
        client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.bound_ports[0]}",
                                  request_timeout_ms=10_000)
        try:
            return call(client)
        finally:
            client.close()
    return await trio.to_thread.run_sync(run)


async def alter(broker: Broker, name: str, configs: dict[str, Any],
                rtype: ConfigResourceType = BROKER, validate_only: bool = False) -> Any:
    if name == "":
        return await alter_default(broker, configs, validate_only)
    results = await admin(broker, lambda c: c.alter_configs(
        [ConfigResource(rtype, name, configs=configs)], validate_only=validate_only,
        raise_on_unknown=False))
    result = results[rtype.name.lower()][name]
    if result != "OK":  # kafka-python answers the error as a string
        raise Refused(result)


async def alter_default(broker: Broker, configs: dict[str, Any], validate_only: bool
                        ) -> None:
    """IncrementalAlterConfigs of the cluster-wide default (kafka-python's admin client
    cannot name it); Kafka's errors raised as kafka-python raises them."""
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    ops = [resource.AlterableConfig(name=k, config_operation=1 if v == ("DELETE", None) else 0,
                                    value=None if v == ("DELETE", None) else v)
           for k, v in configs.items()]
    request = IncrementalAlterConfigsRequest[1](validate_only=validate_only, resources=[
        resource(resource_type=4, resource_name="", configs=ops)])
    request.with_header(correlation_id=1, client_id="test")
    stream = await trio.open_tcp_stream("127.0.0.1", broker.bound_ports[0])
    async with stream:
        await stream.send_all(request.encode(header=True, framed=True))
        frame = b""
        with trio.fail_after(10):
            while len(frame) < 4 or len(frame) < 4 + int.from_bytes(frame[:4], "big"):
                frame += await stream.receive_some(1 << 16)
    response = request.header.get_response_class().decode(frame[4:], version=1, header=True)
    [result] = response.responses
    if result.error_code:
        raise Refused(str(for_code(result.error_code)(result.error_message)))


async def describe(broker: Broker, name: str, rtype: ConfigResourceType = BROKER
                   ) -> dict[str, dict[str, Any]]:
    result = await admin(broker, lambda c: c.describe_configs(
        [ConfigResource(rtype, name)], include_synonyms=True, config_filter="all"))
    return result[rtype.name.lower()][name]


async def test_log_defaults_apply_to_open_logs_without_overrides(
        run_broker: Callable[..., Any]) -> None:
    broker = await run_broker()
    await broker.create_topic("inherits", 1)
    await broker.create_topic("overrides", 1, configs={"retention.ms": "1000"})
    inherits, overrides = (broker.partition(t, 0).log for t in ("inherits", "overrides"))
    await alter(broker, "", {"log.retention.ms": "5000", "message.max.bytes": "2000"})
    assert inherits.config.retention_ms == 5000 and overrides.config.retention_ms == 1000
    assert inherits.config.max_message_bytes == 2000
    await alter(broker, "0", {"log.retention.ms": "7000"})
    assert inherits.config.retention_ms == 7000
    assert broker.config.values["message.max.bytes"] == 2000
    entries = await describe(broker, "0")
    assert entries["log.retention.ms"]["config_source"] in ("DYNAMIC_BROKER_CONFIG", 2)
    await alter(broker, "0", {"log.retention.ms": ("DELETE", None)})
    assert inherits.config.retention_ms == 5000
    # A new topic starts under the dynamic defaults too.
    await broker.create_topic("later", 1)
    assert broker.partition("later", 0).log.config.max_message_bytes == 2000


async def test_refusals_validate_only_and_restart(run_broker: Callable[..., Any],
                                                   tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    broker = await run_broker()
    # Secrets never reach the log, stored or refused.
    await alter(broker, "0", {"listener.name.plaintext.ssl.keystore.password": "hunter2",
                              "custom.secret": "hunter3"})
    with pytest.raises(Refused, match="InvalidRequestError"):
        await alter(broker, "0", {"ssl.keystore.password": "hunter4"})
    assert "custom.secret" in caplog.text and "hunter" not in caplog.text
    await alter(broker, "0", {"listener.name.plaintext.ssl.keystore.password": ("DELETE", None),
                              "custom.secret": ("DELETE", None)})
    assert broker.entity_configs.get("brokers", "0") == {}
    with pytest.raises(Refused, match="InvalidRequestError"):
        await alter(broker, "0", {"log.retention.hours": "2"})
    with pytest.raises(Refused, match="InvalidRequestError"):
        await alter(broker, "0", {"num.io.threads": "100"})
    with pytest.raises(Refused, match="InvalidRequestError"):
        await alter(broker, "0", {"listeners": "PLAINTEXT://127.0.0.1:1"})
    with pytest.raises(Refused, match="InvalidConfigurationError"):
        await alter(broker, "0", {"log.retention.ms": ("APPEND", "1")})
    await alter(broker, "", {"log.cleaner.backoff.ms": "100"}, validate_only=True)
    assert broker.entity_configs.get("brokers", "<default>") == {}
    await alter(broker, "", {"log.cleaner.backoff.ms": "100",
                             "num.recovery.threads.per.data.dir": "3"})
    assert broker.entity_configs.get("brokers", "<default>") == {
        "log.cleaner.backoff.ms": "100", "num.recovery.threads.per.data.dir": "3"}
    assert broker.log_manager.threads_per_dir == 3
    # A broker started on the same data dir (the store's file) starts with it.
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                "log.dirs": str(tmp_path / "data")})
    again = Broker(config)
    assert again.config.values["log.cleaner.backoff.ms"] == 100
    assert again.log_cleaner.backoff_s == 0.1 and again.log_manager.threads_per_dir == 3


async def test_log_cleaner_restarts_its_workers(run_broker: Callable[..., Any]) -> None:
    broker = await run_broker()
    with trio.fail_after(10):
        while broker.log_cleaner.running != 1:
            await trio.sleep(0.01)
    await alter(broker, "0", {"log.cleaner.threads": "2",
                              "log.cleaner.io.max.bytes.per.second": "1000000"})
    with trio.fail_after(10):
        while broker.log_cleaner.running != 2:
            await trio.sleep(0.01)
    assert broker.log_cleaner.throttler.rate == 1_000_000


async def test_connection_limits_apply_to_new_connections(
        run_broker: Callable[..., Any]) -> None:
    broker = await run_broker()
    await alter(broker, "", {"max.connections.per.ip.overrides": "127.0.0.2:0"})
    stream = await trio.open_tcp_stream("127.0.0.1", broker.bound_ports[0],
                                        local_address="127.0.0.2")
    with trio.fail_after(10):
        assert await stream.receive_some(10) == b""  # closed at once
    await alter(broker, "", {"max.connections.per.ip.overrides": ("DELETE", None)})
    assert broker.sockets.quotas.per_ip_overrides == {}


async def test_listener_key_store_is_reloaded_for_new_connections(
        run_broker: Callable[..., Any], tmp_path: Path) -> None:
    ca = trustme.CA()
    first, second = (ca.issue_cert("localhost", "127.0.0.1") for _ in range(2))
    pems = []
    for i, cert in enumerate((first, second)):
        path = tmp_path / f"broker{i}.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(path))
        pems.append(path)
    broker = await run_broker(**{
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pems[0])})

    async def served_certificate() -> bytes:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        stream = await trio.open_ssl_over_tcp_stream(
            "127.0.0.1", broker.bound_ports[1], ssl_context=context)
        async with stream:
            await stream.do_handshake()
            return stream.getpeercert(binary_form=True)

    before = await served_certificate()
    await alter(broker, "0", {"listener.name.ssl.ssl.keystore.location": str(pems[1])})
    after = await served_certificate()
    assert before != after
    with pytest.raises(Refused, match="InvalidRequestError"):
        await alter(broker, "0", {"listener.name.ssl.ssl.keystore.location": "/no/such"})


async def test_broker_logger_levels(run_broker: Callable[..., Any]) -> None:
    broker = await run_broker()
    name = "josefk.server.reconfiguration"
    target = logging.getLogger(name)
    try:
        await alter(broker, "0", {name: "DEBUG"}, rtype=LOGGER)
        assert target.level == logging.DEBUG
        levels = await describe(broker, "0", rtype=LOGGER)
        assert levels[name]["value"] == "DEBUG" and "root" in levels
        with pytest.raises(Refused, match="InvalidConfigurationError"):
            await alter(broker, "0", {name: "LOUD"}, rtype=LOGGER)
        with pytest.raises(Refused, match="InvalidRequestError"):
            await alter(broker, "0", {"root": ("DELETE", None)}, rtype=LOGGER)
        await alter(broker, "0", {name: ("DELETE", None)}, rtype=LOGGER)
        assert target.level == logging.NOTSET
    finally:
        target.setLevel(logging.NOTSET)
