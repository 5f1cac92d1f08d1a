"""librdkafka (confluent-kafka) load generators, each run as its own process.

    python -m bench.clients ROLE '{"bootstrap": ..., ...}'

prints one JSON line with its figures on stdout. Every role is bounded by a
record count and by ``seconds``. Times are CLOCK_MONOTONIC nanoseconds, which are
the same clock in every process of the machine, so a harness can combine
the windows of several producers and a consumer can compare a producer's send
time with its receive time.

Roles:

- ``produce``: ``count`` records of ``size`` bytes to ``topic`` as fast as the
  client accepts them, then flush; ``barrier`` makes it print ``ready`` and wait
  for a line on stdin first (several producers start together).
- ``consume``: read ``count`` records of ``topic`` partition 0 from the start,
  without a consumer group (assign).
- ``latency-produce``: ``count`` records paced at ``rate`` bytes/s, each value
  starting with its send time.
- ``latency-consume``: read those and report send-to-receive percentiles.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from typing import Any

import confluent_kafka as ck

QUIET = {"log_level": 0}


def now_ns() -> int:
    return time.monotonic_ns()


class Stats:
    """The last librdkafka statistics report, summed over the real brokers: requests
    sent per API (``req``) and bytes received from / sent to the brokers."""

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        self.rxbytes = 0
        self.txbytes = 0
        self.reports = 0

    def __call__(self, payload: str) -> None:
        data = json.loads(payload)
        self.reports += 1
        requests: dict[str, int] = {}
        rx = tx = 0
        for name, broker in data.get("brokers", {}).items():
            if name.startswith(":"):  # the internal / bootstrap placeholders
                continue
            for api, n in broker.get("req", {}).items():
                requests[api] = requests.get(api, 0) + int(n)
            rx += int(broker.get("rxbytes", 0))
            tx += int(broker.get("txbytes", 0))
        self.requests, self.rxbytes, self.txbytes = requests, rx, tx

    @property
    def produce_requests(self) -> int:
        return self.requests.get("Produce", 0)

    def wait_for_next(self, client: Any, seconds: float = 2.0) -> None:
        """Serve callbacks until one more report came (so the counts include everything)."""
        seen = self.reports
        until = time.monotonic() + seconds
        while self.reports == seen and time.monotonic() < until:
            if isinstance(client, ck.Consumer):
                client.consume(1, 0.05)
            else:
                client.poll(0.05)


def produce(args: dict[str, Any]) -> dict[str, Any]:
    count, size, seconds = int(args["count"]), int(args["size"]), float(args["seconds"])
    stats = Stats()
    config = {"bootstrap.servers": args["bootstrap"], **QUIET, **args.get("config", {})}
    if args.get("stats"):
        config["statistics.interval.ms"] = 500
        config["stats_cb"] = stats
    errors: list[str] = []
    acked = [0]

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            acked[0] += 1
        elif len(errors) < 5:
            errors.append(str(err))

    producer = ck.Producer(config)
    producer.list_topics(args["topic"], timeout=30)  # connected, topic known
    if args.get("barrier"):
        print("ready", flush=True)
        sys.stdin.readline()
    value = os.urandom(size)
    topic = args["topic"]
    start = now_ns()
    deadline = start + int(seconds * 1e9)
    sent = 0
    while sent < count:
        try:
            producer.produce(topic, value, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.001)
            if now_ns() > deadline:
                break
            continue
        if sent % 1000 == 0:
            producer.poll(0)
            if now_ns() > deadline:
                break
    left = producer.flush(max(1.0, (deadline - now_ns()) / 1e9 + 30))
    end = now_ns()
    if args.get("stats"):
        stats.wait_for_next(producer)
    return {"records": acked[0], "bytes": acked[0] * size, "sent": sent, "unflushed": left,
            "start_ns": start, "end_ns": end, "seconds": (end - start) / 1e9,
            "errors": errors, "produce_requests": stats.produce_requests}


def consume(args: dict[str, Any]) -> dict[str, Any]:
    count, seconds = int(args["count"]), float(args["seconds"])
    config = {"bootstrap.servers": args["bootstrap"], "group.id": "bench-unused",
              "enable.auto.commit": False, "enable.auto.offset.store": False, **QUIET,
              **args.get("config", {})}
    stats = Stats()
    config["statistics.interval.ms"] = 1000
    config["stats_cb"] = stats
    consumer = ck.Consumer(config)
    start = now_ns()
    consumer.assign([ck.TopicPartition(args["topic"], 0, ck.OFFSET_BEGINNING)])
    deadline = start + int(seconds * 1e9)
    records = nbytes = 0
    first = last = 0
    errors: list[str] = []
    while records < count and now_ns() < deadline:
        # Never ask for more than is left: consume() waits for the whole batch.
        batch = consumer.consume(min(10000, count - records), 0.5)
        if not batch:
            continue
        if not first:
            first = now_ns()
        for msg in batch:
            err = msg.error()
            if err is not None:
                if len(errors) < 5 and err.code() != ck.KafkaError._PARTITION_EOF:
                    errors.append(str(err))
                continue
            records += 1
            nbytes += len(msg.value())
        last = now_ns()
    stats.wait_for_next(consumer, 2.5)  # untimed: Fetch counts for the report
    consumer.close()
    fetches = stats.requests.get("Fetch", 0)
    return {"records": records, "bytes": nbytes, "start_ns": start, "end_ns": last or now_ns(),
            "seconds": ((last or now_ns()) - start) / 1e9,
            "first_to_last_seconds": (last - first) / 1e9 if first else None, "errors": errors,
            "fetch_requests": fetches,
            "kib_per_fetch": round(stats.rxbytes / fetches / 1024, 1) if fetches else None}


def latency_produce(args: dict[str, Any]) -> dict[str, Any]:
    count, size, rate = int(args["count"]), int(args["size"]), float(args["rate"])
    per_second = rate / size
    config = {"bootstrap.servers": args["bootstrap"], **QUIET, **args.get("config", {})}
    producer = ck.Producer(config)
    producer.list_topics(args["topic"], timeout=30)
    pad = os.urandom(size - 8)
    topic = args["topic"]
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    start = now_ns()
    sent = 0
    max_behind = 0
    while sent < count:
        due = min(count, int((now_ns() - start) / 1e9 * per_second) + 1)
        max_behind = max(max_behind, due - sent)
        while sent < due:
            try:
                producer.produce(topic, struct.pack(">q", now_ns()) + pad,
                                 on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
        time.sleep(0.0005)
    end = now_ns()
    left = producer.flush(60)
    seconds = (end - start) / 1e9
    return {"records": sent, "seconds": seconds, "rate_bytes": sent * size / seconds,
            "max_behind_records": max_behind, "unflushed": left, "errors": errors}


def latency_consume(args: dict[str, Any]) -> dict[str, Any]:
    count, seconds, warmup = int(args["count"]), float(args["seconds"]), float(args["warmup"])
    config = {"bootstrap.servers": args["bootstrap"], "group.id": "bench-unused",
              "enable.auto.commit": False, "enable.auto.offset.store": False, **QUIET,
              **args.get("config", {})}
    consumer = ck.Consumer(config)
    consumer.assign([ck.TopicPartition(args["topic"], 0, ck.OFFSET_BEGINNING)])
    consumer.consume(1, 1.0)  # the fetcher is running
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    pairs: list[tuple[int, int]] = []
    while len(pairs) < count and time.monotonic() < deadline:
        # poll() returns as soon as one record is there; consume(n, timeout) would wait
        # for n records, which at 20k records/s adds tens of milliseconds.
        first = consumer.poll(0.1)
        if first is None:
            continue
        received = now_ns()
        for msg in [first, *consumer.consume(1000, 0)]:
            if msg.error() is None:
                pairs.append((struct.unpack_from(">q", msg.value())[0], received))
    consumer.close()
    if not pairs:
        return {"records": 0, "measured": 0}
    first_sent = min(sent for sent, _ in pairs)
    cutoff = first_sent + int(warmup * 1e9)
    latencies = sorted(recv - sent for sent, recv in pairs if sent >= cutoff)
    out: dict[str, Any] = {"records": len(pairs), "measured": len(latencies)}
    for name, q in (("p50", 0.50), ("p99", 0.99), ("p999", 0.999), ("max", 1.0)):
        if latencies:
            out[name + "_ms"] = latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1e6
    return out


ROLES = {"produce": produce, "consume": consume, "latency-produce": latency_produce,
         "latency-consume": latency_consume}


def main() -> None:
    role, args = sys.argv[1], json.loads(sys.argv[2])
    result = ROLES[role](args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
