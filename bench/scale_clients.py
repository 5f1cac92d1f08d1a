"""librdkafka (confluent-kafka) clients of the scale bench (bench/scale.py), each run as
its own process so that a hung client can be killed and the broker keeps the machine:

    python -m bench.scale_clients ROLE '{"bootstrap": ..., ...}'

prints one JSON line with its figures on stdout. Times are CLOCK_MONOTONIC nanoseconds
(``*_ns``), the same clock as the harness's ``time.monotonic()``. With ``"barrier":
true`` a role builds its client, prints ``ready`` and waits for a line on stdin first,
so the harness can spawn the broker between the two (a restart is timed from spawn).

Roles:

- ``create``: first (untimed) ``__consumer_offsets``, which the consumers below would
  have the broker create anyway; then one CreateTopics request per topic (``topics``:
  [[name, partitions]]), all in flight together, and full Metadata until every
  partition has a leader (and ``replication_factor`` replicas in sync).
- ``metadata``: ``calls`` full-metadata requests (``list_topics()``), one at a time;
  then as many on a bare socket (MetadataRequest v12 from kafka-python's protocol
  classes), timed from send to the response's last byte: the broker's part without
  librdkafka's parsing and the Python objects built from the answer. This process's
  garbage collector runs between the calls, not in them: a full collection of the
  previous answers' objects landed in every third call (7 → 22 ms at 10,000
  partitions), whichever the broker.
- ``produce``: one message to every partition (``first_write_s``), then ``messages``
  values of ``size`` bytes round-robin over every partition, ``acks`` (default 1),
  until all are acknowledged (the throughput). The producing roles use one librdkafka
  producer per 10,000 partitions (`Producers`): one instance's cost per message grows
  with its partition count, which is the client's, not the broker's.
- every role adds ``client_cpu_s``: its process's CPU time (librdkafka's threads too).
- ``fetch``: assign every partition from offset 0 (the start of the bench's new
  topics), read ``expect`` messages.
- ``probe-produce``: one message to every partition, re-sent after an error, until each
  partition has acknowledged one (start-up: first ack everywhere); a message waits for
  the broker as long as the step may last (``timeout``), never timing out to be re-sent.
- ``probe-fetch``: the message at offset 0 of ``topic`` partition 0 (start-up: oldest
  data answered).
- ``fill``: ``bytes`` of ``size``-byte values round-robin over every partition, big
  batches (the big-log dataset).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest

from bench.wire import Wire

QUIET = {"log_level": 0, "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 200}
# The bench's topics exist or it is an error: no broker-side auto-creation by a probe
# (the admin client is a producer inside librdkafka: it would ask for it too).
NO_AUTO_CREATE = {"allow.auto.create.topics": False}
OFFSETS_TOPIC = "__consumer_offsets"
# Partitions per librdkafka producer instance. Its broker thread visits every partition
# it produces to on each wakeup (rd_kafka_toppar_producer_serve, rd_kafka_msgq_age_scan:
# perf on the 50,000-partition run), so one instance's CPU per message grows with its
# partition count; past this many, the producing roles use one instance per slice.
PRODUCER_PARTITIONS = 10_000


def now_ns() -> int:
    return time.monotonic_ns()


def barrier(args: dict[str, Any]) -> None:
    if args.get("barrier"):
        print("ready", flush=True)
        sys.stdin.readline()


def partitions_of(args: dict[str, Any]) -> list[tuple[str, int]]:
    return [(name, p) for name, count in args["topics"] for p in range(int(count))]


def deadline_of(args: dict[str, Any]) -> int:
    return now_ns() + int(float(args["timeout"]) * 1e9)


def leaders_ready(admin: AdminClient, topics: list[list[Any]], replicas: int = 1
                  ) -> tuple[int, int]:
    """(partitions with a leader and ``replicas`` in sync, partitions expected) in one
    full Metadata."""
    meta = admin.list_topics(timeout=60)
    ready = 0
    for name, count in topics:
        t = meta.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == int(count):
            ready += sum(1 for p in t.partitions.values()
                         if p.leader >= 0 and len(p.isrs) >= replicas)
    return ready, sum(int(c) for _, c in topics)


def offsets_topic(admin: AdminClient, bootstrap: str, timeout: float) -> float:
    """Have the broker create ``__consumer_offsets`` (a consumer with a group.id asks for
    its coordinator, even with assign): seconds until all its partitions have leaders."""
    start = now_ns()
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-scale",
                            "enable.auto.commit": False, **QUIET})
    try:
        deadline = start + int(timeout * 1e9)
        while now_ns() < deadline:
            consumer.poll(0.1)
            # All topics: a Metadata request naming it could auto-create it instead.
            t = admin.list_topics(timeout=30).topics.get(OFFSETS_TOPIC)
            if t is not None and t.error is None and t.partitions \
                    and all(p.leader >= 0 for p in t.partitions.values()):
                return (now_ns() - start) / 1e9
        raise TimeoutError(f"{OFFSETS_TOPIC} not ready after {timeout:.0f}s")
    finally:
        consumer.close()


def create(args: dict[str, Any]) -> dict[str, Any]:
    # CreateTopics is answered once the partitions exist, which a cluster may take
    # longer than librdkafka's default socket timeout (60 s; 300 s at most) to finish.
    admin = AdminClient({"bootstrap.servers": args["bootstrap"], **QUIET, **NO_AUTO_CREATE,
                         "socket.timeout.ms": min(300_000, int(float(args["timeout"]) * 1000))})
    admin.list_topics(timeout=30)
    timeout = float(args["timeout"])
    # Every consumer below would make the broker create it mid-measure: first, untimed.
    offsets_s = offsets_topic(admin, args["bootstrap"], timeout)
    config = {k: str(v) for k, v in args.get("config", {}).items()}
    replicas = int(args.get("replication_factor", 1))
    start = now_ns()
    futures = [admin.create_topics([NewTopic(name, int(count), replicas, config=config)],
                                   operation_timeout=timeout, request_timeout=timeout)[name]
               for name, count in args["topics"]]
    for future in futures:
        future.result(timeout=timeout)
    answered = now_ns()
    deadline = start + int(timeout * 1e9)
    polls = 0
    while True:
        polls += 1
        ready, total = leaders_ready(admin, args["topics"], replicas)
        if ready == total:
            break
        if now_ns() > deadline:
            raise TimeoutError(f"{ready}/{total} partitions have a leader and {replicas} "
                               f"replica(s) in sync after {timeout:.0f}s")
        time.sleep(0.05)
    end = now_ns()
    return {"partitions": total, "requests_s": (answered - start) / 1e9,
            "create_s": (end - start) / 1e9, "metadata_polls": polls,
            "offsets_topic_s": offsets_s}


def metadata(args: dict[str, Any]) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": args["bootstrap"], **QUIET, **NO_AUTO_CREATE})
    admin.list_topics(timeout=60)  # connected; the first answer is not a sample
    samples, partitions = [], 0
    deadline = deadline_of(args)
    gc.disable()  # this process's collections (of the answers' objects) happen untimed
    try:
        for _ in range(int(args["calls"])):
            gc.collect()
            began = now_ns()
            meta = admin.list_topics(timeout=120)
            samples.append((now_ns() - began) / 1e6)
            partitions = sum(len(t.partitions) for t in meta.topics.values())
            del meta
            if now_ns() > deadline:
                break
    finally:
        gc.enable()
    wire = _wire_metadata_ms(args["bootstrap"], len(samples), deadline)
    return {"samples_ms": samples, "partitions_seen": partitions, "wire_samples_ms": wire}


def _wire_metadata_ms(bootstrap: str, calls: int, deadline: int) -> list[float]:
    """Full Metadata on a bare socket: send to the last byte of the answer."""
    samples = []
    wire = Wire(bootstrap, timeout=120, client_id="bench-scale")
    try:
        for i in range(calls + 1):
            began = now_ns()
            wire.send(MetadataRequest[12](topics=None), 12)
            wire.receive_frame()
            if i:  # the first answer is not a sample (as above)
                samples.append((now_ns() - began) / 1e6)
            if now_ns() > deadline:
                break
    finally:
        wire.close()
    return samples


def _delivery_counter() -> tuple[dict[str, Any], Callable[[Any, Any], None]]:
    state: dict[str, Any] = {"acked": 0, "bytes": 0, "failed": 0, "errors": [], "last_ns": 0}

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            state["acked"] += 1
            state["bytes"] += len(msg.value())
            state["last_ns"] = now_ns()
        else:
            state["failed"] += 1
            if len(state["errors"]) < 5:
                state["errors"].append(str(err))

    return state, on_delivery


class Producers:
    """librdkafka producers sharing the work, each for whole topics of at most
    PRODUCER_PARTITIONS partitions (one producer up to that many), used as one."""

    def __init__(self, config: dict[str, Any], topics: list[list[Any]]) -> None:
        self.instances: list[ck.Producer] = []
        self._of: dict[str, ck.Producer] = {}
        load = PRODUCER_PARTITIONS
        for name, count in topics:
            if load + int(count) > PRODUCER_PARTITIONS:
                self.instances.append(ck.Producer(config))
                load = 0
            load += int(count)
            self._of[name] = self.instances[-1]

    def produce(self, topic: str, value: bytes, **kwargs: Any) -> None:
        self._of[topic].produce(topic, value, **kwargs)

    def poll(self, timeout: float) -> None:
        for i, producer in enumerate(self.instances):
            producer.poll(timeout if i == 0 else 0)

    def flush(self, timeout: float) -> int:
        deadline = now_ns() + int(timeout * 1e9)
        return sum(p.flush(max(0.0, (deadline - now_ns()) / 1e9)) for p in self.instances)

    def list_topics(self, timeout: float) -> None:
        for producer in self.instances:
            producer.list_topics(timeout=timeout)


def _produce_all(producer: Producers, targets: list[tuple[str, int]], count: int,
                 values: list[bytes], on_delivery: Callable[[Any, Any], None],
                 deadline: int) -> int:
    sent = 0
    while sent < count:
        topic, partition = targets[sent % len(targets)]
        try:
            producer.produce(topic, values[sent % len(values)], partition=partition,
                             on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.005)
            if now_ns() > deadline:
                break
            continue
        sent += 1
        if sent % 2000 == 0:
            producer.poll(0)
            if now_ns() > deadline:
                break
    return sent


def produce(args: dict[str, Any]) -> dict[str, Any]:
    targets = partitions_of(args)
    size, count = int(args["size"]), int(args["messages"])
    deadline = deadline_of(args)
    producer = Producers({"bootstrap.servers": args["bootstrap"], "acks": args.get("acks", 1),
                          "linger.ms": 5, "queue.buffering.max.messages": 2_000_000,
                          "queue.buffering.max.kbytes": 1 << 20,
                          "message.timeout.ms": int(float(args["timeout"]) * 1000),
                          **QUIET, **NO_AUTO_CREATE}, args["topics"])
    producer.list_topics(timeout=60)
    # One message to every partition first, timed apart: a broker's first append to a
    # fresh partition can cost much more than the next ones (Kafka's ~10-20 ms each on
    # the development VM), and the throughput below is the steady state.
    warm, on_warm = _delivery_counter()
    began = now_ns()
    _produce_all(producer, targets, len(targets), [b"warm-up"], on_warm, deadline)
    producer.flush(max(1.0, (deadline - now_ns()) / 1e9))
    first_write_s = ((warm["last_ns"] or now_ns()) - began) / 1e9
    if warm["acked"] != len(targets):
        raise RuntimeError(f"first write: {warm['acked']}/{len(targets)} acked, "
                           f"errors {warm['errors']}")
    values = [os.urandom(size) for _ in range(16)]
    state, on_delivery = _delivery_counter()
    start = now_ns()
    sent = _produce_all(producer, targets, count, values, on_delivery, deadline)
    left = producer.flush(max(1.0, (deadline - now_ns()) / 1e9))
    end = state["last_ns"] or now_ns()
    secs = (end - start) / 1e9
    out = {"sent": sent, "acked": state["acked"], "failed": state["failed"],
           "unflushed": left, "errors": state["errors"], "seconds": secs,
           "bytes": state["bytes"], "warm_up": warm["acked"], "first_write_s": first_write_s,
           "msgs_s": state["acked"] / secs, "mib_s": state["bytes"] / secs / (1 << 20),
           "producers": len(producer.instances)}
    if state["acked"] < count:
        raise RuntimeError(f"only {state['acked']:,}/{count:,} acknowledged "
                           f"({left} unflushed, errors {state['errors']})")
    return out


def _consumer(args: dict[str, Any], **extra: Any) -> ck.Consumer:
    return ck.Consumer({"bootstrap.servers": args["bootstrap"], "group.id": "bench-scale",
                        "enable.auto.commit": False, "enable.partition.eof": False,
                        **QUIET, **NO_AUTO_CREATE, **extra})


def fetch(args: dict[str, Any]) -> dict[str, Any]:
    expect = int(args["expect"])
    deadline = deadline_of(args)
    # As bench.run's workload 4: by default librdkafka stops fetching a partition for a
    # whole second whenever its local queue is over queued.min.messages, which a first
    # answer holding every partition's records always is; the figure was then whole
    # seconds of client back-off (seen in its debug=fetch log against both brokers).
    consumer = _consumer(args, **{"fetch.queue.backoff.ms": 10})
    consumer.list_topics(timeout=60)
    # Offset 0, not OFFSET_BEGINNING: the bench's topics are new, so both are the start.
    # With OFFSET_BEGINNING librdkafka (2.16) sends one ListOffsets per partition and,
    # past ~15,000 partitions, about one run in two loses the last few hundred of them
    # before they are sent: those partitions wait in offset-wait forever. Seen against
    # Apache Kafka 4.3.1 (16,000 partitions) as against josefk; the bench measures the
    # brokers' fetch, not that race.
    assignment = [ck.TopicPartition(t, p, 0) for t, p in partitions_of(args)]
    got = nbytes = 0
    errors: list[str] = []
    start = now_ns()
    consumer.assign(assignment)
    while got < expect and now_ns() < deadline:
        for msg in consumer.consume(10_000, 0.5):
            if msg.error() is None:
                got += 1
                nbytes += len(msg.value() or b"")
            elif len(errors) < 5:
                errors.append(str(msg.error()))
    end = now_ns()
    consumer.close()
    secs = (end - start) / 1e9
    if got < expect:
        raise RuntimeError(f"read {got:,}/{expect:,} messages in {secs:.0f}s; errors {errors}")
    return {"messages": got, "bytes": nbytes, "seconds": secs, "errors": errors,
            "msgs_s": got / secs, "mib_s": nbytes / secs / (1 << 20)}


def probe_produce(args: dict[str, Any]) -> dict[str, Any]:
    targets = partitions_of(args)
    # Messages wait for the broker as long as the step may last: a message timing out
    # while the broker still loads would be re-sent by the loop below, and the figure
    # would jump by a whole timeout wherever loading takes longer than one.
    producer = Producers({"bootstrap.servers": args["bootstrap"], "acks": args.get("acks", 1),
                          "linger.ms": 5, "queue.buffering.max.messages": 2_000_000,
                          "message.timeout.ms": int(float(args["timeout"]) * 1000),
                          **QUIET, **NO_AUTO_CREATE}, args["topics"])
    acked: dict[tuple[str, int], int] = {}
    retry: list[tuple[str, int]] = []
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        key = (msg.topic(), msg.partition())
        if err is None:
            acked.setdefault(key, now_ns())
        else:
            retry.append(key)
            if len(errors) < 5:
                errors.append(str(err))

    barrier(args)
    start = now_ns()
    deadline = deadline_of(args)
    pending = list(targets)
    resent = 0
    while now_ns() < deadline:
        for topic, partition in pending:
            while True:
                try:
                    producer.produce(topic, b"probe", partition=partition,
                                     on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
                except ck.KafkaException as exc:
                    # A cluster's broker just started may not know the topic yet.
                    if exc.args[0].code() != ck.KafkaError._UNKNOWN_TOPIC:
                        raise
                    retry.append((topic, partition))
                    if len(errors) < 5:
                        errors.append(str(exc))
                    break
        producer.poll(0.05)
        if len(acked) == len(targets):
            break
        # Failed deliveries (e.g. the topic not loaded yet) are sent again.
        pending = [key for key in retry if key not in acked]
        resent += len(pending)
        retry.clear()
    producer.flush(5)
    if len(acked) < len(targets):
        raise RuntimeError(f"{len(acked):,}/{len(targets):,} partitions acknowledged; "
                           f"errors {errors}")
    return {"start_ns": start, "first_ack_ns": min(acked.values()),
            "all_acked_ns": max(acked.values()), "partitions": len(targets),
            "resent": resent, "errors": errors}


def probe_fetch(args: dict[str, Any]) -> dict[str, Any]:
    tp = ck.TopicPartition(args["topic"], int(args.get("partition", 0)), 0)
    consumer = _consumer(args, **{"topic.metadata.refresh.interval.ms": 1000})
    barrier(args)
    start = now_ns()
    deadline = deadline_of(args)
    errors: list[str] = []
    consumer.assign([tp])
    while now_ns() < deadline:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error() is None:
            if msg.offset() != 0:
                raise RuntimeError(f"first message at offset {msg.offset()}, not 0")
            got = now_ns()
            consumer.close()
            return {"start_ns": start, "fetched_ns": got, "errors": errors}
        if len(errors) < 5:
            errors.append(str(msg.error()))
    raise RuntimeError(f"offset 0 not fetched; errors {errors}")


def fill(args: dict[str, Any]) -> dict[str, Any]:
    targets = partitions_of(args)
    size = int(args["size"])
    count = max(1, int(args["bytes"]) // size)
    deadline = deadline_of(args)
    producer = Producers({"bootstrap.servers": args["bootstrap"], "acks": args.get("acks", 1),
                          "linger.ms": 20, "batch.size": 1 << 20,
                          "queue.buffering.max.kbytes": 1 << 20,
                          "message.timeout.ms": int(float(args["timeout"]) * 1000),
                          **QUIET, **NO_AUTO_CREATE}, args["topics"])
    producer.list_topics(timeout=60)
    values = [os.urandom(size) for _ in range(8)]
    state, on_delivery = _delivery_counter()
    start = now_ns()
    sent = _produce_all(producer, targets, count, values, on_delivery, deadline)
    left = producer.flush(max(1.0, (deadline - now_ns()) / 1e9))
    secs = (now_ns() - start) / 1e9
    if state["acked"] < count:
        raise RuntimeError(f"only {state['acked']:,}/{count:,} acknowledged ({left} "
                           f"unflushed, errors {state['errors']})")
    return {"messages": state["acked"], "bytes": state["bytes"], "sent": sent,
            "seconds": secs, "mib_s": state["bytes"] / secs / (1 << 20)}


ROLES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "create": create, "metadata": metadata, "produce": produce, "fetch": fetch,
    "probe-produce": probe_produce, "probe-fetch": probe_fetch, "fill": fill,
}


def main() -> None:
    role, args = sys.argv[1], json.loads(sys.argv[2])
    out = ROLES[role](args)
    # The client's own CPU (librdkafka's threads, the Python objects built): a step whose
    # broker is mostly idle measured the client.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["client_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
