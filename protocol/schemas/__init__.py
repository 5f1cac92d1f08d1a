"""Kafka JSON message specs for the inter-broker apis kafka-python ships no schema for.

LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7)
and AlterPartition (56) as Apache Kafka 3.9.1 defines them (ZooKeeper mode;
Kafka 4 removed the first four). The files are in Kafka's own spec format, so
kafka-python's `load_json` reads them: see `josefk.protocol.controller_messages`.

Also KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), which
kafka-python lacks too, and their classes (`consumer_groups`).
"""
