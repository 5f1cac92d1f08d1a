"""``/api/cluster``: the console's JSON, gathered through this broker's own inter-broker
listener with the broker's inter-broker login, so it works on a secured cluster too."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from typing import Any, Protocol

import trio

from josefk.server.admin import GroupListing, open_admin
from josefk.server.config.broker import BrokerConfig
from josefk.server.config.values import ConfigError
from josefk.server.console.gather import OpenAdmin, gather
from josefk.server.console.traffic import Traffic, traffic
from josefk.server.metrics.http import Response
from josefk.server.security.client import PLAINTEXT_PEERS, PeerSecurity, inter_broker_listener
from josefk.server.security.client import peer_security as inter_broker_security

# The whole gathering (cluster, groups, lag) must end within this; the page polls every
# 2 s and shows what came back.
GATHER_BUDGET_S = 3.0
# One request may take this long: a broker that does not answer (paused, cut off) fails
# its part with an error inside the budget, and the rest still comes back.
REQUEST_TIMEOUT_S = 2.0
# Answers to several open pages within this many seconds share one gathering.
REUSE_S = 1.0


class Endpoint(Protocol):
    host: str
    port: int


class ConsoleBroker(Protocol):
    """What the console needs of the broker."""

    node_id: int
    config: BrokerConfig
    peer_security: PeerSecurity
    endpoints: Mapping[str, Endpoint]
    local_broker: Endpoint


def own_listener(broker: ConsoleBroker) -> tuple[str, PeerSecurity]:
    """host:port of this broker's inter-broker listener and how to log in there.

    A single broker has no inter-broker login of its own unless its configuration names
    one; without one the console connects as a plain client."""
    name = inter_broker_listener(broker.config)
    endpoint = broker.endpoints.get(name, broker.local_broker)
    security = broker.peer_security
    if security is PLAINTEXT_PEERS and not broker.config.zookeeper_connect:
        try:
            security = inter_broker_security(broker.config)
        except ConfigError:
            security = PLAINTEXT_PEERS
    return f"{endpoint.host}:{endpoint.port}", security


class ClusterApi:
    """The handler of ``/api/cluster``: one gathering at a time, reused for ``REUSE_S``."""

    def __init__(self, broker: ConsoleBroker, traffic_of: Traffic = traffic,
                 budget_s: float = GATHER_BUDGET_S) -> None:
        self.broker = broker
        self.traffic_of = traffic_of
        self.budget_s = budget_s
        self._lock = trio.Lock()
        self._snapshot: dict[str, Any] | None = None
        self._taken = -1e9

    def _open_admin(self) -> OpenAdmin:
        bootstrap, security = own_listener(self.broker)
        return functools.partial(open_admin, bootstrap, security=security,
                                 client_id=f"josefk-console-{self.broker.node_id}",
                                 timeout_s=min(REQUEST_TIMEOUT_S, self.budget_s)
                                 )  # type: ignore[return-value]

    async def snapshot(self) -> dict[str, Any]:
        async with self._lock:
            if time.monotonic() - self._taken > REUSE_S:
                self._snapshot = await gather(self._open_admin(), self.budget_s,
                                              _listings(self._snapshot))
                self._taken = time.monotonic()
            assert self._snapshot is not None
            return self._snapshot

    async def __call__(self, query: Mapping[str, str]) -> Response:
        snapshot = await self.snapshot()
        body = {"broker_id": self.broker.node_id, **snapshot,
                "traffic": self.traffic_of(self.broker)}
        return Response(200, "application/json",
                        json.dumps(body, separators=(",", ":")).encode())


def _listings(snapshot: dict[str, Any] | None) -> list[GroupListing]:
    """The groups a snapshot names."""
    if snapshot is None:
        return []
    return [GroupListing(g["group_id"], g["protocol_type"], g["state"])
            for g in snapshot["groups"]]
