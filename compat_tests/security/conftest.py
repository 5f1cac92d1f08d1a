"""A broker with every kind of listener, and the certificates and users to reach them.

The broker (josefk, or Apache Kafka 4.x with ``--kafka``) gets the same settings either
way: PLAINTEXT for administration, SSL (client certificates requested), SASL_PLAINTEXT
and SASL_SSL with PLAIN (users in the listener's JAAS configuration) and both SCRAM
mechanisms (users created through the admin API). Certificates come from ``trustme``
at test time; the broker's key store is a PEM file (a PKCS#8 key and its chain), as
Kafka reads ``ssl.keystore.type=PEM``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..certs import Certs
from ..conftest import START_KRAFT, Broker, free_port

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USERS = {"scram-alice": "scram-alice-secret"}
CLIENT_DN = "CN=alice,OU=eng,O=josefk-tests"
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class SecureBroker:
    broker: Broker
    ports: dict[str, int]
    certs: Certs

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def _jaas(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="admin" password="{users["admin"]}" {entries};')


def security_overrides(ports: dict[str, int], certs: Certs) -> dict[str, str]:
    """The settings both brokers run with (Kafka's key names)."""
    endpoints = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    overrides = {
        "listeners": endpoints,
        "advertised.listeners": endpoints,
        "listener.security.protocol.map": ",".join(f"{n}:{n}" for n in LISTENERS),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms": "100",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        overrides[f"listener.name.{listener}.plain.sasl.jaas.config"] = _jaas(PLAIN_USERS)
        for mechanism in ("scram-sha-256", "scram-sha-512"):
            overrides[f"listener.name.{listener}.{mechanism}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    return overrides


def broker_command(kind: str, data_dir: Path, overrides: dict[str, str],
                   controller_port: int) -> list[str]:
    if kind == "kafka":
        overrides = dict(overrides)
        overrides["listeners"] += f",CONTROLLER://127.0.0.1:{controller_port}"
        overrides["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
        command = [str(START_KRAFT), str(data_dir), str(free_port())]
    else:
        command = [sys.executable, "-m", "josefk.server", "serve",
                   "--override", f"log.dirs={data_dir}"]
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    return command


@contextlib.contextmanager
def run_broker(request: pytest.FixtureRequest, tmp: Path, overrides: dict[str, str],
               bootstrap: str) -> Iterator[Broker]:
    if request.config.getoption("bootstrap"):
        pytest.skip("needs a broker of its own (security listeners); --bootstrap given")
    kind = "kafka" if request.config.getoption("kafka") else "josefk"
    data_dir = tmp / "data"
    data_dir.mkdir()
    controller_port = free_port()
    os.environ["CONTROLLER_PORT"] = str(controller_port)
    broker = Broker(kind, bootstrap, broker_command(kind, data_dir, overrides, controller_port),
                    data_dir, tmp / "broker.log", start_timeout=90.0 if kind == "kafka" else 20.0)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        os.environ.pop("CONTROLLER_PORT", None)


@pytest.fixture(scope="module")
def secure(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           certs: Certs) -> Iterator[SecureBroker]:
    ports = {name: free_port() for name in LISTENERS}
    with run_broker(request, tmp_path_factory.mktemp("secure"),
                    security_overrides(ports, certs),
                    f"127.0.0.1:{ports['PLAINTEXT']}") as broker:
        yield SecureBroker(broker, ports, certs)
