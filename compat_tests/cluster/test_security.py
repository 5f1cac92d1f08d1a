"""A cluster secured between brokers: SASL_SSL is the inter-broker listener, so every
follower fetch, controller request and AlterPartition goes over TLS after a SASL login.
SCRAM users live in ZooKeeper under ``/config/users`` as Kafka 3.9 writes them: created
through one broker, they hold on every broker. Against three josefk brokers, three Kafka
3.9.1 brokers (``--kafka``), and a mixed cluster (Kafka 3.9.1 beside two josefk brokers)
where a user created through either kind works on the other."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.protocol.admin import CreateAclsRequest

from ..certs import ROTATED_KEY_PASSWORD, Certs
from ..conftest import free_port
from ..rawkafka import RawConnection
from ..security.clients import ROUND_TRIPS, Login, kafka_python_config
from ..security.conftest import PLAIN_USERS, _jaas
from .conftest import broker_kinds, first_controller, need_jars
from .harness import (
    CLUSTER_START_TIMEOUT,
    Cluster,
    ZooKeeperServer,
    wait_until,
    znode_json,
)

MIXED = {1: "kafka", 2: "josefk", 3: "josefk"}


def secure_config(certs: Certs) -> dict[str, str]:
    """What every broker of the secured cluster gets (Kafka's keys)."""
    scram_jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas(PLAIN_USERS),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca),
        # Dynamic password configs are stored encrypted in /config/brokers/<id>.
        "password.encoder.secret": "compat-encoder-secret",
    }


def start_secure_cluster(request: pytest.FixtureRequest, zookeeper: ZooKeeperServer,
                         home: Path, certs: Certs, kinds: dict[int, str],
                         extra: dict[str, str] | None = None) -> Cluster:
    need_jars(request.config, kafka="kafka" in kinds.values())
    plain = {b: free_port() for b in kinds}
    sasl = {b: free_port() for b in kinds}
    timeout = max(CLUSTER_START_TIMEOUT[k] for k in kinds.values())
    cluster = Cluster(zookeeper, home, kinds, timeout,
                      config={**secure_config(certs), **(extra or {})},
                      placement=lambda b: {"port": plain[b]})
    for b in kinds:
        endpoints = f"PLAINTEXT://127.0.0.1:{plain[b]},SASL_SSL://127.0.0.1:{sasl[b]}"
        cluster.brokers[b] = cluster.new_broker(b, kinds[b], extra={
            "listeners": endpoints, "advertised.listeners": endpoints})
    cluster.sasl_ports = sasl  # type: ignore[attr-defined]
    cluster.start(first_controller(request.config))
    return cluster


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper: ZooKeeperServer,
            tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Cluster]:
    kinds = broker_kinds(request.config)
    secured = start_secure_cluster(request, zookeeper, tmp_path_factory.mktemp("secure"),
                                   certs, kinds)
    try:
        yield secured
    finally:
        secured.stop()


def sasl_bootstrap(cluster: Cluster, broker_id: int) -> str:
    return f"127.0.0.1:{cluster.sasl_ports[broker_id]}"  # type: ignore[attr-defined]


def add_scram_user(bootstrap: str, user: str, password: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
    admin.alter_user_scram_credentials([upsertion])[user].result(30)


def round_trip_when_ready(bootstrap: str, login: Login, certs: Certs) -> list[bytes]:
    """A produce and consume as ``login``, retried while the user is still on its way to
    the broker (the change notification)."""
    deadline = time.monotonic() + 60
    while True:
        topic = f"sec-{uuid.uuid4().hex[:10]}"
        try:
            return ROUND_TRIPS["kafka-python"](bootstrap, topic, login, certs)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def established_to(ports: set[int]) -> int:
    """Established TCP connections whose remote port is one of ``ports``."""
    out = subprocess.run(["ss", "-Htn", "state", "established"], capture_output=True,
                         text=True, check=True).stdout
    return sum(1 for line in out.splitlines()
               if int(line.split()[-1].rsplit(":", 1)[1]) in ports)


def test_replication_runs_over_sasl_ssl(cluster: Cluster, topic: str, certs: Certs) -> None:
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    login = Login("SASL_SSL", "PLAIN", "alice", PLAIN_USERS["alice"])
    got = ROUND_TRIPS["kafka-python"](sasl_bootstrap(cluster, 2), topic, login, certs)
    assert sorted(got) == [f"kafka-python {i}".encode() for i in range(3)]
    cluster.wait_in_sync(topic, 3)
    registration = json.loads(cluster.zk.get("/brokers/ids/1")[0])
    assert registration["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    # Followers fetch over SASL_SSL: the brokers hold connections to those ports.
    assert established_to(set(cluster.sasl_ports.values())) > 0  # type: ignore[attr-defined]


def test_scram_user_made_on_one_broker_works_on_another(cluster: Cluster,
                                                        certs: Certs) -> None:
    user, password = f"u-{uuid.uuid4().hex[:6]}", "cluster-secret"
    add_scram_user(cluster[1].bootstrap, user, password)
    config = json.loads(cluster.zk.get(f"/config/users/{user}")[0])
    assert config["version"] == 1
    assert config["config"]["SCRAM-SHA-512"].startswith("salt=")
    assert "cluster-secret" not in json.dumps(config)
    login = Login("SASL_SSL", "SCRAM-SHA-512", user, password)
    assert len(round_trip_when_ready(sasl_bootstrap(cluster, 3), login, certs)) == 3


@pytest.mark.josefk_only("a mixed cluster is josefk brokers beside Apache Kafka 3.9.1")
def test_mixed_cluster_shares_scram_users(request: pytest.FixtureRequest,
                                          zookeeper: ZooKeeperServer,
                                          tmp_path_factory: pytest.TempPathFactory,
                                          certs: Certs, topic: str) -> None:
    mixed = start_secure_cluster(request, zookeeper, tmp_path_factory.mktemp("mixed"), certs,
                                 MIXED)
    try:
        mixed.create_topic(topic, partitions=3, replication_factor=3)
        mixed.wait_in_sync(topic, 3)
        by_kafka, by_josefk = f"k-{uuid.uuid4().hex[:6]}", f"j-{uuid.uuid4().hex[:6]}"
        add_scram_user(mixed[1].bootstrap, by_kafka, "made-by-kafka")
        add_scram_user(mixed[2].bootstrap, by_josefk, "made-by-josefk")
        for user, password, broker in ((by_kafka, "made-by-kafka", 2),
                                       (by_josefk, "made-by-josefk", 1)):
            login = Login("SASL_SSL", "SCRAM-SHA-512", user, password)
            got = round_trip_when_ready(sasl_bootstrap(mixed, broker), login, certs)
            assert len(got) == 3, (user, broker)
        wait_until(lambda: mixed.agreed_view([topic]), 30, "brokers agree on the topic")
    finally:
        mixed.stop()


AUTHORIZED = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              # PLAINTEXT (the tests' admin) is ANONYMOUS; brokers log in to each other as
              # admin over SASL_SSL.
              "super.users": "User:ANONYMOUS;User:admin"}


def allow_write(broker_bootstrap: str, topic: str, principal: str) -> None:
    """CreateAcls sent to this broker itself (an admin client may pick any broker)."""
    creation = CreateAclsRequest.AclCreation(
        resource_type=2, resource_name=topic, resource_pattern_type=3, principal=principal,
        host="*", operation=4, permission_type=3)  # TOPIC, LITERAL, WRITE, ALLOW
    with RawConnection(broker_bootstrap) as conn:
        answer = conn.request(CreateAclsRequest(creations=[creation]), 2)
    assert [r.error_code for r in answer.results] == [0], answer


def produce_as_alice(cluster: Cluster, broker: int, topic: str, certs: Certs) -> None:
    """One record as alice (a write, nothing else: her ACLs allow no more)."""
    login = Login("SASL_SSL", "PLAIN", "alice", PLAIN_USERS["alice"])
    producer = KafkaProducer(bootstrap_servers=sasl_bootstrap(cluster, broker),
                             max_block_ms=20_000, **kafka_python_config(login, certs))
    try:
        producer.send(topic, b"alice was here").get(20)
    finally:
        producer.close()


@pytest.mark.josefk_only("a mixed cluster is josefk brokers beside Apache Kafka 3.9.1")
def test_mixed_cluster_enforces_each_others_acls(request: pytest.FixtureRequest,
                                                 zookeeper: ZooKeeperServer,
                                                 tmp_path_factory: pytest.TempPathFactory,
                                                 certs: Certs, topic: str) -> None:
    """An ACL made through the Kafka broker holds on a partition a josefk broker leads, and
    one made through a josefk broker on a partition the Kafka broker leads."""
    mixed = start_secure_cluster(request, zookeeper, tmp_path_factory.mktemp("mixed-acl"),
                                 certs, MIXED, AUTHORIZED)
    try:
        led_by_josefk, led_by_kafka = f"{topic}-j", f"{topic}-k"
        mixed.create_topic(led_by_josefk, assignments={0: [2, 3]})
        mixed.create_topic(led_by_kafka, assignments={0: [1, 2]})
        for name in (led_by_josefk, led_by_kafka):
            with pytest.raises(TopicAuthorizationFailedError):
                produce_as_alice(mixed, 2, name, certs)
        allow_write(mixed[1].bootstrap, led_by_josefk, "User:alice")  # through Kafka
        allow_write(mixed[2].bootstrap, led_by_kafka, "User:alice")  # through josefk
        for name in (led_by_josefk, led_by_kafka):
            wait_until(lambda name=name: _produces(mixed, name, certs), 60,
                       f"alice's write ACL on {name} in force")
    finally:
        mixed.stop()


def _produces(cluster: Cluster, topic: str, certs: Certs) -> bool:
    try:
        produce_as_alice(cluster, 3, topic, certs)
    except TopicAuthorizationFailedError:
        return False
    return True


def served_certificate(port: int) -> bytes:
    """The DER certificate a TLS handshake with 127.0.0.1:``port`` presents."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def pem_certificate(path: Path) -> bytes:
    """The DER of the first certificate in a PEM key store."""
    text = path.read_text()
    begin = text.index("-----BEGIN CERTIFICATE-----")
    end = text.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")
    return ssl.PEM_cert_to_DER_cert(text[begin:end])


def test_a_key_store_rotated_with_its_password_is_stored_encrypted(
        cluster: Cluster, certs: Certs) -> None:
    """``listener.name.sasl_ssl.ssl.key.password`` set on one broker while it runs, with
    a new key store: new TLS connections get the new certificate, the password is in
    /config/brokers/<id> encrypted with ``password.encoder.secret`` (Kafka 3.9's
    format), and the broker reads it back from there after a restart."""
    broker_id = 2
    port = cluster.sasl_ports[broker_id]  # type: ignore[attr-defined]
    assert served_certificate(port) == pem_certificate(certs.keystore)
    prefix = "listener.name.sasl_ssl."
    resource = ConfigResource(ResourceType.BROKER, str(broker_id), incremental_configs=[
        ConfigEntry(prefix + "ssl.keystore.location", str(certs.rotated_keystore),
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry(prefix + "ssl.key.password", ROTATED_KEY_PASSWORD,
                    incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)

    rotated = pem_certificate(certs.rotated_keystore)
    wait_until(lambda: served_certificate(port) == rotated or None, 30,
               "the rotated certificate on new connections")
    raw, _ = cluster.zk.get(f"/config/brokers/{broker_id}")
    stored = json.loads(raw)["config"]
    assert ROTATED_KEY_PASSWORD.encode() not in raw
    assert "encryptedPassword:" in stored[prefix + "ssl.key.password"]
    assert stored[prefix + "ssl.keystore.location"] == str(certs.rotated_keystore)
    login = Login("SASL_SSL", "PLAIN", "alice", PLAIN_USERS["alice"])
    assert round_trip_when_ready(sasl_bootstrap(cluster, broker_id), login, certs)

    broker = cluster.brokers[broker_id]
    broker.terminate()
    broker.start()
    assert served_certificate(port) == rotated
    assert round_trip_when_ready(sasl_bootstrap(cluster, broker_id), login, certs)
    assert znode_json(cluster.zk, f"/config/brokers/{broker_id}")[0]["config"] == stored
