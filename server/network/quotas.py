"""Connection limits: Kafka's ``ConnectionQuotas`` (SocketServer.scala) on trio.

- ``max.connections.per.ip`` (and its ``.overrides`` by host): a connection over an
  address's limit is accepted and closed at once (Kafka's TooManyConnectionsException,
  logged at INFO).
- ``max.connections`` (broker-wide): once reached, an acceptor holds the connection it
  just accepted until another closes; later ones wait in the listen backlog.
- KIP-402: with more than one listener, the inter-broker listener is never blocked by
  ``max.connections``; when its connections push the total over the limit, the least
  recently active connections of the other listeners are closed.
- KIP-612: ``max.connection.creation.rate``, broker-wide (the protected inter-broker
  listener aside) and per listener (``listener.name.<l>.max.connection.creation.rate``),
  measured as Kafka's quota sensors are; the acceptor waits out the throttle time (at
  most one quota window) before it takes the connection.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Iterable, Mapping

import trio

from josefk.server.config.broker import BrokerConfig
from josefk.server.config.values import ConfigError
from josefk.server.quotas.rate import RateConfig, SampledRate, throttle_time_ms

RATE_KEY = "max.connection.creation.rate"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TooManyConnections(Exception):
    """The address already has its maximum number of connections."""

    def __init__(self, ip: IPAddress, count: int) -> None:
        super().__init__(f"Too many connections from {ip} (maximum = {count})")
        self.ip = ip
        self.count = count


def ip_of(host: str) -> IPAddress:
    """The address of a peer or resolved host; IPv4-mapped IPv6 counts as IPv4, as in Java."""
    address = ipaddress.ip_address(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def resolve_overrides(overrides: Mapping[str, int]) -> dict[IPAddress, int]:
    """Kafka's ``InetAddress.getByName`` of every override host (blocking: DNS)."""
    resolved: dict[IPAddress, int] = {}
    for host, count in overrides.items():
        try:
            address = ip_of(host)
        except ValueError:
            try:
                infos = socket.getaddrinfo(host or "localhost", None, type=socket.SOCK_STREAM)
            except OSError as e:
                raise ConfigError(f"max.connections.per.ip.overrides: unknown host {host}: {e}",
                                  "max.connections.per.ip.overrides", host) from e
            address = ip_of(str(infos[0][4][0]))
        resolved[address] = count
    return resolved


def inter_broker_listener(config: BrokerConfig) -> str:
    """``inter.broker.listener.name``, else the listener named after
    ``security.inter.broker.protocol`` (Kafka's ``interBrokerListenerName``)."""
    values = config.values
    return str(values["inter.broker.listener.name"]
               or values["security.inter.broker.protocol"]).upper()


class CreationRates:
    """Connection creation rates, broker-wide and per listener, against their limits."""

    def __init__(self, config: RateConfig, broker_limit: int,
                 listener_limits: Mapping[str, int]) -> None:
        self.config = config
        self.broker_limit = broker_limit
        self.listener_limits = dict(listener_limits)
        now = _now_ms()
        self._broker = SampledRate(config, now)
        self._listeners = {name: SampledRate(config, now) for name in listener_limits}

    @classmethod
    def from_config(cls, config: BrokerConfig) -> CreationRates:
        values = config.values
        return cls(RateConfig(values["quota.window.num"],
                              values["quota.window.size.seconds"] * 1000), *_limits(config))

    def reconfigure(self, config: BrokerConfig) -> None:
        """New limits (dynamic broker configs); the rates measured so far stay."""
        self.broker_limit, limits = _limits(config)
        self.listener_limits.update((k, v) for k, v in limits.items() if k in self._listeners)

    def record(self, listener: str, protected: bool) -> int:
        """Count one new connection; the milliseconds to wait before taking it: the
        longer of the broker's and the listener's throttle, bounded by one window."""
        now = _now_ms()
        waits = []
        if not protected:
            waits.append(_recorded(self._broker, self.broker_limit, now))
        rate = self._listeners.get(listener)
        if rate is not None:
            waits.append(_recorded(rate, self.listener_limits[listener], now))
        return min(max(waits, default=0), self.config.window_ms)


def _limits(config: BrokerConfig) -> tuple[int, dict[str, int]]:
    """The broker-wide limit and each listener's (its prefixed key, else the broker's,
    as Kafka's ``valuesWithPrefixOverride``)."""
    return config.values[RATE_KEY], {x.name: config.listener_value(x.name, RATE_KEY)
                                     for x in config.listeners}


def _recorded(rate: SampledRate, limit: int, now_ms: int) -> int:
    rate.record(1.0, now_ms)
    return throttle_time_ms(rate, limit, now_ms)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ConnectionQuotas:
    """Counts connections by listener and address and enforces Kafka's limits.

    ``inc`` and ``dec`` are synchronous, so a check and its count cannot interleave
    with another task's.
    """

    def __init__(self, max_connections: int, max_per_ip: int,
                 per_ip_overrides: Mapping[IPAddress, int], listeners: Iterable[str],
                 inter_broker: str, rates: CreationRates | None = None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self.listener_counts = dict.fromkeys(listeners, 0)
        self.inter_broker = inter_broker
        self.rates = rates
        self.counts: dict[IPAddress, int] = {}
        self.total = 0
        self._slot_freed = trio.Event()

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ConnectionQuotas:
        return cls(config.max_connections, config.max_connections_per_ip,
                   resolve_overrides(config.max_connections_per_ip_overrides),
                   [x.name for x in config.listeners], inter_broker_listener(config),
                   CreationRates.from_config(config))

    def reconfigure(self, max_connections: int, max_per_ip: int,
                    per_ip_overrides: Mapping[IPAddress, int]) -> None:
        """New limits (dynamic broker configs), as Kafka's ``ConnectionQuotas``: they
        apply to connections accepted from now on (open ones stay); an acceptor waiting
        for a slot checks again."""
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self._slot_freed.set()
        self._slot_freed = trio.Event()

    def protected(self, listener: str) -> bool:
        """KIP-402: the inter-broker listener, when there is another."""
        return listener == self.inter_broker and len(self.listener_counts) > 1

    def slot_available(self, listener: str) -> bool:
        return self.protected(listener) or self.total < self.max_connections

    async def wait_for_slot(self, listener: str) -> None:
        """Return once ``listener`` may take one more connection: its creation rate
        throttle waited out, then a slot under max.connections."""
        if self.rates is not None:
            wait_ms = self.rates.record(listener, self.protected(listener))
            if wait_ms:
                await trio.sleep(wait_ms / 1000)
        while not self.slot_available(listener):
            await self._slot_freed.wait()

    def inc(self, listener: str, ip: IPAddress) -> None:
        """Count a new connection; TooManyConnections (not counted) if ``ip`` is at its limit."""
        count = self.counts.get(ip, 0)
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if count >= limit:
            raise TooManyConnections(ip, limit)
        self.counts[ip] = count + 1
        self.total += 1
        self.listener_counts[listener] += 1

    def dec(self, listener: str, ip: IPAddress) -> None:
        count = self.counts.pop(ip)
        if count > 1:
            self.counts[ip] = count - 1
        self.total -= 1
        self.listener_counts[listener] -= 1
        if self._slot_freed.statistics().tasks_waiting:
            self._slot_freed.set()
            self._slot_freed = trio.Event()

    def excess(self) -> int:
        """How many connections of unprotected listeners must go (KIP-402)."""
        return max(0, self.total - self.max_connections)

    def get(self, ip: IPAddress) -> int:
        return self.counts.get(ip, 0)
