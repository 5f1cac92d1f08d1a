"""The group coordinator (Kafka's GroupCoordinator) on ``__consumer_offsets``: classic
groups, and KIP-848 consumer groups in the ``consumer`` package.

``api`` is its vocabulary (errors, requests, results); ``state`` one classic group's state
machine as a transition table; ``joins`` and ``rebalance`` the classic protocol on one
group; ``groups`` and ``offsets`` the membership and offset requests over all groups;
``pending_offsets`` and ``txn_commits`` the offsets transactions commit; ``records`` the
topic's keys and values byte for byte; ``partitions`` loads and unloads the partitions
and writes records, ``timers`` fires the groups' deadlines, ``coordinator`` serves the
requests over them; ``host`` is what it needs of the broker.

Uses ``josefk.cluster.metadata``, ``josefk.cluster.partition``, ``josefk.log``; used by
the server's group and offset handlers. Independent of the transaction coordinator.
"""
