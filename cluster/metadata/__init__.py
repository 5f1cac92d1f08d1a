"""Cluster metadata as the broker sees it: topics, partitions, brokers and configs.

``store`` defines `MetadataStore`, the interface the broker codes against, and its
single-broker implementation (a local file); ``zk_store`` is the second implementation,
on ZooKeeper for a cluster, filled by the controller's UpdateMetadata into ``cache``.
``placement`` places replicas (Kafka's round-robin, rack aware); ``requests`` holds the
controller's requests to brokers (LeaderAndIsr, UpdateMetadata, StopReplica) as data;
``errors`` the failures, each with its Kafka error code.

Uses ``josefk.cluster.zk``; used by the controller, the coordinators and the server.
"""
