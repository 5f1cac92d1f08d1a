"""The coordinators hosted on internal topics: ``group`` (``__consumer_offsets``) and
``transaction`` (``__transaction_state``).

Each coordinator is the leader of its topic's partition for a key (`records.partition_for`),
loads its state by replaying that partition when it becomes leader and forgets it when it
stops. The two are independent: the only code they share is ``records``, the framing of
their records (Kafka's generated schemas' primitives, batches, the Java string hash).
"""
