"""Certificates made at test time (``trustme``): a CA, a broker key store as Kafka reads
``ssl.keystore.type=PEM`` (a PKCS#8 key and its chain in one file), and client
certificates (and ``openssl`` for a key encrypted as Java reads it). No key is
committed."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)

#: The password of ``Certs.rotated_keystore``'s key.
ROTATED_KEY_PASSWORD = "rotated-key-pw"


@dataclass(frozen=True)
class Certs:
    """Files of the test CA, the broker's key store and a client's certificate."""

    ca: Path
    keystore: Path
    client_cert: Path
    client_key: Path
    other_client_cert: Path  # signed by a CA the broker does not trust
    other_client_key: Path
    # The same host names under a new key, encrypted with ROTATED_KEY_PASSWORD: what a
    # broker's key store is replaced with while it runs.
    rotated_keystore: Path


def _pkcs8(pem: bytes) -> bytes:
    key = load_pem_private_key(pem, password=None)
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())


def _encrypted_pkcs8(pem: bytes) -> bytes:
    """The key as PKCS#8 encrypted with ROTATED_KEY_PASSWORD under PBEWithSHA1AndDESede:
    Java's key factories (Kafka's PEM key stores) cannot read cryptography's PBES2."""
    done = subprocess.run(["openssl", "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES",
                           "-passout", f"pass:{ROTATED_KEY_PASSWORD}"],
                          input=_pkcs8(pem), capture_output=True, check=True, timeout=30)
    return done.stdout


def _client_files(ca: trustme.CA, tmp: Path, name: str) -> tuple[Path, Path]:
    cert = ca.issue_cert("client@example.com", common_name="alice",
                         organization_unit_name="eng", organization_name="josefk-tests")
    cert_path, key_path = tmp / f"{name}.pem", tmp / f"{name}.key"
    cert_path.write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
    key_path.write_bytes(_pkcs8(cert.private_key_pem.bytes()))
    return cert_path, key_path


def make_certs(tmp: Path) -> Certs:
    """A CA, the broker's PEM key store and two clients' certificates, in ``tmp``."""
    ca = trustme.CA()
    # One subject for both broker certificates: Kafka refuses a new key store whose
    # certificate names another one (ssl.allow.dn.changes=false).
    subject = {"organization_name": "josefk-tests", "organization_unit_name": "broker"}
    server = ca.issue_cert("localhost", "127.0.0.1", **subject)
    keystore = tmp / "broker-keystore.pem"
    keystore.write_bytes(_pkcs8(server.private_key_pem.bytes())
                         + b"".join(b.bytes() for b in server.cert_chain_pems))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    client_cert, client_key = _client_files(ca, tmp, "client")
    other_cert, other_key = _client_files(trustme.CA(), tmp, "stranger")
    rotated = ca.issue_cert("localhost", "127.0.0.1", **subject)
    rotated_keystore = tmp / "broker-keystore-rotated.pem"
    rotated_keystore.write_bytes(_encrypted_pkcs8(rotated.private_key_pem.bytes())
                                 + b"".join(b.bytes() for b in rotated.cert_chain_pems))
    return Certs(tmp / "ca.pem", keystore, client_cert, client_key, other_cert, other_key,
                 rotated_keystore)
