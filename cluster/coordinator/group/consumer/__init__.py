"""KIP-848 consumer groups (the "consumer" rebalance protocol) beside the classic ones.

``assignors`` are the server-side assignors (``uniform``, ``range``); ``reconciliation``
moves one member towards its target assignment as a table of transitions (revoke before
assign); ``member`` and ``group`` are a group's state with its epochs, changed only by
replaying ``records`` (the ConsumerGroup* records of ``__consumer_offsets``, read back
by ``decoding``); ``subscriptions`` are the topics a group subscribes to and their
metadata hash (KIP-1101), ``regex_refresh`` resolves the members' regular expressions in
the group's timer;
``heartbeat`` answers ConsumerGroupHeartbeat, fences members and describes groups, as
Kafka 4's ``GroupMetadataManager`` does; ``classic_members`` serves the JoinGroup,
SyncGroup, Heartbeat and LeaveGroup of members still speaking the classic protocol, and
``migration`` turns a classic group with members into a consumer group and back. No I/O
here: the classic package's coordinator writes the records and runs the timers.
"""
