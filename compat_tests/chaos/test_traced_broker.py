"""The soak's heap hunt: a josefk broker run under tracemalloc serves as usual and leaves
snapshots that ``--compare`` reads."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafka.protocol.metadata import ApiVersionsRequest

from josefk.testing.polling import free_port

from ..rawkafka import RawConnection
from . import census
from .traced_broker import compare, snapshots

ROOT = Path(__file__).resolve().parents[2]
BROKER = "josefk.server.broker.Broker"


def _serve_until(tmp_path: Path, mode: list[str], done) -> subprocess.Popen:
    """A watched broker serving an ApiVersions, stopped once ``done(heap)`` holds."""
    port, heap = free_port(), tmp_path / "heap"
    command = [sys.executable, "-m", "compat_tests.chaos.traced_broker", *mode, str(heap),
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
        while not done(heap):
            assert time.monotonic() < deadline, "too few snapshots"
            time.sleep(0.2)
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(30)
    return broker


def test_a_traced_broker_serves_and_leaves_snapshots_to_compare(tmp_path: Path) -> None:
    heap = tmp_path / "heap"
    broker = _serve_until(tmp_path, ["0.5"],
                          lambda heap: len(next(iter(snapshots(heap).values()), [])) >= 3)
    [(pid, paths)] = snapshots(heap).items()
    assert pid == str(broker.pid) and len(paths) >= 3
    report = compare(heap, skip=0)
    assert report.startswith(f"process {pid}: ") and " MB traced between " in report
    assert "kB" in report


def test_a_census_broker_serves_and_leaves_censuses_to_compare(tmp_path: Path) -> None:
    heap = tmp_path / "heap"

    def serving(heap: Path) -> bool:  # the census after the broker came up
        files = list(heap.glob("*.census"))
        censuses = census.load(files[0]) if files else []
        return len(censuses) >= 2 and BROKER in censuses[-1]["types"]

    broker = _serve_until(tmp_path, ["--census", "0.5"], serving)
    [path] = heap.glob("*.census")
    assert path.stem == str(broker.pid)
    last = census.load(path)[-1]
    assert last["types"]["builtins.dict"][0] > 1000 and last["blocks"] > 0
    assert last["types"][BROKER][0] == 1
    report = census.compare(heap, skip=0)
    assert report.startswith(f"process {broker.pid}: ") and " pymalloc blocks over " in report


class Grown:
    """A type only this test makes."""


def test_the_census_names_the_type_that_grew_and_the_frozen_garbage() -> None:
    name = f"{__name__}.Grown"
    try:
        census.take()  # freezes
        cycles = [Grown() for _ in range(3000)]
        for obj in cycles:
            obj.me = obj
        del obj
        gc.freeze()
        cycles.clear()  # frozen cycles: garbage no collection finds
        kept = [Grown() for _ in range(5000)]
        after = census.take()
    finally:
        gc.unfreeze()
    assert after["types"][name][0] == 5000 and after["garbage"][name][0] == 3000
    assert len(kept) == 5000
    rows = {row[0]: row[1:] for row in census.diff({}, after["types"], top=10_000)}
    assert rows[name][0] == 5000 and rows[name][1] >= 5000 * 48


def test_the_census_names_the_largest_objects_and_their_holders() -> None:
    holder = Grown()
    holder.blob = bytearray(64 << 20)
    try:
        after = census.take()
    finally:
        gc.unfreeze()
    # Through the instance's own dict or its inline values (CPython decides which).
    [name, size, holders] = after["big"][0]
    assert (name, size) == ("builtins.bytearray", sys.getsizeof(holder.blob))
    assert holders in (f"{__name__}.Grown", f"{__name__}.Grown.__dict__")
