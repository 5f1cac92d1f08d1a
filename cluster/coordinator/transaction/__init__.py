"""The transaction coordinator (Kafka's TransactionCoordinator) on ``__transaction_state``.

``state`` is a transactional id's state machine as a transition table; ``coordinator``
the requests (InitProducerId, AddPartitionsToTxn, EndTxn ...) as records plus answers;
``effects`` what a completed transition asks of the broker (markers, timeouts);
``records`` the topic's keys and values byte for byte; ``service`` loads, writes and
schedules; ``host`` is what it needs of the broker.

Uses ``josefk.cluster.metadata``, ``josefk.cluster.partition``, ``josefk.log``; used by
the server's transaction handlers and marker writer. Independent of the group coordinator.
"""
