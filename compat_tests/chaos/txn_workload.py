"""The transactions workload: transactional producers, read_committed consumers, and a
consume-transform-produce loop, every transaction's values written to the history first.

Each producer process (confluent-kafka, ``transactional.id`` ``tx-<index>``) runs
transactions of ``values_per_txn`` values ``"<process>:<txn>:<i>"``, one per partition in
turn; every ``abort_every``-th transaction is aborted on purpose. ``txn-begin`` names the
values before any is sent, ``txn-end`` the outcome: ``committed``, ``aborted`` or
``unknown`` (the client could neither commit nor abort: the coordinator decides).

The transformer reads ``<topic>-in`` (filled before the faults) with read_committed, and
writes ``"out:<input value>"`` to ``<topic>-out`` in transactions that also commit its
consumer offsets (``send_offsets_to_transaction``); it restarts every ``restart_every_s``
seconds, dropping its open transaction, as a crashed application would.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from .history import History
from .workload import POLL_BATCH, _common, _records, read_partition

TXN_TIMEOUT_MS = 60000


@dataclass(frozen=True)
class TxnWorkload:
    """What the transactional clients do."""

    bootstrap: str
    topic: str
    partitions: int
    producers: int = 3
    txns_per_s: float = 5.0  # per producer
    values_per_txn: int = 4
    abort_every: int = 5
    inputs: int = 2000
    transform_rate: float = 50.0  # input values per second
    restart_every_s: float = 15.0

    @property
    def input_topic(self) -> str:
        return f"{self.topic}-in"

    @property
    def output_topic(self) -> str:
        return f"{self.topic}-out"


def _transactional(workload: TxnWorkload, name: str, txn_id: str, history: History
                   ) -> Producer:
    config = _common(workload.bootstrap, name, history)
    config.update({"transactional.id": txn_id, "acks": "all", "linger.ms": 5,
                   "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": 30000,
                   "request.timeout.ms": 10000, "debug": "eos"})
    producer = Producer(config)
    _retrying(lambda: producer.init_transactions(30))
    return producer


def _retrying(call, attempts: int = 30) -> None:  # type: ignore[no-untyped-def]
    """``call`` again while the client calls its error retriable (a leader moving)."""
    for attempt in range(attempts):
        try:
            call()
            return
        except KafkaException as exc:
            error = exc.args[0]
            if not error.retriable() or attempt == attempts - 1:
                raise
            time.sleep(0.5)


class TxnProducerProcess:
    """One transactional producer: a thread running transactions until stopped; a new
    client instance (same ``transactional.id``, a new process name) after a fatal error."""

    def __init__(self, index: int, workload: TxnWorkload, history: History) -> None:
        self.index = index
        self.workload = workload
        self.history = history
        self.generation = 0

    @property
    def name(self) -> str:
        return f"t{self.index}" if self.generation == 0 else f"t{self.index}r{self.generation}"

    def run(self, stop: threading.Event) -> None:
        producer = self._start()
        number = 0
        interval = 1.0 / self.workload.txns_per_s
        while not stop.is_set():
            began = time.monotonic()
            abort = number % self.workload.abort_every == self.workload.abort_every - 1
            if not self._transaction(producer, number, abort):
                with _quietly():  # a fatally failed instance raises from flush too
                    producer.flush(10)
                self.generation += 1
                producer = self._start()
            number += 1
            stop.wait(max(0.0, interval - (time.monotonic() - began)))
        with _quietly():
            producer.flush(30)

    def _start(self) -> Producer:
        while True:
            try:
                return _transactional(self.workload, self.name, f"tx-{self.index}",
                                      self.history)
            except KafkaException as exc:
                self.history.record("client-error", process=self.name, error=str(exc.args[0]),
                                    fatal=True)
                time.sleep(1.0)

    def _transaction(self, producer: Producer, number: int, abort: bool) -> bool:
        """One transaction; False when the client is fenced or fatally failed."""
        name, w = self.name, self.workload
        txn = f"{name}:{number}"
        values = [[(number * w.values_per_txn + i + self.index) % w.partitions, f"{txn}:{i}"]
                  for i in range(w.values_per_txn)]
        self.history.record("txn-begin", process=name, txn=txn, values=values, abort=abort)
        try:
            producer.begin_transaction()
            for partition, value in values:
                producer.produce(w.topic, value.encode(), partition=partition)
            if abort:
                producer.abort_transaction(30)
                self.history.record("txn-end", process=name, txn=txn, outcome="aborted")
            else:
                _retrying(lambda: producer.commit_transaction(30), attempts=5)
                self.history.record("txn-end", process=name, txn=txn, outcome="committed")
            return True
        except KafkaException as exc:
            return self._failed(producer, txn, exc.args[0])

    def _failed(self, producer: Producer, txn: str, error: KafkaError) -> bool:
        name = self.name
        self.history.record("client-error", process=name, error=str(error),
                            fatal=error.fatal())
        if error.txn_requires_abort():
            try:
                producer.abort_transaction(30)
                self.history.record("txn-end", process=name, txn=txn, outcome="aborted")
                return True
            except KafkaException as exc:
                error = exc.args[0]
        self.history.record("txn-end", process=name, txn=txn, outcome="unknown",
                            error=str(error))
        return False


def fill_input(workload: TxnWorkload, history: History) -> None:
    """The transformer's input: ``in:<n>`` values, each acknowledged, before the faults."""
    config = _common(workload.bootstrap, "filler", history)
    config.update({"enable.idempotence": True, "acks": "all", "linger.ms": 20})
    producer = Producer(config)
    acknowledged: list[str] = []

    def delivered(err: KafkaError | None, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acknowledged.append(msg.value().decode())

    for n in range(workload.inputs):
        producer.produce(workload.input_topic, f"in:{n}".encode(), partition=n % 3,
                         on_delivery=delivered)
        producer.poll(0)
    if producer.flush(60) != 0 or len(acknowledged) != workload.inputs:
        raise RuntimeError(f"only {len(acknowledged)} of {workload.inputs} inputs acknowledged")
    history.record("inputs", values=acknowledged)


class Transformer:
    """Consume-transform-produce with exactly-once semantics, restarted now and then."""

    GROUP = "chaos-eos"

    def __init__(self, workload: TxnWorkload, history: History) -> None:
        self.workload = workload
        self.history = history
        self.instance = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.instance += 1
            self._run_instance(stop, time.monotonic() + self.workload.restart_every_s)

    def _run_instance(self, stop: threading.Event, until: float) -> None:
        name = f"x{self.instance}"
        w = self.workload
        try:
            producer = _transactional(w, name, "tx-transformer", self.history)
        except KafkaException as exc:
            self.history.record("client-error", process=name, error=str(exc.args[0]))
            time.sleep(1.0)
            return
        config = _common(w.bootstrap, name, self.history)
        config.update({"group.id": self.GROUP, "auto.offset.reset": "earliest",
                       "enable.auto.commit": False, "isolation.level": "read_committed",
                       "session.timeout.ms": 10000, "heartbeat.interval.ms": 2000})
        consumer = Consumer(config)
        consumer.subscribe([w.input_topic])
        batch = max(1, int(w.transform_rate / 2))
        try:
            while not stop.is_set() and time.monotonic() < until:
                messages = [m for m in consumer.consume(batch, 0.5) if m.error() is None]
                if messages and not self._transform(producer, consumer, messages, name):
                    return
                time.sleep(0.5)
            if not stop.is_set():
                self._crash(producer, consumer, name)
        finally:
            consumer.close()
            with _quietly():
                producer.flush(5)

    def _crash(self, producer: Producer, consumer: Consumer, name: str) -> None:
        """Write the next batch's outputs and leave the transaction open, as a crashed
        instance would: the next instance's ``init_transactions`` must abort it."""
        messages = [m for m in consumer.consume(10, 1.0) if m.error() is None]
        if not messages:
            return
        inputs = [m.value().decode() for m in messages]
        self.history.record("transform-abandoned", process=name, inputs=inputs)
        with _quietly():
            producer.begin_transaction()
            for value in inputs:
                producer.produce(self.workload.output_topic, f"out:{value}".encode(),
                                 partition=int(value.split(":")[1]) % 3)
            producer.flush(10)

    def _transform(self, producer: Producer, consumer: Consumer, messages: list,  # type: ignore[type-arg]
                   name: str) -> bool:
        w = self.workload
        inputs = [m.value().decode() for m in messages]
        self.history.record("transform", process=name, inputs=inputs)
        try:
            producer.begin_transaction()
            for value in inputs:
                producer.produce(w.output_topic, f"out:{value}".encode(),
                                 partition=int(value.split(":")[1]) % 3)
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            _retrying(lambda: producer.commit_transaction(30), attempts=5)
            return True
        except KafkaException as exc:
            error = exc.args[0]
            self.history.record("client-error", process=name, error=str(error),
                                fatal=error.fatal())
            with _quietly():
                producer.abort_transaction(10)
            return False  # a new instance resumes from the committed offsets

    def caught_up(self) -> bool:
        """Whether the group's committed offsets cover every input."""
        config = {"bootstrap.servers": self.workload.bootstrap, "group.id": self.GROUP}
        consumer = Consumer(config)
        try:
            partitions = [TopicPartition(self.workload.input_topic, p) for p in range(3)]
            committed = consumer.committed(partitions, timeout=10)
            ends = [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions]
            return all(c.offset >= end for c, end in zip(committed, ends, strict=True))
        except KafkaException:
            return False
        finally:
            consumer.close()


class _quietly:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return isinstance(exc, KafkaException)


def committed_consumer(workload: TxnWorkload, history: History, stop: threading.Event) -> None:
    """Process ``r0``: every partition from the beginning, read_committed."""
    name = "r0"
    config = _common(workload.bootstrap, name, history)
    config.update({"group.id": "chaos-txn-read", "isolation.level": "read_committed",
                   "enable.partition.eof": False})
    consumer = Consumer(config)
    consumer.assign([TopicPartition(workload.topic, p, OFFSET_BEGINNING)
                     for p in range(workload.partitions)])
    history.record("rebalance", process=name, assigned=list(range(workload.partitions)))
    try:
        while not stop.is_set():
            records = _records(consumer.consume(POLL_BATCH, 0.5), name, history)
            if records:
                history.record("poll", process=name, mode="read_committed", records=records)
    finally:
        consumer.close()


def final_read_committed(workload: TxnWorkload, topic: str, partitions: int,
                         history: History, timeout: float) -> bool:
    """Every committed record of ``topic``, read_committed from the beginning up to each
    partition's high watermark (control records count by position), into ``final``
    events; False if a partition did not get there within ``timeout`` seconds."""
    config = _common(workload.bootstrap, "final", history)
    config.update({"group.id": "chaos-final", "isolation.level": "read_committed",
                   "enable.partition.eof": False})
    consumer = Consumer(config)
    deadline = time.monotonic() + timeout
    complete = True
    try:
        for p in range(partitions):
            complete &= read_partition(consumer, topic, p, history, deadline)
    finally:
        consumer.close()
    return complete
