"""The soak's heap hunt: a josefk broker run under tracemalloc serves as usual and leaves
snapshots that ``--compare`` reads."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from kafka.protocol.metadata import ApiVersionsRequest

from josefk.testing.polling import free_port

from ..rawkafka import RawConnection
from .traced_broker import compare, snapshots

ROOT = Path(__file__).resolve().parents[2]


def test_a_traced_broker_serves_and_leaves_snapshots_to_compare(tmp_path: Path) -> None:
    port, heap = free_port(), tmp_path / "heap"
    command = [sys.executable, "-m", "compat_tests.chaos.traced_broker", "0.5", str(heap),
               "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
               "--override", f"log.dirs={tmp_path / 'data'}"]
    broker = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                connection = RawConnection(f"127.0.0.1:{port}", 5.0, "traced")
                break
            except OSError:
                assert broker.poll() is None and time.monotonic() < deadline, "never served"
                time.sleep(0.2)
        connection.request(ApiVersionsRequest[0](), 0)
        connection.close()
        while len(next(iter(snapshots(heap).values()), [])) < 3:
            assert time.monotonic() < deadline, "fewer than three snapshots"
            time.sleep(0.2)
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(30)
    [(pid, paths)] = snapshots(heap).items()
    assert pid == str(broker.pid) and len(paths) >= 3
    report = compare(heap, skip=0)
    assert report.startswith(f"process {pid}: ") and " MB traced between " in report
    assert "kB" in report
