"""Connection creation rates per client address (KIP-612's IP quotas): the
``connection_creation_rate`` of ``ips`` entities in the entity config store (a literal
address, a host name, or ``<default>``), measured as Kafka's quota sensors are.

Kafka accepts a connection over its address's rate and closes it once the throttle time
has passed (``ConnectionThrottledException``); the socket server does the same.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from josefk.server.network.quotas import IPAddress, ip_of
from josefk.server.quotas.rate import RateConfig, SampledRate, throttle_time_ms

logger = logging.getLogger(__name__)

IPS = "ips"
DEFAULT = "<default>"
RATE_KEY = "connection_creation_rate"
#: Idle addresses' rates are dropped once this many are kept.
MAX_TRACKED = 4096


class IpQuotaStore(Protocol):
    """The entity config store, as far as IP quotas need it."""

    def get(self, entity_type: str, name: str) -> Mapping[str, str]: ...

    def names(self, entity_type: str) -> list[str]: ...

    def subscribe(self, listener: Callable[[str, str], None]) -> None: ...


class IpConnectionRates:
    """Each address's connection creation rate against its limit (its own entity's, else
    the ``<default>`` entity's; none: unlimited)."""

    def __init__(self, store: IpQuotaStore, config: RateConfig,
                 now_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000)) -> None:
        self._store = store
        self.config = config
        self._now_ms = now_ms
        self.limits: dict[IPAddress, int] = {}
        self.default: int | None = None
        self._rates: dict[IPAddress, SampledRate] = {}
        self._reload(store.names(IPS))
        store.subscribe(self._on_change)

    def _on_change(self, entity_type: str, name: str) -> None:
        if entity_type == IPS:
            self._reload(self._store.names(IPS))

    def _reload(self, names: Collection[str]) -> None:
        limits: dict[IPAddress, int] = {}
        default = None
        for name in names:
            raw = self._store.get(IPS, name).get(RATE_KEY)
            if raw is None:
                continue
            rate = int(float(raw))
            if name == DEFAULT:
                default = rate
                continue
            address = _address(name)
            if address is not None:
                limits[address] = rate
        self.limits, self.default = limits, default
        logger.info("connection creation rates by address: %s; default %s",
                    {str(k): v for k, v in limits.items()} or "none", default)

    def throttle_ms(self, ip: IPAddress) -> int:
        """Count a connection from ``ip``; the milliseconds after which to close it when
        it is over its address's rate (then it is not counted), else 0."""
        limit = self.limits.get(ip, self.default)
        if limit is None:
            return 0
        now = self._now_ms()
        rate = self._rates.get(ip)
        if rate is None:
            if len(self._rates) >= MAX_TRACKED:
                self._forget_idle(now)
            rate = self._rates[ip] = SampledRate(self.config, now)
        rate.record(1.0, now)
        wait = throttle_time_ms(rate, limit, now)
        if wait:
            rate.record(-1.0, now)  # a refused connection does not count, as in Kafka
        return min(wait, self.config.window_ms)

    def _forget_idle(self, now_ms: int) -> None:
        idle = [ip for ip, rate in self._rates.items() if rate.total(now_ms) <= 0]
        for ip in idle or list(self._rates)[:len(self._rates) // 2]:
            del self._rates[ip]


def _address(name: str) -> IPAddress | None:
    """The address an entity names (a host name resolved, blocking: as Kafka's
    ``InetAddress.getByName``); None, logged, if it does not resolve."""
    try:
        return ip_of(name)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        logger.warning("connection creation rate of %s ignored: it does not resolve (%s)",
                       name, e)
        return None
    return ip_of(str(infos[0][4][0]))
