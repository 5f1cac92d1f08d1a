"""TLS contexts from Kafka's ``ssl.*`` keys, one per listener (and one for the
inter-broker client side).

Key and trust stores are read as Kafka reads them: ``PEM`` files (the private key,
PKCS#8, optionally encrypted with ``ssl.key.password``, and its certificate chain in one
file), PEM text in ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` /
``ssl.truststore.certificates``, and ``PKCS12`` files with their passwords. Java's own
``JKS`` format has no reader outside the JVM: it is refused with the keytool command that
converts it. The standard library loads key material from files only, so converted
material goes through an anonymous in-memory file (``memfd``) and never touches the disk.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """An ``ssl.*`` setting that cannot be used; the message names the key, never a secret."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class TlsSettings:
    """The ``ssl.*`` values of one listener (``listener.name.<l>.`` overrides applied)."""

    values: Mapping[str, Any]

    def get(self, key: str) -> Any:
        value = self.values.get(key)
        return None if value in (None, "") else value

    def password(self, key: str) -> str | None:
        value = self.get(key)
        return None if value is None else str(value)


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context a TLS listener accepts connections with."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, settings)
    _ciphers(ctx, settings)
    if not _load_keystore(ctx, settings):
        raise TlsConfigError("ssl.keystore.location",
                             "a TLS listener needs a key store (ssl.keystore.location, or "
                             "ssl.keystore.key and ssl.keystore.certificate.chain)")
    auth = str(settings.get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise TlsConfigError("ssl.client.auth", f"must be one of none, requested, required, "
                             f"not {auth!r}")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none" and not _load_truststore(ctx, settings):
        raise TlsConfigError("ssl.truststore.location",
                             f"ssl.client.auth={auth} needs a trust store to check clients")
    return ctx


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context this broker connects to other brokers with (inter-broker listener)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, settings)
    _ciphers(ctx, settings)
    algorithm = settings.get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = str(algorithm or "").lower() == "https"
    if not _load_truststore(ctx, settings):
        ctx.load_default_certs()
    _load_keystore(ctx, settings)
    return ctx


def _protocols(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    enabled = settings.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    if isinstance(enabled, str):
        enabled = [p.strip() for p in enabled.split(",") if p.strip()]
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown or not enabled:
        raise TlsConfigError("ssl.enabled.protocols",
                             f"unknown protocol(s) {unknown}; use {', '.join(_VERSIONS)}")
    versions = sorted(_VERSIONS[p] for p in enabled)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def _ciphers(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    suites = settings.get("ssl.cipher.suites")
    if isinstance(suites, str):
        suites = [s.strip() for s in suites.split(",") if s.strip()]
    if not suites:
        return
    # TLS 1.3's suites are OpenSSL's defaults (the ssl module cannot narrow them); the
    # TLS 1.2 ones are named as IANA names them in Kafka's configs, OpenSSL otherwise.
    names = [openssl_cipher_name(s) for s in suites if not s.startswith("TLS_AES_")
             and not s.startswith("TLS_CHACHA20_")]
    if not names:
        return
    try:
        ctx.set_ciphers(":".join(names))
    except ssl.SSLError as e:
        raise TlsConfigError("ssl.cipher.suites", f"no usable cipher suite in {suites}") from e


def openssl_cipher_name(iana: str) -> str:
    """``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` → ``ECDHE-RSA-AES128-GCM-SHA256``; a
    name that is not an IANA one is returned as it is (an OpenSSL name)."""
    m = re.fullmatch(r"TLS_(\w+?)_WITH_(\w+)", iana)
    if not m:
        return iana
    exchange = "" if m.group(1) == "RSA" else m.group(1).replace("_", "-") + "-"
    cipher = m.group(2)
    cipher = re.sub(r"AES_(\d+)", r"AES\1", cipher)
    cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305")
    cipher = re.sub(r"_CBC_SHA$", "-SHA", cipher).replace("_CBC_", "-")
    return exchange + cipher.replace("_", "-")


def _load_keystore(ctx: ssl.SSLContext, settings: TlsSettings) -> bool:
    key_pem, chain_pem = settings.get("ssl.keystore.key"), settings.get(
        "ssl.keystore.certificate.chain")
    key_password = settings.password("ssl.key.password")
    if key_pem is not None or chain_pem is not None:
        if key_pem is None or chain_pem is None:
            raise TlsConfigError("ssl.keystore.key", "ssl.keystore.key and "
                                 "ssl.keystore.certificate.chain go together")
        _load_chain(ctx, (str(key_pem) + "\n" + str(chain_pem)).encode(), key_password)
        return True
    store = _store(settings, "keystore")
    if store is None:
        return False
    kind, data = store
    if kind == "PEM":
        _load_chain(ctx, data, key_password)
        return True
    # Only PKCS12 key stores need cryptography (a tenth of a second to import).
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
        pkcs12,
    )

    store_password = settings.password("ssl.keystore.password")
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            data, store_password.encode() if store_password else None)
    except ValueError as e:
        raise TlsConfigError("ssl.keystore.location",
                             "cannot open the PKCS12 key store (wrong ssl.keystore.password?)"
                             ) from e
    if key is None or cert is None:
        raise TlsConfigError("ssl.keystore.location", "the PKCS12 key store holds no key entry")
    # The key stays encrypted in the in-memory file, with a password of our own.
    secret = os.urandom(24).hex()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                            BestAvailableEncryption(secret.encode()))
    pem += b"".join(c.public_bytes(Encoding.PEM) for c in [cert, *extra])
    _load_chain(ctx, pem, secret)
    return True


def _load_truststore(ctx: ssl.SSLContext, settings: TlsSettings) -> bool:
    inline = settings.get("ssl.truststore.certificates")
    if inline is not None:
        _verify_pem(ctx, str(inline), "ssl.truststore.certificates")
        return True
    store = _store(settings, "truststore")
    if store is None:
        return False
    kind, data = store
    if kind == "PEM":
        _verify_pem(ctx, data.decode("ascii", "replace"), "ssl.truststore.location")
        return True
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    password = settings.password("ssl.truststore.password")
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as e:
        raise TlsConfigError("ssl.truststore.location", "cannot open the PKCS12 trust store "
                             "(wrong ssl.truststore.password?)") from e
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.append(store.cert.certificate)
    if not certs:
        raise TlsConfigError("ssl.truststore.location", "the PKCS12 trust store is empty")
    ctx.load_verify_locations(cadata="".join(
        c.public_bytes(Encoding.PEM).decode() for c in certs))
    return True


def _verify_pem(ctx: ssl.SSLContext, pem: str, key: str) -> None:
    try:
        ctx.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as e:
        raise TlsConfigError(key, "no PEM certificate could be read") from e


def _store(settings: TlsSettings, which: str) -> tuple[str, bytes] | None:
    """The type and bytes of ``ssl.<which>.location`` (key or trust store), if set."""
    location = settings.get(f"ssl.{which}.location")
    if location is None:
        return None
    kind = _store_type(settings, f"ssl.{which}.type", f"ssl.{which}.location")
    return kind, _read(location, f"ssl.{which}.location")


def _store_type(settings: TlsSettings, key: str, location_key: str) -> str:
    kind = str(settings.get(key) or "JKS").upper()
    if kind == "JKS":
        raise TlsConfigError(key, f"JKS stores ({location_key}) are read only by the JVM; "
                             "convert with keytool -importkeystore -deststoretype pkcs12 and "
                             f"set {key}=PKCS12 (or use PEM)")
    if kind not in ("PEM", "PKCS12"):
        raise TlsConfigError(key, f"must be PEM or PKCS12, not {kind}")
    return kind


def _read(location: str, key: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as e:
        raise TlsConfigError(key, f"cannot read {location}: {e.strerror}") from e


def _load_chain(ctx: ssl.SSLContext, pem: bytes, password: str | None) -> None:
    with _memory_file(pem) as path:
        try:
            ctx.load_cert_chain(path, password=password if password is not None else "")
        except ssl.SSLError as e:
            raise TlsConfigError("ssl.keystore.location",
                                 "the key store's key or certificate chain cannot be used "
                                 "(a PKCS#8 key and its chain; ssl.key.password if the key is "
                                 "encrypted)") from e


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    fd = os.memfd_create("josefk-tls", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


