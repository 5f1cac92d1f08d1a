"""One consumer group member of the groups workload, as a process of its own so that the
runner can kill it with a real signal: ``python -m compat_tests.chaos.group_member``.

A kafka-python consumer (classic protocol, eager range assignment, manual commits)
prints one JSON event per line on stdout — ``assigned`` and ``revoked`` with the
generation, ``poll`` with the records, ``commit`` with the offsets and whether the
coordinator took them — which the runner relays into the history. It commits the
position after every poll, so a committed offset means every record before it was
delivered to some member.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

_lock = threading.Lock()


def emit(type_: str, **fields: Any) -> None:
    with _lock:
        sys.stdout.write(json.dumps({"type": type_, **fields}) + "\n")
        sys.stdout.flush()


def _generation(consumer: KafkaConsumer) -> tuple[int, str]:
    """The member's generation and member id (kafka-python keeps them on its coordinator)."""
    generation = consumer._coordinator._generation  # noqa: SLF001 - what the checker needs
    return generation.generation_id, generation.member_id


class _Listener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.consumer: KafkaConsumer | None = None

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        assert self.consumer is not None
        generation, member = _generation(self.consumer)
        emit("revoked", generation=generation, member_id=member,
             partitions=sorted(tp.partition for tp in revoked))

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        assert self.consumer is not None
        generation, member = _generation(self.consumer)
        emit("assigned", generation=generation, member_id=member,
             partitions=sorted(tp.partition for tp in assigned))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.chaos.group_member")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    listener = _Listener()
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap.split(","), group_id=args.group,
        client_id=args.name, enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=10000, heartbeat_interval_ms=2000, max_poll_interval_ms=30000,
        request_timeout_ms=15000, metadata_max_age_ms=5000)
    listener.consumer = consumer
    consumer.subscribe([args.topic], listener=listener)
    emit("member-start")
    while not stop.is_set():
        _poll_and_commit(consumer)
    consumer.close(autocommit=False)  # LeaveGroup: a graceful stop
    emit("member-left")
    return 0


def _poll_and_commit(consumer: KafkaConsumer) -> None:
    try:
        batches = consumer.poll(timeout_ms=500, max_records=200)
    except KafkaError as e:
        emit("client-error", error=repr(e))
        return
    if not batches:
        return
    generation, _ = _generation(consumer)
    records = [[tp.partition, r.offset, r.value.decode() if r.value else None]
               for tp, rs in batches.items() for r in rs]
    emit("poll", mode="group", generation=generation, records=records)
    offsets = {tp: OffsetAndMetadata(rs[-1].offset + 1, "", -1) for tp, rs in batches.items()}
    try:
        consumer.commit(offsets)
        emit("commit", generation=generation, ok=True,
             offsets={str(tp.partition): o.offset for tp, o in offsets.items()})
    except KafkaError as e:
        emit("commit", generation=generation, ok=False, error=repr(e),
             offsets={str(tp.partition): o.offset for tp, o in offsets.items()})


if __name__ == "__main__":
    sys.exit(main())
