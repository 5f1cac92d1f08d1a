"""Kafka's ``partition.metadata`` file and Kafka's text form of topic ids."""

from __future__ import annotations

import logging
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import require_kafka_jars
from hypothesis import given
from hypothesis import strategies as st

from josefk.log.partition_metadata import (
    METADATA_TOPIC_ID,
    PARTITION_METADATA_FILE,
    ZERO_UUID,
    decode_partition_metadata,
    encode_partition_metadata,
    kafka_uuid_str,
    parse_kafka_uuid,
    random_kafka_uuid,
    read_partition_metadata,
    write_partition_metadata,
)

REPO = Path(__file__).resolve().parents[2]
KAFKA_LIBS = REPO / ".cache" / "kafka" / "libs"
# Uuid(0x0123456789abcdefL, 0xfedcba9876543210L).toString() in Kafka 4.3.
KNOWN = uuid.UUID("0123456789abcdef-fedcba9876543210".replace("-", ""))
KNOWN_STR = "ASNFZ4mrze_-3LqYdlQyEA"


def test_kafka_uuid_str_known_values() -> None:
    assert kafka_uuid_str(KNOWN) == KNOWN_STR
    assert kafka_uuid_str(ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert kafka_uuid_str(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"


@given(st.binary(min_size=16, max_size=16))
def test_uuid_text_round_trips(raw: bytes) -> None:
    u = uuid.UUID(bytes=raw)
    text = kafka_uuid_str(u)
    assert len(text) == 22
    assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert parse_kafka_uuid(text) == u


def test_parse_is_as_lenient_as_javas_url_decoder() -> None:
    assert parse_kafka_uuid(KNOWN_STR + "==") == KNOWN
    # The 4 unused low bits of the last character are ignored, as in Java.
    assert parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAAAB") == ZERO_UUID
    assert parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAAA_") == uuid.UUID(int=3)


@pytest.mark.parametrize("text", [
    "", "abc", "AAAAAAAAAAAAAAAAAAAAA+", "AAAAAAAAAAAAAAAAAAAAA/", "________________________",
    "AAAAAAAAAAAAAAAAAAAAAAAA", " AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAA=A",
    "0123456789abcdef0123456789abcdef",
])
def test_parse_rejects_what_is_not_16_bytes_of_base64url(text: str) -> None:
    with pytest.raises(ValueError):
        parse_kafka_uuid(text)


def test_random_ids_avoid_reserved_and_dash_prefixed() -> None:
    ids = {random_kafka_uuid() for _ in range(2000)}
    assert len(ids) == 2000
    for u in ids:
        assert u not in (ZERO_UUID, METADATA_TOPIC_ID)
        assert not kafka_uuid_str(u).startswith("-")
        assert u.version == 4


def test_random_id_retries_until_acceptable(monkeypatch: pytest.MonkeyPatch) -> None:
    dash = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))  # base64 "-A..."
    assert kafka_uuid_str(dash).startswith("-")
    queue = [ZERO_UUID, METADATA_TOPIC_ID, dash, KNOWN]
    monkeypatch.setattr(uuid, "uuid4", lambda: queue.pop(0))
    assert random_kafka_uuid() == KNOWN
    assert queue == []


def test_write_produces_kafkas_exact_bytes(tmp_path: Path) -> None:
    write_partition_metadata(tmp_path, KNOWN)
    assert (tmp_path / PARTITION_METADATA_FILE).read_bytes() == (
        b"version: 0\ntopic_id: " + KNOWN_STR.encode())
    assert [p.name for p in tmp_path.iterdir()] == [PARTITION_METADATA_FILE]


def test_write_replaces_and_read_round_trips(tmp_path: Path) -> None:
    other = random_kafka_uuid()
    write_partition_metadata(tmp_path, KNOWN)
    write_partition_metadata(tmp_path, other)
    assert read_partition_metadata(tmp_path) == other


def test_zero_uuid_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_partition_metadata(tmp_path, ZERO_UUID)
    assert not (tmp_path / PARTITION_METADATA_FILE).exists()


def test_missing_file_reads_as_none_without_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert read_partition_metadata(tmp_path) is None
    assert caplog.records == []


@pytest.mark.parametrize("text", [
    f"version: 0\ntopic_id: {KNOWN_STR}\n",
    f"version:\t0\r\ntopic_id:   {KNOWN_STR}\r\n\nignored",
    f"version: 3\ntopic_id: {KNOWN_STR}",  # Kafka accepts any version >= 0
    f"anything: 0\nelse: {KNOWN_STR}",  # Kafka does not check the field names
])
def test_decode_accepts_what_kafka_reads(text: str) -> None:
    assert decode_partition_metadata(text) == KNOWN


@pytest.mark.parametrize("text", [
    "",
    "version: 0",
    f"version: -1\ntopic_id: {KNOWN_STR}",
    f"version: x\ntopic_id: {KNOWN_STR}",
    f"version 0\ntopic_id: {KNOWN_STR}",
    f"version: 0 1\ntopic_id: {KNOWN_STR}",
    f"version: 0\ntopic_id:{KNOWN_STR}",
    f"version: 0\ntopic_id: {KNOWN_STR}: x",
    "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
    "version: 0\ntopic_id: nope",
])
def test_corrupt_file_reads_as_none_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_text(text)
    with caplog.at_level(logging.WARNING, logger="josefk.log.partition_metadata"):
        assert read_partition_metadata(tmp_path) is None
    assert any(PARTITION_METADATA_FILE in r.getMessage() for r in caplog.records)


def test_undecodable_file_reads_as_none(tmp_path: Path) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(b"version: 0\ntopic_id: \xff\xfe")
    assert read_partition_metadata(tmp_path) is None


def test_encode_matches_write(tmp_path: Path) -> None:
    write_partition_metadata(tmp_path, KNOWN)
    assert (tmp_path / PARTITION_METADATA_FILE).read_bytes() == encode_partition_metadata(KNOWN)


# --- Apache Kafka reads our file and we read Kafka's ---------------------------------------

KAFKA_PROGRAM = """
import java.io.File;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.storage.internals.checkpoint.PartitionMetadataFile;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;

public class PartitionMetadataCheck {
    public static void main(String[] args) {
        PartitionMetadataFile ours = new PartitionMetadataFile(
            PartitionMetadataFile.newFile(new File(args[0])), new LogDirFailureChannel(1));
        System.out.println(ours.read().topicId());
        PartitionMetadataFile theirs = new PartitionMetadataFile(
            PartitionMetadataFile.newFile(new File(args[1])), new LogDirFailureChannel(1));
        theirs.record(Uuid.fromString(args[2]));
        theirs.maybeFlush();
    }
}
"""


def _java() -> str:
    require_kafka_jars()
    return "java"


def test_kafka_reads_ours_and_we_read_kafkas(tmp_path: Path) -> None:
    java = _java()
    source = tmp_path / "PartitionMetadataCheck.java"
    source.write_text(KAFKA_PROGRAM)
    ours, theirs = tmp_path / "ours-0", tmp_path / "theirs-0"
    ours.mkdir()
    theirs.mkdir()
    ours_id, theirs_id = random_kafka_uuid(), random_kafka_uuid()
    write_partition_metadata(ours, ours_id)
    proc = subprocess.run(
        [java, "-cp", f"{KAFKA_LIBS}/*", str(source), str(ours), str(theirs),
         kafka_uuid_str(theirs_id)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [kafka_uuid_str(ours_id)]
    assert read_partition_metadata(theirs) == theirs_id
    written = (theirs / PARTITION_METADATA_FILE).read_bytes()
    assert written == encode_partition_metadata(theirs_id)
