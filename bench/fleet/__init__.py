"""The cluster at scale (issue 31): josefk clusters of N brokers against Apache Kafka
3.9.1 in ZooKeeper mode, timing topic visibility, controlled shutdown, controller
failover and restart back into every ISR. ``python -m bench.fleet --help``."""
