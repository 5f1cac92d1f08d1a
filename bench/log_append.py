"""Storage engine throughput: josefk's Log against a plain ``os.write`` loop.

Appends ``--total`` bytes (1 GiB) of 16 KiB record batches through
``Log.append_as_leader`` and the same bytes through a bare ``os.write`` loop
into the same directory, then reads everything back by offset. Also times a
random-offset lookup in logs of 10 to 10,000 segments. Prints MB/s and ratios
measured in this run; nothing here is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.log.config import LogConfig
from josefk.log.log import Log

MIB = 1 << 20


def make_batch(batch_bytes: int, record_bytes: int = 1024) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=batch_bytes * 2)
    value = os.urandom(record_bytes)
    i = 0
    while True:
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
        i += 1
        if builder.size() + record_bytes + 16 > batch_bytes:
            return bytes(builder.build())


def plain_write(path: Path, batch: bytes, count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        view = memoryview(batch)
        while view:
            view = view[os.write(fd, view):]
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def log_append(directory: Path, batch: bytes, count: int) -> tuple[float, Log]:
    log = Log.open(directory, LogConfig())
    # As in the broker: the batch arrives as read-only request bytes; the append copies
    # and rewrites only its 61-byte header and writes the body from these bytes.
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0)
    elapsed = time.perf_counter() - start
    log.high_watermark = log.log_end_offset
    return elapsed, log


def read_back(log: Log, batch_bytes: int) -> tuple[float, int]:
    start = time.perf_counter()
    offset, total = log.log_start_offset, 0
    while offset < log.log_end_offset:
        piece = log.read(offset, batch_bytes)
        data = piece.read_bytes()
        total += len(data)
        # The slice starts at a batch holding `offset`; continue after its last offset.
        offset = int.from_bytes(data[0:8], "big") + int.from_bytes(data[23:27], "big") + 1
    return time.perf_counter() - start, total


def lookup_latency(root: Path, segments: int, lookups: int) -> float:
    """Median microseconds for a random-offset read in a log of ``segments`` segments."""
    batch = make_batch(4096, record_bytes=100)
    config = LogConfig(segment_bytes=len(batch) * 2, index_interval_bytes=len(batch))
    log = Log.open(root / f"lookup-{segments}", config)
    buf = bytearray(batch)
    while len(log.segments) < segments:
        log.append_as_leader(buf, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    timings = []
    for _ in range(lookups):
        offset = random.randrange(log.log_start_offset, log.log_end_offset)
        start = time.perf_counter()
        log.read(offset, 4096)
        timings.append(time.perf_counter() - start)
    log.close()
    return statistics.median(timings) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--total-mib", type=int, default=1024)
    parser.add_argument("--batch-kib", type=int, default=16)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="josefk-bench-", dir=args.dir))
    try:
        batch = make_batch(args.batch_kib * 1024)
        count = args.total_mib * MIB // len(batch)
        mib = count * len(batch) / MIB
        print(f"{count} batches of {len(batch)} bytes ({mib:.0f} MiB) in {root}, "
              f"{args.rounds} alternating rounds")
        plain_rates, append_rates, read_rates = [], [], []
        for round_no in range(1, args.rounds + 1):
            plain = plain_write(root / "plain.bin", batch, count)
            (root / "plain.bin").unlink()
            appended, log = log_append(root / "bench-0", batch, count)
            read_time, read_total = read_back(log, len(batch))
            log.close()
            shutil.rmtree(root / "bench-0")
            plain_rates.append(mib / plain)
            append_rates.append(mib / appended)
            read_rates.append(read_total / MIB / read_time)
            print(f"round {round_no}: plain write {plain_rates[-1]:6.0f} MB/s, "
                  f"Log.append {append_rates[-1]:6.0f} MB/s, read {read_rates[-1]:6.0f} MB/s")
        plain_mb, append_mb = statistics.median(plain_rates), statistics.median(append_rates)
        print(f"median plain os.write : {plain_mb:6.0f} MB/s")
        print(f"median Log.append     : {append_mb:6.0f} MB/s  = {append_mb / plain_mb:.2f}x "
              f"plain write")
        print(f"median read by offset : {statistics.median(read_rates):6.0f} MB/s")
        for segments in (10, 100, 1000, 10000):
            micros = lookup_latency(root, segments, args.lookups)
            print(f"lookup, {segments:>5} segments: {micros:7.1f} us median")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
