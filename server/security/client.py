"""This broker as a client of the others, on the inter-broker listener
(``inter.broker.listener.name``, else the listener named by
``security.inter.broker.protocol``): its TLS context and its SASL login, with the
mechanism ``sasl.mechanism.inter.broker.protocol`` and the username and password of that
listener's JAAS entry for it, as Kafka's brokers log in to each other."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from josefk.server.config.broker import BrokerConfig
from josefk.server.config.values import ConfigError
from josefk.server.security.errors import AuthenticationError
from josefk.server.security.jaas import JaasConfigError, parse_listener_jaas_config
from josefk.server.security.listener import tls_settings
from josefk.server.security.mechanisms import MECHANISMS
from josefk.server.security.plain import PLAIN
from josefk.server.security.scram_client import ScramClient
from josefk.server.security.tls import TlsConfigError, client_context


class PlainClient:
    """PLAIN's one message (RFC 4616): ``NUL user NUL password``."""

    mechanism_name = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()
        self.complete = False

    def evaluate(self, challenge: bytes) -> bytes:
        if self.complete:
            raise AuthenticationError("PLAIN: unexpected challenge after the exchange")
        self.complete = True
        return self._message


@dataclass(frozen=True)
class PeerSecurity:
    """How to open a connection to another broker's inter-broker listener."""

    listener: str
    tls: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)

    def sasl_client(self) -> PlainClient | ScramClient | None:
        """A fresh client of the SASL exchange, or None on a listener without SASL."""
        if self.mechanism is None:
            return None
        if self.mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password)


PLAINTEXT_PEERS = PeerSecurity("PLAINTEXT")


def inter_broker_listener(config: BrokerConfig) -> str:
    """Kafka's ``interBrokerListenerName``: ``inter.broker.listener.name``, else the
    listener named as ``security.inter.broker.protocol`` (PLAINTEXT by default); josefk
    falls back to the first advertised listener when there is no such listener."""
    named = config.values["inter.broker.listener.name"]
    listeners = config.advertised_listeners or config.listeners
    if named:
        return str(named).upper()
    protocol = str(config.values["security.inter.broker.protocol"]).upper()
    if any(x.name == protocol for x in listeners):
        return protocol
    return listeners[0].name


def peer_security(config: BrokerConfig) -> PeerSecurity:
    """The inter-broker listener's client side; ConfigError if it cannot be built."""
    name = inter_broker_listener(config)
    listener = next((x for x in config.listeners if x.name == name), None)
    if listener is None:
        raise ConfigError(f"inter.broker.listener.name {name} is not one of the listeners",
                          "inter.broker.listener.name", name)
    tls = None
    if listener.security_protocol in ("SSL", "SASL_SSL"):
        try:
            tls = client_context(tls_settings(config, name))
        except TlsConfigError as e:
            raise ConfigError(f"inter-broker listener {name}: {e}", e.key, None) from e
    if listener.security_protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return PeerSecurity(name, tls)
    mechanism = str(config.listener_value(name, "sasl.mechanism.inter.broker.protocol"))
    if mechanism not in MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol {mechanism}: josefk's brokers "
                          f"log in to each other with {', '.join(MECHANISMS)}",
                          "sasl.mechanism.inter.broker.protocol", mechanism)
    key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_overrides.mechanism_value(name, mechanism, "sasl.jaas.config")
    if text is None:
        raise ConfigError(f"the inter-broker SASL/{mechanism} login needs {key}", key, None)
    try:
        options = parse_listener_jaas_config(text).options
    except JaasConfigError as e:
        raise ConfigError(f"{key}: {e}", key, None) from e
    if "username" not in options or "password" not in options:
        raise ConfigError(f"{key} needs username and password for brokers to log in to "
                          "each other", key, None)
    return PeerSecurity(name, tls, mechanism, options["username"], options["password"])
