"""A transactional id's states and metadata, without I/O (Kafka 3.9's ``TransactionMetadata``).

The states and their legal moves are the table :data:`VALID_PREVIOUS_STATES` (target →
states it may be entered from, Kafka 4's ``TransactionState.validPreviousStates``), in the
manner of h11's ``_state.py``: every ``prepare_*`` method goes through
:meth:`TransactionMetadata._prepare`, which refuses what the table does not list.

Changes are record-then-apply: a ``prepare_*`` method returns the :class:`TxnTransit` to
write to ``__transaction_state`` and marks it pending (so a second change cannot start);
:meth:`TransactionMetadata.complete_transition` applies it once the write succeeded, and
:meth:`TransactionMetadata.abandon_transition` drops it when the write failed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import NoReturn

from josefk.cluster.coordinator.transaction.records import (
    RecordFormatError,
    TopicPartition,
    TxnLogValue,
    TxnRecord,
    decode_record,
)
from josefk.protocol import error_codes as ec

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue
#: The ``transaction.version`` of a client that bumps the epoch on every EndTxn (KIP-890
#: part 2: EndTxn v5+, and partitions added by their leaders for Produce v12+).
TV2 = 2

logger = logging.getLogger(__name__)


class TxnState(IntEnum):
    """The states, numbered as ``transaction_status`` in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit")."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {s: "".join(w.capitalize() for w in s.name.split("_")) for s in TxnState}
_BY_NAME = {n: s for s, n in _NAMES.items()}

_S = TxnState
VALID_PREVIOUS_STATES = MappingProxyType({
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # Transactions v2 may abort from a completed or empty state: the client cannot know
    # whether its produce reached a leader that added the partition.
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY,
                                 _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
})
"""Target state → the states it may be entered from."""

EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
"""States in which an idle transactional id may expire (``isExpirationAllowed``)."""


class IllegalTxnTransition(RuntimeError):
    """A transition the table, or Kafka's completion checks, do not allow: a coordinator bug."""


class TxnError(Exception):
    """A request refused with the Kafka error ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def check_transition(current: TxnState, target: TxnState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTxnTransition(
            f"illegal transaction state transition from {current.kafka_name} to "
            f"{target.kafka_name}")


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka never hands out Short.MaxValue, so the coordinator can always fence once more."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The metadata a transactional id moves to (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_timestamp: int
    last_update_timestamp: int
    txn_version: int = 0  # the client's transaction.version (Kafka's clientTransactionVersion)
    next_producer_id: int = NO_PRODUCER_ID  # v2: the id after an exhausted epoch's markers

    def value(self) -> TxnLogValue:
        # As Kafka 4 writes it: no last producer id or epoch (they do not survive a
        # reload), the client's transaction version in v1's tagged fields.
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms,
                           int(self.state), self.partitions, self.last_update_timestamp,
                           self.start_timestamp, client_transaction_version=self.txn_version)


@dataclass(eq=False)
class TransactionMetadata:
    """One transactional id's state, as the coordinator keeps it in memory."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp: int = -1
    last_update_timestamp: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending_state: TxnState | None = None
    # A fence whose write failed already bumped the epoch in memory: do not bump it again.
    has_failed_epoch_fence: bool = False
    txn_version: int = 0
    next_producer_id: int = NO_PRODUCER_ID

    @classmethod
    def from_value(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        """The metadata a loaded record describes (Kafka's ``readTxnRecordValue``)."""
        try:
            state = TxnState(value.status)
        except ValueError:
            raise IllegalTxnTransition(f"unknown transaction state id {value.status}") from None
        return cls(transactional_id, value.producer_id, value.producer_epoch, value.timeout_ms,
                   state, set(value.partitions) if state is not TxnState.EMPTY else set(),
                   value.start_timestamp_ms, value.last_update_timestamp_ms,
                   last_producer_id=value.previous_producer_id,
                   txn_version=value.client_transaction_version,
                   next_producer_id=value.next_producer_id)

    def snapshot(self) -> TxnTransit:
        """The current metadata as a transit (Kafka's ``prepareNoTransit``)."""
        return TxnTransit(self.producer_id, self.last_producer_id, self.producer_epoch,
                          self.last_producer_epoch, self.timeout_ms, self.state,
                          frozenset(self.partitions), self.start_timestamp,
                          self.last_update_timestamp, self.txn_version, self.next_producer_id)

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT)

    def record(self, transit: TxnTransit) -> TxnRecord:
        """The ``__transaction_state`` record of ``transit`` (a tombstone for Dead)."""
        return self.transactional_id, None if transit.state is TxnState.DEAD else transit.value()

    # --- preparing ---------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Bump the epoch to fence the current producer before aborting its transaction."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTxnTransition("cannot fence a producer at epoch Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, self.producer_id, bumped,
                             NO_PRODUCER_EPOCH, self.timeout_ms, frozenset(self.partitions),
                             self.start_timestamp, self.last_update_timestamp)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now: int) -> TxnTransit:
        """InitProducerId's epoch bump; with an expected epoch (KIP-360), a retry of a
        bump that succeeded keeps the epoch, and a stale one raises PRODUCER_FENCED."""
        if self.epoch_exhausted:
            raise IllegalTxnTransition(
                f"no more producer epochs for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise TxnError(ec.PRODUCER_FENCED)
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last_epoch, timeout_ms,
                             frozenset(), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransit:
        if self.has_pending_transaction:
            raise IllegalTxnTransition("cannot rotate producer ids while a transaction is open")
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(TxnState.EMPTY, new_producer_id, 0, last_epoch, timeout_ms,
                             frozenset(), -1, now)

    def prepare_add_partitions(self, added: Iterable[TopicPartition], now: int,
                               txn_version: int = 0) -> TxnTransit:
        starting = self.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT,
                                  TxnState.COMPLETE_COMMIT)
        return self._prepare(TxnState.ONGOING, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.timeout_ms,
                             frozenset(self.partitions).union(added),
                             now if starting else self.start_timestamp, now,
                             txn_version=txn_version)

    def prepare_abort_or_commit(self, target: TxnState, now: int, txn_version: int = 0,
                                next_producer_id: int = NO_PRODUCER_ID) -> TxnTransit:
        """Prepare*; with transactions v2 the epoch is bumped (the markers carry the new
        one) and, an exhausted epoch, the producer id to move to is chosen now."""
        epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        start = self.start_timestamp
        if txn_version >= TV2:
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
            if self.state is not TxnState.ONGOING:
                start = now  # an abort with no partition added starts and ends now
        return self._prepare(target, self.producer_id, epoch, last_epoch, self.timeout_ms,
                             frozenset(self.partitions), start, now,
                             txn_version=txn_version, next_producer_id=next_producer_id)

    def prepare_complete(self, now: int) -> TxnTransit:
        target = (TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT
                  else TxnState.COMPLETE_ABORT)
        # The Prepare* record is written, so a fence that failed before is behind us.
        self.has_failed_epoch_fence = False
        if self.txn_version >= TV2 and self.next_producer_id != NO_PRODUCER_ID:
            # The markers went out at the last epoch: the client moves to the new id.
            return self._prepare(target, self.next_producer_id, 0, self.producer_epoch,
                                 self.timeout_ms, frozenset(), self.start_timestamp, now,
                                 txn_version=self.txn_version)
        return self._prepare(target, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.timeout_ms, frozenset(),
                             self.start_timestamp, now, txn_version=self.txn_version)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TxnState.DEAD, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.timeout_ms, frozenset(),
                             self.start_timestamp, self.last_update_timestamp)

    def _prepare(self, target: TxnState, producer_id: int, epoch: int, last_epoch: int,
                 timeout_ms: int, partitions: frozenset[TopicPartition], start: int,
                 now: int, *, txn_version: int | None = None,
                 next_producer_id: int = NO_PRODUCER_ID) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTxnTransition(
                f"{self.transactional_id}: preparing {target.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTxnTransition(f"illegal new producer id {producer_id}")
        if target is not TxnState.DEAD and epoch < 0:
            raise IllegalTxnTransition(f"illegal new producer epoch {epoch}")
        check_transition(self.state, target)
        self.pending_state = target
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, target,
                          partitions, start, now,
                          self.txn_version if txn_version is None else txn_version,
                          next_producer_id)

    # --- completing ----------------------------------------------------------------------------

    def abandon_transition(self) -> None:
        """The write of the pending transit failed: nothing changes."""
        self.pending_state = None

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker for ``tp`` is written (or needs no writing)."""
        if self.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalTxnTransition(
                f"{self.transactional_id}: removing a marked partition in {self.state.kafka_name}")
        self.partitions.discard(tp)

    def complete_transition(self, t: TxnTransit) -> None:
        """Apply ``t`` once its record is written, with Kafka's ``completeTransitionTo`` checks."""
        target = self.pending_state
        if target is None or target is not t.state:
            self._fail(t)
        same_producer = (t.producer_epoch == self.producer_epoch
                         and t.producer_id == self.producer_id)
        v2 = t.txn_version >= TV2
        if target is TxnState.EMPTY:
            bump = (t.producer_epoch == self.producer_epoch + 1
                    or (t.producer_epoch == 0 and t.producer_id != self.producer_id))
            if ((t.producer_epoch != self.producer_epoch and not bump) or t.partitions
                    or t.start_timestamp != -1):
                self._fail(t)
            self.timeout_ms = t.timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.last_producer_id = t.last_producer_id
        elif target is TxnState.ONGOING:
            if (not same_producer or not self.partitions <= t.partitions
                    or self.timeout_ms != t.timeout_ms):
                self._fail(t)
            self.start_timestamp = t.start_timestamp
            self.partitions |= t.partitions
        elif target in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            bumped = (v2 and t.producer_id == self.producer_id
                      and t.producer_epoch == self.producer_epoch + 1)
            empty_abort = v2 and self.state is not TxnState.ONGOING
            if (not (same_producer or bumped) or self.partitions != t.partitions
                    or self.timeout_ms != t.timeout_ms
                    or (self.start_timestamp != t.start_timestamp and not empty_abort)):
                self._fail(t)
            if v2:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.next_producer_id = t.next_producer_id
                self.start_timestamp = t.start_timestamp
        elif target in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            rotated = (v2 and self.next_producer_id != NO_PRODUCER_ID
                       and t.producer_id == self.next_producer_id and t.producer_epoch == 0)
            if (not (same_producer or rotated) or self.timeout_ms != t.timeout_ms
                    or t.start_timestamp == -1):
                self._fail(t)
            if rotated:
                self.last_producer_id = self.producer_id
                self.last_producer_epoch = t.last_producer_epoch
                self.producer_id = t.producer_id
                self.producer_epoch = 0
            self.next_producer_id = NO_PRODUCER_ID
            self.start_timestamp = t.start_timestamp
            self.partitions.clear()
        else:
            # PrepareEpochFence is never written (it turns into PrepareAbort), and Dead is
            # completed by removing the id, not by applying it.
            self._fail(t)
        self.last_update_timestamp = t.last_update_timestamp
        self.txn_version = t.txn_version
        self.pending_state = None
        self.state = target

    def _fail(self, t: TxnTransit) -> NoReturn:
        raise IllegalTxnTransition(
            f"{self.transactional_id}: cannot complete the transition from "
            f"{self.state.kafka_name} (pending {self.pending_state}) to {t}")


def replay(records: Iterable[tuple[bytes | None, bytes | None]]
           ) -> dict[str, TransactionMetadata]:
    """The metadata a partition's records describe: the last record per id wins, a
    tombstone removes the id, keys of unknown versions are skipped."""
    loaded: dict[str, TransactionMetadata] = {}
    try:
        for key, value in records:
            record = decode_record(key, value)
            if record is None:
                continue
            transactional_id, txn_value = record
            if txn_value is None:
                loaded.pop(transactional_id, None)
            else:
                loaded[transactional_id] = TransactionMetadata.from_value(transactional_id,
                                                                          txn_value)
    except (RecordFormatError, UnicodeDecodeError, IllegalTxnTransition) as e:
        # As Kafka: stop at the bad record and keep what was loaded before it.
        logger.error("loading transaction metadata stopped at a bad record: %s", e)
    return loaded
