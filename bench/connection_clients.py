"""The client processes of bench/connections.py.

    python -m bench.connection_clients idle BOOTSTRAP N [CONCURRENCY]
    python -m bench.connection_clients produce BOOTSTRAP TOPIC PRODUCERS RATE SIZE WARMUP SECONDS

``idle`` raises its RLIMIT_NOFILE, opens N connections (each one ApiVersions round
trip, CONCURRENCY at a time), prints one JSON line (opened, failed, seconds), then
holds them idle until its stdin closes. ``produce`` runs PRODUCERS confluent-kafka
producers (acks=1) sending SIZE-byte messages at RATE per second each, staggered;
after WARMUP seconds it records librdkafka's produce-to-acknowledgement latency of
every message for SECONDS (a thread per producer serves its delivery reports),
then prints one JSON line (latencies in ms, errors).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import threading
import time
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest

CONNECT_TIMEOUT = 30.0


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def api_versions_frame() -> bytes:
    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=1, client_id="bench-idle")
    return request.encode(header=True, framed=True)


async def open_idle(host: str, port: int, count: int, concurrency: int
                    ) -> tuple[list[asyncio.StreamWriter], int, float]:
    frame = api_versions_frame()
    gate = asyncio.Semaphore(concurrency)
    writers: list[asyncio.StreamWriter] = []
    failed = 0

    async def one() -> None:
        nonlocal failed
        async with gate:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    reader, writer = await asyncio.open_connection(host, port)
                    writer.write(frame)
                    size = int.from_bytes(await reader.readexactly(4), "big")
                    await reader.readexactly(size)
                writers.append(writer)
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                failed += 1

    began = time.monotonic()
    await asyncio.gather(*(one() for _ in range(count)))
    return writers, failed, time.monotonic() - began


async def idle_main(bootstrap: str, count: int, concurrency: int) -> None:
    host, port = bootstrap.rsplit(":", 1)
    limit = raise_fd_limit()
    writers, failed, seconds = await open_idle(host, int(port), count, concurrency)
    print(json.dumps({"opened": len(writers), "failed": failed, "seconds": seconds,
                      "fd_limit": limit}), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # hold until the bench closes stdin
    for writer in writers:
        writer.close()


def produce_main(bootstrap: str, topic: str, producers: int, rate: float, size: int,
                 warmup: float, seconds: float) -> dict[str, Any]:
    from confluent_kafka import KafkaError, Message, Producer

    latencies: list[float] = []
    errors = 0
    recording = False

    def delivered(err: KafkaError | None, msg: Message) -> None:
        nonlocal errors
        if not recording:
            return
        if err is not None:
            errors += 1
        else:
            latencies.append(msg.latency() * 1000)

    config = {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0,
              "enable.idempotence": False, "log_level": 3}
    clients = [Producer(config) for _ in range(producers)]
    payload = b"x" * size
    stop = threading.Event()

    def serve_reports(client: Producer) -> None:
        # librdkafka's latency() counts until the report is served: serve it at once.
        while not stop.is_set():
            client.poll(0.05)

    pollers = [threading.Thread(target=serve_reports, args=(c,), daemon=True) for c in clients]
    for poller in pollers:
        poller.start()
    began = time.monotonic()
    record_from, stop_at = began + warmup, began + warmup + seconds
    # Producer i sends at began + (n + i / producers) / rate: an even load.
    due = [began + i / producers / rate for i in range(producers)]
    while True:
        now = time.monotonic()
        if now >= stop_at:
            break
        recording = now >= record_from
        for i, client in enumerate(clients):
            while due[i] <= now:
                client.produce(topic, payload, on_delivery=delivered)
                due[i] += 1 / rate
        time.sleep(max(0.0, min(min(due), stop_at) - time.monotonic()))
    for client in clients:
        client.flush(10)
    stop.set()
    for poller in pollers:
        poller.join()
    return {"latencies_ms": latencies, "errors": errors}


def main(argv: list[str]) -> int:
    if argv[0] == "idle":
        concurrency = int(argv[3]) if len(argv) > 3 else 256
        asyncio.run(idle_main(argv[1], int(argv[2]), concurrency))
        return 0
    if argv[0] == "produce":
        bootstrap, topic = argv[1], argv[2]
        producers, rate, size = int(argv[3]), float(argv[4]), int(argv[5])
        warmup, seconds = float(argv[6]), float(argv[7])
        print(json.dumps(produce_main(bootstrap, topic, producers, rate, size, warmup,
                                      seconds)), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
