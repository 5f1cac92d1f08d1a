"""Transaction states as a table, and TransactionMetadata's prepare/complete transitions
(Kafka 3.9's TransactionMetadata.scala)."""

from __future__ import annotations

import itertools

import pytest

from josefk.cluster.coordinator.transaction.records import (
    TopicPartition,
    TxnLogValue,
    encode_key,
    encode_record,
)
from josefk.cluster.coordinator.transaction.state import (
    MAX_EPOCH,
    VALID_PREVIOUS_STATES,
    IllegalTxnTransition,
    TransactionMetadata,
    TxnError,
    TxnState,
    check_transition,
    replay,
)
from josefk.protocol import error_codes as ec

S = TxnState
TP0, TP1 = TopicPartition("a", 0), TopicPartition("b", 1)

# Kafka 4's TransactionState.validPreviousStates, written out: Kafka 3.9's, plus the
# aborts of transactions v2 from Empty, CompleteCommit and CompleteAbort.
ALLOWED = {
    (S.EMPTY, S.PREPARE_ABORT), (S.COMPLETE_COMMIT, S.PREPARE_ABORT),
    (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_ABORT, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)),
                         ids=lambda s: s.kafka_name)
def test_transition_table(current: TxnState, target: TxnState) -> None:
    assert ((current in VALID_PREVIOUS_STATES[target]) == ((current, target) in ALLOWED))
    if (current, target) in ALLOWED:
        check_transition(current, target)
    else:
        with pytest.raises(IllegalTxnTransition):
            check_transition(current, target)


def test_names_and_ids() -> None:
    assert [s.kafka_name for s in S] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
        "Dead", "PrepareEpochFence"]
    assert [int(s) for s in S] == list(range(8))
    assert S.from_kafka_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE
    assert S.from_kafka_name("prepareCommit") is None


def md(state: TxnState = S.EMPTY, epoch: int = 0, parts: set[TopicPartition] | None = None,
       start: int = -1) -> TransactionMetadata:
    return TransactionMetadata("t", 100, epoch, 60000, state, parts or set(), start, 1)


def test_a_full_commit() -> None:
    m = md(epoch=-1)
    t = m.prepare_increment_producer_epoch(60000, None, 5)
    assert (t.producer_epoch, t.last_producer_epoch, t.state) == (0, -1, S.EMPTY)
    assert m.pending_state is S.EMPTY and m.producer_epoch == -1  # not applied yet
    m.complete_transition(t)
    assert (m.producer_epoch, m.state, m.pending_state) == (0, S.EMPTY, None)
    t = m.prepare_add_partitions([TP0], 10)
    assert (t.start_timestamp, t.last_update_timestamp) == (10, 10)
    m.complete_transition(t)
    m.complete_transition(m.prepare_add_partitions([TP1], 20))
    assert m.partitions == {TP0, TP1} and m.start_timestamp == 10
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, 30))
    t = m.prepare_complete(40)
    assert t.partitions == frozenset()
    m.remove_partition(TP0)
    m.remove_partition(TP1)
    m.complete_transition(t)
    assert (m.state, m.partitions, m.last_update_timestamp) == (S.COMPLETE_COMMIT, set(), 40)
    assert m.record(t)[1] == TxnLogValue(100, 0, 60000, 4, frozenset(), 40, 10)


def test_one_pending_transition_at_a_time_and_abandon() -> None:
    m = md()
    m.prepare_add_partitions([TP0], 10)
    with pytest.raises(IllegalTxnTransition):
        m.prepare_add_partitions([TP1], 11)
    m.abandon_transition()
    assert m.state is S.EMPTY and m.partitions == set()
    m.prepare_add_partitions([TP1], 11)


def test_table_refuses_via_prepare() -> None:
    with pytest.raises(IllegalTxnTransition):
        md(S.EMPTY).prepare_abort_or_commit(S.PREPARE_COMMIT, 1)
    with pytest.raises(IllegalTxnTransition):
        md(S.PREPARE_COMMIT).prepare_add_partitions([TP0], 1)
    with pytest.raises(IllegalTxnTransition):
        md(S.ONGOING).prepare_dead()
    with pytest.raises(IllegalTxnTransition):
        md(S.ONGOING, parts={TP0}).prepare_producer_id_rotation(5, 1, 1, False)


def test_kip360_epoch_bump() -> None:
    m = md(epoch=3)
    t = m.prepare_increment_producer_epoch(60000, 3, 5)  # producer recovering at epoch 3
    assert (t.producer_epoch, t.last_producer_epoch) == (4, 3)
    m.complete_transition(t)
    t = m.prepare_increment_producer_epoch(60000, 3, 6)  # retry of that call: no bump
    assert (t.producer_epoch, t.last_producer_epoch) == (4, 3)
    m.abandon_transition()
    with pytest.raises(TxnError) as e:
        m.prepare_increment_producer_epoch(60000, 1, 7)
    assert e.value.code == ec.PRODUCER_FENCED
    assert m.pending_state is None


def test_epoch_exhaustion_and_rotation() -> None:
    m = md(epoch=MAX_EPOCH - 1)
    assert m.epoch_exhausted
    with pytest.raises(IllegalTxnTransition):
        m.prepare_increment_producer_epoch(60000, None, 1)
    t = m.prepare_producer_id_rotation(200, 60000, 1, True)
    assert (t.producer_id, t.producer_epoch, t.last_producer_id, t.last_producer_epoch) == (
        200, 0, 100, MAX_EPOCH - 1)
    m.complete_transition(t)
    assert (m.producer_id, m.last_producer_id, m.producer_epoch) == (200, 100, 0)


def test_fence_bumps_once_even_after_a_failed_write() -> None:
    m = md(S.ONGOING, epoch=5, parts={TP0}, start=1)
    t = m.prepare_fence_producer_epoch()
    assert (t.state, t.producer_epoch, t.last_producer_epoch) == (S.PREPARE_EPOCH_FENCE, 6, -1)
    m.abandon_transition()
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 5
    with pytest.raises(IllegalTxnTransition):  # PrepareEpochFence is never written
        m.complete_transition(t)
    with pytest.raises(IllegalTxnTransition):
        md(S.ONGOING, epoch=MAX_EPOCH).prepare_fence_producer_epoch()


def test_complete_checks_what_kafka_checks() -> None:
    m = md(S.ONGOING, parts={TP0}, start=1)
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, 5)
    m.producer_epoch = 9  # moved on meanwhile
    with pytest.raises(IllegalTxnTransition):
        m.complete_transition(t)
    m = md(S.COMPLETE_ABORT)
    t = m.prepare_dead()
    with pytest.raises(IllegalTxnTransition):  # Dead completes by removal, never by apply
        m.complete_transition(t)
    assert m.record(t) == ("t", None)


def test_remove_partition_only_while_preparing() -> None:
    with pytest.raises(IllegalTxnTransition):
        md(S.ONGOING, parts={TP0}).remove_partition(TP0)


def test_from_value() -> None:
    m = TransactionMetadata.from_value("t", TxnLogValue(1, 2, 3, 1, frozenset({TP0}), 5, 4))
    assert (m.producer_id, m.producer_epoch, m.timeout_ms, m.state, m.partitions,
            m.last_update_timestamp, m.start_timestamp) == (1, 2, 3, S.ONGOING, {TP0}, 5, 4)
    assert (m.last_producer_id, m.last_producer_epoch) == (-1, -1)  # not in Kafka 3.9's log
    with pytest.raises(IllegalTxnTransition):
        TransactionMetadata.from_value("t", TxnLogValue(1, 2, 3, 9, frozenset(), 5, 4))


def test_replay_last_wins_tombstones_remove_unknown_keys_skip() -> None:
    def rec(tid: str, status: int | None, epoch: int = 0) -> tuple[bytes, bytes | None]:
        value = None if status is None else TxnLogValue(1, epoch, 10, status, frozenset(), 1, 1)
        return encode_record((tid, value))

    loaded = replay([rec("a", 0), rec("b", 0), rec("a", 4, 3), rec("b", None),
                     (b"\x00\x07junk", b"junk"), rec("c", 0)])
    assert set(loaded) == {"a", "c"}
    assert (loaded["a"].state, loaded["a"].producer_epoch) == (S.COMPLETE_COMMIT, 3)
    # A bad record stops the load; what came before it stays (Kafka logs and goes on).
    loaded = replay([rec("a", 0), (encode_key("x"), b"\x00\x09"), rec("c", 0)])
    assert set(loaded) == {"a"}
