"""The storage engine in Kafka's on-disk format: segments (``segment``), their indexes
(``index``), the partition log (``log``, with ``transactions`` and ``deletion``), producer
state, leader epochs, checkpoints, crash recovery, the log manager and the cleaner
(``cleaner``). Plain synchronous code: no trio, no sockets; uses ``josefk.protocol``."""

# Before any module of this package imports kafka-python (see kafka_python).
from josefk.protocol.kafka_python import defer_client_imports

defer_client_imports()
