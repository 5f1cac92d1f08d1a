"""Start-up imports only what serving needs (issue 29): a broker without ZooKeeper or TLS
serves stock clients without importing kazoo, the controller, cryptography, pytest or
kafka-python's client, and imports them once the feature is configured. kafka-python's
package stays whole for user code in the same process (protocol/kafka_python.py).

Each case runs in a fresh interpreter (this one has imported everything already); the
broker is the ``josefk serve`` command itself, reporting its ``sys.modules`` at exit."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)

# Imported by nothing a single PLAINTEXT broker does.
LAZY = ("kazoo", "josefk.cluster.controller", "josefk.cluster.zk", "josefk.server.control",
        "cryptography", "pytest", "_pytest", "trio.testing", "kafka.consumer",
        "kafka.producer", "kafka.admin", "kafka.net", "kafka.coordinator",
        "importlib.metadata",  # only for --version
        # Handlers are imported on their api's first request (server/handlers/__init__.py).
        *(f"josefk.server.handlers.{name}" for name in (
            "admin.topic_changes", "admin.configs", "controller_apis", "producers", "records",
            "security", "groups.txn_offsets")),
        "josefk.protocol.controller_messages",
        # Built on first use; a consumer group builds the group coordinator, not this one.
        "josefk.cluster.coordinator.transaction.service",
        # kafka-python's admin messages, one family at a time (protocol/kafka_python.py).
        *(f"kafka.protocol.admin.{name}" for name in (
            "acl", "client_quotas", "cluster", "configs", "users")))
# `josefk serve`, with sys.modules printed as the last line of stdout at exit.
SERVE_AND_REPORT = textwrap.dedent("""
    import atexit, json, sys
    atexit.register(lambda: print(json.dumps(sorted(sys.modules)), flush=True))
    from josefk.server.cli import main
    sys.exit(main(sys.argv[1:]))
""")
TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


class Served:
    """A ``josefk serve`` process that reports its modules when it stops."""

    def __init__(self, tmp: Path, overrides: dict[str, str]) -> None:
        self.port = _free_port()
        listener = overrides.pop("listener", "PLAINTEXT")
        args = ["serve", "--log-level", "WARNING",
                "--override", f"listeners={listener}://127.0.0.1:{self.port}",
                "--override", f"log.dirs={tmp / 'data'}",
                "--override", "group.initial.rebalance.delay.ms=0",
                *[x for k, v in overrides.items() for x in ("--override", f"{k}={v}")]]
        self.proc = subprocess.Popen([sys.executable, "-c", SERVE_AND_REPORT, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_serving(self) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            assert self.proc.poll() is None, self.proc.communicate()[1][-3000:]
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            assert time.monotonic() < deadline, "the broker did not open its port"
            time.sleep(0.05)

    def stop(self) -> tuple[int, list[str], str]:
        """SIGTERM; the exit status, the modules it had imported and its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=TIMEOUT_S)
        lines = out.strip().splitlines()
        return self.proc.returncode, json.loads(lines[-1]) if lines else [], err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[type[Served]]:
    started: list[Served] = []

    def start(overrides: dict[str, str] | None = None) -> Served:
        s = Served(tmp_path, dict(overrides or {}))
        started.append(s)
        s.wait_serving()
        return s

    yield start  # type: ignore[misc]
    for s in started:
        s.kill()


def _produce_and_consume(bootstrap: str, **client: object) -> None:
    """A topic created after start-up, one record acknowledged with acks=all and read back
    through a consumer group (kafka-python)."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    topic = f"imports-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **client)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **client)
    producer.send(topic, b"first").get(timeout=TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=topic,
                             auto_offset_reset="earliest", consumer_timeout_ms=30_000, **client)
    assert next(consumer).value == b"first"
    consumer.close()


def test_a_single_plaintext_broker_imports_only_what_serving_needs(served) -> None:
    broker = served()
    _produce_and_consume(f"127.0.0.1:{broker.port}")
    status, modules, err = broker.stop()
    assert status == 0, err[-3000:]
    assert "josefk.server.broker" in modules and "kafka.protocol.admin" in modules
    assert [name for name in LAZY if _loaded(modules, name)] == []


def test_an_ssl_listener_imports_cryptography(served, tmp_path: Path) -> None:
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    key = load_pem_private_key(leaf.private_key_pem.bytes(), None)
    keystore, ca_file = tmp_path / "keystore.pem", tmp_path / "ca.pem"
    keystore.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                         + b"".join(b.bytes() for b in leaf.cert_chain_pems))
    ca.cert_pem.write_to_path(str(ca_file))
    broker = served({"listener": "SSL", "ssl.keystore.type": "PEM",
                     "ssl.keystore.location": str(keystore)})
    _produce_and_consume(f"127.0.0.1:{broker.port}", security_protocol="SSL",
                         ssl_cafile=str(ca_file))
    status, modules, err = broker.stop()
    assert status == 0, err[-3000:]
    assert _loaded(modules, "cryptography.x509")
    assert not _loaded(modules, "kazoo") and not _loaded(modules, "josefk.cluster.controller")


def test_zookeeper_connect_imports_the_cluster_code(tmp_path: Path) -> None:
    """Cluster mode, with a ZooKeeper that is not there: the clear error of before (exit 1,
    no traceback), from the code imported for it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]  # nothing listens here once the socket is closed
    broker = Served(tmp_path, {"zookeeper.connect": f"127.0.0.1:{closed}",
                               "zookeeper.connection.timeout.ms": "1000"})
    try:
        status, modules, err = _wait_exit(broker)
    finally:
        broker.kill()
    assert status == 1
    assert "Timed out waiting for connection to ZooKeeper" in err and "Traceback" not in err
    assert _loaded(modules, "kazoo") and _loaded(modules, "josefk.cluster.controller")


def _wait_exit(broker: Served) -> tuple[int, list[str], str]:
    out, err = broker.proc.communicate(timeout=TIMEOUT_S)
    lines = out.strip().splitlines()
    return broker.proc.returncode, json.loads(lines[-1]) if lines else [], err


# --- kafka-python's package beside the broker in one process ----------------------------

CLIENT_AFTER_BROKER = """
import sys, threading
import josefk.server.broker
assert "kafka.producer" not in sys.modules and "kafka.protocol.api_message" in sys.modules
from josefk.protocol.messages import request_class
assert request_class(19).__name__ == "CreateTopicsRequest"
assert "kafka.protocol.admin.acl" not in sys.modules  # one admin family, not all eight
import crc32c
from crc32c import crc32c as crc
assert "importlib.metadata" not in sys.modules and crc(b"123456789") == 0xE3069283
assert crc32c.__version__ and crc32c.CRC32CHash  # the package's own __init__, run on demand
got = []
threads = [threading.Thread(target=lambda: got.append(__import__("kafka").KafkaProducer))
           for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
import kafka, kafka.producer
assert set(got) == {KafkaProducer} and KafkaProducer is kafka.producer.KafkaProducer
assert kafka.__version__ and "__getattr__" not in vars(kafka)
import kafka.protocol.admin as admin
assert admin.CreateAclsRequest.__name__ == "CreateAclsRequest"
assert "__getattr__" not in vars(admin) and "CreateTopicsRequest" in admin.__all__
"""
CLIENT_BEFORE_BROKER = """
import sys
import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
import josefk.server.broker
from josefk.protocol.messages import request_class
assert sys.modules["kafka"] is kafka and "__getattr__" not in vars(kafka)
assert request_class(0).__name__ == "ProduceRequest"
"""
RUN_CLIENT = """
from tests.test_imports import _produce_and_consume
_produce_and_consume(sys.argv[1])
print("ok")
"""


@pytest.mark.parametrize("order", [CLIENT_AFTER_BROKER, CLIENT_BEFORE_BROKER],
                         ids=["broker-first", "kafka-first"])
def test_kafka_pythons_client_works_beside_the_broker(served, order: str) -> None:
    broker = served()
    run = subprocess.run([sys.executable, "-c", order + RUN_CLIENT, f"127.0.0.1:{broker.port}"],
                         capture_output=True, text=True, timeout=TIMEOUT_S * 2,
                         cwd=Path(__file__).resolve().parents[1],
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
