"""Which EndTxn a transaction accepts: Kafka 4's ``TransactionCoordinator.endTransaction``
checks, for transactions v1 and v2 (KIP-890 part 2), as one pure function.

With v2 every EndTxn bumps the producer epoch, so a retry of one that went through carries
the epoch before the bump (or, once the last epoch was used, the previous producer id at
``Short.MaxValue - 1``); the same epoch as the coordinator's is the next transaction's. A
v2 client may also abort when the coordinator saw nothing of its transaction (Empty or a
completed one): its produce may have reached no leader.
"""

from __future__ import annotations

from typing import NamedTuple

from josefk.cluster.coordinator.transaction.state import (
    MAX_EPOCH,
    TV2,
    IllegalTxnTransition,
    TransactionMetadata,
    TxnState,
)
from josefk.protocol import error_codes as ec

__all__ = ["EndVerdict", "judge_end"]

_S = TxnState
_PREPARED = (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
_COMPLETE = (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)


class EndVerdict(NamedTuple):
    """Either an answer now (``error``; NONE for a retry of a completed EndTxn) or the
    Prepare* state to move to (``target``)."""

    error: int | None = None
    target: TxnState | None = None


def judge_end(md: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
              from_client: bool, txn_version: int) -> EndVerdict:
    """The verdict on an EndTxn of ``md`` (``txn_version``: the request's, 2 from v5)."""
    state = md.state
    # How the transaction was run: the last transition's version (not a pending fence's).
    v2 = md.txn_version >= TV2 and md.pending_state is not _S.PREPARE_EPOCH_FENCE
    retry_overflow = (v2 and md.last_producer_id == producer_id
                      and producer_epoch == MAX_EPOCH - 1 and md.producer_epoch == 0)
    retry_bump = v2 and md.producer_epoch == producer_epoch + 1
    if md.producer_id != producer_id and not retry_overflow:
        return EndVerdict(ec.INVALID_PRODUCER_ID_MAPPING)
    if v2 and state in _PREPARED:
        valid_epoch = retry_bump
    elif v2 and state in _COMPLETE:
        valid_epoch = retry_bump or retry_overflow or producer_epoch == md.producer_epoch
    else:
        # A client must match the epoch; the coordinator's own aborts carry a bumped one.
        valid_epoch = ((not from_client or producer_epoch == md.producer_epoch)
                       and producer_epoch >= md.producer_epoch)
    if not valid_epoch:
        return EndVerdict(ec.PRODUCER_FENCED)
    if md.pending and md.pending_state is not _S.PREPARE_EPOCH_FENCE:
        return EndVerdict(ec.CONCURRENT_TRANSACTIONS)
    if state is _S.ONGOING:
        return EndVerdict(target=_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT)
    if state in _COMPLETE:
        done_commit = state is _S.COMPLETE_COMMIT
        if (retry_bump or retry_overflow) if v2 else commit == done_commit:
            # A retry of an EndTxn that completed succeeds; the opposite outcome cannot.
            return EndVerdict(ec.NONE if commit == done_commit else ec.INVALID_TXN_STATE)
    if state in _PREPARED:
        same = commit == (state is _S.PREPARE_COMMIT)
        return EndVerdict(ec.CONCURRENT_TRANSACTIONS if same else ec.INVALID_TXN_STATE)
    if state is _S.EMPTY or state in _COMPLETE:
        if not commit and txn_version >= TV2:
            return EndVerdict(target=_S.PREPARE_ABORT)
        return EndVerdict(ec.INVALID_TXN_STATE)
    raise IllegalTxnTransition(f"{md.transactional_id} found in {state.kafka_name}")
