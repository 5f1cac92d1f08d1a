"""Connection creation rates per address (``server.network.ip_rates``): limits followed
from the entity config store, throttled connections not counted, a bounded table."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping

from josefk.server.network import ip_rates
from josefk.server.network.ip_rates import DEFAULT, IPS, RATE_KEY, IpConnectionRates
from josefk.server.quotas.rate import RateConfig

A, B = ipaddress.ip_address("10.0.0.1"), ipaddress.ip_address("10.0.0.2")


class Store:
    def __init__(self) -> None:
        self.entities: dict[str, dict[str, str]] = {}
        self.listeners: list[Callable[[str, str], None]] = []

    def get(self, entity_type: str, name: str) -> Mapping[str, str]:
        return self.entities.get(name, {}) if entity_type == IPS else {}

    def names(self, entity_type: str) -> list[str]:
        return sorted(self.entities) if entity_type == IPS else []

    def subscribe(self, listener: Callable[[str, str], None]) -> None:
        self.listeners.append(listener)

    def set(self, name: str, rate: int | None) -> None:
        if rate is None:
            self.entities.pop(name, None)
        else:
            self.entities[name] = {RATE_KEY: str(rate)}
        for listener in self.listeners:
            listener(IPS, name)


def test_limits_follow_the_store_and_throttled_connections_do_not_count() -> None:
    store, now = Store(), [1_000_000]
    rates = IpConnectionRates(store, RateConfig(11, 1000), lambda: now[0])
    assert rates.throttle_ms(A) == 0  # no quota: never throttled
    store.set(A.exploded, 1)
    # One a second over ten windows: ten at once, then throttled, at most a window.
    assert [rates.throttle_ms(A) for _ in range(10)] == [0] * 10
    waits = [rates.throttle_ms(A) for _ in range(5)]
    assert all(0 < w <= 1000 for w in waits)
    assert rates.throttle_ms(B) == 0  # another address has no quota
    store.set(DEFAULT, 1)
    assert rates.throttle_ms(B) == 0
    # The refused connections were not counted; once the samples age out, A may again.
    assert rates._rates[A].total(now[0]) == 10
    now[0] += 11_000
    assert rates.throttle_ms(A) == 0
    store.set(A.exploded, None)
    store.set(DEFAULT, None)
    assert rates.throttle_ms(A) == 0 and rates.limits == {} and rates.default is None


def test_the_table_of_rates_stays_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(ip_rates, "MAX_TRACKED", 8)
    store, now = Store(), [0]
    store.set(DEFAULT, 100)
    rates = IpConnectionRates(store, RateConfig(11, 1000), lambda: now[0])
    for i in range(50):
        now[0] += 20_000  # each address idle long before the next comes
        assert rates.throttle_ms(ipaddress.ip_address(f"10.1.0.{i}")) == 0
    assert len(rates._rates) <= 8
