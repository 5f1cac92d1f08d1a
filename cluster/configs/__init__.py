"""Entity configs: dynamic broker configs and client quotas, kept per entity (a broker or
the cluster default, a client id, a user, a user's client id) on the single broker's disk
or in ZooKeeper as Kafka 3.9 keeps them."""
