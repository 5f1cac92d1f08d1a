"""A broker under a low open-file limit: more partitions than descriptors work, and when
descriptors do run out the produce that needed one fails with KAFKA_STORAGE_ERROR while
the broker goes on serving and loses nothing."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

LIMIT = 200
PARTITIONS = 300  # more than the limit: one descriptor per partition could not hold them


class LimitedBroker:
    """A josefk process whose open-file limit (soft and hard) is ``LIMIT``."""

    def __init__(self, tmp_path: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = tmp_path / "broker.log"
        # The flood below queues connections the broker has no descriptors to accept: the
        # listen queue must hold them (Kafka's default of 50 would not).
        serve = ["josefk", "serve", "--override", f"listeners=PLAINTEXT://{self.bootstrap}",
                 "--override", f"log.dirs={tmp_path / 'data'}",
                 "--override", "socket.listen.backlog.size=1024"]
        self.command = [sys.executable, "-c", (
            "import resource, sys; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({LIMIT}, {LIMIT})); "
            f"sys.argv = {serve!r}; from josefk.server.cli import main; main()")]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.log_tail()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, self.log_tail()
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def produce_everywhere(producer: Producer, topic: str, value: bytes) -> dict[int, int]:
    """One value to every partition: partition → error code (0 when acknowledged)."""
    results: dict[int, int] = {}

    def report(err: KafkaError | None, msg) -> None:  # type: ignore[no-untyped-def]
        results[msg.partition()] = 0 if err is None else err.code()

    for p in range(PARTITIONS):
        producer.produce(topic, value, partition=p, on_delivery=report)
    assert producer.flush(60) == 0
    return results


def flood(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        socks.append(s)
    return socks


def test_descriptors_running_out_fail_the_request_not_the_broker(tmp_path: Path) -> None:
    broker = LimitedBroker(tmp_path)
    broker.start()
    topic = "wide"
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for name, count in ((topic, PARTITIONS), ("warm-up", 1)):
            admin.create_topics([NewTopic(name, count, 1)])[name].result(30)
        config = {"bootstrap.servers": broker.bootstrap, "retries": 0, "linger.ms": 50,
                  "message.timeout.ms": 20000}
        producer = Producer(config)
        assert set(produce_everywhere(producer, topic, b"first").values()) == {0}

        # A clean restart leaves no segment file open: descriptors go to whoever comes
        # first, here a flood of idle connections.
        broker.restart()
        producer = Producer(config)
        producer.produce("warm-up", b"connect")  # the producer's connections, before the flood
        assert producer.flush(30) == 0
        # Deleting the warm-up topic closes the only segment file open.
        admin.delete_topics(["warm-up"])["warm-up"].result(30)
        socks = flood(broker.port, LIMIT + 50)
        time.sleep(2)  # the broker accepts until its descriptors run out
        failed = produce_everywhere(producer, topic, b"second")
        assert set(failed.values()) == {KafkaError.KAFKA_STORAGE_ERROR}
        assert "out of file descriptors opening" in broker.log_path.read_text()
        assert broker.proc is not None and broker.proc.poll() is None

        for s in socks:
            s.close()
        time.sleep(1)
        assert set(produce_everywhere(producer, topic, b"third").values()) == {0}
    finally:
        broker_tail = broker.log_tail(30)
        broker.stop()
    consumer = None
    broker.start()
    try:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen: dict[int, list[bytes]] = {}
        deadline = time.monotonic() + 60
        while sum(map(len, seen.values())) < 2 * PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1):
                assert msg.error() is None, msg.error()
                seen.setdefault(msg.partition(), []).append(msg.value())
        assert seen == {p: [b"first", b"third"] for p in range(PARTITIONS)}, broker_tail
    finally:
        if consumer is not None:
            consumer.close()
        broker.stop()
