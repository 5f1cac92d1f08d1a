"""The queue workload: idempotent producers and consumers, every operation in the history.

Producers (confluent-kafka, ``enable.idempotence``, ``acks=all``) send unique values
``"<process>:<seq>"`` at a fixed rate, spreading them over the partitions; a
producer that hits a fatal error is replaced by a new instance under a new process
name, so one process's values always come from one producer id. Consumers read
both ways: one assigns every partition from the beginning, the others subscribe in
a group. After the last heal, :func:`final_read` reads every partition from the
beginning up to its high watermark.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from .history import History

# librdkafka's own log lines (run.py sends them to a file of their own).
CLIENT_LOG = logging.getLogger("chaos.clients")
# Bounds on what one producer keeps in flight while the cluster cannot take it.
MAX_QUEUED = 5000
POLL_BATCH = 500


@dataclass(frozen=True)
class Workload:
    """What the clients do: where, how many, how fast."""

    bootstrap: str
    topic: str
    partitions: int
    producers: int = 3
    rate: float = 100.0  # values per second per producer
    # librdkafka with more than one request in flight bumps its epoch when a new leader
    # answers OUT_OF_ORDER_SEQUENCE_NUMBER for a batch sent behind a failed one, and
    # re-sends batches already written under the new epoch: duplicates, on Apache Kafka
    # and josefk alike (confluentinc/librdkafka#4953). One in flight keeps the test on
    # the broker; --max-in-flight 5 shows the client's behaviour.
    max_in_flight: int = 1
    group_consumers: int = 2
    group_id: str = "chaos-group"


def _common(bootstrap: str, name: str, history: History) -> dict[str, object]:
    def on_error(err: KafkaError) -> None:
        history.record("client-error", process=name, error=str(err), fatal=err.fatal())

    return {
        "bootstrap.servers": bootstrap,
        "client.id": name,
        "error_cb": on_error,
        "logger": CLIENT_LOG,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 5000,
        "metadata.max.age.ms": 15000,
    }


@dataclass(frozen=True)
class Keyed:
    """A keyed write (the compaction workload): the value is the write's id, or no value
    at all (a tombstone) with the id in a header."""

    key: str
    tombstone: bool = False


class ProducerProcess:
    """One logical producer: a thread sending ``rate`` values a second until stopped.

    ``keyed(seq)``, if given, makes each value a keyed write (its partition by the key's
    hash is the producer's); without it values are unkeyed and spread round-robin.
    """

    def __init__(self, index: int, workload: Workload, history: History,
                 keyed: Callable[[int], Keyed] | None = None) -> None:
        self.index = index
        self.workload = workload
        self.history = history
        self.keyed = keyed
        self.generation = 0
        self.fatal = threading.Event()

    @property
    def name(self) -> str:
        return f"p{self.index}" if self.generation == 0 else f"p{self.index}r{self.generation}"

    def _producer(self) -> Producer:
        name = self.name
        config = _common(self.workload.bootstrap, name, self.history)
        on_error = config["error_cb"]

        def on_any_error(err: KafkaError) -> None:
            on_error(err)  # type: ignore[operator]
            if err.fatal():
                self.fatal.set()

        config.update(
            {
                "error_cb": on_any_error,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "max.in.flight.requests.per.connection": self.workload.max_in_flight,
                # Longer than any fault lasts: a timed-out send would make librdkafka
                # bump its epoch, the same duplicate source as above.
                "message.timeout.ms": 120000,
                "request.timeout.ms": 10000,
                # The idempotence state machine (producer ids, epoch bumps, drains) in
                # clients.log: what explains a duplicate when there is one.
                "debug": "eos",
            }
        )
        return Producer(config)

    def run(self, stop: threading.Event) -> None:
        """Send until ``stop``; then wait (bounded) for the outstanding acknowledgements."""
        producer = self._producer()
        seq = 0
        interval = 1.0 / self.workload.rate
        next_send = time.monotonic()
        while not stop.is_set():
            if self.fatal.is_set():
                producer.flush(10)
                self.generation += 1
                self.fatal.clear()
                producer, seq = self._producer(), 0
            if len(producer) < MAX_QUEUED:
                self._send(producer, seq)
                seq += 1
            next_send += interval
            try:
                producer.poll(max(0.0, next_send - time.monotonic()))
            except KafkaException as exc:
                # A fatal error can surface from poll() too: replace the instance as above.
                self.history.record("client-error", process=self.name,
                                    error=str(exc.args[0]), fatal=exc.args[0].fatal())
                if exc.args[0].fatal():
                    self.fatal.set()
        producer.flush(30)

    def _send(self, producer: Producer, seq: int) -> None:
        name = self.name
        value = f"{name}:{seq}"
        partition = (seq + self.index) % self.workload.partitions
        extra: dict[str, object] = {}
        keyed = self.keyed(seq) if self.keyed else None
        if keyed is not None:
            extra = {"key": keyed.key, "tombstone": keyed.tombstone}
            partition = zlib.crc32(keyed.key.encode()) % self.workload.partitions
        self.history.record("invoke", process=name, f="send", value=value, partition=partition,
                            **extra)
        start = time.monotonic()

        def delivered(err: KafkaError | None, msg: Message) -> None:
            latency = round(time.monotonic() - start, 4)
            if err is None:
                self.history.record(
                    "ok",
                    process=name,
                    f="send",
                    value=value,
                    partition=msg.partition(),
                    offset=msg.offset(),
                    latency=latency,
                )
            else:
                self.history.record(
                    "fail",
                    process=name,
                    f="send",
                    value=value,
                    partition=partition,
                    error=str(err),
                    latency=latency,
                )

        try:
            if keyed is None:
                producer.produce(self.workload.topic, value.encode(), partition=partition,
                                 on_delivery=delivered)
            else:
                producer.produce(self.workload.topic, None if keyed.tombstone else value.encode(),
                                 keyed.key.encode(), partition=partition, on_delivery=delivered,
                                 headers=[("id", value.encode())])
        except KafkaException as exc:
            # A producer in a fatal state refuses sends: this one never left, and a new
            # instance (a new process name) takes over.
            error = exc.args[0]
            self.history.record("fail", process=name, f="send", value=value,
                                partition=partition, error=str(error), latency=0.0)
            if error.fatal():
                self.fatal.set()


def _records(messages: list[Message], name: str, history: History) -> list[list[object]]:
    records = []
    for m in messages:
        err = m.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                history.record("client-error", process=name, error=str(err))
            continue
        value = m.value()
        records.append([m.partition(), m.offset(), value.decode() if value else None])
    return records


def _consumer(workload: Workload, name: str, history: History, group: str) -> Consumer:
    config = _common(workload.bootstrap, name, history)
    config.update(
        {
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 2000,
        }
    )
    return Consumer(config)


def assigned_consumer(workload: Workload, history: History, stop: threading.Event) -> None:
    """Process ``c0``: every partition assigned from the beginning, no group."""
    name = "c0"
    consumer = _consumer(workload, name, history, "chaos-assign")
    consumer.assign(
        [TopicPartition(workload.topic, p, OFFSET_BEGINNING) for p in range(workload.partitions)]
    )
    history.record("rebalance", process=name, assigned=list(range(workload.partitions)))
    try:
        _poll_until(consumer, name, "assign", history, stop)
    finally:
        consumer.close()


def group_consumer(index: int, workload: Workload, history: History, stop: threading.Event) -> None:
    """Process ``c<index>``: a member of the workload's consumer group (auto commit)."""
    name = f"c{index}"
    consumer = _consumer(workload, name, history, workload.group_id)

    def assigned(_: Consumer, partitions: list[TopicPartition]) -> None:
        history.record("rebalance", process=name, assigned=sorted(p.partition for p in partitions))

    def revoked(_: Consumer, partitions: list[TopicPartition]) -> None:
        history.record("rebalance", process=name, assigned=[])

    consumer.subscribe([workload.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    try:
        _poll_until(consumer, name, "group", history, stop)
    finally:
        consumer.close()


def _poll_until(
    consumer: Consumer, name: str, mode: str, history: History, stop: threading.Event
) -> None:
    while not stop.is_set():
        records = _records(consumer.consume(POLL_BATCH, 0.5), name, history)
        if records:
            history.record("poll", process=name, mode=mode, records=records)


def final_read(workload: Workload, history: History, timeout: float,
               row: Callable[[Message], list[object]] | None = None) -> bool:
    """Read every partition from the beginning to its high watermark into ``final`` events.

    False when the reads did not reach the high watermarks within ``timeout`` seconds.
    """
    consumer = _consumer(workload, "final", history, "chaos-final")
    deadline = time.monotonic() + timeout
    complete = True
    try:
        for p in range(workload.partitions):
            complete &= read_partition(consumer, workload.topic, p, history, deadline,
                                       row or _offset_and_value)
    finally:
        consumer.close()
    return complete


def _offset_and_value(m: Message) -> list[object]:
    value = m.value()
    return [m.offset(), value.decode() if value else None]


def read_partition(
    consumer: Consumer, topic: str, partition: int, history: History, deadline: float,
    row: Callable[[Message], list[object]] = _offset_and_value,
) -> bool:
    """Read ``partition`` from the beginning up to its high watermark into a ``final``
    event of ``row(message)`` per record (control records count by position); False if
    the deadline came first.

    The watermark lookup is retried: just after the faults heal a leader may still be
    moving, and the client answers NOT_LEADER_FOR_PARTITION until its metadata catches up.
    """
    tp = TopicPartition(topic, partition)
    _, high = _retry(lambda: consumer.get_watermark_offsets(tp, timeout=10), deadline)
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    records: list[list[object]] = []
    position = 0
    while position < high and time.monotonic() < deadline:
        for m in consumer.consume(POLL_BATCH, 1.0):
            if m.error() is None:
                records.append(row(m))
        position = max(position, consumer.position([tp])[0].offset)
    history.record("final", topic=topic, partition=partition, records=records,
                   high_watermark=high)
    return position >= high


def _retry(call: Callable[[], tuple[int, int]], deadline: float) -> tuple[int, int]:
    while True:
        try:
            return call()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
