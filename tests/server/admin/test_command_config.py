"""``--command-config`` files as PeerSecurity, and bootstrap server lists."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from josefk.server.admin.brokers import parse_bootstrap
from josefk.server.admin.errors import AdminError
from josefk.server.admin.properties import client_security, load_security

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="alice" password="s3cret-pw";')


def test_no_file_is_plaintext() -> None:
    security = load_security(None)
    assert (security.listener, security.tls, security.mechanism) == ("PLAINTEXT", None, None)


def test_sasl_ssl_with_scram_and_a_pem_truststore(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca))
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      f"sasl.jaas.config={JAAS}\nssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={ca}\n")
    security = load_security(config)
    assert (security.listener, security.mechanism, security.username, security.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "alice", "s3cret-pw")
    assert isinstance(security.tls, ssl.SSLContext)
    assert security.tls.check_hostname  # Kafka's clients verify the host by default
    assert "s3cret-pw" not in repr(security)


def test_librdkafka_names(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca))
    security = client_security({"security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN",
                                "sasl.username": "bob", "sasl.password": "pw",
                                "ssl.ca.location": str(ca),
                                "ssl.endpoint.identification.algorithm": ""})
    assert (security.mechanism, security.username, security.password) == ("PLAIN", "bob", "pw")
    assert security.tls is not None and not security.tls.check_hostname


@pytest.mark.parametrize(("values", "names"), [
    ({"security.protocol": "SSH"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": 'x required password="s3cret-pw";'}, "username and password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": 'x required password="s3cret-pw'}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent.p12",
      "ssl.truststore.type": "PKCS12", "ssl.truststore.password": "s3cret-pw"},
     "ssl.truststore.location"),
])
def test_unusable_configs_name_the_key_not_the_secret(values: dict[str, str],
                                                      names: str) -> None:
    with pytest.raises(AdminError) as caught:
        client_security(values)
    assert caught.value.error == "INVALID_CONFIG"
    assert names in str(caught.value) and "s3cret-pw" not in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AdminError, match="INVALID_CONFIG: cannot read"):
        load_security(tmp_path / "nope.properties")


def test_bootstrap_lists() -> None:
    assert parse_bootstrap("a:1, b:9092,[::1]:9093") == [("a", 1), ("b", 9092), ("::1", 9093)]
    for bad in ("a", "a:", ":9092", "a:x", "a:70000", "a:1,"):
        with pytest.raises(AdminError, match="INVALID_CONFIG"):
            parse_bootstrap(bad)
