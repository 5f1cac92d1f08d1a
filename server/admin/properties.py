"""A Kafka client properties file (``--command-config``, as Kafka's tools take it) as
the admin client's PeerSecurity: ``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config`` (or librdkafka's ``sasl.username``/``sasl.password``), the
``ssl.*`` trust and key stores, and librdkafka's ``ssl.ca.location``."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path

from josefk.server.admin.errors import AdminError
from josefk.server.config.properties import load_properties
from josefk.server.config.values import ConfigError
from josefk.server.security.client import PeerSecurity
from josefk.server.security.jaas import JaasConfigError, parse_listener_jaas_config
from josefk.server.security.mechanisms import MECHANISMS
from josefk.server.security.tls import TlsConfigError, TlsSettings, client_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
INVALID_CONFIG = "INVALID_CONFIG"


def load_security(path: Path | None) -> PeerSecurity:
    """The PeerSecurity of a properties file; PLAINTEXT without one. AdminError
    INVALID_CONFIG (naming the key, never a secret) when it cannot be used."""
    if path is None:
        return PeerSecurity("PLAINTEXT")
    try:
        values = load_properties(path)
    except ConfigError as e:
        raise AdminError(INVALID_CONFIG, str(e)) from e
    return client_security(values)


def client_security(values: Mapping[str, str]) -> PeerSecurity:
    """The PeerSecurity of Kafka client properties."""
    protocol = values.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise AdminError(INVALID_CONFIG, f"security.protocol {protocol!r} is not one of "
                                         f"{', '.join(PROTOCOLS)}")
    tls = _tls(values) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL_"):
        return PeerSecurity(protocol, tls)
    mechanism = values.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise AdminError(INVALID_CONFIG, f"sasl.mechanism {mechanism}: josefk logs in with "
                                         f"{', '.join(MECHANISMS)}")
    username, password = _credentials(values)
    return PeerSecurity(protocol, tls, mechanism, username, password)


def _tls(values: Mapping[str, str]) -> ssl.SSLContext:
    settings = {k: v for k, v in values.items() if k.startswith("ssl.")}
    # Kafka's clients check the broker's host name unless told not to.
    settings.setdefault("ssl.endpoint.identification.algorithm", "https")
    if "ssl.ca.location" in settings and "ssl.truststore.location" not in settings:
        settings["ssl.truststore.location"] = settings["ssl.ca.location"]
        settings["ssl.truststore.type"] = "PEM"
    try:
        return client_context(TlsSettings(settings))
    except TlsConfigError as e:
        raise AdminError(INVALID_CONFIG, str(e)) from e


def _credentials(values: Mapping[str, str]) -> tuple[str, str]:
    if "sasl.username" in values:
        return values["sasl.username"], values.get("sasl.password", "")
    text = values.get("sasl.jaas.config")
    if not text:
        raise AdminError(INVALID_CONFIG, "a SASL login needs sasl.jaas.config")
    try:
        options = parse_listener_jaas_config(text).options
    except JaasConfigError as e:
        raise AdminError(INVALID_CONFIG, f"sasl.jaas.config: {e}") from e
    if "username" not in options or "password" not in options:
        raise AdminError(INVALID_CONFIG, "sasl.jaas.config needs username and password")
    return options["username"], options["password"]
