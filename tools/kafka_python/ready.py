"""Tell kafka-python's KafkaFixture, in Kafka's words, that the josefk broker is ready.

KafkaFixture watches the broker's output for Kafka's log lines: ``[KafkaServer id=N]
started`` (ZooKeeper mode) and, with SCRAM, ``Removing Produce quota for user <user>``, the
line a Kafka 3.x broker logs once it has read the user's config from ZooKeeper. josefk logs
neither, so shim.py forks a watcher (this module) before it execs josefk. The watcher
checks for real and only then prints the line the fixture waits for:

* started: the first listener answers DescribeCluster through kafka-python, over the
  listener's own security protocol (TLS without certificate checks: readiness is what is
  probed here, the tests check the trust chain themselves; SASL with the inter-broker
  mechanism's JAAS username and password), with this broker registered and a controller;
* SCRAM: that login went through SCRAM, so the user's credentials from ZooKeeper are in
  place.

It writes to the broker's stdout (inherited), gives up after ``DEADLINE`` seconds, and stops
as soon as the broker process is gone.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import sys
import time
from dataclasses import dataclass

DEADLINE = 120.0


@dataclass(frozen=True)
class Probe:
    broker_id: int
    host: str
    port: int
    protocol: str
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def watch(probe: Probe, broker_pid: int) -> None:
    """Poll until the broker is ready (then print the lines), gone, or DEADLINE passes."""
    logging.getLogger("kafka").setLevel(logging.CRITICAL + 1)
    import kafka  # noqa: F401 - while the broker starts, not after
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if not _alive(broker_pid):
            return
        if _listening(probe) and _answers(probe):
            say(f"[KafkaServer id={probe.broker_id}] started (printed by tools/kafka_python/"
                f"ready.py: josefk answers DescribeCluster on {probe.protocol}://{probe.host}:"
                f"{probe.port})")
            if probe.mechanism and probe.mechanism.startswith("SCRAM-"):
                say(f"[tools/kafka_python/ready.py] {probe.username} logged in with "
                    f"{probe.mechanism}; stands for Kafka's 'Removing Produce quota for user "
                    f"{probe.username}', which KafkaFixture waits for")
            return
        time.sleep(0.1)
    say(f"[tools/kafka_python/ready.py] josefk not ready on {probe.host}:{probe.port} "
        f"after {DEADLINE:.0f}s")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _unverified() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _listening(probe: Probe) -> bool:
    """The port accepts connections (and completes a TLS handshake on a TLS listener, so
    that the broker does not log a failed one)."""
    try:
        with socket.create_connection((probe.host, probe.port), timeout=1) as sock:
            if probe.protocol in ("SSL", "SASL_SSL"):
                _unverified().wrap_socket(sock, server_hostname=probe.host).close()
            return True
    except OSError:
        return False


def _answers(probe: Probe) -> bool:
    from kafka import KafkaAdminClient

    params: dict[str, object] = {
        "bootstrap_servers": f"{probe.host}:{probe.port}",
        "security_protocol": probe.protocol,
        "client_id": "josefk-shim-ready",
        "request_timeout_ms": 5000,
    }
    if probe.protocol in ("SSL", "SASL_SSL"):
        params["ssl_context"] = _unverified()
    if probe.mechanism:
        params.update(sasl_mechanism=probe.mechanism, sasl_plain_username=probe.username,
                      sasl_plain_password=probe.password)
    try:
        admin = KafkaAdminClient(**params)
    except Exception:
        return False
    try:
        cluster = admin.describe_cluster()
        ids = {b["broker_id"] for b in cluster["brokers"]}
        return cluster["controller_id"] >= 0 and probe.broker_id in ids
    except Exception:
        return False
    finally:
        admin.close()


def spawn(probe: Probe) -> None:
    """Start the watcher for this process (about to exec the broker): double fork, so the
    watcher is nobody's child to reap once it is done."""
    broker_pid = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    try:
        if os.fork() == 0:
            os.setsid()  # keep the watcher out of the broker's process group
            try:
                watch(probe, broker_pid)
            finally:
                os._exit(0)
    finally:
        os._exit(0)
