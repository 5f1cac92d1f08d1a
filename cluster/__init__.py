"""The cluster's state, below the network: what a broker knows and decides.

Packages, in the order their imports point (each may use those after it):

- ``controller``: the active controller (Kafka's KafkaController) and the election that
  makes one, with the parts it owns.
- ``coordinator.group`` and ``coordinator.transaction``: the group and transaction
  coordinators, independent of each other and of the controller; they share only
  ``coordinator.records`` (the framing of their internal topics).
- ``metadata``: the `MetadataStore` the broker codes against (a local file for one
  broker, ZooKeeper for a cluster), the metadata cache, replica placement, the
  controller's requests to brokers as data.
- ``security``: ACLs and SCRAM credentials as data, and the pure authorization check.
- ``zk``: the ZooKeeper interface the cluster writes through, and Kafka 3.9's znodes.
- ``partition``, ``producer_ids``, ``truncation``, ``background``: one partition replica
  and its ISR, producer-id blocks, the follower's truncation point, logged background work.

Used by ``josefk.server`` only; uses ``josefk.log`` and ``josefk.protocol``. Nothing here
opens a socket: the network is handed in through narrow interfaces.
"""

# Before any module of this package imports kafka-python (see kafka_python).
from josefk.protocol.kafka_python import defer_client_imports

defer_client_imports()
