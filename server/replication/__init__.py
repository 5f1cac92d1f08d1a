"""Replication between brokers: a follower's fetchers (truncation by leader epoch, then
fetching and appending the leader's batches), a leader's ISR updates through the
controller (AlterPartition), and incremental fetch sessions (KIP-227) on both sides.

Uses ``josefk.cluster.partition``, ``josefk.server.network``; it never names the broker:
it is handed a `ReplicationHost`.
"""
