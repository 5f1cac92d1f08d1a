"""A segment's indexes, in Kafka's on-disk formats: ``base`` is the memory-mapped,
preallocated file they share; ``offset`` (relative offset to file position), ``time``
(timestamp to relative offset) and ``txn`` (aborted transactions) are the three kinds.
Used by ``segment`` and the cleaner."""
