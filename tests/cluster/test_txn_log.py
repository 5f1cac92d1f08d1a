"""The ``__transaction_state`` record codec: Kafka 3.9's schemas, byte for byte, checked
against Kafka's own TransactionLog (tests/cluster/KafkaTxnLog.java)."""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.cluster.coordinator.records import partition_for
from josefk.cluster.coordinator.transaction.records import (
    RecordFormatError,
    TopicPartition,
    TxnLogValue,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from josefk.cluster.coordinator.transaction.state import VALID_PREVIOUS_STATES, TxnState

KAFKA39_LIBS = Path(__file__).resolve().parents[2] / ".cache" / "kafka39" / "libs"
KAFKA_TXN_LOG_JAVA = Path(__file__).with_name("KafkaTxnLog.java")


def s16(s: str) -> bytes:
    return struct.pack(">h", len(s.encode())) + s.encode()


def test_key_bytes() -> None:
    assert encode_key("t1") == b"\x00\x00" + s16("t1")
    assert decode_key(encode_key("tx-é")) == "tx-é"
    assert decode_key(b"\x00\x01" + s16("t1")) is None  # versions Kafka 3.9 skips


def test_value_v0_bytes() -> None:
    value = TxnLogValue(5, 2, 60000, 1, frozenset({TopicPartition("b", 3), TopicPartition("a", 1),
                                                   TopicPartition("a", 0)}), 20, 10)
    expected = (struct.pack(">hqhib", 0, 5, 2, 60000, 1) + struct.pack(">i", 2)
                + s16("a") + struct.pack(">iii", 2, 0, 1) + s16("b") + struct.pack(">ii", 1, 3)
                + struct.pack(">qq", 20, 10))
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_value_v1_is_flexible() -> None:
    value = TxnLogValue(5, 2, 60000, 2, frozenset({TopicPartition("a", 7)}), 20, 10)
    expected = (struct.pack(">hqhib", 1, 5, 2, 60000, 2) + b"\x02" + b"\x02a" + b"\x02"
                + struct.pack(">i", 7) + b"\x00" + struct.pack(">qq", 20, 10) + b"\x00")
    assert encode_value(value, flexible=True) == expected
    assert decode_value(expected) == value


def test_empty_writes_null_partitions_and_complete_an_empty_array() -> None:
    empty = TxnLogValue(1, 0, 100, 0, frozenset(), 5, -1)
    assert encode_value(empty)[17:21] == struct.pack(">i", -1)
    assert encode_value(empty, flexible=True)[17:18] == b"\x00"
    done = TxnLogValue(1, 0, 100, 4, frozenset(), 5, 3)
    assert encode_value(done)[17:21] == struct.pack(">i", 0)
    with pytest.raises(RecordFormatError):
        encode_value(TxnLogValue(1, 0, 100, 0, frozenset({TopicPartition("a", 0)}), 5, -1))


def test_tombstone_and_bad_records() -> None:
    assert encode_record(("t", None)) == (encode_key("t"), None)
    assert decode_record(encode_key("t"), None) == ("t", None)
    assert decode_record(b"\x00\x05" + s16("t"), b"junk") is None
    with pytest.raises(RecordFormatError):
        decode_record(None, None)
    good = encode_value(TxnLogValue(1, 0, 100, 1, frozenset({TopicPartition("a", 0)}), 5, 3))
    with pytest.raises(RecordFormatError):
        decode_value(b"\x00\x02" + good[2:])
    with pytest.raises(RecordFormatError):
        decode_value(good[:-3])


topics = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                 max_size=12)
values = st.builds(
    lambda pid, epoch, timeout, status, parts, upd, start: TxnLogValue(
        pid, epoch, timeout, status, frozenset() if status == 0 else parts, upd, start),
    st.integers(-1, 2**63 - 1), st.integers(-1, 32767), st.integers(0, 2**31 - 1),
    st.integers(0, 7),
    st.frozensets(st.builds(TopicPartition, topics, st.integers(0, 2**31 - 1)), max_size=8),
    st.integers(-1, 2**62), st.integers(-1, 2**62))


@given(st.text(max_size=40), values, st.booleans())
def test_round_trip(transactional_id: str, value: TxnLogValue, flexible: bool) -> None:
    key, data = encode_record((transactional_id, value), flexible=flexible)
    assert decode_record(key, data) == (transactional_id, value)


def test_partition_for_matches_java_hash_code() -> None:
    # Utils.abs("...".hashCode()) % 50 as Java 17 computes it.
    assert partition_for("my-txn", 50) == 45
    assert partition_for("polygenelubricants", 50) == 0  # hashCode == Integer.MIN_VALUE
    assert partition_for("", 50) == 0


# --- against Kafka 3.9's own codec (the kafka_2.13-3.9.1 jar) ---------------------------------


def kafka_cases() -> list[dict[str, Any]]:
    rng = random.Random(13)
    cases: list[dict[str, Any]] = [
        {"id": "t1", "value": TxnLogValue(5, 2, 60000, 1,
                                          frozenset({TopicPartition("a", 0)}), 20, 10)},
        {"id": "empty", "value": TxnLogValue(7, 0, 900000, 0, frozenset(), 1700000000000, -1)},
        {"id": "gone", "value": None},
        {"id": "ünï-çødé ✓", "value": TxnLogValue(2**40, 32766, 1, 4, frozenset(), 3, 2)},
    ]
    for i in range(40):
        status = rng.choice([0, 1, 2, 3, 4, 5, 7])
        parts = frozenset() if status == 0 else frozenset(
            TopicPartition(rng.choice(["orders", "ü-topic", "__consumer_offsets", "x"]),
                           rng.randrange(0, 100)) for _ in range(rng.randrange(0, 6)))
        cases.append({"id": f"txn-{i}-{rng.random()}", "value": TxnLogValue(
            rng.randrange(0, 2**50), rng.randrange(0, 32767), rng.randrange(1, 900001), status,
            parts, rng.randrange(0, 2**45), rng.choice([-1, rng.randrange(0, 2**45)]))})
    for n, case in enumerate(cases):
        case["flexible"] = n % 2 == 1
    return cases


CASES = kafka_cases()
PARTITION_IDS = ["my-txn", "polygenelubricants", "", "a", "tx-ünï", "emoji-\U0001F600",
                 "\U0001F600\U0001F601", "x" * 300, "transactional-id-42", "日本語のID"]


def as_args(value: TxnLogValue) -> dict[str, Any]:
    return {"producer_id": value.producer_id, "producer_epoch": value.producer_epoch,
            "timeout_ms": value.timeout_ms, "status": value.status,
            "partitions": sorted([tp.topic, tp.partition] for tp in value.partitions),
            "start": value.start_timestamp_ms, "last_update": value.last_update_timestamp_ms}


@pytest.fixture(scope="module")
def kafka() -> dict[str, Any]:
    """Kafka's answers to every case, from one JVM."""
    missing = None
    if shutil.which("java") is None:
        missing = "no java on PATH"
    elif not list(KAFKA39_LIBS.glob("kafka_2.13-3.9*.jar")):
        missing = f"no Kafka 3.9 jars in {KAFKA39_LIBS} (make kafka39-jars)"
    if missing is not None:
        if os.environ.get("JOSEFK_REQUIRE_KAFKA") == "1":
            pytest.fail(missing + " and JOSEFK_REQUIRE_KAFKA=1", pytrace=False)
        pytest.skip(missing)
    requests = [{"kind": "states"}]
    requests += [{"kind": "partition", "id": i, "partitions": 50} for i in PARTITION_IDS]
    for case in CASES:
        key, value = encode_record((case["id"], case["value"]), flexible=case["flexible"])
        requests.append({
            "kind": "record", "id": case["id"], "flexible": case["flexible"],
            "value": None if case["value"] is None else as_args(case["value"]),
            "josefk_key": base64.b64encode(key).decode(),
            "josefk_value": None if value is None else base64.b64encode(value).decode()})
    result = subprocess.run(
        ["java", "-cp", f"{KAFKA39_LIBS}/*", str(KAFKA_TXN_LOG_JAVA)],
        input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True, text=True,
        timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == len(requests), result.stderr[-3000:]
    return {"states": answers[0]["states"],
            "partitions": answers[1:1 + len(PARTITION_IDS)],
            "records": answers[1 + len(PARTITION_IDS):]}


def test_same_states_and_transitions_as_kafka(kafka: dict[str, Any]) -> None:
    theirs = {s["name"]: s for s in kafka["states"]}
    assert set(theirs) == {s.kafka_name for s in TxnState}
    # Kafka 4 (TransactionState.validPreviousStates of 4.3.1) adds the aborts of
    # transactions v2 from Empty, CompleteCommit and CompleteAbort.
    v2_aborts = {"PrepareAbort": {"Empty", "CompleteCommit", "CompleteAbort"}}
    for state in TxnState:
        assert theirs[state.kafka_name]["id"] == int(state)
        assert sorted({*theirs[state.kafka_name]["previous"],
                       *v2_aborts.get(state.kafka_name, ())}) == sorted(
            s.kafka_name for s in VALID_PREVIOUS_STATES[state])


def test_same_coordinator_partition_as_kafka(kafka: dict[str, Any]) -> None:
    assert [a["partition"] for a in kafka["partitions"]] == [
        partition_for(i, 50) for i in PARTITION_IDS]


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c["id"][:20] for c in CASES])
def test_kafka_reads_ours_and_we_read_kafkas(kafka: dict[str, Any], i: int) -> None:
    case, answer = CASES[i], kafka["records"][i]
    assert "error" not in answer, answer["error"]
    value: TxnLogValue | None = case["value"]
    # Kafka decodes josefk's bytes to the same metadata.
    assert answer["decoded_id"] == case["id"]
    if value is None:
        assert answer["decoded"] is None
    else:
        decoded = answer["decoded"]
        assert decoded["state"] == TxnState(value.status).kafka_name
        assert {k: decoded[k] for k in ("producer_id", "producer_epoch", "timeout_ms", "status",
                                        "start", "last_update")} == {
            k: v for k, v in as_args(value).items() if k != "partitions"}
        assert decoded["partitions"] == sorted(f"{t}:{p}" for t, p in value.partitions)
    # josefk decodes Kafka's bytes to the same record ...
    kafka_key = base64.b64decode(answer["kafka_key"])
    kafka_value = (None if answer["kafka_value"] is None
                   else base64.b64decode(answer["kafka_value"]))
    assert decode_record(kafka_key, kafka_value) == (case["id"], value)
    # ... and, where Kafka's hash-set order cannot differ, writes the very same bytes.
    ours = encode_record((case["id"], value), flexible=case["flexible"])
    assert ours[0] == kafka_key
    if value is None or len(value.partitions) <= 1:
        assert ours[1] == kafka_value
