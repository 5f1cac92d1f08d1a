"""``/api/cluster`` on a broker whose only listener wants SASL: the console logs in to
its own broker with the inter-broker login, as the brokers of a cluster log in to
each other."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from josefk.server.broker import Broker
from josefk.server.config.broker import load_config
from josefk.server.console.api import ClusterApi, own_listener

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="{password}" user_admin="admin-secret";')


async def sasl_broker(tmp_path: Path, password: str) -> AsyncIterator[Broker]:
    config = load_config(None, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "data"),
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "connection.failed.authentication.delay.ms": "0",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS.format(password=password),
    })
    async with trio.open_nursery() as nursery:
        yield await nursery.start(Broker(config).serve)
        nursery.cancel_scope.cancel()


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async for b in sasl_broker(tmp_path, "admin-secret"):
        yield b


async def test_the_console_logs_in_with_the_inter_broker_login(broker: Broker) -> None:
    bootstrap, security = own_listener(broker)
    assert bootstrap == f"127.0.0.1:{broker.bound_ports[0]}"
    assert (security.mechanism, security.username) == ("PLAIN", "admin")
    snapshot = await ClusterApi(broker).snapshot()
    assert snapshot["errors"] == [] and snapshot["complete"]
    assert [b["id"] for b in snapshot["cluster"]["brokers"]] == [broker.node_id]


async def test_a_refused_login_is_a_line_on_the_page_not_a_traceback(tmp_path: Path) -> None:
    # The broker's own login names a password its listener does not accept.
    async for broker in sasl_broker(tmp_path, "wrong"):
        snapshot = await ClusterApi(broker).snapshot()
        assert snapshot["cluster"] is None and not snapshot["complete"]
        [error] = snapshot["errors"]
        assert error.startswith("cannot reach the cluster: ")
        assert "wrong" not in error and "admin-secret" not in error
