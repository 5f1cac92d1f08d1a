"""The broker's side of transactions: writing COMMIT/ABORT markers to partition leaders
(Kafka's TransactionMarkerChannelManager) and verifying that a transactional produce's
partition was added to its transaction (KIP-890).

Uses the transaction coordinator and ``josefk.server.network``; used by the broker and
the produce and transaction handlers.
"""
