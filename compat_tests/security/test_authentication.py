"""TLS and SASL as clients see them, on the same settings for josefk and Apache Kafka 4.x:
kafka-python, aiokafka, confluent-kafka and Kafka's console tools over SSL, SASL_PLAINTEXT
and SASL_SSL with PLAIN and both SCRAM mechanisms; SCRAM users created, used and removed
through the admin API; wrong passwords refused with SASL_AUTHENTICATION_FAILED; and, before
authentication, nothing but ApiVersions and the SASL requests served."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from ..rawkafka import RawConnection, split_hostport
from ..test_java_tools import CONSOLE_CONSUMER, CONSOLE_PRODUCER, run_tool
from .clients import PREFIX, ROUND_TRIPS, Login, confluent_config
from .conftest import PLAIN_USERS, SCRAM_USERS, SecureBroker

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
SASL_AUTHENTICATION_FAILED = 58
MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
              "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}

LOGINS = [
    Login("SSL"),
    Login("SSL", client_cert=True),
    Login("SASL_PLAINTEXT", "PLAIN", "alice", PLAIN_USERS["alice"]),
    Login("SASL_PLAINTEXT", "SCRAM-SHA-256", "scram-alice", SCRAM_USERS["scram-alice"]),
    Login("SASL_SSL", "PLAIN", "alice", PLAIN_USERS["alice"]),
    Login("SASL_SSL", "SCRAM-SHA-256", "scram-alice", SCRAM_USERS["scram-alice"]),
    Login("SASL_SSL", "SCRAM-SHA-512", "scram-alice", SCRAM_USERS["scram-alice"]),
]


def _login_id(login: Login) -> str:
    return "-".join(filter(None, [login.protocol, login.mechanism,
                                  "mtls" if login.client_cert else None]))


def admin(secure: SecureBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})


def set_scram(secure: SecureBroker, user: str, password: str,
              mechanisms: tuple[str, ...] = tuple(MECHANISMS)) -> None:
    """One request per mechanism: Kafka 4 refuses a user changed twice in one request."""
    client = admin(secure)  # referenced until the answers are in
    for m in mechanisms:
        upsertion = UserScramCredentialUpsertion(user, ScramCredentialInfo(MECHANISMS[m], 8192),
                                                 password.encode())
        client.alter_user_scram_credentials([upsertion])[user].result(30)


def described_mechanisms(secure: SecureBroker, user: str) -> set[str] | None:
    client = admin(secure)
    try:
        result = client.describe_user_scram_credentials([user])[user].result(30)
    except Exception as e:  # confluent raises KafkaException for RESOURCE_NOT_FOUND
        if "RESOURCE_NOT_FOUND" in str(e) or "does not exist" in str(e):
            return None
        raise
    return {info.mechanism.name.replace("_", "-") for info in result.scram_credential_infos}


@pytest.fixture(scope="module")
def scram_users(secure: SecureBroker) -> Iterator[None]:
    for user, password in SCRAM_USERS.items():
        set_scram(secure, user, password)
    yield


@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
@pytest.mark.parametrize("login", LOGINS, ids=_login_id)
def test_clients_produce_and_consume_over_each_listener(
        secure: SecureBroker, scram_users: None, client: str, login: Login) -> None:
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    got = ROUND_TRIPS[client](secure.bootstrap(login.protocol), topic, login, secure.certs)
    assert got == [f"{PREFIX[client]} {i}".encode() for i in range(3)]


def _raw_sasl(bootstrap: str, mechanism: str, token: bytes) -> tuple[int, str | None]:
    """SaslHandshake v1 and one SaslAuthenticate v1: its error code and message."""
    with RawConnection(bootstrap) as conn:
        shake = conn.request(SaslHandshakeRequest(mechanism=mechanism), 1)
        assert shake.error_code == 0 and mechanism in shake.mechanisms
        answer = conn.request(SaslAuthenticateRequest(auth_bytes=token), 1)
        return answer.error_code, answer.error_message


def test_wrong_plain_password_is_sasl_authentication_failed(secure: SecureBroker) -> None:
    bootstrap = secure.bootstrap("SASL_PLAINTEXT")
    assert _raw_sasl(bootstrap, "PLAIN", b"\0alice\0alice-secret")[0] == 0
    error, message = _raw_sasl(bootstrap, "PLAIN", b"\0alice\0not-her-password")
    assert error == SASL_AUTHENTICATION_FAILED
    assert message is not None and "not-her-password" not in message


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_wrong_scram_password_fails_the_client(secure: SecureBroker, scram_users: None,
                                               mechanism: str) -> None:
    errors: list[KafkaError] = []
    login = Login("SASL_PLAINTEXT", mechanism, "scram-alice", "wrong-password")
    producer = Producer({"bootstrap.servers": secure.bootstrap("SASL_PLAINTEXT"),
                         **confluent_config(login, secure.certs),
                         "error_cb": errors.append, "message.timeout.ms": 5000})
    producer.produce("never-written", b"x")
    producer.flush(10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_scram_user_created_used_and_removed(secure: SecureBroker, tmp_path: Path) -> None:
    user, password = f"user-{uuid.uuid4().hex[:6]}", "its-password"
    assert described_mechanisms(secure, user) is None
    set_scram(secure, user, password, ("SCRAM-SHA-512",))
    assert described_mechanisms(secure, user) == {"SCRAM-SHA-512"}
    login = Login("SASL_SSL", "SCRAM-SHA-512", user, password)
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    assert ROUND_TRIPS["kafka-python"](secure.bootstrap("SASL_SSL"), topic, login,
                                       secure.certs) == [b"kafka-python 0", b"kafka-python 1",
                                                        b"kafka-python 2"]
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    client = admin(secure)
    client.alter_user_scram_credentials([deletion])[user].result(30)
    assert described_mechanisms(secure, user) is None
    token = _scram_first(user)
    error, _ = _raw_scram_final(secure.bootstrap("SASL_PLAINTEXT"), token)
    assert error == SASL_AUTHENTICATION_FAILED


def _scram_first(user: str) -> bytes:
    return f"n,,n={user},r=nonce{uuid.uuid4().hex}".encode()


def _raw_scram_final(bootstrap: str, first: bytes) -> tuple[int, str | None]:
    """A SCRAM-SHA-512 exchange with a made-up proof, as far as the broker lets it go:
    the error of the first SaslAuthenticate that fails."""
    with RawConnection(bootstrap) as conn:
        conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
        answer = conn.request(SaslAuthenticateRequest(auth_bytes=first), 1)
        if answer.error_code:
            return answer.error_code, answer.error_message
        nonce = dict(kv.split("=", 1) for kv in bytes(answer.auth_bytes).decode().split(","))["r"]
        final = f"c=biws,r={nonce},p=" + "A" * 88
        answer = conn.request(SaslAuthenticateRequest(auth_bytes=final.encode()), 1)
        return answer.error_code, answer.error_message


def _closed(sock: socket.socket, timeout: float = 10.0) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT"])
def test_requests_before_authentication_close_the_connection(secure: SecureBroker,
                                                             listener: str) -> None:
    with RawConnection(secure.bootstrap(listener)) as conn:
        assert conn.api_versions()  # ApiVersions is served before authentication
        request = MetadataRequest(topics=None)
        request.with_header(correlation_id=7, client_id="pre-auth")
        conn.sock.sendall(request.encode(version=1, header=True, framed=True))
        assert _closed(conn.sock)


def test_oversized_frame_before_authentication_closes_the_connection(
        secure: SecureBroker) -> None:
    """sasl.server.max.receive.size (512 KiB) holds before authentication: a frame larger
    than that is refused from its size prefix, before anything is allocated."""
    with socket.create_connection(split_hostport(secure.bootstrap("SASL_PLAINTEXT")),
                                  timeout=10) as sock:
        sock.sendall(struct.pack(">i", 600_000) + b"\0" * 1024)
        assert _closed(sock)
    # The same size is fine after authentication (the broker's request limit applies).
    assert _raw_sasl(secure.bootstrap("SASL_PLAINTEXT"), "PLAIN", b"\0alice\0alice-secret")[0] == 0


def test_broker_serves_others_after_bad_clients(secure: SecureBroker) -> None:
    for _ in range(20):
        with socket.create_connection(split_hostport(secure.bootstrap("SASL_SSL")),
                                      timeout=5) as sock:
            sock.sendall(b"\x16\x03\x01\x00\x05hello")  # a broken TLS record
            _closed(sock, 5)
    login = Login("SASL_SSL", "PLAIN", "alice", PLAIN_USERS["alice"])
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    assert ROUND_TRIPS["kafka-python"](secure.bootstrap("SASL_SSL"), topic, login, secure.certs)


def test_console_tools_over_sasl_ssl(secure: SecureBroker, scram_users: None,
                                     kafka_tools: Path, tmp_path: Path) -> None:
    user, password = next(iter(SCRAM_USERS.items()))
    props = tmp_path / "client.properties"
    props.write_text("\n".join([
        "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";',
        "ssl.truststore.type=PEM", f"ssl.truststore.location={secure.certs.ca}", ""]))
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    bootstrap = secure.bootstrap("SASL_SSL")
    run_tool(kafka_tools, CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
             "--command-config", str(props), stdin="one\ntwo\nthree\n")
    started = time.monotonic()
    done = run_tool(kafka_tools, CONSOLE_CONSUMER, "--bootstrap-server", bootstrap,
                    "--topic", topic, "--from-beginning", "--max-messages", "3",
                    "--command-config", str(props), "--timeout-ms", "30000")
    assert done.stdout.split() == ["one", "two", "three"], time.monotonic() - started


def test_kafka_configs_adds_and_deletes_a_scram_user(secure: SecureBroker,
                                                      kafka_tools: Path) -> None:
    """``kafka-configs.sh --entity-type users``: what operators type to manage SCRAM users."""
    user = f"tool-{uuid.uuid4().hex[:6]}"
    common = ("--bootstrap-server", secure.bootstrap("PLAINTEXT"), "--entity-type", "users",
              "--entity-name", user)
    run_tool(kafka_tools, CONFIG_COMMAND, *common, "--alter", "--add-config",
             "SCRAM-SHA-256=[iterations=4096,password=tool-secret]")
    # (--describe also asks DescribeClientQuotas, which josefk does not serve yet.)
    assert described_mechanisms(secure, user) == {"SCRAM-SHA-256"}
    login = Login("SASL_PLAINTEXT", "SCRAM-SHA-256", user, "tool-secret")
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    assert ROUND_TRIPS["confluent-kafka"](secure.bootstrap("SASL_PLAINTEXT"), topic, login,
                                          secure.certs) == [b"confluent 0", b"confluent 1",
                                                            b"confluent 2"]
    run_tool(kafka_tools, CONFIG_COMMAND, *common, "--alter", "--delete-config",
             "SCRAM-SHA-256")
    assert described_mechanisms(secure, user) is None


def test_an_unauthenticated_connection_is_closed_in_time(secure: SecureBroker) -> None:
    """A peer that connects and says nothing holds no slot for ever: josefk closes it after
    request.timeout.ms (30 s); the bound here is generous for Kafka's own."""
    with socket.create_connection(split_hostport(secure.bootstrap("SASL_SSL")),
                                  timeout=5) as sock:
        if secure.broker.kind != "josefk":
            pytest.skip("Kafka keeps a silent connection until connections.max.idle.ms")
        assert _closed(sock, timeout=45)
