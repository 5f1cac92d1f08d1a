"""Apache Kafka's own DumpLogSegments reads josefk's segments and indexes without complaint.

The Kafka jars come from ``tools/kafka/fetch.sh`` (into ``.cache/kafka/libs``); without
them the test skips, unless ``JOSEFK_REQUIRE_KAFKA=1`` (set by ``make test``) makes it fail.
"""

from __future__ import annotations

import re
import struct
import subprocess
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import require_kafka_jars
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.log.config import LogConfig
from josefk.log.log import Log

REPO = Path(__file__).resolve().parents[1]
KAFKA_LIBS = REPO / ".cache" / "kafka" / "libs"
RUN_CLASS = REPO / "tools" / "kafka" / "run-class.sh"
# Kafka 4.3 moved the tool from core's Scala ``kafka.tools`` to Java in kafka-tools.
DUMP_CLASSES = ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")

SEGMENT_BYTES = 4096
INDEX_INTERVAL_BYTES = 200
BASE_TS = 1_700_000_000_000
NO_COMPRESSION, GZIP = 0, 1

BATCH_RE = re.compile(
    r"baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) count: (?P<count>\d+) "
    r"baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    r"partitionLeaderEpoch: (?P<epoch>-?\d+) isTransactional: false isControl: false "
    r"deleteHorizonMs: \S+ position: (?P<pos>\d+) (?P<tstype>CreateTime|LogAppendTime): "
    r"(?P<max_ts>-?\d+) size: (?P<size>\d+) magic: 2 compresscodec: (?P<codec>\w+) "
    r"crc: \d+ isvalid: (?P<valid>true|false)"
)
RECORD_RE = re.compile(
    r"\| offset: (?P<offset>\d+) (?P<tstype>CreateTime|LogAppendTime): (?P<ts>-?\d+) "
    r"keySize: (?P<key_size>-?\d+) valueSize: (?P<value_size>-?\d+) sequence: -1 "
    r"headerKeys: \[(?P<headers>[^\]]*)\](?: key: (?P<key>\S+))?(?: payload: (?P<value>.*))?"
)
INDEX_RE = re.compile(r"offset: (?P<offset>\d+) position: (?P<pos>\d+)")
TIMEINDEX_RE = re.compile(r"timestamp: (?P<ts>-?\d+) offset: (?P<offset>\d+)")
# Printed for every segment whose base offset is not 0: the tool starts each file's
# consecutiveness check at -1. Anything else on stderr is a complaint.
NON_CONSECUTIVE_RE = re.compile(r"Non-consecutive offsets in (?P<file>\S+)")
FOLLOWED_RE = re.compile(r"  (?P<prev>-?\d+) is followed by (?P<next>\d+)")
COMPLAINT_RE = re.compile(
    r"mismatch|corrupt|exception|error|invalid bytes|not found|out of order|isvalid: false"
    r"|ignoring unknown file",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Rec:
    """One record as appended, and as DumpLogSegments should print it."""

    offset_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Batch:
    """One appended batch: its records, codec and the offsets the log assigned."""

    records: tuple[Rec, ...]
    codec: str
    epoch: int
    first_offset: int = -1
    last_offset: int = -1


def kafka_dump_class() -> str:
    """The DumpLogSegments class in the fetched jars; skips (or fails) without them."""
    require_kafka_jars()
    jars = sorted(KAFKA_LIBS.glob("*.jar"))
    for jar in jars:
        with zipfile.ZipFile(jar) as zf:
            names = set(zf.namelist())
        for cls in DUMP_CLASSES:
            if cls.replace(".", "/") + ".class" in names:
                return cls
    pytest.fail(f"no DumpLogSegments class in {KAFKA_LIBS}")


def run_dump(cls: str, files: list[Path], *flags: str) -> tuple[str, str]:
    """Run DumpLogSegments on ``files``; assert it exits 0; return (stdout, stderr)."""
    proc = subprocess.run(
        [str(RUN_CLASS), cls, "--files", ",".join(str(f) for f in files), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, report
    assert not COMPLAINT_RE.search(proc.stdout), report
    return proc.stdout, proc.stderr


def sections(stdout: str) -> dict[str, list[str]]:
    """Split the tool's stdout into lines per ``Dumping <file>`` header, keyed by file name."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            current = out.setdefault(Path(line[len("Dumping ") :]).name, [])
        elif current is not None:
            current.append(line)
        else:
            raise AssertionError(f"output before the first 'Dumping' line: {line!r}")
    return out


def make_batches() -> list[Batch]:
    """Batches of 1–9 records: plain and gzip, keyed and not, with headers, a tombstone,
    timestamps out of order inside a batch, and some late batches below the running max."""
    batches = []
    ts = BASE_TS
    for i in range(72):
        n = 1 + (i * 5) % 9
        recs = []
        for j in range(n):
            key = f"key-{i}-{j}".encode() if (i + j) % 3 else None
            value = None if (i, j) == (7, 0) else f"value {i} {j} ".encode() * (2 + (i + j) % 7)
            if value is None:
                key = b"tombstone-key"
            headers: tuple[tuple[str, bytes], ...] = ()
            if j % 4 == 1:
                headers = (("trace", f"t{i}".encode()), ("h2", b""))
            # The max timestamp sits mid-batch in some batches; every 10th batch is late.
            stamp = ts + (37 if j == n // 2 else j) - (5000 if i % 10 == 9 else 0)
            recs.append(Rec(j, stamp, key, value, headers))
        ts += 100
        batches.append(Batch(tuple(recs), "gzip" if i % 3 == 1 else "none", 0 if i < 40 else 3))
    return batches


def encode(batch: Batch) -> bytes:
    """The batch as a producer would send it (kafka-python's v2 builder)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=GZIP if batch.codec == "gzip" else NO_COMPRESSION,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for r in batch.records:
        meta = builder.append(
            r.offset_delta, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers)
        )
        assert meta is not None
    data = bytes(builder.build())
    # kafka-python sends uncompressed if gzip does not help; the values are made to compress.
    (attributes,) = struct.unpack_from(">h", data, 21)
    assert attributes & 0x07 == (GZIP if batch.codec == "gzip" else NO_COMPRESSION)
    return data


def write_log(log_dir: Path, config: LogConfig) -> list[Batch]:
    """Append the test batches to a fresh josefk log in ``log_dir`` and close it."""
    log = Log.open(log_dir, config)
    appended = []
    try:
        next_offset = 0
        for batch in make_batches():
            info = log.append_as_leader(encode(batch), leader_epoch=batch.epoch)
            n = len(batch.records)
            assert (info.first_offset, info.last_offset) == (next_offset, next_offset + n - 1)
            appended.append(
                Batch(batch.records, batch.codec, batch.epoch, info.first_offset, info.last_offset)
            )
            next_offset += n
    finally:
        log.close()
    return appended


def read_offset_index(path: Path, base: int) -> list[tuple[int, int]]:
    """(absolute offset, position) entries of a Kafka ``.index`` file, as stored."""
    data = path.read_bytes()
    assert len(data) % 8 == 0, f"{path.name}: {len(data)} bytes is not whole entries"
    return [(base + rel, pos) for rel, pos in struct.iter_unpack(">ii", data)]


def read_time_index(path: Path, base: int) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries of a Kafka ``.timeindex`` file, as stored."""
    data = path.read_bytes()
    assert len(data) % 12 == 0, f"{path.name}: {len(data)} bytes is not whole entries"
    return [(ts, base + rel) for ts, rel in struct.iter_unpack(">qi", data)]


def check_stderr(stderr: str, bases: dict[str, int]) -> None:
    """Allow only the tool's per-file '-1 is followed by <base offset>' note on stderr."""
    lines = iter(stderr.splitlines())
    for line in lines:
        header = NON_CONSECUTIVE_RE.fullmatch(line)
        assert header, f"DumpLogSegments complained:\n{stderr}"
        name = Path(header["file"]).name
        follow = FOLLOWED_RE.fullmatch(next(lines, ""))
        assert follow and (int(follow["prev"]), int(follow["next"])) == (-1, bases[name]), (
            f"non-consecutive offsets in {name}:\n{stderr}"
        )


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_dump_log_segments_reads_josefk_log(tmp_path: Path, timestamp_type: str) -> None:
    """Kafka's DumpLogSegments dumps every segment, index and time index josefk wrote,
    finds no corrupt batch, index mismatch or time-index error, and prints exactly the
    batches, records and index entries that went in; the indexes pass the broker's
    startup sanity check. (``--verify-index-only`` runs the same index checks as the
    full dump, only quieter, so it is not run separately.)"""
    cls = kafka_dump_class()
    log_dir = tmp_path / "topic-0"
    config = LogConfig(
        segment_bytes=SEGMENT_BYTES,
        index_interval_bytes=INDEX_INTERVAL_BYTES,
        message_timestamp_type=timestamp_type,
    )
    started_ms = int(time.time() * 1000)
    appended = write_log(log_dir, config)
    finished_ms = int(time.time() * 1000)

    logs = sorted(log_dir.glob("*.log"))
    assert len(logs) >= 4, f"expected several segments, got {[p.name for p in logs]}"
    bases = {p.name: int(p.stem) for p in logs}
    files = []
    for log_file in logs:
        for suffix in (".log", ".index", ".timeindex"):
            path = log_file.with_suffix(suffix)
            assert path.is_file(), f"missing {path.name}"
            files.append(path)

    stdout, stderr = run_dump(cls, files, "--print-data-log")
    check_stderr(stderr, bases)
    dumped = sections(stdout)
    assert sorted(dumped) == sorted(p.name for p in files)

    # Batches and records, segment by segment, in log order.
    printed: list[tuple[str, dict[str, str], list[dict[str, str]]]] = []
    for log_file in logs:
        lines = dumped[log_file.name]
        assert lines[0] == f"Log starting offset: {int(log_file.stem)}"
        position = 0
        for line in lines[1:]:
            if m := BATCH_RE.fullmatch(line):
                assert int(m["pos"]) == position, line
                position += int(m["size"])
                printed.append((log_file.name, m.groupdict(), []))
            else:
                m = RECORD_RE.fullmatch(line)
                assert m and printed and printed[-1][0] == log_file.name, f"unparsed: {line!r}"
                printed[-1][2].append(m.groupdict())
        assert position == log_file.stat().st_size, f"{log_file.name}: trailing bytes"
        first = next(b for name, b, _ in printed if name == log_file.name)
        assert int(first["base"]) == int(log_file.stem), "segment name != first base offset"

    assert len(printed) == len(appended)
    for (_, pb, precs), batch in zip(printed, appended, strict=True):
        where = f"batch at offset {batch.first_offset}"
        assert (int(pb["base"]), int(pb["last"]), int(pb["count"])) == (
            batch.first_offset,
            batch.last_offset,
            len(batch.records),
        ), where
        assert pb["valid"] == "true", where
        assert pb["codec"] == batch.codec, where
        assert int(pb["epoch"]) == batch.epoch, where
        assert pb["tstype"] == timestamp_type, where
        batch_max = int(pb["max_ts"])
        if timestamp_type == "CreateTime":
            assert batch_max == max(r.timestamp for r in batch.records), where
        else:
            assert started_ms <= batch_max <= finished_ms, where
        assert len(precs) == len(batch.records), where
        for pr, rec in zip(precs, batch.records, strict=True):
            assert int(pr["offset"]) == batch.first_offset + rec.offset_delta, where
            assert pr["tstype"] == timestamp_type
            want_ts = rec.timestamp if timestamp_type == "CreateTime" else batch_max
            assert int(pr["ts"]) == want_ts, where
            assert int(pr["key_size"]) == (-1 if rec.key is None else len(rec.key)), where
            assert int(pr["value_size"]) == (-1 if rec.value is None else len(rec.value)), where
            assert pr["key"] == (None if rec.key is None else rec.key.decode()), where
            assert pr["value"] == (None if rec.value is None else rec.value.decode()), where
            assert pr["headers"] == ",".join(k for k, _ in rec.headers), where

    # The offset and time index entries Kafka read are exactly the ones in our files.
    offset_entries = 0
    for log_file in logs:
        base = int(log_file.stem)
        index_file = log_file.with_suffix(".index")
        ours = read_offset_index(index_file, base)
        lines = dumped[index_file.name]
        if not ours:
            assert lines == [f"{index_file} is empty."], lines
        else:
            kafka = [(int(m["offset"]), int(m["pos"])) for m in map(INDEX_RE.fullmatch, lines) if m]
            assert len(kafka) == len(lines), f"unparsed index lines: {lines}"
            # A longer file than Kafka read means a zero-filled tail: not trimmed on close.
            assert kafka == ours, f"{index_file.name}: Kafka read {len(kafka)} of {len(ours)}"
        offset_entries += len(ours)

        time_file = log_file.with_suffix(".timeindex")
        ours_t = read_time_index(time_file, base)
        lines = dumped[time_file.name]
        kafka_t = [
            (int(m["ts"]), int(m["offset"])) for m in map(TIMEINDEX_RE.fullmatch, lines) if m
        ]
        assert len(kafka_t) == len(lines), f"unparsed time index lines: {lines}"
        assert kafka_t == ours_t, f"{time_file.name}: Kafka read {len(kafka_t)} of {len(ours_t)}"
        # Kafka's close() leaves a time index entry for every non-empty segment.
        assert ours_t, f"{time_file.name} is empty"
    total_bytes = sum(p.stat().st_size for p in logs)
    assert offset_entries >= total_bytes // (4 * INDEX_INTERVAL_BYTES), "index is too sparse"

    # The check a Kafka broker runs on its indexes at startup.
    index_files = [p for p in files if p.suffix != ".log"]
    stdout, stderr = run_dump(cls, index_files, "--index-sanity-check")
    assert stderr == "", stderr
    for path in index_files:
        lines = sections(stdout)[path.name]
        ok = [f"{path} passed sanity check."]
        if path.suffix == ".index" and not read_offset_index(path, 0):
            ok = [f"{path} is empty."]
        assert lines == ok, stdout


def _txn_batch(pid: int, seq: int, count: int, timestamp: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=pid,
        producer_epoch=0, base_sequence=seq, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=timestamp, key=b"k%d" % i, value=b"v" * 100, headers=[])
    return bytes(builder.build())


def test_dump_log_segments_reads_josefk_transactions(tmp_path: Path) -> None:
    """Kafka's DumpLogSegments reads our markers (``endTxnMarker: ABORT coordinatorEpoch:``),
    our ``.txnindex`` entries (version, producerId, firstOffset, lastOffset,
    lastStableOffset) and an open transaction and coordinator epoch in our ``.snapshot``."""
    cls = kafka_dump_class()
    log = Log.open(tmp_path / "topic-0", LogConfig(segment_bytes=1024))
    now = int(time.time() * 1000)
    p1, p2 = 4242, 777
    log.append_as_leader(_txn_batch(p1, 0, 3, now), 0)  # 0-2
    log.append_as_leader(_txn_batch(p2, 0, 2, now), 0)  # 3-4
    for i in range(12):  # spread the transactions over several segments
        log.append_as_leader(_txn_batch(p1, 3 + i, 1, now), 0)  # 5-16
    log.append_control_batch(p1, 0, 6, commit=False, leader_epoch=0)  # 17: p2 still open
    log.append_control_batch(p2, 0, 6, commit=True, leader_epoch=0)  # 18
    log.append_as_leader(_txn_batch(p2, 2, 1, now), 0)  # 19: open
    log.append_control_batch(p2, 0, 7, commit=False, leader_epoch=0)  # 20
    log.append_as_leader(_txn_batch(p1, 15, 1, now), 0)  # 21: open at the snapshot
    log.close()
    log_dir = tmp_path / "topic-0"
    txnindexes = sorted(log_dir.glob("*.txnindex"))
    assert len(list(log_dir.glob("*.log"))) > 1 and txnindexes
    files = [*sorted(log_dir.glob("*.log")), *txnindexes, log_dir / f"{22:020d}.snapshot"]
    stdout, _ = run_dump(cls, files, "--print-data-log")
    dumped = sections(stdout)

    markers = [(int(m[1]), m[2], int(m[3])) for name, lines in dumped.items()
               if name.endswith(".log") for line in lines
               if (m := re.search(r"\| offset: (\d+) .* endTxnMarker: (\w+) "
                                  r"coordinatorEpoch: (\d+)", line))]
    assert markers == [(17, "ABORT", 6), (18, "COMMIT", 6), (20, "ABORT", 7)]
    controls = [line for name, lines in dumped.items() if name.endswith(".log")
                for line in lines if "isControl: true" in line]
    assert len(controls) == 3 and all("isTransactional: true" in c for c in controls)

    entries = [dict(re.findall(r"(\w+): (-?\d+)", line)) for path in txnindexes
               for line in dumped[path.name] if line.strip()]
    assert entries == [
        {"version": "0", "producerId": str(p1), "firstOffset": "0", "lastOffset": "17",
         "lastStableOffset": "3"},
        {"version": "0", "producerId": str(p2), "firstOffset": "19", "lastOffset": "20",
         "lastStableOffset": "21"},
    ]
    raw = b"".join(p.read_bytes() for p in txnindexes)
    assert raw == (struct.pack(">hqqqq", 0, p1, 0, 17, 3)
                   + struct.pack(">hqqqq", 0, p2, 19, 20, 21))

    snapshot = {f["producerId"]: f for line in dumped[f"{22:020d}.snapshot"]
                if line.startswith("producerId")
                for f in [dict(re.findall(r"(\w+): (\S+)", line))]}
    assert snapshot[str(p1)]["currentTxnFirstOffset"] in ("21", "OptionalLong[21]")
    assert snapshot[str(p1)]["coordinatorEpoch"] == "6"
    assert snapshot[str(p2)]["coordinatorEpoch"] == "7"
    assert snapshot[str(p2)]["currentTxnFirstOffset"] in ("-1", "OptionalLong.empty")
