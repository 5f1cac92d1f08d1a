"""CPU per Produce request inside the broker, without sockets: decode, handler, append,
response encoding, as the connection would run them.

    .venv/bin/python -m bench.produce_path                 # 16 KiB requests (the Java producer's)
    .venv/bin/python -m bench.produce_path --records 1000  # ~1 MiB requests (librdkafka's)
    .venv/bin/python -m bench.produce_path --profile       # and cProfile's top functions

A figure, not an assertion: user and system CPU microseconds per request (os.times),
after a warm-up, with one in-process broker on a fresh data directory. System time is
mostly the append's write into the page cache.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time

import trio
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.protocol.messages import decode_request
from josefk.server.broker import Broker
from josefk.server.config import load_config

TOPIC = "produce-path"


def produce_frame(records: int, size: int, version: int, acks: int) -> bytes:
    """A Produce request frame (without its size prefix) of one batch to partition 0."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(records):
        builder.append(i, timestamp=now, key=None, value=b"x" * size, headers=[])
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(
        index=0, records=bytes(builder.build()))
    request = ProduceRequest[version](transactional_id=None, acks=acks, timeout_ms=30000,
                                      topic_data=[ProduceRequest.TopicProduceData(
                                          name=TOPIC, partition_data=[partition])])
    request.with_header(correlation_id=1, client_id="producer-1")
    return bytes(request.encode(header=True, framed=True))[4:]


async def measure(args: argparse.Namespace) -> None:
    frame = produce_frame(args.records, args.size, args.version, args.acks)
    if args.requests is None:  # about 300 MB written in all
        args.requests = max(1000, min(20000, 300_000_000 // len(frame)))
    with tempfile.TemporaryDirectory() as data:
        config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data})
        async with trio.open_nursery() as nursery:
            broker = await nursery.start(Broker(config).serve)
            await broker.create_topic(TOPIC, 1, 1)
            for _ in range(args.warmup):
                await broker.dispatch(decode_request(frame))
            profile = cProfile.Profile() if args.profile else None
            if profile is not None:
                profile.enable()
            before = os.times()
            for _ in range(args.requests):
                await broker.dispatch(decode_request(frame))
            after = os.times()
            if profile is not None:
                profile.disable()
                pstats.Stats(profile).sort_stats("tottime").print_stats(25)
            user = (after.user - before.user) / args.requests * 1e6
            system = (after.system - before.system) / args.requests * 1e6
            print(f"{len(frame):,} B requests ({args.records} records of {args.size} B), "
                  f"Produce v{args.version}, acks={args.acks}: {user:.1f} µs user + "
                  f"{system:.1f} µs sys per request over {args.requests:,}")
            nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=15, help="records per batch (15)")
    parser.add_argument("--size", type=int, default=1024, help="bytes per value (1024)")
    parser.add_argument("--version", type=int, default=9, help="Produce version (9)")
    parser.add_argument("--acks", type=int, default=1, choices=(-1, 0, 1))
    parser.add_argument("--requests", type=int, default=None,
                        help="requests measured (default: about 300 MB of them, 1,000-20,000)")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 25")
    trio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
