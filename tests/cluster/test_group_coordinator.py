"""The group coordinator on a real broker's logs: the internal topic, writes, start-up
replay (after a clean stop or a crash), timers and offset expiry. No sockets."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from conftest import require_kafka_jars

from josefk.cluster.coordinator.group.api import (
    Error,
    JoinRequest,
    JoinResult,
    PartitionCommit,
    SyncRequest,
    SyncResult,
)
from josefk.cluster.coordinator.group.coordinator import GroupCoordinator
from josefk.cluster.coordinator.group.host import (
    CoordinatorConfig,
    CoordinatorHost,
    CoordinatorStore,
)
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_key,
    decode_value,
)
from josefk.cluster.coordinator.group.state import GroupState
from josefk.cluster.coordinator.records import OFFSETS_TOPIC, partition_for, read_batches
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config

REPO = Path(__file__).resolve().parents[2]
RUN_CLASS = REPO / "tools" / "kafka" / "run-class.sh"
PARTITIONS = 4
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"


def make_broker(data: Path, **overrides: str) -> Broker:
    config = load_config(None, {
        "log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0",
        "offsets.topic.num.partitions": str(PARTITIONS), "offsets.topic.replication.factor": "3",
        "group.initial.rebalance.delay.ms": "0", **overrides})
    broker = Broker(config)
    broker.startup()
    return broker



def test_coordinators_are_built_on_first_use_without_their_topics(tmp_path: Path) -> None:
    """A fresh broker (no ``__consumer_offsets``) defers the coordinators; the first use
    builds one and queues its background task."""
    broker = make_broker(tmp_path)
    try:
        assert "group_coordinator" not in vars(broker) and "txn_service" not in vars(broker)
        coordinator = broker.group_coordinator
        assert broker.group_coordinator is coordinator
        assert coordinator.run in broker.background_tasks
        assert broker.txn_service.run in broker.background_tasks
    finally:
        broker.shutdown()

@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def broker(data: Path) -> Iterator[Broker]:
    broker = make_broker(data)
    yield broker
    broker.shutdown()


def written(broker: Broker, group_id: str) -> list[tuple[object, object]]:
    """The decoded records of the group's partition, in log order."""
    partition = broker.partition(OFFSETS_TOPIC, partition_for(group_id, PARTITIONS))
    assert partition is not None
    log = partition.log
    records = []
    data = log.read(log.log_start_offset, 1 << 24).read_bytes()
    for _, batch in read_batches(data):
        for rec in batch:
            key = decode_key(rec.key)
            assert key is not None
            records.append((key, decode_value(key, rec.value)))
    return records


def test_the_broker_is_a_coordinator_host(broker: Broker) -> None:
    """The coordinator sees the broker only through cluster's CoordinatorHost (cluster must
    not import server); the broker keeps every member of it (names only, at run time)."""
    assert isinstance(broker, CoordinatorHost)
    assert isinstance(broker.config, CoordinatorConfig)
    assert isinstance(broker.store, CoordinatorStore)


async def test_find_coordinator_creates_the_offsets_topic(broker: Broker) -> None:
    coordinator = broker.group_coordinator
    assert coordinator.check("g") is Error.NOT_COORDINATOR  # no topic yet
    error, node = await coordinator.coordinator_node("g")
    assert error is Error.NONE and node is not None and node.node_id == broker.node_id
    topic = broker.store.get(OFFSETS_TOPIC)
    assert topic is not None
    # Three replicas asked for, one broker alive: one replica.
    assert [len(r) for r in topic.replicas] == [1] * PARTITIONS
    assert topic.configs["cleanup.policy"] == "compact"
    assert topic.configs["segment.bytes"] == str(broker.config.offsets_topic_segment_bytes)
    assert coordinator.loaded == set(range(PARTITIONS))
    assert coordinator.check("g") is Error.NONE


async def join_and_sync(coordinator: GroupCoordinator, group: str, instance: str | None = None
                        ) -> tuple[str, int]:
    """One member joins (one step, v3 or static) and syncs; (member id, generation)."""
    joined = await coordinator.join(JoinRequest(
        group, "", instance, "consumer", (("range", SUBSCRIPTION),), 6000, 10000, "client",
        "/127.0.0.1", 5 if instance else 3))
    assert joined.error is Error.NONE
    synced = await coordinator.sync(SyncRequest(
        group, joined.generation_id, joined.member_id, instance, None, None,
        ((joined.member_id, b"assigned"),)))
    assert (synced.error, synced.assignment) == (Error.NONE, b"assigned")
    return joined.member_id, joined.generation_id


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "crash"])
async def test_groups_and_offsets_survive_a_restart(data: Path, crash: bool) -> None:
    broker = make_broker(data)
    coordinator = broker.group_coordinator
    await coordinator.ensure_topic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        member, generation = await join_and_sync(coordinator, "g", instance="i")
        errors = coordinator.commit_offsets("g", member, "i", generation, -1, [
            ("t", [PartitionCommit(0, 42, 7, "meta"), PartitionCommit(1, 3)])], 8)
        assert set(errors.values()) == {Error.NONE}
        assert coordinator.commit_offsets("simple", "", None, -1, -1, [
            ("t", [PartitionCommit(0, 9)])], 8) == {("t", 0): Error.NONE}
        nursery.cancel_scope.cancel()
    records = written(broker, "g")
    assert records[-2:] == [
        (OffsetCommitKey("g", "t", 0), records[-2][1]), (OffsetCommitKey("g", "t", 1),
                                                        records[-1][1])]
    metadata = [v for k, v in records if isinstance(k, GroupMetadataKey)]
    assert isinstance(metadata[-1], GroupMetadataValue)
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in metadata[-1].members] \
        == [(member, "i", b"assigned")]
    if not crash:
        broker.shutdown()

    again = make_broker(data)
    try:
        coordinator = again.group_coordinator
        assert coordinator.loaded == set(range(PARTITIONS))
        group = coordinator.groups.get("g")
        assert group is not None
        assert (group.state, group.generation, list(group.members)) == \
            (GroupState.STABLE, generation, [member])
        assert group.static_members == {"i": member}
        error, fetched = coordinator.fetch_offsets("g", None)
        assert error is Error.NONE
        assert [(t, [(o.partition, o.offset, o.leader_epoch, o.metadata) for o in offsets])
                for t, offsets in fetched] == [("t", [(0, 42, 7, "meta"), (1, 3, -1, "")])]
        assert coordinator.fetch_offsets("simple", [("t", [0])])[1][0][1][0].offset == 9
        # The loaded member carries on in its generation.
        assert coordinator.heartbeat("g", member, "i", generation) is Error.NONE
    finally:
        again.shutdown()


async def test_session_timeouts_fire_without_polling(broker: Broker,
                                                     autojump_clock: trio.testing.MockClock
                                                     ) -> None:
    coordinator = GroupCoordinator(broker, clock=lambda: int(trio.current_time() * 1000))
    broker.group_coordinator = coordinator
    await coordinator.ensure_topic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        member, generation = await join_and_sync(coordinator, "g")
        await trio.sleep(5)
        assert coordinator.heartbeat("g", member, None, generation) is Error.NONE
        await trio.sleep(5.9)  # within the 6 s session of the last heartbeat
        assert coordinator.groups.groups["g"].state is GroupState.STABLE
        await trio.sleep(0.2)
        # Expired: removed, and the empty next generation is written.
        group = coordinator.groups.groups["g"]
        assert (group.state, group.generation, group.members) == (GroupState.EMPTY, 2, {})
        assert written(broker, "g")[-1] == (GroupMetadataKey("g"), GroupMetadataValue(
            "consumer", 2, None, None, group.state_timestamp or -1, ()))
        assert coordinator.timers._heap == []  # nothing left to wait for
        nursery.cancel_scope.cancel()


async def test_a_failing_timer_is_logged_and_the_other_groups_timers_still_fire(
        broker: Broker, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    coordinator = GroupCoordinator(broker, clock=lambda: int(trio.current_time() * 1000))
    broker.group_coordinator = coordinator
    await coordinator.ensure_topic()
    on_timer, broken = coordinator.groups.on_timer, set()

    def failing(group_id: str) -> list[object]:
        if group_id in broken:
            raise RuntimeError("a bug")
        return on_timer(group_id)

    monkeypatch.setattr(coordinator.groups, "on_timer", failing)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        await join_and_sync(coordinator, "bad")
        await join_and_sync(coordinator, "g")
        broken.add("bad")
        await trio.sleep(7)  # both 6 s sessions run out
        assert coordinator.groups.groups["g"].state is GroupState.EMPTY
        nursery.cancel_scope.cancel()
    assert any("the timer of group bad failed" in r.getMessage() for r in caplog.records)


async def test_a_failing_offset_expiration_is_logged_and_runs_again(
        broker: Broker, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    coordinator = broker.group_coordinator
    runs: list[int] = []

    def expire_offsets() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise RuntimeError("a bug")

    monkeypatch.setattr(coordinator, "expire_offsets", expire_offsets)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        await trio.sleep(broker.config.offsets_retention_check_interval_ms / 1000 * 2.5)
        nursery.cancel_scope.cancel()
    assert runs == [0, 1]
    assert any("offset expiration failed" in r.getMessage() for r in caplog.records)


async def test_expired_offsets_are_tombstoned(data: Path) -> None:
    now = [1_000_000]
    broker = make_broker(data, **{"offsets.retention.minutes": "1"})
    coordinator = GroupCoordinator(broker, clock=lambda: now[0])
    broker.group_coordinator = coordinator
    await coordinator.ensure_topic()
    coordinator.commit_offsets("old", "", None, -1, -1, [("t", [PartitionCommit(0, 5)])], 8)
    now[0] += 60_000
    coordinator.commit_offsets("new", "", None, -1, -1, [("t", [PartitionCommit(0, 6)])], 8)
    coordinator.expire_offsets()
    assert written(broker, "old")[-2:] == [(OffsetCommitKey("old", "t", 0), None),
                                           (GroupMetadataKey("old"), None)]
    assert coordinator.groups.get("old") is None and coordinator.groups.get("new") is not None
    broker.shutdown()
    again = make_broker(data)
    try:
        assert again.group_coordinator.groups.get("old") is None
        error, fetched = again.group_coordinator.fetch_offsets("old", [("t", [0])])
        assert (error, fetched[0][1][0].offset) == (Error.NONE, -1)
        assert again.group_coordinator.groups.get("new") is not None
    finally:
        again.shutdown()


async def test_write_failures_are_reported(broker: Broker) -> None:
    coordinator = broker.group_coordinator
    await coordinator.ensure_topic()
    partition = broker.partition(OFFSETS_TOPIC, partition_for("g", PARTITIONS))
    assert partition is not None
    partition.isr = []  # acks=all cannot be met: NOT_ENOUGH_REPLICAS, as Kafka maps it
    errors = coordinator.commit_offsets("g", "", None, -1, -1, [("t", [PartitionCommit(0, 1)])],
                                        8)
    assert errors == {("t", 0): Error.COORDINATOR_NOT_AVAILABLE}
    partition.leader = broker.node_id + 1  # another broker leads it now
    errors = coordinator.commit_offsets("g", "", None, -1, -1, [("t", [PartitionCommit(0, 1)])],
                                        8)
    assert errors == {("t", 0): Error.NOT_COORDINATOR}
    assert coordinator.fetch_offsets("g", [("t", [0])])[0] is Error.NOT_COORDINATOR


async def test_kafka_dump_log_segments_decodes_our_records(broker: Broker) -> None:
    require_kafka_jars()
    coordinator = broker.group_coordinator
    await coordinator.ensure_topic()
    coordinator.commit_offsets("dumped", "", None, -1, -1,
                               [("topic-x", [PartitionCommit(3, 1234, 5, "meta-y")])], 8)
    coordinator.delete_groups(["dumped"])
    partition = broker.partition(OFFSETS_TOPIC, partition_for("dumped", PARTITIONS))
    assert partition is not None
    partition.log.flush()
    segment = sorted(partition.log.directory.glob("*.log"))[0]
    done = subprocess.run(
        [str(RUN_CLASS), "org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder",
         "--files", str(segment)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not re.search(r"exception|error", done.stderr, re.IGNORECASE), done.stderr
    decoded = []
    for line in done.stdout.splitlines():
        m = re.search(r" key: (\{.*\}) payload: (.*)$", line)
        if m:
            value = None if m.group(2) == "<DELETE>" else json.loads(m.group(2))
            decoded.append((json.loads(m.group(1)), value))
    offset_key = {"type": "1", "data": {"group": "dumped", "topic": "topic-x", "partition": 3}}
    assert decoded == [
        (offset_key, {"version": "3", "data": {"offset": 1234, "leaderEpoch": 5,
                                                "metadata": "meta-y",
                                                "commitTimestamp": decoded[0][1]["data"][
                                                    "commitTimestamp"]}}),
        (offset_key, None),
        ({"type": "2", "data": {"group": "dumped"}}, None)], done.stdout


def committed(coordinator: GroupCoordinator, group_id: str, *partitions: int
              ) -> list[int]:
    error, [(_, fetched)] = coordinator.fetch_offsets(group_id, [("t", list(partitions))])
    assert error is Error.NONE
    return [o.offset for o in fetched]


def write_marker(broker: Broker, group_id: str, producer_id: int, commit: bool) -> None:
    """The transaction coordinator's COMMIT or ABORT marker on the group's partition."""
    p = partition_for(group_id, PARTITIONS)
    partition = broker.partition(OFFSETS_TOPIC, p)
    assert partition is not None
    partition.append_control_batch(producer_id, 0, 0, commit)
    broker.group_coordinator.complete_txn_offsets(producer_id, p, commit)


def txn_commit(coordinator: GroupCoordinator, group_id: str, producer_id: int,
               *offsets: tuple[int, int], metadata: str = "") -> Error:
    return coordinator.txn_commit_offsets(group_id, producer_id, 0, "", None, -1, [
        ("t", [(p, offset, -1, metadata) for p, offset in offsets])])


async def test_a_member_id_too_long_to_write_is_refused_at_join(broker: Broker) -> None:
    """A member id past a record string's 32767 bytes (a long client id and a UUID) could
    never be written to ``__consumer_offsets``: as Kafka 4 answers, the JoinGroup fails
    with UNKNOWN_SERVER_ERROR and the group holds nothing of it (Kafka 3's coordinator
    let it join and failed the leader's SyncGroup instead)."""
    coordinator = broker.group_coordinator
    await coordinator.ensure_topic()
    for version in (3, 5):
        joined = await coordinator.join(JoinRequest(
            "g", "", None, "consumer", (("range", SUBSCRIPTION),), 6000, 10000, "c" * 32740,
            "/127.0.0.1", version))
        assert (joined.error, joined.member_id) == (Error.UNKNOWN_SERVER_ERROR, "")
    group = coordinator.groups.groups.get("g")
    assert group is None or not group.members
    assert all(not getattr(value, "members", ()) for _, value in written(broker, "g"))


async def test_unloading_a_partition_answers_its_parked_requests(broker: Broker) -> None:
    """Kafka's onUnloaded: the groups go Dead and parked JoinGroup and SyncGroup
    requests are answered NOT_COORDINATOR, so their members find the new coordinator."""
    coordinator = broker.group_coordinator
    await coordinator.ensure_topic()
    answers: dict[str, Any] = {}

    async def ask(name: str, request: Awaitable[object]) -> None:
        answers[name] = await request

    def join(group: str, member_id: str, client: str) -> Awaitable[JoinResult]:
        return coordinator.join(JoinRequest(group, member_id, None, "consumer",
                                            (("range", SUBSCRIPTION),), 6000, 10000, client,
                                            "/127.0.0.1", 3))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        await join_and_sync(coordinator, "g")
        nursery.start_soon(ask, "g: new member", join("g", "", "b"))  # waits for the leader
        other, _ = await join_and_sync(coordinator, "s")
        async with trio.open_nursery() as rejoining:
            rejoining.start_soon(ask, "s: new member", join("s", "", "b"))
            await trio.testing.wait_all_tasks_blocked()
            rejoining.start_soon(ask, "s: leader", join("s", other, "client"))
        follower = answers["s: new member"]
        assert (follower.error, follower.generation_id) == (Error.NONE, 2)
        nursery.start_soon(ask, "s: follower sync", coordinator.sync(SyncRequest(
            "s", 2, follower.member_id)))
        await trio.testing.wait_all_tasks_blocked()
        assert set(answers) == {"s: new member", "s: leader"}
        groups = {name: coordinator.groups.groups[name] for name in ("g", "s")}
        for p in range(PARTITIONS):
            coordinator.unload(p)
        with trio.fail_after(5):
            while len(answers) < 4:
                await trio.sleep(0.01)
        newcomer = answers["g: new member"]
        assert newcomer == JoinResult(Error.NOT_COORDINATOR, newcomer.member_id)
        assert newcomer.member_id.startswith("b-")
        assert answers["s: follower sync"] == SyncResult(Error.NOT_COORDINATOR)
        assert {name: g.state for name, g in groups.items()} == \
            {"g": GroupState.DEAD, "s": GroupState.DEAD}
        assert coordinator.groups.groups == {}
        nursery.cancel_scope.cancel()


async def test_of_a_transactional_and_a_regular_commit_the_later_record_wins(data: Path
                                                                             ) -> None:
    """Kafka keeps the commit whose record is later in the log (recordOffset): a
    regular commit written after a transaction's offsets stays when the transaction
    commits, live and when the partition is loaded again."""
    broker = make_broker(data)
    coordinator = broker.group_coordinator
    await coordinator.ensure_topic()
    assert txn_commit(coordinator, "g", 1000, (0, 5), (1, 5)) is Error.NONE
    assert coordinator.commit_offsets("g", "", None, -1, -1, [
        ("t", [PartitionCommit(0, 7)])], 8) == {("t", 0): Error.NONE}
    write_marker(broker, "g", 1000, commit=True)
    assert committed(coordinator, "g", 0, 1) == [7, 5]
    # And the other way round: the transaction's record is the later one.
    assert coordinator.commit_offsets("g", "", None, -1, -1, [
        ("t", [PartitionCommit(1, 8)])], 8) == {("t", 1): Error.NONE}
    assert txn_commit(coordinator, "g", 1001, (1, 9)) is Error.NONE
    write_marker(broker, "g", 1001, commit=True)
    assert committed(coordinator, "g", 0, 1) == [7, 9]
    broker.shutdown()
    again = make_broker(data)
    try:
        assert committed(again.group_coordinator, "g", 0, 1) == [7, 9]
    finally:
        again.shutdown()


async def test_offsets_pending_in_a_transaction_do_not_expire(data: Path) -> None:
    """Kafka: an offset an open transaction holds does not expire yet, nor does a group
    with open transactions (which a TxnOffsetCommit makes a "simple" group)."""
    now = [1_000_000]
    broker = make_broker(data, **{"offsets.retention.minutes": "1"})
    coordinator = GroupCoordinator(broker, clock=lambda: now[0])
    broker.group_coordinator = coordinator
    await coordinator.ensure_topic()
    try:
        coordinator.commit_offsets("g", "", None, -1, -1, [("t", [PartitionCommit(0, 1)])], 8)
        assert txn_commit(coordinator, "g", 1000, (0, 2)) is Error.NONE
        now[0] += 120_000
        coordinator.expire_offsets()
        assert committed(coordinator, "g", 0) == [1] and coordinator.groups.get("g")
        assert txn_commit(coordinator, "only-pending", 1000, (0, 3)) is Error.NONE
        assert coordinator.describe("only-pending")[1].state == "Empty"
        coordinator.expire_offsets()
        assert coordinator.groups.get("only-pending") is not None
        write_marker(broker, "g", 1000, commit=True)
        write_marker(broker, "only-pending", 1000, commit=True)
        assert committed(coordinator, "g", 0) == [2]
        assert committed(coordinator, "only-pending", 0) == [3]
    finally:
        broker.shutdown()


async def test_deleting_a_group_tombstones_its_pending_offsets(broker: Broker) -> None:
    """Kafka's deleteAllOffsets: the offsets open transactions hold are tombstoned too,
    so that the transactions' commit brings none of them back."""
    coordinator = broker.group_coordinator
    await coordinator.ensure_topic()
    coordinator.commit_offsets("d", "", None, -1, -1, [("t", [PartitionCommit(0, 1)])], 8)
    assert txn_commit(coordinator, "d", 1001, (0, 2), (1, 3)) is Error.NONE
    assert coordinator.delete_groups(["d"]) == {"d": Error.NONE}
    assert written(broker, "d")[-3:] == [(OffsetCommitKey("d", "t", 0), None),
                                         (OffsetCommitKey("d", "t", 1), None),
                                         (GroupMetadataKey("d"), None)]
    write_marker(broker, "d", 1001, commit=True)
    assert committed(coordinator, "d", 0, 1) == [-1, -1]
    assert coordinator.groups.get("d") is None


async def test_txn_offset_metadata_is_measured_in_utf16_units(broker: Broker) -> None:
    """Kafka compares String.length(): a character outside the BMP counts twice."""
    coordinator = broker.group_coordinator
    await coordinator.ensure_topic()
    limit = coordinator.config.offset_metadata_max_bytes
    fits, too_long = "\U0001F600" * (limit // 2), "\U0001F600" * (limit // 2 + 1)
    commits = [("t", [(0, 1, -1, fits), (1, 7, -1, too_long)])]
    assert coordinator.oversized_metadata(commits) == {("t", 1)}
    # As Kafka: the partition with too much metadata fails alone, the other commits.
    assert coordinator.txn_commit_offsets("g", 1000, 0, "", None, -1, commits) is Error.NONE
    write_marker(broker, "g", 1000, commit=True)
    assert committed(coordinator, "g", 0, 1) == [1, -1]
