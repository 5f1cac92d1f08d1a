"""The controller (Kafka 3.9's ZooKeeper-mode KafkaController) and how a broker becomes it.

``membership`` keeps the broker registered and runs the election; the winner runs a
``controller.Controller``, which owns its parts as collaborators: the partition and replica
state machines (``states``), leader election (``leader_election``), topic deletion,
reassignment, ISR changes and broker lifecycle. What it knows is its ``context``; it talks
to brokers through the ``ControllerChannel`` interface of ``josefk.cluster.metadata.requests``
and to ZooKeeper through ``josefk.cluster.zk``.

Uses ``metadata``, ``zk``; used by ``josefk.server.control`` (the broker's cluster mode)
and the controller's request handlers. Independent of the coordinators.
"""
