"""Consumer groups with stock clients, against josefk or Apache Kafka.

- Groups of three members of each client split a 6-partition topic exactly; a
  member that leaves, then one that is SIGKILLed, hand their partitions over.
- cooperative-sticky (librdkafka) rebalances incrementally.
- A static member (group.instance.id) restarted within its session timeout
  takes its place without a rebalance.
- Committed offsets (sync, async, with metadata) are returned by OffsetFetch and
  survive a broker SIGKILL; every client resumes exactly after its last commit.
- Kafka's console consumer with --group and the consumer-groups command.
- The group APIs' error codes, request by request (raw protocol).

Members run as subprocesses (``python -m compat_tests.test_groups member
CONFIG``) so they can be SIGKILLed; each prints one JSON line per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import re
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, Broker
from .rawkafka import RawConnection

SESSION_MS = 10_000  # within Kafka's group.min/max.session.timeout.ms
HEARTBEAT_MS = 1_000
MAX_POLL_MS = 30_000  # the rebalance timeout
STATIC_SESSION_MS = 30_000
PARTITIONS = 6
REBALANCE_TIMEOUT = 60.0  # how long a test waits for a group to settle
SETTLED_FOR = 1.5  # an assignment must hold this long to count as settled

# The assignor each client uses by default, and the exact assignments it makes of
# partitions 0-5 to three members, then to two (members sorted by member id).
DEFAULT_ASSIGNOR = {"kafka-python": "range", "aiokafka": "roundrobin",
                    "confluent-kafka": "range"}
EXPECTED = {
    "range": ([(0, 1), (2, 3), (4, 5)], [(0, 1, 2), (3, 4, 5)]),
    "roundrobin": ([(0, 3), (1, 4), (2, 5)], [(0, 2, 4), (1, 3, 5)]),
}
CLIENTS = list(DEFAULT_ASSIGNOR)


def unique_group(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --- members as subprocesses (parent side) ----------------------------------------------------


class Member:
    """One group member process; ``current`` is its assignment after its last event."""

    def __init__(self, name: str, config: dict[str, Any], log_path: Path) -> None:
        self.name = name
        self.config = config
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "compat_tests.test_groups", "member", json.dumps(config)],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True, bufsize=1)
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(json.JSONDecodeError):
                event = json.loads(line)
                event["at"] = time.monotonic()
                with self._lock:
                    self.events.append(event)

    def last(self, *kinds: str) -> dict[str, Any] | None:
        with self._lock:
            for event in reversed(self.events):
                if event["event"] in kinds:
                    return event
        return None

    @property
    def current(self) -> tuple[int, ...]:
        event = self.last("assigned", "revoked", "lost")
        return tuple(event["current"]) if event else ()

    @property
    def generation(self) -> int | None:
        event = self.last("assigned", "status")
        return event.get("generation") if event else None

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for e in self.events if e["event"] == kind)

    def events_since(self, index: int) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events[index:])

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def status(self, timeout: float = 10.0) -> dict[str, Any]:
        before = self.count("status")
        self.send("status")
        wait_for(lambda: self.count("status") > before, timeout, f"{self.name} status", [self])
        event = self.last("status")
        assert event is not None
        return event

    def leave(self, timeout: float = 30.0) -> None:
        """Close the consumer (LeaveGroup for a dynamic member) and wait for the exit."""
        self.send("leave")
        self.proc.wait(timeout=timeout)
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()

    def describe(self) -> str:
        status = self.proc.poll()
        tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
        return (f"{self.name} ({'running' if status is None else f'exit {status}'}) "
                f"current={self.current} generation={self.generation} "
                f"events={[(e['event'], e.get('current')) for e in self.events[-6:]]}\n  "
                + "\n  ".join(tail))


def wait_for(predicate: Callable[[], bool], timeout: float, what: str,
             members: list[Member]) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}:\n"
                                 + "\n".join(m.describe() for m in members))
        time.sleep(0.1)


def wait_settled(members: list[Member], predicate: Callable[[], bool], what: str,
                 timeout: float = REBALANCE_TIMEOUT) -> None:
    """Wait until ``predicate`` holds and keeps holding for SETTLED_FOR seconds."""
    deadline = time.monotonic() + timeout
    while True:
        wait_for(predicate, max(0.0, deadline - time.monotonic()), what, members)
        held_until = time.monotonic() + SETTLED_FOR
        while predicate() and time.monotonic() < held_until:
            time.sleep(0.1)
        if predicate():
            return


def assignments(members: list[Member]) -> list[tuple[int, ...]]:
    return sorted(m.current for m in members)


def split_evenly(members: list[Member]) -> bool:
    """Disjoint assignments of equal size covering every partition."""
    current = [set(m.current) for m in members]
    union = set().union(*current)
    return (union == set(range(PARTITIONS)) and sum(map(len, current)) == PARTITIONS
            and len({len(c) for c in current}) == 1)


@pytest.fixture
def spawn(broker: Broker, tmp_path: Path) -> Iterator[Callable[..., Member]]:
    """Start member processes; all are killed at the end of the test."""
    started: list[Member] = []

    def start(client: str, topic: str, group: str, instance_id: str | None = None,
              strategy: str | None = None, session_ms: int = SESSION_MS) -> Member:
        name = f"{client}-{len(started)}"
        config = {"client": client, "bootstrap": broker.bootstrap, "topic": topic,
                  "group": group, "instance_id": instance_id, "strategy": strategy,
                  "session_ms": session_ms}
        member = Member(name, config, tmp_path / f"{name}.log")
        started.append(member)
        return member

    yield start
    for member in started:
        member.stop()


# --- membership and rebalances ------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.timeout(180)
def test_group_of_three_rebalances_on_leave_and_kill(
    make_topic: Callable[..., str], spawn: Callable[..., Member], client: str
) -> None:
    topic = make_topic(partitions=PARTITIONS)
    group = unique_group(f"g3-{client}")
    three, two = EXPECTED[DEFAULT_ASSIGNOR[client]]
    members = [spawn(client, topic, group) for _ in range(3)]
    wait_settled(members, lambda: assignments(members) == three, f"the split {three}")
    if client != "confluent-kafka":  # librdkafka does not expose the generation
        assert len({m.generation for m in members}) == 1

    # A member leaves (LeaveGroup): its partitions go to the other two.
    leaving, a, c = members
    leaving.leave()
    wait_settled([a, c], lambda: assignments([a, c]) == two, f"the split {two}")

    # A member is SIGKILLed: after its session times out, the last one has everything.
    c.kill()
    wait_settled([a], lambda: a.current == tuple(range(PARTITIONS)), "all partitions on one",
                 timeout=SESSION_MS / 1000 + REBALANCE_TIMEOUT)


@pytest.mark.timeout(180)
def test_cooperative_sticky_rebalances_incrementally(
    make_topic: Callable[..., str], spawn: Callable[..., Member]
) -> None:
    topic = make_topic(partitions=PARTITIONS)
    group = unique_group("coop")
    members = [spawn("confluent-kafka", topic, group, strategy="cooperative-sticky")
               for _ in range(3)]
    wait_settled(members, lambda: split_evenly(members), "two partitions each")
    leaving, a, c = members
    before = {m.name: set(m.current) for m in (a, c)}
    marks = {m.name: len(m.events) for m in (a, c)}

    leaving.leave()
    wait_settled([a, c], lambda: split_evenly([a, c]), "three partitions each")
    for m in (a, c):
        # Each survivor kept its partitions and was never asked to give one up.
        assert before[m.name] < set(m.current), m.describe()
        revoked = [e for e in m.events_since(marks[m.name])
                   if e["event"] in ("revoked", "lost") and e["partitions"]]
        assert revoked == [], m.describe()
        added = [e for e in m.events_since(marks[m.name]) if e["event"] == "assigned"]
        assert {p for e in added for p in e["partitions"]} == set(m.current) - before[m.name]


@pytest.mark.timeout(180)
def test_static_member_restart_does_not_rebalance(
    make_topic: Callable[..., str], spawn: Callable[..., Member]
) -> None:
    topic = make_topic(partitions=PARTITIONS)
    group = unique_group("static")
    three, _ = EXPECTED["range"]
    members = [spawn("kafka-python", topic, group, instance_id=f"instance-{i}",
                     session_ms=STATIC_SESSION_MS) for i in range(3)]
    wait_settled(members, lambda: assignments(members) == three, f"the split {three}")
    generation = members[0].generation
    assert generation is not None and all(m.generation == generation for m in members)
    a, b, victim = members
    marks = {m.name: m.count("assigned") + m.count("revoked") for m in (a, b)}
    held = victim.current

    # SIGKILL (a static member never sends LeaveGroup) and restart within the session.
    victim.kill()
    restarted = spawn("kafka-python", topic, group, instance_id="instance-2",
                      session_ms=STATIC_SESSION_MS)
    wait_for(lambda: restarted.current == held, REBALANCE_TIMEOUT,
             f"the restarted member to get {held} back", [restarted, a, b])
    assert restarted.generation == generation
    time.sleep(3 * HEARTBEAT_MS / 1000)  # a rebalance would reach every member by now
    for m in (a, b, restarted):
        status = m.status()
        assert status["generation"] == generation, m.describe()
        assert tuple(status["current"]) in three
    for m in (a, b):
        assert m.count("assigned") + m.count("revoked") == marks[m.name], m.describe()


# --- committed offsets -------------------------------------------------------------------------

RECORDS_PER_PARTITION = 30
OFFSET_PARTITIONS = 3
# Per client: the offset each partition is committed at, and its metadata.
COMMITS = {
    "kafka-python": {0: (7, "kp sync"), 1: (12, "kp async"), 2: (30, "")},
    "aiokafka": {0: (1, "aio é"), 1: (29, ""), 2: (15, "aio x" * 20)},
    "confluent-kafka": {0: (0, "cf sync"), 1: (18, "cf async"), 2: (3, "")},
}


def _poll_until(condition: Callable[[], bool], poll: Callable[[], None], timeout: float,
                what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        poll()


def _commit_kafka_python(bootstrap: str, topic: str, group: str) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    try:
        _poll_until(lambda: len(consumer.assignment()) == OFFSET_PARTITIONS,
                    lambda: consumer.poll(timeout_ms=100), REBALANCE_TIMEOUT, "an assignment")
        commits = COMMITS["kafka-python"]
        tps = {p: TopicPartition(topic, p) for p in commits}
        consumer.commit({tps[0]: OffsetAndMetadata(commits[0][0], commits[0][1], -1),
                         tps[2]: OffsetAndMetadata(commits[2][0], commits[2][1], -1)})
        done: list[Any] = []
        consumer.commit_async({tps[1]: OffsetAndMetadata(commits[1][0], commits[1][1], -1)},
                              callback=lambda offsets, result: done.append(result))
        _poll_until(lambda: bool(done), lambda: consumer.poll(timeout_ms=100), 20,
                    "the async commit")
        assert not isinstance(done[0], Exception), done[0]
    finally:
        consumer.close()


def _commit_aiokafka(bootstrap: str, topic: str, group: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    async def run() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    session_timeout_ms=SESSION_MS,
                                    heartbeat_interval_ms=HEARTBEAT_MS)
        await consumer.start()
        try:
            while len(consumer.assignment()) < OFFSET_PARTITIONS:
                await consumer.getmany(timeout_ms=100)
            await consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, m)
                                   for p, (o, m) in COMMITS["aiokafka"].items()})
        finally:
            await consumer.stop()

    asyncio.run(asyncio.wait_for(run(), REBALANCE_TIMEOUT))


def _commit_confluent(bootstrap: str, topic: str, group: str) -> None:
    import confluent_kafka

    committed: list[Any] = []
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "on_commit": lambda err, partitions: committed.append((err, partitions))})
    try:
        consumer.subscribe([topic])
        _poll_until(lambda: len(consumer.assignment()) == OFFSET_PARTITIONS,
                    lambda: consumer.poll(0.1), REBALANCE_TIMEOUT, "an assignment")
        commits = COMMITS["confluent-kafka"]
        tp = confluent_kafka.TopicPartition
        result = consumer.commit(offsets=[tp(topic, 0, commits[0][0], commits[0][1]),
                                          tp(topic, 2, commits[2][0], commits[2][1])],
                                 asynchronous=False)
        assert all(p.error is None for p in result)
        consumer.commit(offsets=[tp(topic, 1, commits[1][0], commits[1][1])], asynchronous=True)
        _poll_until(lambda: any(p.partition == 1 for _, parts in committed for p in parts),
                    lambda: consumer.poll(0.1), 20, "the async commit")
        assert all(err is None for err, _ in committed), committed
    finally:
        consumer.close()


def _resume_kafka_python(bootstrap: str, topic: str, group: str, count: int
                         ) -> list[tuple[int, int]]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    got: list[tuple[int, int]] = []
    try:
        def poll() -> None:
            for records in consumer.poll(timeout_ms=100).values():
                got.extend((r.partition, r.offset) for r in records)

        _poll_until(lambda: len(got) >= count, poll, REBALANCE_TIMEOUT, f"{count} records")
        consumer.poll(timeout_ms=500)  # nothing more may come
    finally:
        consumer.close()
    return got


def _resume_aiokafka(bootstrap: str, topic: str, group: str, count: int
                     ) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaConsumer

    async def run() -> list[tuple[int, int]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    session_timeout_ms=SESSION_MS,
                                    heartbeat_interval_ms=HEARTBEAT_MS)
        await consumer.start()
        got: list[tuple[int, int]] = []
        try:
            while len(got) < count:
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    got.extend((r.partition, r.offset) for r in records)
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend((r.partition, r.offset) for r in records)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(asyncio.wait_for(run(), REBALANCE_TIMEOUT))


def _resume_confluent(bootstrap: str, topic: str, group: str, count: int
                      ) -> list[tuple[int, int]]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS})
    got: list[tuple[int, int]] = []
    try:
        consumer.subscribe([topic])

        def poll() -> None:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append((msg.partition(), msg.offset()))

        _poll_until(lambda: len(got) >= count, poll, REBALANCE_TIMEOUT, f"{count} records")
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            poll()
    finally:
        consumer.close()
    return got


COMMITTERS = {"kafka-python": _commit_kafka_python, "aiokafka": _commit_aiokafka,
              "confluent-kafka": _commit_confluent}
RESUMERS = {"kafka-python": _resume_kafka_python, "aiokafka": _resume_aiokafka,
            "confluent-kafka": _resume_confluent}


def _stored(client: str) -> dict[int, tuple[int, str]]:
    """What OffsetFetch returns for a client's commits: librdkafka sends the metadata
    with its C string's terminating NUL, and brokers keep it."""
    nul = "\x00" if client == "confluent-kafka" else ""
    return {p: (o, m + nul) for p, (o, m) in COMMITS[client].items()}


def _committed(bootstrap: str, group: str) -> dict[int, tuple[int, str]]:
    """OffsetFetch through kafka-python's admin client: partition -> (offset, metadata).

    Retries while the coordinator is not ready (a restarted Kafka answers
    NOT_COORDINATOR until it has loaded ``__consumer_offsets``)."""
    from kafka import KafkaAdminClient
    from kafka.errors import (
        CoordinatorLoadInProgressError,
        CoordinatorNotAvailableError,
        NotCoordinatorError,
    )

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    deadline = time.monotonic() + REBALANCE_TIMEOUT
    try:
        while True:
            try:
                offsets = admin.list_group_offsets(group)[group]
                break
            except (NotCoordinatorError, CoordinatorLoadInProgressError,
                    CoordinatorNotAvailableError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        admin.close()
    return {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()}


@pytest.mark.timeout(240)
def test_committed_offsets_survive_broker_sigkill(
    owned_broker: Broker, make_topic: Callable[..., str]
) -> None:
    from .clients import Rec, produce

    topic = make_topic(partitions=OFFSET_PARTITIONS)
    for p in range(OFFSET_PARTITIONS):
        recs = [Rec(f"p{p}".encode(), f"{p}:{i}".encode()) for i in range(RECORDS_PER_PARTITION)]
        assert produce(owned_broker.bootstrap, topic, recs, partition=p) == \
            list(range(RECORDS_PER_PARTITION))
    groups = {client: unique_group(f"offsets-{client}") for client in CLIENTS}
    for client, group in groups.items():
        COMMITTERS[client](owned_broker.bootstrap, topic, group)
        assert _committed(owned_broker.bootstrap, group) == _stored(client)

    owned_broker.restart(kill=True)

    for client, group in groups.items():
        commits = COMMITS[client]
        assert _committed(owned_broker.bootstrap, group) == _stored(client)
        expected = sorted((p, o) for p, (start, _) in commits.items()
                          for o in range(start, RECORDS_PER_PARTITION))
        got = RESUMERS[client](owned_broker.bootstrap, topic, group, len(expected))
        # Exactly the records after each commit: none lost, none read again.
        assert sorted(got) == expected, client


# --- Apache Kafka's tools ----------------------------------------------------------------------

CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def _table(output: str, first_column: str) -> list[dict[str, str]]:
    """Rows of a whitespace-aligned table whose header starts with ``first_column``."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    for i, cells in enumerate(lines):
        if cells and cells[0] == first_column:
            return [dict(zip(cells, row, strict=False)) for row in lines[i + 1:]
                    if len(row) == len(cells)]
    raise AssertionError(f"no table with {first_column} in:\n{output}")


@pytest.mark.timeout(240)
def test_console_consumer_and_consumer_groups_command(
    broker: Broker, make_topic: Callable[..., str], kafka_tools: Path
) -> None:
    from .clients import Rec, produce
    from .test_java_tools import run_tool

    topic = make_topic(partitions=2)
    produce(broker.bootstrap, topic, [Rec(f"k{i}".encode(), f"a{i}".encode()) for i in range(6)],
            partition=0)
    produce(broker.bootstrap, topic, [Rec(f"k{i}".encode(), f"b{i}".encode()) for i in range(4)],
            partition=1)
    group = unique_group("console")
    server = ["--bootstrap-server", broker.bootstrap]

    def consume() -> list[str]:
        done = run_tool(kafka_tools, CONSOLE_CONSUMER, *server, "--topic", topic, "--group",
                        group, "--from-beginning", "--max-messages", "10", "--timeout-ms",
                        "60000")
        return sorted(done.stdout.split())

    expected = sorted([f"a{i}" for i in range(6)] + [f"b{i}" for i in range(4)])
    assert consume() == expected  # commits its positions when it closes

    listed = run_tool(kafka_tools, GROUP_COMMAND, *server, "--list").stdout.split()
    assert group in listed
    described = run_tool(kafka_tools, GROUP_COMMAND, *server, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in described.stderr
    rows = {int(r["PARTITION"]): r for r in _table(described.stdout, "GROUP")}
    assert {p: (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for p, r in rows.items()} \
        == {0: ("6", "6", "0"), 1: ("4", "4", "0")}
    state = run_tool(kafka_tools, GROUP_COMMAND, *server, "--describe", "--group", group,
                     "--state")
    [row] = _table(state.stdout, "GROUP")
    assert (row["STATE"], row["#MEMBERS"]) == ("Empty", "0")

    reset = run_tool(kafka_tools, GROUP_COMMAND, *server, "--reset-offsets", "--to-earliest",
                     "--execute", "--group", group, "--topic", topic)
    assert {(r["PARTITION"], r["NEW-OFFSET"]) for r in _table(reset.stdout, "GROUP")} == \
        {("0", "0"), ("1", "0")}
    assert _committed(broker.bootstrap, group) == {0: (0, ""), 1: (0, "")}
    assert consume() == expected  # from the reset offsets again

    deleted = run_tool(kafka_tools, GROUP_COMMAND, *server, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in \
        deleted.stdout
    assert group not in run_tool(kafka_tools, GROUP_COMMAND, *server, "--list").stdout.split()


# --- the protocol, request by request --------------------------------------------------------

NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 0, 22, 25, 27
INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT = 23, 26
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 68, 69, 79, 82
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_NOT_READY = (14, 15, 16)  # load in progress, not available, not coordinator


def _subscription(topic: str) -> bytes:
    """A ConsumerProtocolSubscription v0 of one topic."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


class GroupClient:
    """Raw group requests on one connection to the group's coordinator."""

    def __init__(self, bootstrap: str, group: str) -> None:
        from kafka.protocol.metadata import FindCoordinatorRequest

        self.group = group
        with RawConnection(bootstrap) as conn:
            version = conn.pick_version(FindCoordinatorRequest, 4, 4)
            deadline = time.monotonic() + 30
            while True:  # Kafka answers COORDINATOR_NOT_AVAILABLE while it creates the topic
                resp = conn.request(FindCoordinatorRequest(key_type=0,
                                                           coordinator_keys=[group]), version)
                [coordinator] = resp.coordinators
                if coordinator.error_code == NONE or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        assert coordinator.error_code == NONE, coordinator
        self.conn = RawConnection(f"{coordinator.host}:{coordinator.port}", timeout=30)
        self.wait_ready(group)

    def wait_ready(self, group: str) -> None:
        """Wait until the coordinator serves ``group``: a freshly created or restarted
        Kafka answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS until it has
        loaded the group's partition."""
        from kafka.protocol.consumer import HeartbeatRequest

        deadline = time.monotonic() + 30
        while True:
            error = self.conn.request(HeartbeatRequest(
                group_id=group, generation_id=1, member_id="probe", group_instance_id=None),
                0).error_code
            if error not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert error == UNKNOWN_MEMBER_ID, error

    def close(self) -> None:
        self.conn.close()

    def join(self, topic: str, member_id: str = "", instance_id: str | None = None,
             session_ms: int = SESSION_MS, version: int = 5) -> Any:
        from kafka.protocol.consumer import JoinGroupRequest

        protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                             metadata=_subscription(topic))
        return self.conn.request(JoinGroupRequest(
            group_id=self.group, session_timeout_ms=session_ms, rebalance_timeout_ms=MAX_POLL_MS,
            member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
            protocols=[protocol], reason=None), version)

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes],
             protocol_type: str | None = "consumer", instance_id: str | None = None) -> Any:
        from kafka.protocol.consumer import SyncGroupRequest

        entry = SyncGroupRequest.SyncGroupRequestAssignment
        return self.conn.request(SyncGroupRequest(
            group_id=self.group, generation_id=generation, member_id=member_id,
            group_instance_id=instance_id, protocol_type=protocol_type, protocol_name="range",
            assignments=[entry(member_id=m, assignment=a) for m, a in assignments.items()]), 5)

    def heartbeat(self, member_id: str, generation: int, instance_id: str | None = None) -> int:
        from kafka.protocol.consumer import HeartbeatRequest

        return self.conn.request(HeartbeatRequest(
            group_id=self.group, generation_id=generation, member_id=member_id,
            group_instance_id=instance_id), 4).error_code

    def commit(self, member_id: str, generation: int, topic: str, offset: int, version: int,
               group: str | None = None) -> tuple[int, int]:
        """Commit ``offset`` for partitions 0 and 99 (which does not exist); their errors."""
        from kafka.protocol.consumer import OffsetCommitRequest

        t = OffsetCommitRequest.OffsetCommitRequestTopic
        p = t.OffsetCommitRequestPartition
        resp = self.conn.request(OffsetCommitRequest(
            group_id=group or self.group, generation_id_or_member_epoch=generation,
            member_id=member_id, group_instance_id=None, retention_time_ms=-1,
            topics=[t(name=topic, partitions=[
                p(partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                  committed_metadata="raw"),
                p(partition_index=99, committed_offset=offset, committed_leader_epoch=-1,
                  committed_metadata=None)])]), version)
        errors = {q.partition_index: q.error_code for t in resp.topics for q in t.partitions}
        return errors[0], errors[99]


@pytest.mark.timeout(120)
def test_group_protocol_errors(broker: Broker, make_topic: Callable[..., str]) -> None:
    from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest
    from kafka.protocol.consumer import LeaveGroupRequest, OffsetFetchRequest

    topic = make_topic(partitions=1)
    group = unique_group("raw")
    client = GroupClient(broker.bootstrap, group)
    try:
        assert client.join(topic, session_ms=1).error_code == INVALID_SESSION_TIMEOUT
        # KIP-394: a new dynamic member (v4+) first gets its member id.
        first = client.join(topic)
        assert (first.error_code, first.generation_id) == (MEMBER_ID_REQUIRED, -1)
        member = first.member_id
        assert member
        joined = client.join(topic, member_id=member)
        assert joined.error_code == NONE
        assert (joined.leader, joined.member_id, joined.protocol_name) == (member, member, "range")
        assert [(m.member_id, m.metadata) for m in joined.members] == \
            [(member, _subscription(topic))]
        generation = joined.generation_id
        assert generation >= 1

        assert client.join(topic, member_id="nobody").error_code == UNKNOWN_MEMBER_ID
        assert client.sync(member, generation + 1, {}).error_code == ILLEGAL_GENERATION
        assert client.sync("nobody", generation, {}).error_code == UNKNOWN_MEMBER_ID
        assert client.sync(member, generation, {}, protocol_type=None).error_code == \
            INCONSISTENT_GROUP_PROTOCOL
        synced = client.sync(member, generation, {member: b"assignment"})
        assert (synced.error_code, synced.assignment, synced.protocol_type) == \
            (NONE, b"assignment", "consumer")

        assert client.heartbeat(member, generation) == NONE
        assert client.heartbeat(member, generation - 1) == ILLEGAL_GENERATION
        assert client.heartbeat("nobody", generation) == UNKNOWN_MEMBER_ID

        assert client.commit(member, generation + 1, topic, 5, 8) == \
            (ILLEGAL_GENERATION, UNKNOWN_TOPIC_OR_PARTITION)
        assert client.commit(member, generation, topic, 5, 8) == \
            (NONE, UNKNOWN_TOPIC_OR_PARTITION)
        missing = unique_group("missing")
        assert client.commit("m", 3, topic, 1, 8, group=missing) == \
            (ILLEGAL_GENERATION, UNKNOWN_TOPIC_OR_PARTITION)
        assert client.commit("m", 3, topic, 1, 9, group=missing) == \
            (GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION)

        fetch_group = OffsetFetchRequest.OffsetFetchRequestGroup
        fetch_topic = fetch_group.OffsetFetchRequestTopics
        fetched = client.conn.request(OffsetFetchRequest(groups=[
            fetch_group(group_id=group, member_id=None, member_epoch=-1,
                        topics=[fetch_topic(name=topic, partition_indexes=[0])]),
            fetch_group(group_id=missing, member_id=None, member_epoch=-1, topics=None)],
            require_stable=True), 8)
        [ours, theirs] = fetched.groups
        [[partition]] = [t.partitions for t in ours.topics]
        assert (ours.error_code, partition.committed_offset, partition.metadata) == \
            (NONE, 5, "raw")
        assert (theirs.error_code, theirs.topics) == (NONE, [])

        described = client.conn.request(DescribeGroupsRequest(
            groups=[group], include_authorized_operations=False), 5)
        [g] = described.groups
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == \
            (NONE, "Stable", "consumer", "range")
        assert [(m.member_id, m.member_assignment) for m in g.members] == \
            [(member, b"assignment")]

        deleted = client.conn.request(DeleteGroupsRequest(groups_names=[group, missing]), 2)
        assert {r.group_id: r.error_code for r in deleted.results} == \
            {group: NON_EMPTY_GROUP, missing: GROUP_ID_NOT_FOUND}

        identity = LeaveGroupRequest.MemberIdentity
        left = client.conn.request(LeaveGroupRequest(group_id=group, members=[
            identity(member_id=member, group_instance_id=None, reason="done"),
            identity(member_id="nobody", group_instance_id=None, reason=None)]), 5)
        assert (left.error_code, [m.error_code for m in left.members]) == \
            (NONE, [NONE, UNKNOWN_MEMBER_ID])
        assert client.heartbeat(member, generation) == UNKNOWN_MEMBER_ID
    finally:
        client.close()


@pytest.mark.timeout(120)
def test_static_member_fencing(broker: Broker, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=1)
    group = unique_group("fence")
    client = GroupClient(broker.bootstrap, group)
    try:
        # A static member joins in one step (no MEMBER_ID_REQUIRED).
        joined = client.join(topic, instance_id="only")
        assert joined.error_code == NONE
        member, generation = joined.member_id, joined.generation_id
        assert member.startswith("only-")
        assert client.sync(member, generation, {member: b"mine"}, instance_id="only"
                           ).error_code == NONE
        # The same instance joins again (a restart): a new member id, the same generation.
        again = client.join(topic, instance_id="only")
        assert (again.error_code, again.generation_id) == (NONE, generation)
        assert again.member_id != member
        # The old member id is fenced; the new one goes on.
        assert client.heartbeat(member, generation, "only") == FENCED_INSTANCE_ID
        assert client.heartbeat(again.member_id, generation, "only") == NONE
        synced = client.sync(again.member_id, generation, {}, instance_id="only")
        assert (synced.error_code, synced.assignment) == (NONE, b"mine")
    finally:
        client.close()


def _versions(conn: RawConnection, request_class: Any) -> range:
    """Every version of an api both the broker and josefk's table support."""
    from josefk.protocol.versions import SUPPORTED_VERSIONS

    lo, hi = conn.api_versions()[request_class.API_KEY]
    ours = SUPPORTED_VERSIONS[request_class.API_KEY]
    return range(max(lo, ours.min_version), min(hi, ours.max_version, request_class.max_version)
                 + 1)


@pytest.mark.timeout(120)
def test_every_version_of_the_group_apis(broker: Broker, make_topic: Callable[..., str],
                                          admin: Any) -> None:
    """Each version of each api, with requests whose answers do not depend on timing."""
    from kafka.protocol.admin import (
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        ListGroupsRequest,
    )
    from kafka.protocol.consumer import (
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        SyncGroupRequest,
    )
    from kafka.protocol.metadata import FindCoordinatorRequest

    topic = make_topic(partitions=1)
    group = unique_group("versions")
    client = GroupClient(broker.bootstrap, group)
    conn = client.conn
    try:
        for v in _versions(conn, FindCoordinatorRequest):
            resp = conn.request(FindCoordinatorRequest(key=group, key_type=0,
                                                       coordinator_keys=[group, group + "x"]), v)
            errors = [c.error_code for c in resp.coordinators] if v >= 4 else [resp.error_code]
            assert set(errors) == {NONE}, (v, resp)

        protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                             metadata=_subscription(topic))
        for v in _versions(conn, JoinGroupRequest):
            resp = conn.request(JoinGroupRequest(
                group_id=group, session_timeout_ms=1, rebalance_timeout_ms=MAX_POLL_MS,
                member_id="", group_instance_id=None, protocol_type="consumer",
                protocols=[protocol], reason="versions"), v)
            assert (resp.error_code, resp.generation_id, resp.members) == \
                (INVALID_SESSION_TIMEOUT, -1, []), (v, resp)
        for v in _versions(conn, SyncGroupRequest):
            resp = conn.request(SyncGroupRequest(
                group_id=group, generation_id=1, member_id="m", group_instance_id=None,
                protocol_type="consumer", protocol_name="range", assignments=[]), v)
            assert (resp.error_code, resp.assignment) == (UNKNOWN_MEMBER_ID, b""), (v, resp)
        for v in _versions(conn, HeartbeatRequest):
            resp = conn.request(HeartbeatRequest(group_id=group, generation_id=1, member_id="m",
                                                 group_instance_id=None), v)
            assert resp.error_code == UNKNOWN_MEMBER_ID, (v, resp)
        identity = LeaveGroupRequest.MemberIdentity
        for v in _versions(conn, LeaveGroupRequest):
            resp = conn.request(LeaveGroupRequest(group_id=group, member_id="m", members=[
                identity(member_id="m", group_instance_id=None, reason=None)]), v)
            got = [m.error_code for m in resp.members] if v >= 3 else [resp.error_code]
            assert got == [UNKNOWN_MEMBER_ID], (v, resp)

        # Per version: a group committed to without membership, fetched, described,
        # listed, its offset deleted, the group deleted.
        commit_topic = OffsetCommitRequest.OffsetCommitRequestTopic
        commit_partition = commit_topic.OffsetCommitRequestPartition
        fetch_group = OffsetFetchRequest.OffsetFetchRequestGroup
        fetch_topics = fetch_group.OffsetFetchRequestTopics
        fetch_topic = OffsetFetchRequest.OffsetFetchRequestTopic
        delete_topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
        delete_partition = delete_topic.OffsetDeleteRequestPartition
        commit_versions = _versions(conn, OffsetCommitRequest)
        # From v10 OffsetCommit and OffsetFetch name topics by id.
        topic_id = uuid.UUID(str(admin.describe_topics([topic])[0]["topic_id"]))
        by_id = {"name": "", "topic_id": topic_id}
        simple = [unique_group(f"simple-v{v}") for v in commit_versions]
        for name in simple:
            client.wait_ready(name)
        for v, name in zip(commit_versions, simple, strict=True):
            resp = conn.request(OffsetCommitRequest(
                group_id=name, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, retention_time_ms=-1, topics=[commit_topic(
                    **(by_id if v >= 10 else {"name": topic}), partitions=[commit_partition(
                        partition_index=0, committed_offset=v, committed_leader_epoch=-1,
                        committed_metadata=f"v{v}")])]), v)
            assert [p.error_code for t in resp.topics for p in t.partitions] == [NONE], (v, resp)
        for v in _versions(conn, OffsetFetchRequest):
            for i, name in enumerate(simple):
                if v >= 8:
                    resp = conn.request(OffsetFetchRequest(groups=[fetch_group(
                        group_id=name, member_id=None, member_epoch=-1,
                        topics=[fetch_topics(**(by_id if v >= 10 else {"name": topic}),
                                             partition_indexes=[0])])],
                        require_stable=False), v)
                    [g] = resp.groups
                    partitions, error = [p for t in g.topics for p in t.partitions], g.error_code
                else:
                    resp = conn.request(OffsetFetchRequest(
                        group_id=name, topics=[fetch_topic(name=topic, partition_indexes=[0])],
                        require_stable=False), v)
                    partitions = [p for t in resp.topics for p in t.partitions]
                    error = resp.error_code if v >= 2 else NONE
                offset = commit_versions[i]
                assert (error, [(p.committed_offset, p.metadata, p.error_code)
                                for p in partitions]) == (NONE, [(offset, f"v{offset}", NONE)]), \
                    (v, resp)
        for v in _versions(conn, DescribeGroupsRequest):
            resp = conn.request(DescribeGroupsRequest(groups=[simple[0]],
                                                      include_authorized_operations=True), v)
            [g] = resp.groups
            assert (g.error_code, g.group_id, g.group_state, g.protocol_type, g.members) == \
                (NONE, simple[0], "Empty", "", []), (v, resp)
        for v in _versions(conn, ListGroupsRequest):
            resp = conn.request(ListGroupsRequest(states_filter=["Empty"],
                                                  types_filter=["classic"]), v)
            listed = {g.group_id: g for g in resp.groups}
            assert resp.error_code == NONE and set(simple) <= set(listed), (v, resp)
            if v >= 4:
                assert listed[simple[0]].group_state == "Empty"
            if v >= 5:
                assert listed[simple[0]].group_type == "classic"
        for v in _versions(conn, OffsetDeleteRequest):
            resp = conn.request(OffsetDeleteRequest(group_id=simple[0], topics=[delete_topic(
                name=topic, partitions=[delete_partition(partition_index=0)])]), v)
            assert (resp.error_code, [p.error_code for t in resp.topics for p in t.partitions]) \
                == (NONE, [NONE]), (v, resp)
        for v in _versions(conn, DeleteGroupsRequest):
            name = simple[(v + 1) % len(simple)]
            resp = conn.request(DeleteGroupsRequest(groups_names=[name]), v)
            assert [(r.group_id, r.error_code) for r in resp.results] == [(name, NONE)], (v, resp)
    finally:
        client.close()


# --- a member process (child side) -----------------------------------------------------------


class _Emitter:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: set[int] = set()

    def emit(self, event: str, **fields: Any) -> None:
        with self.lock:
            line = json.dumps({"event": event, "current": sorted(self.current), **fields})
            print(line, flush=True)


def _stdin_commands() -> queue.Queue[str]:
    commands: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("leave")

    threading.Thread(target=read, daemon=True).start()
    return commands


def _next_command(commands: queue.Queue[str]) -> str | None:
    try:
        return commands.get_nowait()
    except queue.Empty:
        return None


def _member_kafka_python(cfg: dict[str, Any], out: _Emitter, commands: queue.Queue[str]) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    consumer = KafkaConsumer(
        bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"],
        group_instance_id=cfg["instance_id"], client_id="compat-member",
        session_timeout_ms=cfg["session_ms"], heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=MAX_POLL_MS, enable_auto_commit=False,
        auto_offset_reset="earliest")

    def generation() -> int:
        return consumer.group_metadata().generation_id

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            parts = sorted(tp.partition for tp in revoked)
            out.current -= set(parts)
            out.emit("revoked", partitions=parts)

        def on_partitions_assigned(self, assigned: Any) -> None:
            parts = sorted(tp.partition for tp in assigned)
            out.current = set(parts)
            out.emit("assigned", partitions=parts, generation=generation())

    consumer.subscribe([cfg["topic"]], listener=Listener())
    while True:
        consumer.poll(timeout_ms=100)
        command = _next_command(commands)
        if command == "status":
            out.emit("status", generation=generation())
        elif command == "leave":
            consumer.close()
            return


def _member_aiokafka(cfg: dict[str, Any], out: _Emitter, commands: queue.Queue[str]) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    async def run() -> None:
        extra = {"group_instance_id": cfg["instance_id"]} if cfg["instance_id"] else {}
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"], client_id="compat-member",
            session_timeout_ms=cfg["session_ms"], heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=MAX_POLL_MS, rebalance_timeout_ms=MAX_POLL_MS,
            enable_auto_commit=False, auto_offset_reset="earliest", **extra)

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                parts = sorted(tp.partition for tp in revoked)
                out.current -= set(parts)
                out.emit("revoked", partitions=parts)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                parts = sorted(tp.partition for tp in assigned)
                out.current = set(parts)
                out.emit("assigned", partitions=parts)

        consumer.subscribe([cfg["topic"]], listener=Listener())
        await consumer.start()
        try:
            while True:
                await consumer.getmany(timeout_ms=100)
                command = _next_command(commands)
                if command == "status":
                    out.emit("status")
                elif command == "leave":
                    return
        finally:
            await consumer.stop()

    asyncio.run(run())


def _member_confluent(cfg: dict[str, Any], out: _Emitter, commands: queue.Queue[str]) -> None:
    import confluent_kafka

    settings: dict[str, Any] = {
        "bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"],
        "client.id": "compat-member", "session.timeout.ms": cfg["session_ms"],
        "heartbeat.interval.ms": HEARTBEAT_MS, "max.poll.interval.ms": MAX_POLL_MS,
        "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if cfg["strategy"]:
        settings["partition.assignment.strategy"] = cfg["strategy"]
    if cfg["instance_id"]:
        settings["group.instance.id"] = cfg["instance_id"]
    incremental = cfg["strategy"] == "cooperative-sticky"
    consumer = confluent_kafka.Consumer(settings)

    def on_assign(_: Any, partitions: list[Any]) -> None:
        parts = sorted(tp.partition for tp in partitions)
        out.current = out.current | set(parts) if incremental else set(parts)
        out.emit("assigned", partitions=parts)

    def on_revoke(_: Any, partitions: list[Any]) -> None:
        parts = sorted(tp.partition for tp in partitions)
        out.current -= set(parts)
        out.emit("revoked", partitions=parts)

    def on_lost(_: Any, partitions: list[Any]) -> None:
        parts = sorted(tp.partition for tp in partitions)
        out.current -= set(parts)
        out.emit("lost", partitions=parts)

    consumer.subscribe([cfg["topic"]], on_assign=on_assign, on_revoke=on_revoke,
                       on_lost=on_lost)
    while True:
        consumer.poll(0.1)
        command = _next_command(commands)
        if command == "status":
            out.emit("status")
        elif command == "leave":
            consumer.close()
            return


MEMBERS = {"kafka-python": _member_kafka_python, "aiokafka": _member_aiokafka,
           "confluent-kafka": _member_confluent}


def _member_main(config: str) -> None:
    cfg = json.loads(config)
    MEMBERS[cfg["client"]](cfg, _Emitter(), _stdin_commands())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "member":
        _member_main(sys.argv[2])
    else:
        sys.exit(re.sub(r"\s+", " ", "usage: python -m compat_tests.test_groups member CONFIG"))
