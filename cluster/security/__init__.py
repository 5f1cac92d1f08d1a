"""ACLs and SCRAM credentials as data: Kafka's resource, operation and permission model,
the pure authorization check, and the ZooKeeper layout they are stored in. Used by the
metadata stores (cluster.metadata) and the server's security package.
"""
