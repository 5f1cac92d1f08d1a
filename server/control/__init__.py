"""A broker's cluster mode (``zookeeper.connect`` set): the one bridge between kazoo's
thread and trio (``zk_bridge``), the node that registers, runs the controller when elected
and applies its requests (``node``), the controller's channel to the brokers and its wire
form (``channel``, ``wire``), and producer-id blocks from the controller.

Uses ``josefk.cluster.controller``, ``josefk.cluster.metadata``, ``josefk.server.network``
and ``josefk.server.replication``; used by the broker and the CLI.
"""
