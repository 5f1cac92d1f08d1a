"""Log cleaner throughput: MB/s of dirty log compacted by josefk's cleaner core.

Writes ``--total`` bytes (64 MiB) of ``--keys`` keys, each rewritten many times, in
small segments, then runs one cleaning pass in this process (the thread the broker
would use, without the event loop) and prints the dirty bytes read per second and
how much the log shrank. josefk only: the side-by-side run against Apache Kafka
(its cleaner on the same data, read from its log) and the group coordinator
start-up after a million offset commits are not written yet.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.log.cleaner import Cleaner, OffsetMap
from josefk.log.cleaner_manager import LogCleanerManager
from josefk.log.config import LogConfig
from josefk.log.manager import LogManager

MIB = 1 << 20


def batch(keys: list[bytes], value: bytes, compression: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                        is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
    now = int(time.time() * 1000)
    for i, key in enumerate(keys):
        builder.append(i, timestamp=now, key=key, value=value, headers=[])
    return bytes(builder.build())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--total", type=int, default=64 * MIB, help="bytes of log to write")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--per-batch", type=int, default=100)
    parser.add_argument("--compression", type=int, default=0, help="0 none, 1 gzip, ...")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="josefk-bench-compaction-", dir=args.dir))
    try:
        config = LogConfig(cleanup_policy="compact", segment_bytes=16 * MIB,
                           min_cleanable_dirty_ratio=0.0)
        manager = LogManager([root], lambda _t: config)
        manager.startup()
        log = manager.get_or_create_log("bench", 0)
        value = os.urandom(args.value_bytes)
        i = 0
        while log.size_in_bytes() < args.total:
            keys = [b"key-%08d" % ((i + j) % args.keys) for j in range(args.per_batch)]
            log.append_as_leader(batch(keys, value, args.compression), leader_epoch=0)
            i += args.per_batch
        log.roll()
        log.high_watermark = log.log_end_offset
        dirty = log.size_in_bytes()
        cleaners = LogCleanerManager(manager)
        plan = cleaners.grab_filthiest()
        assert plan is not None
        began = time.perf_counter()
        end, stats = Cleaner(OffsetMap(128 * MIB // 24)).clean(
            plan, lambda group, writer: cleaners.replace(plan, group, writer))
        elapsed = time.perf_counter() - began
        cleaners.done(plan, end)
        print(f"josefk cleaner: {dirty / MIB:.1f} MiB of dirty log ({i} records, {args.keys} "
              f"keys) in {elapsed:.2f} s = {dirty / MIB / elapsed:.1f} MB/s; "
              f"{log.size_in_bytes() / MIB:.2f} MiB left")
        print(stats.summary("bench-0"))
        manager.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
