"""Transactions v2 (KIP-890 part 2) in the transaction coordinator: EndTxn v5 bumps the
epoch on every transaction (the markers carry the bumped one), retries of it are told
the new epoch, an exhausted epoch moves the producer to a new id, and a v2 client may
abort with nothing added (Kafka 4's TransactionCoordinator.endTransaction)."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
from test_txn_coordinator import TID, TP0, TP1, Harness

from josefk.cluster.coordinator.transaction.effects import MarkerJob
from josefk.cluster.coordinator.transaction.records import (
    TopicPartition,
    TxnLogValue,
    decode_value,
    encode_value,
)
from josefk.cluster.coordinator.transaction.state import MAX_EPOCH, TV2, TxnState
from josefk.protocol import error_codes as ec

S = TxnState


@pytest.fixture
def h() -> Harness:
    return Harness(num_partitions=3)


def add_v2(h: Harness, pid: int, epoch: int, *tps: object) -> int:
    d = h.c.add_partitions(TID, pid, epoch, tps or (TP0,), TV2)
    return d.answer if d.write is None else h.write(d.write).error  # type: ignore[return-value]


def end_v2(h: Harness, pid: int, epoch: int, commit: bool
           ) -> tuple[int, MarkerJob | None]:
    """EndTxn v5: the error and the marker job (not yet written)."""
    d = h.c.end_txn(TID, pid, epoch, commit, TV2)
    if d.write is None:
        assert d.answer is not None
        return d.answer, None
    out = h.write(d.write)
    return out.error, out.markers


def test_commit_bumps_the_epoch_and_the_markers_carry_it(h: Harness) -> None:
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert add_v2(h, pid, epoch, TP0, TP1) == ec.NONE
    error, job = end_v2(h, pid, epoch, commit=True)
    assert error == ec.NONE and job is not None
    assert (job.producer_id, job.producer_epoch, job.commit) == (pid, epoch + 1, True)
    assert job.partitions == {TP0, TP1}
    assert h.c.producer_after_end(TID) == (pid, epoch + 1)
    # The old epoch is fenced at once, before the markers are written.
    assert add_v2(h, pid, epoch, TP0) == ec.PRODUCER_FENCED
    h.markers(job)
    assert (h.md().state, h.md().producer_epoch) == (S.COMPLETE_COMMIT, epoch + 1)
    # The next transaction runs at the bumped epoch, and bumps it again.
    assert add_v2(h, pid, epoch + 1, TP1) == ec.NONE
    error, job = end_v2(h, pid, epoch + 1, commit=False)
    assert error == ec.NONE and job is not None and job.producer_epoch == epoch + 2
    h.markers(job)
    assert h.c.producer_after_end(TID) == (pid, epoch + 2)


def test_retries_of_a_bumping_end_txn(h: Harness) -> None:
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    add_v2(h, pid, epoch)
    error, job = end_v2(h, pid, epoch, commit=True)
    assert error == ec.NONE and job is not None
    # Markers still being written: the retry waits.
    assert end_v2(h, pid, epoch, commit=True)[0] == ec.CONCURRENT_TRANSACTIONS
    h.markers(job)
    # Completed: the retry with the epoch before the bump succeeds, the other outcome not.
    assert end_v2(h, pid, epoch, commit=True) == (ec.NONE, None)
    assert end_v2(h, pid, epoch, commit=False)[0] == ec.INVALID_TXN_STATE
    # An epoch older than that is a zombie.
    assert end_v2(h, pid, epoch - 1 if epoch else 7, commit=True)[0] == ec.PRODUCER_FENCED


def test_exhausted_epoch_moves_to_a_new_producer_id(h: Harness) -> None:
    h.init()
    last = MAX_EPOCH - 1
    h.md().producer_epoch = last
    assert add_v2(h, 100, last) == ec.NONE
    error, job = end_v2(h, 100, last, commit=True)
    assert error == ec.NONE and job is not None
    # The markers use the last epoch of the old id; the client is told the new id.
    assert (job.producer_id, job.producer_epoch) == (100, MAX_EPOCH)
    assert h.c.producer_after_end(TID) == (101, 0)
    h.markers(job)
    md = h.md()
    assert (md.producer_id, md.producer_epoch, md.last_producer_id) == (101, 0, 100)
    # A retry from the old id succeeds and learns the new one.
    assert end_v2(h, 100, last, commit=True) == (ec.NONE, None)
    assert h.c.producer_after_end(TID) == (101, 0)
    assert add_v2(h, 101, 0) == ec.NONE


def test_abort_with_nothing_added(h: Harness) -> None:
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert end_v2(h, pid, epoch, commit=True)[0] == ec.INVALID_TXN_STATE
    error, job = end_v2(h, pid, epoch, commit=False)
    assert error == ec.NONE and job is not None and not job.partitions
    assert job.producer_epoch == epoch + 1
    h.markers(job)
    assert (h.md().state, h.md().producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    # Again, after a completed transaction, at the current epoch.
    error, job = end_v2(h, pid, epoch + 1, commit=False)
    assert error == ec.NONE and job is not None
    h.markers(job)
    assert h.md().producer_epoch == epoch + 2


def test_v1_end_txn_keeps_the_epoch(h: Harness) -> None:
    pid, epoch = h.ongoing(TP0)
    assert h.end(pid, epoch, True) == ec.NONE
    assert h.md().producer_epoch == epoch
    assert h.c.end_txn(TID, pid, epoch, False).answer == ec.INVALID_TXN_STATE


def test_fencing_an_open_v2_transaction(h: Harness) -> None:
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    add_v2(h, pid, epoch)
    assert h.init().error == ec.CONCURRENT_TRANSACTIONS  # fenced and aborted
    assert h.md().state is S.COMPLETE_ABORT
    assert end_v2(h, pid, epoch, commit=True)[0] == ec.PRODUCER_FENCED
    again = h.init()
    assert again.error == ec.NONE and again.producer_epoch > epoch + 1


def test_reload_keeps_the_client_transaction_version() -> None:
    h = Harness(num_partitions=3, flexible_records=True)
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    add_v2(h, pid, epoch)
    error, job = end_v2(h, pid, epoch, commit=True)
    assert error == ec.NONE and job is not None
    h.markers(job)
    p = h.c.partition_for(TID)
    h.c.begin_loading(p, 2)
    h.c.finish_loading(p, 2, h.log[p])
    assert (h.md().state, h.md().txn_version) == (S.COMPLETE_COMMIT, TV2)
    # After the reload a retry of the EndTxn is still known as one.
    assert end_v2(h, pid, epoch, commit=True) == (ec.NONE, None)


KAFKA_LIBS = Path(__file__).resolve().parents[2] / ".cache" / "kafka" / "libs"
KAFKA_VALUE_V1 = Path(__file__).with_name("KafkaTxnValueV1.java")


@pytest.mark.skipif(not any(KAFKA_LIBS.glob("*.jar")) or shutil.which("java") is None,
                    reason="needs Kafka 4's jars (make kafka-jars) and java")
def test_value_v1_with_the_client_transaction_version_as_kafka_4_writes_it() -> None:
    ours = encode_value(TxnLogValue(7, 3, 60000, 1, frozenset({TopicPartition("t", 0),
                                                               TopicPartition("t", 1)}),
                                    20, 10, client_transaction_version=2), flexible=True)
    done = subprocess.run(
        ["java", "-cp", f"{KAFKA_LIBS}/*", str(KAFKA_VALUE_V1), base64.b64encode(ours).decode()],
        capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    kafkas, read_back = done.stdout.split()[0], done.stdout.splitlines()[1]
    assert base64.b64decode(kafkas) == ours
    assert read_back == "7 3 1 2 1"
    assert decode_value(ours) == TxnLogValue(
        7, 3, 60000, 1, frozenset({TopicPartition("t", 0), TopicPartition("t", 1)}), 20, 10,
        client_transaction_version=2)
