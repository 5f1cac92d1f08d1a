"""What one listener's connections need to be secured: its TLS context, its SASL
settings and how a principal is named, built once from the broker's configuration
(with the listener's ``listener.name.<listener>.`` settings applied)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from josefk.server.config.broker import BrokerConfig
from josefk.server.config.listeners import Listener
from josefk.server.config.values import ConfigError
from josefk.server.security.authentication import SaslConfig
from josefk.server.security.jaas import JaasConfigError, parse_listener_jaas_config
from josefk.server.security.mechanisms import MECHANISMS
from josefk.server.security.plain import PLAIN, plain_users
from josefk.server.security.principal import SslPrincipalMapper, x509_module
from josefk.server.security.scram import CredentialLookup
from josefk.server.security.tls import TlsConfigError, TlsSettings, server_context

TLS_KEYS = (
    "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.keystore.type",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
)


@dataclass(frozen=True)
class ListenerSecurity:
    """A listener's security: ``tls`` for SSL and SASL_SSL, ``sasl`` for the SASL ones."""

    listener: str
    protocol: str
    tls: ssl.SSLContext | None = None
    sasl: SaslConfig | None = None
    principal_mapper: SslPrincipalMapper | None = None
    sasl_max_receive_size: int = 524288
    # A connection not authenticated by then is closed.
    authentication_timeout_s: float = 30.0


PLAINTEXT = ListenerSecurity("PLAINTEXT", "PLAINTEXT")


def tls_settings(config: BrokerConfig, listener: str) -> TlsSettings:
    """The ``ssl.*`` values of ``listener``, its own settings winning."""
    return TlsSettings({k: config.listener_value(listener, k) for k in TLS_KEYS})


def listener_security(config: BrokerConfig, listener: Listener,
                      scram_credentials: CredentialLookup) -> ListenerSecurity:
    """Build a listener's security from the configuration; ConfigError if it cannot be."""
    name, protocol = listener.name, listener.security_protocol
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            tls = server_context(tls_settings(config, name))
        except TlsConfigError as e:
            raise ConfigError(f"listener {name}: {e}", e.key, None) from e
        x509_module()  # now, not during the first client certificate's handshake
    sasl = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        sasl = _sasl_config(config, name, scram_credentials)
    rules = config.listener_value(name, "ssl.principal.mapping.rules")
    try:
        mapper = SslPrincipalMapper(rules)
    except ValueError as e:
        raise ConfigError(f"listener {name}: ssl.principal.mapping.rules: {e}",
                          "ssl.principal.mapping.rules", rules) from e
    return ListenerSecurity(
        name, protocol, tls, sasl, mapper,
        sasl_max_receive_size=config.listener_value(name, "sasl.server.max.receive.size"),
        authentication_timeout_s=config.request_timeout_ms / 1000)


def _sasl_config(config: BrokerConfig, name: str,
                 scram_credentials: CredentialLookup) -> SaslConfig:
    mechanisms = tuple(config.listener_value(name, "sasl.enabled.mechanisms"))
    unsupported = [m for m in mechanisms if m not in MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(f"listener {name}: sasl.enabled.mechanisms {list(mechanisms)}: josefk "
                          f"offers {', '.join(MECHANISMS)} (not GSSAPI or OAUTHBEARER)",
                          "sasl.enabled.mechanisms", ",".join(mechanisms))
    users = None
    if PLAIN in mechanisms:
        users = plain_users(_jaas_options(config, name, PLAIN))
    return SaslConfig(mechanisms, users, scram_credentials,
                      reauth_ms=config.listener_value(name, "connections.max.reauth.ms"),
                      failed_delay_ms=config.values["connection.failed.authentication.delay.ms"])


def _jaas_options(config: BrokerConfig, name: str, mechanism: str) -> dict[str, str]:
    key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_overrides.mechanism_value(name, mechanism, "sasl.jaas.config")
    if text is None:
        raise ConfigError(f"listener {name}: SASL/{mechanism} needs {key} (the JAAS "
                          f"configuration of its login module)", key, None)
    try:
        return dict(parse_listener_jaas_config(text).options)
    except JaasConfigError as e:
        raise ConfigError(f"{key}: {e}", key, None) from e
