"""Prometheus metrics named after Kafka's JMX metrics, and the small HTTP server that
serves them (and the console page) when ``metrics.port`` or ``metrics.listener`` is set.

- ``recorder``: plain counters the request path bumps (no prometheus_client), and the
  per-connection request timer (queue, local, remote, send, total time).
- ``loop``: the event loop's idle share, from a trio instrument.
- ``collector``: the metric families, built at scrape time from the broker's state.
- ``lag``: consumer lag of the groups coordinated here (ListOffsets to other leaders).
- ``http``: a trio HTTP/1.1 GET server with a route table (``Response``, ``Handler``).
- ``service``: a registry per broker, ``/metrics``, the console's routes mounted beside.

Never names the broker: it reads it through ``collector.MetricsHost``. Only ``service``
and ``collector`` import prometheus_client, and the broker imports them only when
metrics are on.
"""
