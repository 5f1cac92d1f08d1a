"""ZooKeeper as the cluster sees it: ``client`` is the interface (reads, conditional
writes, multis, watches, sessions; the trio bridge over kazoo implements it in
``josefk.server.control``) and ``znodes`` Kafka 3.9's paths and JSON, byte for byte.

Uses nothing of the cluster; used by ``metadata`` and ``controller``.
"""
