"""``josefk`` admin commands over a SASL_SSL listener with SCRAM credentials in a Kafka
client properties file (``--command-config``), against josefk or Apache Kafka; what
they see is checked against kafka-python on the PLAINTEXT listener."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from ..test_cli import josefk, one_line_error
from .conftest import SCRAM_USERS, SecureBroker
from .test_authentication import set_scram

USER = "scram-alice"


@pytest.fixture(scope="module")
def scram_user(secure: SecureBroker) -> Iterator[None]:
    set_scram(secure, USER, SCRAM_USERS[USER], ("SCRAM-SHA-512",))
    yield


def command_config(path: Path, secure: SecureBroker, password: str) -> str:
    """Kafka client properties, as Kafka's own tools take them."""
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{USER}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secure.certs.ca}\n")
    return str(path)


def test_admin_commands_over_sasl_ssl(secure: SecureBroker, scram_user: None,
                                      tmp_path: Path) -> None:
    config = command_config(tmp_path / "client.properties", secure, SCRAM_USERS[USER])
    bootstrap = secure.bootstrap("SASL_SSL")
    topic = f"cli-sasl-{uuid.uuid4().hex[:10]}"
    admin = KafkaAdminClient(bootstrap_servers=secure.bootstrap("PLAINTEXT"))
    try:
        josefk(bootstrap, "topics", "create", topic, "--partitions", "2",
               "--command-config", config)
        [seen] = admin.describe_topics([topic])
        assert len(seen["partitions"]) == 2
        listed = josefk(bootstrap, "topics", "list", "--command-config", config)
        assert topic in listed.stdout.split()
        cluster = josefk(bootstrap, "cluster", "--command-config", config).stdout
        assert f"Cluster id: {admin.describe_cluster()['cluster_id']}" in cluster
        # The brokers as the SASL_SSL listener advertises them.
        assert str(secure.ports["SASL_SSL"]) in cluster
        josefk(bootstrap, "topics", "delete", topic, "--command-config", config)
        assert topic not in admin.list_topics()
    finally:
        admin.close()


def test_wrong_password_is_one_line_without_the_password(secure: SecureBroker,
                                                         scram_user: None,
                                                         tmp_path: Path) -> None:
    config = command_config(tmp_path / "client.properties", secure, "not-the-pw-123")
    done = josefk(secure.bootstrap("SASL_SSL"), "cluster", "--command-config", config, ok=False)
    one_line_error(done, "SASL_AUTHENTICATION_FAILED")
    assert "not-the-pw-123" not in done.stderr + done.stdout
