"""The errors of cluster metadata changes, each carrying the Kafka error code its
controller answers (``ReplicationControlManager``)."""

from __future__ import annotations

MAX_PARTITIONS_PER_BATCH = 10_000
"""The most partitions one CreateTopics or CreatePartitions request may add: Kafka's
controller (``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``) bounds the metadata
records of one request (``QuorumController.MAX_RECORDS_PER_USER_OP``) by the same number."""


class ClusterError(Exception):
    """A refused metadata change; ``error_code`` is the Kafka error code to answer with."""

    error_code = -1  # UNKNOWN_SERVER_ERROR


class UnknownTopicError(ClusterError):
    error_code = 3  # UNKNOWN_TOPIC_OR_PARTITION


class InvalidTopicError(ClusterError):
    error_code = 17  # INVALID_TOPIC_EXCEPTION


class TopicExistsError(ClusterError):
    error_code = 36  # TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(ClusterError):
    error_code = 37  # INVALID_PARTITIONS


class InvalidReplicationFactorError(ClusterError):
    error_code = 38  # INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(ClusterError):
    error_code = 39  # INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(ClusterError):
    error_code = 40  # INVALID_CONFIG


class InvalidRequestError(ClusterError):
    error_code = 42  # INVALID_REQUEST


class PolicyViolationError(ClusterError):
    error_code = 44  # POLICY_VIOLATION


class ManualReplicationFactorError(InvalidRequestError, InvalidReplicationFactorError):
    """A replication factor together with a manual assignment: INVALID_REQUEST in Kafka."""


class ManualPartitionCountError(InvalidRequestError, InvalidPartitionsError):
    """A partition count together with a manual assignment: INVALID_REQUEST in Kafka."""


class NonConsecutivePartitionsError(InvalidReplicaAssignmentError):
    """A manual assignment's partitions are not 0, 1, ...; Kafka checks this last."""


class TooManyPartitionsError(PolicyViolationError):
    """CreateTopics for more than MAX_PARTITIONS_PER_BATCH partitions in all: Kafka's
    ``validateTotalNumberOfPartitions`` refuses the whole request before anything else."""

    def __init__(self) -> None:
        super().__init__("Excessively large number of partitions per request.")


class TooManyRecordsError(PolicyViolationError):
    """CreateTopics whose topics, config overrides and partitions come to more than
    MAX_PARTITIONS_PER_BATCH metadata records: Kafka's controller overflows its bounded
    record list and refuses the whole request with this (``EventHandlerExceptionInfo``)."""

    def __init__(self) -> None:
        super().__init__("Unable to perform excessively large batch operation.")


class PartitionBatchOverflowError(ClusterError):
    """CreatePartitions adding more partitions than the request has room for (of
    MAX_PARTITIONS_PER_BATCH): Kafka's controller overflows its bounded record list and
    catches that as an unexpected error, so UNKNOWN_SERVER_ERROR with no message."""

    error_code = -1  # UNKNOWN_SERVER_ERROR

    def __init__(self, added: int, room: int = MAX_PARTITIONS_PER_BATCH) -> None:
        super().__init__(f"{added} new partitions, room for {room} in this request")


class MissingRackError(ClusterError):
    """Some brokers have a rack and some none, so replicas cannot be placed by rack. Kafka
    raises AdminOperationException, which is no ApiException: the broker answers
    UNKNOWN_SERVER_ERROR (and, as for every such error, no message)."""

    error_code = -1  # UNKNOWN_SERVER_ERROR


class MetadataCorruptError(ValueError):
    """The store's file exists but cannot be read back."""


class InconsistentClusterIdError(ValueError):
    """The log dir belongs to another cluster (Kafka's InconsistentClusterIdException)."""
