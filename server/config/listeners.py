"""Listener endpoints: the ``NAME://host:port`` entries of ``listeners`` and
``advertised.listeners``, and the ``listener.security.protocol.map`` that names their
security protocols."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from josefk.server.config.values import ConfigError, jtrim

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS = SECURITY_PROTOCOLS

_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)]?:(-?[0-9]+)")


@dataclass(frozen=True, slots=True)
class Listener:
    """A ``NAME://host:port`` endpoint; ``host`` None means every interface."""

    name: str
    security_protocol: str
    host: str | None
    port: int

    @property
    def bind_host(self) -> str:
        return self.host or "0.0.0.0"

    def __str__(self) -> str:
        host = self.host or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{self.name}://{host}:{self.port}"


def protocol_map(raw: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for entry in filter(None, (jtrim(e) for e in raw.split(","))):
        name, sep, protocol = entry.partition(":")
        protocol = jtrim(protocol).upper()
        if not sep or not jtrim(name) or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {raw} for configuration "
                              f"listener.security.protocol.map: bad entry {entry!r}",
                              "listener.security.protocol.map", raw)
        result[jtrim(name).upper()] = protocol
    return result


def parse_http_endpoint(raw: str) -> tuple[str, int]:
    """(host, port) of an ``http://host:port`` address (``metrics.listener``); the host may
    be empty (every interface) or a bracketed IPv6 address; ValueError if malformed."""
    m = re.fullmatch(r"http://(\[[0-9a-fA-F:.%]+\]|[^:/\[\]\s]*):(\d{1,5})/?", raw.strip())
    if not m or int(m.group(2)) > 65535:
        raise ValueError(f"{raw!r} is not http://host:port with a port in 0-65535")
    return m.group(1).strip("[]"), int(m.group(2))


def parse_listeners(key: str, entries: list[str], protocols: dict[str, str]) -> list[Listener]:
    listeners: list[Listener] = []
    for entry in entries:
        m = _LISTENER.fullmatch(entry)
        if not m:
            raise ConfigError(f"Invalid value {','.join(entries)} for configuration {key}: "
                              f"Unable to parse {entry} to a broker endpoint", key, entry)
        name, host, port = m.group(1).upper(), m.group(2) or None, int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {entry} for configuration {key}: "
                              f"port {port} is not in 0-65535", key, entry)
        if name not in protocols:
            raise ConfigError(f"Invalid value {entry} for configuration {key}: "
                              f"No security protocol defined for listener {name}", key, entry)
        protocol = protocols[name]
        if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {entry} for configuration {key}: security "
                              f"protocol {protocol} is not supported (only PLAINTEXT)", key, entry)
        listeners.append(Listener(name, protocol, host, port))
    names = [x.name for x in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"Invalid value {','.join(entries)} for configuration {key}: "
                          "Each listener must have a different name", key, entries)
    return listeners


def check_distinct_ports(listeners: list[Listener]) -> None:
    by_port: dict[int, list[Listener]] = {}
    for x in listeners:
        if x.port != 0:
            by_port.setdefault(x.port, []).append(x)
    for port, group in by_port.items():
        if len(group) > 1 and not _ipv4_and_ipv6(group):
            raise ConfigError(f"Invalid value {','.join(map(str, listeners))} for configuration "
                              f"listeners: Each listener must have a different port unless "
                              f"exactly one has an IPv4 and the other an IPv6 address "
                              f"(port {port})", "listeners", port)


def _ipv4_and_ipv6(group: list[Listener]) -> bool:
    try:
        versions = sorted(ipaddress.ip_address(x.host or "").version for x in group)
    except ValueError:
        return False
    return versions == [4, 6]
