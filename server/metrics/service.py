"""The broker's metrics endpoint: a registry of its own, ``/metrics``, and the HTTP
server the console page shares."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from josefk.server.metrics.collector import BrokerCollector, MetricsHost
from josefk.server.metrics.http import Handler, HttpServer, Response, bound_address
from josefk.server.metrics.lag import LagGatherer
from josefk.server.metrics.loop import IdleInstrument
from josefk.server.metrics.recorder import Recorder
from josefk.server.network.peer import PeerPool

logger = logging.getLogger(__name__)

#: How long a scrape waits for another broker's high watermarks (consumer lag).
LAG_TIMEOUT_S = 2.0


class MetricsService:
    """Serves ``/metrics`` (and any routes mounted beside it) for one broker.

    Several brokers may run in one process (the pytest plugin): each has its own
    registry, never prometheus_client's global one.
    """

    def __init__(self, host: MetricsHost, recorder: Recorder, peers: PeerPool) -> None:
        self.idle = IdleInstrument()
        self.collector = BrokerCollector(host, recorder, self.idle)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self.lag = LagGatherer(host, peers)
        self.http = HttpServer({"/metrics": self.metrics})
        self.address: tuple[str, int] | None = None

    def mount(self, routes: Mapping[str, Handler]) -> None:
        self.http.mount(routes)

    async def metrics(self, query: Mapping[str, str]) -> Response:
        """The text exposition of every metric (consumer lag gathered first).

        The families are read from the broker here, on the event loop; writing them out
        (most of a scrape's time) goes to a worker thread, so requests are served
        meanwhile instead of waiting for the whole page.
        """
        self.collector.lags = await self.lag.gather()
        snapshot = _Snapshot(list(self.registry.collect()))
        body = await trio.to_thread.run_sync(generate_latest, snapshot)
        return Response(200, CONTENT_TYPE_LATEST, body)

    async def serve(self, host: str, port: int,
                    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Bind host:port, log the URL, report the address bound, serve until cancelled."""
        listeners = await trio.open_tcp_listeners(port, host=host or None)
        self.address = bound_address(listeners)
        shown = f"[{self.address[0]}]" if ":" in self.address[0] else self.address[0]
        logger.info("metrics on http://%s:%d/metrics", shown, self.address[1])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.idle.sample)
            await nursery.start(self.http.serve, listeners)
            task_status.started(self.address)


class _Snapshot:
    """Metric families already collected, in the shape generate_latest reads."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


async def serve_metrics(broker: MetricsHost, recorder: Recorder, host: str, port: int,
                        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED
                        ) -> None:
    """The broker's metrics endpoint with the console page mounted beside ``/metrics``
    (when ``josefk.server.console`` is installed), until cancelled."""
    peers = PeerPool(f"broker-{broker.node_id}-metrics", LAG_TIMEOUT_S, broker.peer_security)
    service = MetricsService(broker, recorder, peers)
    try:
        from josefk.server.console import routes
    except ModuleNotFoundError as e:  # a checkout without the console
        if e.name != "josefk.server.console":
            raise
    else:
        service.mount(routes(broker))
    await service.serve(host, port, task_status=task_status)
