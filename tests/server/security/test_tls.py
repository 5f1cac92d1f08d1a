"""TLS contexts from Kafka's ``ssl.*`` keys (PEM files, PEM text, PKCS12, JKS refused) and
the TLS transport: a handshake, bytes both ways and a file region, against trio's own TLS
client on a real socket pair."""

from __future__ import annotations

import os
import socket
import ssl
from pathlib import Path

import pytest
import trio
import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    pkcs12,
)

from josefk.server.network.transport import HandshakeError, TlsTransport
from josefk.server.network.zero_copy import FileRegion
from josefk.server.security.tls import (
    TlsConfigError,
    TlsSettings,
    client_context,
    openssl_cipher_name,
    server_context,
)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def leaf(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("localhost", "127.0.0.1")


def _key(leaf: trustme.LeafCert, password: bytes | None = None) -> bytes:
    key = load_pem_private_key(leaf.private_key_pem.bytes(), None)
    encryption = BestAvailableEncryption(password) if password else NoEncryption()
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, encryption)


def _chain(leaf: trustme.LeafCert) -> bytes:
    return b"".join(b.bytes() for b in leaf.cert_chain_pems)


def pem_settings(tmp: Path, ca: trustme.CA, leaf: trustme.LeafCert, **extra: object
                 ) -> TlsSettings:
    store = tmp / "keystore.pem"
    store.write_bytes(_key(leaf, b"key-pass") + _chain(leaf))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    return TlsSettings({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(store),
                        "ssl.key.password": "key-pass", "ssl.truststore.type": "PEM",
                        "ssl.truststore.location": str(tmp / "ca.pem"), **extra})


def test_pem_keystore_with_an_encrypted_key(tmp_path: Path, ca: trustme.CA,
                                            leaf: trustme.LeafCert) -> None:
    ctx = server_context(pem_settings(tmp_path, ca, leaf, **{"ssl.client.auth": "required"}))
    assert ctx.verify_mode == ssl.CERT_REQUIRED


def test_wrong_key_password_names_the_key_not_the_secret(tmp_path: Path, ca: trustme.CA,
                                                          leaf: trustme.LeafCert) -> None:
    settings = pem_settings(tmp_path, ca, leaf)
    bad = TlsSettings({**settings.values, "ssl.key.password": "s3cr3t-guess"})
    with pytest.raises(TlsConfigError) as info:
        server_context(bad)
    assert "ssl.keystore.location" in str(info.value) and "s3cr3t-guess" not in str(info.value)


def test_inline_pem_text(ca: trustme.CA, leaf: trustme.LeafCert) -> None:
    settings = TlsSettings({"ssl.keystore.type": "PEM", "ssl.keystore.key": _key(leaf).decode(),
                            "ssl.keystore.certificate.chain": _chain(leaf).decode(),
                            "ssl.truststore.type": "PEM",
                            "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
                            "ssl.client.auth": "requested"})
    assert server_context(settings).verify_mode == ssl.CERT_OPTIONAL


def test_pkcs12_key_and_trust_stores(tmp_path: Path, ca: trustme.CA,
                                     leaf: trustme.LeafCert) -> None:
    key = load_pem_private_key(leaf.private_key_pem.bytes(), None)
    certs = [x509.load_pem_x509_certificate(b.bytes()) for b in leaf.cert_chain_pems]
    (tmp_path / "ks.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, certs[0], certs[1:], BestAvailableEncryption(b"store-pass")))
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    (tmp_path / "ts.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca_cert], BestAvailableEncryption(b"trust-pass")))
    settings = TlsSettings({
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tmp_path / "ks.p12"),
        "ssl.keystore.password": "store-pass", "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(tmp_path / "ts.p12"),
        "ssl.truststore.password": "trust-pass", "ssl.client.auth": "required"})
    server_context(settings)
    with pytest.raises(TlsConfigError, match="wrong ssl.keystore.password"):
        server_context(TlsSettings({**settings.values, "ssl.keystore.password": "nope"}))


def test_jks_is_refused_with_the_conversion(tmp_path: Path) -> None:
    (tmp_path / "ks.jks").write_bytes(b"\xfe\xed\xfe\xed")
    with pytest.raises(TlsConfigError, match="keytool -importkeystore"):
        server_context(TlsSettings({"ssl.keystore.location": str(tmp_path / "ks.jks")}))


def test_protocols_and_cipher_names() -> None:
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == \
        "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == \
        "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"
    ctx = client_context(TlsSettings({"ssl.enabled.protocols": "TLSv1.3"}))
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(TlsConfigError, match="ssl.enabled.protocols"):
        client_context(TlsSettings({"ssl.enabled.protocols": "SSLv3"}))


async def test_transport_handshake_bytes_and_file_region(tmp_path: Path, ca: trustme.CA,
                                                         leaf: trustme.LeafCert) -> None:
    server_ctx = server_context(pem_settings(tmp_path, ca, leaf))
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    a, b = socket.socketpair()
    a.setblocking(False)
    payload = os.urandom(700_000)
    (tmp_path / "segment").write_bytes(payload)
    transport = TlsTransport(a.fileno(), server_ctx)
    client = trio.SSLStream(trio.SocketStream(trio.socket.from_stdlib_socket(b)), client_ctx,
                            server_hostname="localhost")

    async def serve() -> None:
        await transport.handshake()
        buf = bytearray(64)
        while (count := transport.read_into(memoryview(buf))) is None:
            await trio.lowlevel.wait_readable(a.fileno())
        assert bytes(buf[:count]) == b"ping"
        fd = os.open(tmp_path / "segment", os.O_RDONLY)
        try:
            await transport.send_region(FileRegion(fd, 0, len(payload), lambda: None))
        finally:
            os.close(fd)

    got = bytearray()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        await client.do_handshake()
        await client.send_all(b"ping")
        while len(got) < len(payload):
            got += await client.receive_some(65536)
    assert bytes(got) == payload
    a.close()
    await client.aclose()


async def test_transport_handshake_failure_is_reported(tmp_path: Path, ca: trustme.CA,
                                                        leaf: trustme.LeafCert) -> None:
    server_ctx = server_context(pem_settings(tmp_path, ca, leaf))
    a, b = socket.socketpair()
    a.setblocking(False)
    b.sendall(b"\x16\x03\x01\x00\x05hello")  # not a TLS ClientHello
    b.shutdown(socket.SHUT_WR)
    with pytest.raises(HandshakeError):
        await TlsTransport(a.fileno(), server_ctx).handshake()
    a.close()
    b.close()


async def test_the_peers_close_notify_reads_as_the_end_and_is_answered(
        tmp_path: Path, ca: trustme.CA, leaf: trustme.LeafCert) -> None:
    """A client ending the session with close_notify (its socket still open, as asyncio's
    SSL transport keeps it while it waits for the answer) is seen closed, and gets the
    broker's close_notify back (Python's SSLObject.read answers it with 0, not an error)."""
    server_ctx = server_context(pem_settings(tmp_path, ca, leaf))
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    a, b = socket.socketpair()
    a.setblocking(False)
    transport = TlsTransport(a.fileno(), server_ctx)
    client_in, client_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(client_in, client_out, server_hostname="localhost")

    def client_step(action) -> bool:  # type: ignore[no-untyped-def]
        """Run ``action`` on the client's engine, moving its ciphertext; True when done."""
        try:
            action()
            done = True
        except ssl.SSLWantReadError:
            done = False
        b.sendall(client_out.read())
        return done

    async def client_side() -> None:
        b.setblocking(False)
        while not client_step(client.do_handshake):
            await trio.lowlevel.wait_readable(b.fileno())
            client_in.write(b.recv(65536))
        assert not client_step(client.unwrap)  # close_notify sent; the socket stays open
        with trio.fail_after(5):
            while True:
                await trio.lowlevel.wait_readable(b.fileno())
                client_in.write(b.recv(65536))
                if client_step(client.unwrap):
                    break

    async def server_side() -> None:
        await transport.handshake()
        buf = bytearray(64)
        with trio.fail_after(5):
            while (count := transport.read_into(memoryview(buf))) is None:
                await trio.lowlevel.wait_readable(a.fileno())
        assert count == 0
        transport.close_notify()
        await transport.drain()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server_side)
        nursery.start_soon(client_side)
    a.close()
    b.close()
