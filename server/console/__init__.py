"""The console: a read-only page with the cluster at a glance (brokers and controller,
topics with partitions, leaders, replicas and ISR, consumer groups with their lag, this
broker's throughput), served beside ``/metrics`` on the metrics port.

- ``routes(broker)``: the page, its script and style sheet, and ``/api/cluster``.
- ``api``: the JSON endpoint, gathered through this broker's own inter-broker listener.
- ``gather``: the bounded gathering through the admin client (``josefk.server.admin``).
- ``traffic``: this broker's cumulative bytes in and out, for the throughput chart.
- ``page.html``, ``console.js``, ``console.css``, ``favicon.svg``: the page;
  hand-written, no build step, nothing fetched from elsewhere at run time.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from josefk.server.metrics.http import Handler, Response

ASSETS = {
    "/": ("page.html", "text/html; charset=utf-8"),
    "/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
    "/favicon.svg": ("favicon.svg", "image/svg+xml"),
}


def _asset(name: str, content_type: str) -> Handler:
    from josefk.server.metrics.http import Response

    response = Response(200, content_type, files(__package__).joinpath(name).read_bytes())

    async def serve(query: Mapping[str, str]) -> Response:
        return response

    return serve


def routes(broker: Any) -> dict[str, Handler]:
    """The console's routes for the metrics HTTP server (path -> handler)."""
    from josefk.server.console.api import ClusterApi

    table = {path: _asset(name, content_type) for path, (name, content_type) in ASSETS.items()}
    table["/api/cluster"] = ClusterApi(broker)
    return table
