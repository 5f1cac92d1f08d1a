"""The broker process: the network, the request path and everything with I/O.

- ``network``: listeners, the acceptor, connections (one request at a time), connection
  quotas, zero-copy sends, and connections to other brokers (``peer``).
- ``config``: ``server.properties`` with Kafka's keys, defaults and listeners.
- ``handlers``: one module per API family, registered in a table.
- ``replication``: follower fetchers, ISR updates, incremental fetch sessions.
- ``transactions``: transaction markers and the verification of transactional produce.
- ``control``: a broker's cluster mode: the kazoo bridge, registration, the controller's
  channel to brokers and its wire, producer-id blocks.
- ``admin``: a Kafka admin client over the wire (on ``network.peer``) and the
  ``josefk topics|groups|cluster`` commands.
- ``metrics``: Prometheus metrics with Kafka's JMX names and the HTTP server of
  ``/metrics`` (``metrics.port``), which also serves the ``console`` page.
- ``broker`` assembles them; ``cli`` starts it; ``purgatory`` parks delayed requests.

Uses ``josefk.cluster``, ``josefk.log``, ``josefk.protocol``; nothing uses it.
"""

# Before any module of this package imports kafka-python (see kafka_python).
from josefk.protocol.kafka_python import defer_client_imports

defer_client_imports()
