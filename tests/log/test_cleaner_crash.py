"""SIGKILL a josefk broker while its cleaner is busy; after a restart nothing live is lost.

For each seed: a compacted topic gets many versions of its keys across many small
segments (CreateTimes further apart than ``segment.ms``), the cleaner is throttled
(``log.cleaner.io.max.bytes.per.second``) so a pass spans many segment swaps, and
the broker is killed at a random moment of it. After the restart a consumer reads
every key's last record at its original offset, and nothing that was not written;
Apache Kafka's DumpLogSegments then reads every segment without complaint.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

REPO = Path(__file__).resolve().parents[2]
TOPIC = "compacted"
KEYS = 40
ROUNDS = 30
SEGMENT_MS = 100
VALUE = 400
SEEDS = [1, 2, 3, 4]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BrokerProcess:
    def __init__(self, data: Path, port: int) -> None:
        self.data, self.port = data, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data.parent / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [sys.executable, "-m", "josefk.server", "serve",
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                   "--override", f"log.dirs={self.data}",
                   "--override", "log.cleaner.backoff.ms=50",
                   "--override", "log.cleaner.io.max.bytes.per.second=300000"]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "broker did not listen"
                time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=60)
        self.proc = None


def _produce(bootstrap: str) -> dict[bytes, tuple[int, bytes]]:
    """ROUNDS versions of KEYS keys, one round per segment; every key's last (offset, value)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        admin.create_topics({TOPIC: {"num_partitions": 1, "configs": {
            "cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS),
            "min.cleanable.dirty.ratio": "0.01"}}}, timeout_ms=15_000, wait_for_metadata=True)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20,
                             enable_idempotence=False)
    written: dict[bytes, tuple[int, bytes]] = {}
    try:
        ts = int(time.time() * 1000) - 3_600_000
        for r in range(ROUNDS):
            ts += SEGMENT_MS * 3
            futures = []
            for k in range(KEYS):
                key, value = b"key-%d" % k, (b"%d-%d;" % (r, k) * VALUE)[:VALUE]
                futures.append((key, value, producer.send(TOPIC, key=key, value=value,
                                                          partition=0, timestamp_ms=ts)))
            producer.flush()
            for key, value, future in futures:
                written[key] = (future.get(timeout=30).offset, value)
        producer.send(TOPIC, key=b"end", value=b"end", partition=0, timestamp_ms=ts + 1000)
        producer.flush()
    finally:
        producer.close()
    return written


def _read_all(bootstrap: str) -> list[tuple[int, bytes, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=15_000)
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        got = []
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline
            for records in consumer.poll(timeout_ms=200).values():
                got.extend((r.offset, r.key, r.value) for r in records)
        return got
    finally:
        consumer.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", SEEDS)
def test_sigkill_during_cleaning_loses_nothing_live(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = tmp_path / "data"
    data.mkdir()
    broker = BrokerProcess(data, _free_port())
    broker.start()
    try:
        latest = _produce(broker.bootstrap)
        time.sleep(rng.uniform(0.0, 2.5))  # somewhere inside the throttled pass
        broker.stop(signal.SIGKILL)
        broker.start()
        got = _read_all(broker.bootstrap)
    finally:
        broker.stop()
    by_offset = {o: (k, v) for o, k, v in got}
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    for key, (offset, value) in latest.items():
        assert by_offset.get(offset) == (key, value), (seed, key, offset)
    # Anything else still there is an older version of a key, never something new.
    for offset, key, value in got:
        if key in latest and offset != latest[key][0]:
            assert offset < latest[key][0] and value.startswith(b"%d-" % (offset // KEYS)), (
                seed, offset, key)
    text = broker.log.read_text()
    assert "Traceback" not in text, text[-3000:]
    _dump_log_segments(data / f"{TOPIC}-0")


def _dump_log_segments(directory: Path) -> None:
    from conftest import require_kafka_jars  # noqa: PLC0415 - only for the dump

    require_kafka_jars()
    sys.path.insert(0, str(REPO / "tests"))
    from test_kafka_dump_log_segments import COMPLAINT_RE, kafka_dump_class  # noqa: PLC0415

    files = sorted(p for p in directory.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    proc = subprocess.run(
        [str(REPO / "tools" / "kafka" / "run-class.sh"), kafka_dump_class(), "--files",
         ",".join(map(str, files)), "--deep-iteration"],
        capture_output=True, text=True, timeout=180)
    report = f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, report
    assert not COMPLAINT_RE.search(proc.stdout), report
    # Offset gaps are what compaction leaves ("Non-consecutive offsets"); nothing else.
    complaints = [line for line in proc.stderr.splitlines()
                  if line.strip() and "Non-consecutive offsets" not in line
                  and "is followed by" not in line]
    assert not complaints, report
