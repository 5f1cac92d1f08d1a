"""What the transaction coordinator asks its I/O layer to do, and what it answers.

The coordinator (`txn_coordinator`) is pure: each request returns a :class:`Decision`,
either an answer now or a :class:`TxnWrite` (one ``__transaction_state`` record to
append with acks=all). The I/O layer appends it, hands the append's error code back to
``TxnCoordinator.write_done`` and gets a :class:`WriteOutcome`: the answer, and maybe a
:class:`MarkerJob` (COMMIT/ABORT control batches to write to the transaction's
partitions, then report with ``TxnCoordinator.markers_written``) or a write to retry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from josefk.cluster.coordinator.transaction.records import TopicPartition
from josefk.cluster.coordinator.transaction.state import TxnTransit
from josefk.protocol import error_codes as ec

T = TypeVar("T")

# API keys whose old versions cannot say PRODUCER_FENCED.
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
_FIRST_VERSION_WITH_PRODUCER_FENCED = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2,
                                       ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}


def error_for_version(error: int, api_key: int, version: int) -> int:
    """Old clients do not know PRODUCER_FENCED; Kafka tells them INVALID_PRODUCER_EPOCH."""
    if error == ec.PRODUCER_FENCED and version < _FIRST_VERSION_WITH_PRODUCER_FENCED.get(
            api_key, 0):
        return ec.INVALID_PRODUCER_EPOCH
    return error


def append_error_to_coordinator_error(code: int) -> int:
    """What a requester is told when appending to ``__transaction_state`` failed."""
    if code in (ec.UNKNOWN_TOPIC_OR_PARTITION, ec.NOT_ENOUGH_REPLICAS,
                ec.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ec.REQUEST_TIMED_OUT):
        return ec.COORDINATOR_NOT_AVAILABLE
    if code in (ec.NOT_LEADER_OR_FOLLOWER, ec.KAFKA_STORAGE_ERROR):
        return ec.NOT_COORDINATOR
    if code in (ec.MESSAGE_TOO_LARGE, ec.RECORD_LIST_TOO_LARGE):
        return ec.UNKNOWN_SERVER_ERROR
    return code


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """The broker settings the coordinator reads, with Kafka's defaults."""

    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    offsets_num_partitions: int = 50  # offsets.topic.num.partitions, for AddOffsetsToTxn
    flexible_records: bool = False  # transaction.version >= 1: TransactionLogValue v1


class WriteKind(Enum):
    INIT_PRODUCER_ID = "InitProducerId: new epoch or producer id"
    FENCE = "InitProducerId on an open transaction: fence it and abort"
    ADD_PARTITIONS = "AddPartitionsToTxn / AddOffsetsToTxn"
    END_TXN = "EndTxn: PrepareCommit or PrepareAbort"
    TIMEOUT_ABORT = "a transaction past its timeout: fence and abort"
    COMPLETE = "every marker written: CompleteCommit or CompleteAbort"
    EXPIRE = "an idle transactional id: tombstone"


@dataclass(frozen=True, slots=True)
class TxnWrite:
    """One record for ``__transaction_state`` partition ``partition``, to append with
    acks=all while this broker still leads it at ``coordinator_epoch``."""

    kind: WriteKind
    transactional_id: str
    partition: int
    coordinator_epoch: int
    transit: TxnTransit
    key: bytes
    value: bytes | None
    commit: bool = False
    is_epoch_fence: bool = False


@dataclass(frozen=True, slots=True)
class Decision(Generic[T]):
    """An answer now, or a write whose `WriteOutcome` will carry the answer."""

    answer: T | None = None
    write: TxnWrite | None = None


@dataclass(eq=False, slots=True)
class MarkerJob:
    """Control batches (COMMIT if ``commit`` else ABORT) to write with WriteTxnMarkers to
    each of ``partitions``, then ``complete`` to append (``TxnCoordinator.markers_written``
    hands it back once every partition is done). A job may have no partitions."""

    transactional_id: str
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    complete: TxnWrite


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """The answer once a write is done. For InitProducerId: ``producer_id``,
    ``producer_epoch``, ``error``; for the others ``error`` alone."""

    error: int
    producer_id: int = -1
    producer_epoch: int = -1
    markers: MarkerJob | None = None
    retry: bool = False  # append the same write again later (a Complete* record)


@dataclass(frozen=True, slots=True)
class MarkerProgress:
    """After some marker results: partitions to send again (to their current leaders), or
    the Complete* record to append now, or nothing more to do (``cancelled``)."""

    retry: frozenset[TopicPartition] = frozenset()
    complete: TxnWrite | None = None
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class InitPidResult:
    producer_id: int
    producer_epoch: int
    error: int


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """One DescribeTransactions entry."""

    transactional_id: str
    error: int
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    start_timestamp: int = -1
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class TxnListing:
    """The ListTransactions answer."""

    error: int
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[tuple[str, int, str], ...] = ()  # (transactional id, producer id, state)


def unknown_partition_errors(partitions: Iterable[TopicPartition],
                             exists: Callable[[TopicPartition], bool]
                             ) -> dict[TopicPartition, int] | None:
    """AddPartitionsToTxn's topic check (KafkaApis): if any partition is unknown, the whole
    request fails, UNKNOWN_TOPIC_OR_PARTITION for those and OPERATION_NOT_ATTEMPTED for the
    rest; None when every partition exists."""
    tps = [TopicPartition(*tp) for tp in partitions]
    missing = {tp for tp in tps if not exists(tp)}
    if not missing:
        return None
    return {tp: ec.UNKNOWN_TOPIC_OR_PARTITION if tp in missing else ec.OPERATION_NOT_ATTEMPTED
            for tp in tps}
