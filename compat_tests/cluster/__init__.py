"""Cluster tests: several brokers on a real ZooKeeper, against Kafka 3.9.1 in ZooKeeper mode."""
