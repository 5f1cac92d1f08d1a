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
import struct
import tempfile
import time

import crc32c
import trio
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from josefk.protocol.messages import decode_request
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config

TOPIC = "produce-path"
# Requests (copies of the frame) made ready at a time, outside the measured time.
CHUNK = 500


PRODUCER_ID = 1000
# Where a batch's base sequence and CRC sit (Kafka's DefaultRecordBatch layout).
BASE_SEQUENCE_AT, CRC_AT, CRC_FROM = 53, 17, 21


def produce_frame(records: int, size: int, version: int, acks: int,
                  idempotent: bool = False) -> bytes:
    """A Produce request frame (without its size prefix) of one batch to partition 0;
    ``idempotent``: from producer PRODUCER_ID, epoch 0, sequence 0 (see `sequenced`)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=PRODUCER_ID if idempotent else -1,
                                        producer_epoch=0 if idempotent else -1,
                                        base_sequence=0 if idempotent else -1,
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


def sequenced(frame: bytes, records: int, first: int, count: int) -> list[bytes]:
    """``count`` copies of an idempotent frame whose batches follow each other from the
    ``first``-th: each its base sequence and CRC rewritten."""
    at = frame.rindex(PRODUCER_ID.to_bytes(8, "big")) - 43  # the batch's start
    end = at + 12 + struct.unpack_from(">i", frame, at + 8)[0]  # + its batchLength
    frames = []
    for n in range(first, first + count):
        buf = bytearray(frame)
        struct.pack_into(">i", buf, at + BASE_SEQUENCE_AT, n * records % (1 << 31))
        struct.pack_into(">I", buf, at + CRC_AT, crc32c.crc32c(memoryview(buf)[at + CRC_FROM:end]))
        frames.append(bytes(buf))
    return frames


async def measure(args: argparse.Namespace) -> None:
    frame = produce_frame(args.records, args.size, args.version, args.acks, args.idempotent)
    if args.requests is None:  # about 300 MB written in all
        args.requests = max(1000, min(20000, 300_000_000 // len(frame)))
    with tempfile.TemporaryDirectory() as data:
        config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data})
        async with trio.open_nursery() as nursery:
            broker = await nursery.start(Broker(config).serve)
            await broker.create_topic(TOPIC, 1, 1)
            sent = 0

            def frames(count: int) -> list[bytes]:
                if args.idempotent:
                    return sequenced(frame, args.records, sent, count)
                return [frame] * count

            for warm in frames(args.warmup):
                await broker.dispatch(decode_request(warm))
            sent = args.warmup
            profile = cProfile.Profile() if args.profile else None
            user = system = 0.0
            while sent < args.warmup + args.requests:
                chunk = frames(min(CHUNK, args.warmup + args.requests - sent))
                if profile is not None:
                    profile.enable()
                before = os.times()
                for f in chunk:
                    await broker.dispatch(decode_request(f))
                after = os.times()
                if profile is not None:
                    profile.disable()
                user += after.user - before.user
                system += after.system - before.system
                sent += len(chunk)
            if profile is not None:
                pstats.Stats(profile).sort_stats("tottime").print_stats(25)
            appended = broker.partition(TOPIC, 0).log.log_end_offset
            if appended != sent * args.records:  # an error answer would be measured
                raise SystemExit(f"{appended} records appended, {sent * args.records} sent")
            user = user / args.requests * 1e6
            system = system / args.requests * 1e6
            print(f"{len(frame):,} B requests ({args.records} records of {args.size} B), "
                  f"Produce v{args.version}, acks={args.acks}"
                  f"{', idempotent' if args.idempotent else ''}: {user:.1f} µs user + "
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
    parser.add_argument("--idempotent", action="store_true",
                        help="batches of one idempotent producer, in sequence")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 25")
    trio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
