"""The metadata store: topic validation, Kafka's replica placement, the local JSON-backed store."""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.cluster.metadata import store as md
from josefk.cluster.metadata.errors import (
    ClusterError,
    InconsistentClusterIdError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    MetadataCorruptError,
    TopicExistsError,
    UnknownTopicError,
)
from josefk.cluster.metadata.placement import assign_replicas
from josefk.cluster.metadata.store import (
    METADATA_FILE,
    BrokerInfo,
    LocalMetadataStore,
    MetadataStore,
    Topic,
    validate_topic_name,
)
from josefk.log.manager import parse_partition_dir
from josefk.log.partition_metadata import METADATA_TOPIC_ID, ZERO_UUID, kafka_uuid_str

BROKER = BrokerInfo(0, "127.0.0.1", 9092)
LEGAL = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


def open_store(tmp_path: Path, **kwargs: Any) -> LocalMetadataStore:
    return LocalMetadataStore(tmp_path / "data", BROKER, **kwargs)


def stored_topics(store: LocalMetadataStore) -> list[Any]:
    return list(json.loads(store.path.read_text())["topics"])


def reject_bad(configs: Mapping[str, str]) -> None:
    if "bad" in configs:
        raise ValueError(f"Unknown topic config name: bad={configs['bad']}")


# --- topic names -------------------------------------------------------------------------


@given(st.text(LEGAL, min_size=1, max_size=249).filter(lambda s: s not in (".", "..")))
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(("name", "message"), [
    ("", "can't be empty"), (".", '"." or ".."'), ("..", '"." or ".."'),
    ("a" * 250, "longer than 249"), ("a b", "character other than"), ("caf\u00e9", "other than"),
    ("a/b", "other than"), ("a:b", "other than"), ("\u0661", "other than"),
])
def test_illegal_topic_names(name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError, match=message) as err:
        validate_topic_name(name)
    assert err.value.error_code == 17


def test_error_codes_are_kafkas() -> None:
    assert {cls.__name__: cls.error_code for cls in (
        UnknownTopicError, InvalidTopicError, TopicExistsError, InvalidPartitionsError,
        InvalidReplicationFactorError, InvalidReplicaAssignmentError, InvalidConfigError)} == {
        "UnknownTopicError": 3, "InvalidTopicError": 17, "TopicExistsError": 36,
        "InvalidPartitionsError": 37, "InvalidReplicationFactorError": 38,
        "InvalidReplicaAssignmentError": 39, "InvalidConfigError": 40}


# --- replica placement -------------------------------------------------------------------


def test_assignment_matches_kafkas_own_example() -> None:
    # AdminZkClientTest.testReplicaAssignment in Apache Kafka 3.x.
    assert assign_replicas(range(5), 10, 3, start_index=0) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
        [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2]]


def test_assignment_uses_sorted_broker_ids() -> None:
    expected = [[20, 10], [30, 20], [10, 30]]  # leader at index 1, follower shift 1
    assert assign_replicas([30, 10, 20], 3, 2, start_index=1) == expected
    assert assign_replicas([10, 20, 30], 3, 2, start_index=1) == expected


def test_single_broker() -> None:
    assert assign_replicas([7], 4, 1) == [[7], [7], [7], [7]]


def test_random_start_comes_from_rng() -> None:
    one = assign_replicas(range(6), 12, 3, rng=random.Random(42))
    assert one == assign_replicas(range(6), 12, 3, rng=random.Random(42))
    starts = {assign_replicas(range(6), 1, 1, rng=random.Random(seed))[0][0] for seed in range(60)}
    assert starts == set(range(6))


def test_added_partitions_continue_the_pattern() -> None:
    whole = assign_replicas(range(5), 10, 3, start_index=2)
    assert whole[:4] + assign_replicas(range(5), 6, 3, start_index=2, start_partition_id=4) == whole


@settings(max_examples=200)
@given(st.sets(st.integers(0, 1000), min_size=1, max_size=12), st.integers(1, 60),
       st.data())
def test_assignment_properties(brokers: set[int], partitions: int, data: st.DataObject) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    start = data.draw(st.one_of(st.none(), st.integers(0, len(brokers) - 1)))
    result = assign_replicas(brokers, partitions, rf, start, random.Random(0))
    ordered = sorted(brokers)
    assert len(result) == partitions
    for replicas in result:
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= brokers
    # Leaders go round the brokers one by one, so they are spread evenly.
    first = ordered.index(result[0][0])
    leaders = [ordered[(first + p) % len(ordered)] for p in range(partitions)]
    assert [r[0] for r in result] == leaders
    counts = Counter(r[0] for r in result)
    assert max(counts.values()) - min(counts.get(b, 0) for b in brokers) <= 1
    if start is not None:
        assert result[0][0] == ordered[start]


@pytest.mark.parametrize(("args", "error", "message"), [
    (([0, 1], 0, 1), InvalidPartitionsError, "Number of partitions must be larger than 0"),
    (([0, 1], 3, 0), InvalidReplicationFactorError, "must be larger than 0"),
    (([0, 1], 3, 3), InvalidReplicationFactorError, "larger than available brokers: 2"),
    (([], 1, 1), InvalidReplicationFactorError, "available brokers: 0"),
])
def test_assignment_errors(args: tuple[Any, ...], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        assign_replicas(*args)


def test_duplicate_broker_ids_are_a_bug() -> None:
    with pytest.raises(ValueError):
        assign_replicas([1, 1], 1, 1)


# --- the local store: creating -----------------------------------------------------------


def test_local_store_is_a_metadata_store(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    assert isinstance(store, MetadataStore)
    assert store.brokers() == [BROKER]
    assert store.topics() == [] and store.get("t") is None
    assert stored_topics(store) == []  # opening writes the file (for the cluster id)


async def test_create_topic(tmp_path: Path) -> None:
    store = open_store(tmp_path, validate_configs=reject_bad)
    topic = await store.create_topic("orders", 3, 1, configs={"cleanup.policy": "compact"})
    assert topic.name == "orders"
    assert topic.partitions == {0: (0,), 1: (0,), 2: (0,)}
    assert topic.replicas == [(0,), (0,), (0,)]
    assert (topic.num_partitions, topic.replication_factor) == (3, 1)
    assert dict(topic.configs) == {"cleanup.policy": "compact"}
    assert topic.topic_id not in (ZERO_UUID, METADATA_TOPIC_ID)
    assert store.get("orders") == topic
    assert store.get_by_id(topic.topic_id) == topic
    assert store.get_by_id(uuid.uuid4()) is None
    assert store.path == tmp_path / "data" / METADATA_FILE


async def test_topics_are_sorted_and_ids_distinct(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for name in ["b", "a", "c-1", "__consumer_offsets"]:
        await store.create_topic(name, 1, 1)
    assert [t.name for t in store.topics()] == ["__consumer_offsets", "a", "b", "c-1"]
    assert len({t.topic_id for t in store.topics()}) == 4


async def test_minus_one_takes_the_broker_defaults(tmp_path: Path) -> None:
    store = open_store(tmp_path, default_num_partitions=4, default_replication_factor=1)
    assert (await store.create_topic("t", -1, -1)).replicas == [(0,)] * 4
    store.default_replication_factor = 2
    with pytest.raises(InvalidReplicationFactorError):
        await store.create_topic("u", -1, -1)


async def test_existing_topic(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    await store.create_topic("t", 1, 1)
    with pytest.raises(TopicExistsError, match="Topic 't' already exists.") as err:
        await store.create_topic("t", 2, 1)
    assert err.value.error_code == 36
    assert store.get("t").num_partitions == 1  # type: ignore[union-attr]


async def test_names_colliding_in_metrics_are_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    await store.create_topic("a.b", 1, 1)
    with pytest.raises(InvalidTopicError, match="collides with existing topic: a.b"):
        await store.create_topic("a_b", 1, 1)


@pytest.mark.parametrize(("name", "partitions", "rf", "error", "message"), [
    ("", 1, 1, InvalidTopicError, "empty"),
    ("bad name", 1, 1, InvalidTopicError, "illegal"),
    ("t", 0, 1, InvalidPartitionsError, "non-positive"),
    ("t", -2, 1, InvalidPartitionsError, "non-positive"),
    ("t", 1 << 31, 1, InvalidPartitionsError, "too large"),
    ("t", 1, 0, InvalidReplicationFactorError, "larger than 0, or -1"),
    ("t", 1, -5, InvalidReplicationFactorError, "larger than 0, or -1"),
    ("t", 1, 2, InvalidReplicationFactorError,
     "target replication factor of 2 cannot be reached because only 1 broker"),
])
async def test_create_errors(tmp_path: Path, name: str, partitions: int, rf: int,
                             error: type[Exception], message: str) -> None:
    store = open_store(tmp_path)
    with pytest.raises(error, match=message):
        await store.create_topic(name, partitions, rf)
    assert store.topics() == [] and stored_topics(store) == []


async def test_configs_are_checked_by_the_validator(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []

    def validator(configs: Mapping[str, str]) -> None:
        seen.append(dict(configs))
        reject_bad(configs)

    store = open_store(tmp_path, validate_configs=validator)
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: bad") as err:
        await store.create_topic("t", 1, 1, configs={"bad": "1"})
    assert err.value.error_code == 40
    assert seen == [{"bad": "1"}]
    assert store.get("t") is None


async def test_configs_are_checked_before_partitions(tmp_path: Path) -> None:
    store = open_store(tmp_path, validate_configs=reject_bad)
    with pytest.raises(InvalidConfigError):
        await store.create_topic("t", 0, 1, configs={"bad": "1"})


async def test_with_the_brokers_topic_config_validator(tmp_path: Path) -> None:
    from josefk.server.config.broker import validate_topic_configs

    store = open_store(tmp_path, validate_configs=validate_topic_configs)
    await store.create_topic("t", 1, 1, configs={"retention.ms": "-1"})
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        await store.create_topic("u", 1, 1, configs={"retention.ms": "-2"})


async def test_validate_only_changes_nothing(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    topic = await store.create_topic("t", 2, 1, validate_only=True)
    assert topic.num_partitions == 2
    assert store.get("t") is None and stored_topics(store) == []


# --- manual assignments ------------------------------------------------------------------


class TwoBrokerStore(LocalMetadataStore):
    """The local store pretending a second broker, to exercise multi-broker rules."""

    def brokers(self) -> list[BrokerInfo]:
        return [BROKER, BrokerInfo(1, "127.0.0.1", 9093)]


def two_brokers(tmp_path: Path, **kwargs: Any) -> TwoBrokerStore:
    return TwoBrokerStore(tmp_path, BROKER, **kwargs)


@pytest.mark.parametrize("assignment", [[[1, 0], [0, 1]], {1: [0, 1], 0: [1, 0]}])
async def test_manual_assignment(tmp_path: Path, assignment: Any) -> None:
    topic = await two_brokers(tmp_path).create_topic("t", -1, -1, assignment=assignment)
    assert topic.partitions == {0: (1, 0), 1: (0, 1)}


@pytest.mark.parametrize(("partitions", "rf", "assignment", "error", "message"), [
    (-1, 1, [[0]], InvalidReplicationFactorError, "replication factor was not set to -1"),
    (1, -1, [[0]], InvalidPartitionsError, "numPartitions was not set to -1"),
    (-1, -1, [[0], []], InvalidReplicaAssignmentError, "empty replica list"),
    (-1, -1, [[0, 2]], InvalidReplicaAssignmentError, "broker 2, but no such broker"),
    (-1, -1, [[1, 1]], InvalidReplicaAssignmentError, "broker 1 more than once"),
    (-1, -1, [[0, 1], [1]], InvalidReplicaAssignmentError, "not consistent"),
    (-1, -1, {0: [0], 2: [1]}, InvalidReplicaAssignmentError, "consecutive 0-based"),
])
async def test_bad_manual_assignments(tmp_path: Path, partitions: int, rf: int, assignment: Any,
                                      error: type[Exception], message: str) -> None:
    store = two_brokers(tmp_path)
    with pytest.raises(error, match=message):
        await store.create_topic("t", partitions, rf, assignment=assignment)
    assert store.get("t") is None


async def test_placement_spreads_over_brokers(tmp_path: Path) -> None:
    store = two_brokers(tmp_path, rng=random.Random(1))
    topic = await store.create_topic("t", 4, 2)
    assert {r[0] for r in topic.replicas} == {0, 1}
    assert all(sorted(r) == [0, 1] for r in topic.replicas)


# --- deleting, growing, altering ---------------------------------------------------------


async def test_delete_topic_and_recreate_gets_a_new_id(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    old = await store.create_topic("t", 1, 1)
    assert await store.delete_topic("t") == old
    assert store.get("t") is None and store.get_by_id(old.topic_id) is None
    with pytest.raises(UnknownTopicError) as err:
        await store.delete_topic("t")
    assert err.value.error_code == 3
    new = await store.create_topic("t", 1, 1)
    assert new.topic_id != old.topic_id
    assert open_store(tmp_path).get("t") == new


async def test_create_partitions(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    topic = await store.create_topic("t", 2, 1, configs={"x": "y"})
    grown = await store.create_partitions("t", 5)
    assert grown.replicas == [(0,)] * 5
    assert (grown.topic_id, grown.configs) == (topic.topic_id, topic.configs)
    assert store.get("t") == grown and open_store(tmp_path).get("t") == grown
    assert (await store.create_partitions("t", 6, [[0]])).num_partitions == 6


@pytest.mark.parametrize(("total", "assignment", "error", "message"), [
    (2, None, InvalidPartitionsError, "already has 2 partition"),
    (1, None, InvalidPartitionsError, "would not be an increase"),
    (1 << 31, None, InvalidPartitionsError, "too large"),
    (4, [[0]], InvalidReplicaAssignmentError, "add 2 additional partition.*only 1"),
    (3, [[5]], InvalidReplicaAssignmentError, "no such broker"),
    (3, [[0, 0]], InvalidReplicaAssignmentError, "more than once"),
])
async def test_create_partitions_errors(tmp_path: Path, total: int, assignment: Any,
                                        error: type[Exception], message: str) -> None:
    store = open_store(tmp_path)
    await store.create_topic("t", 2, 1)
    with pytest.raises(error, match=message):
        await store.create_partitions("t", total, assignment)
    assert store.get("t").num_partitions == 2  # type: ignore[union-attr]
    with pytest.raises(UnknownTopicError):
        await store.create_partitions("nope", 3)


async def test_create_partitions_keeps_the_replication_factor(tmp_path: Path) -> None:
    store = two_brokers(tmp_path)
    await store.create_topic("t", -1, -1, assignment=[[1, 0]])
    grown = await store.create_partitions("t", 3)
    # Kafka's addPartitions starts at partition 0's first replica (broker 1).
    assert grown.replicas == [(1, 0), (0, 1), (1, 0)]
    with pytest.raises(InvalidReplicaAssignmentError, match="not consistent"):
        await store.create_partitions("t", 4, [[0]])
    assert (await store.create_partitions("t", 4, validate_only=True)).num_partitions == 4
    assert store.get("t") == grown


async def test_alter_topic_configs(tmp_path: Path) -> None:
    store = open_store(tmp_path, validate_configs=reject_bad)
    await store.create_topic("t", 1, 1, configs={"a": "1", "b": "2"})
    altered = await store.alter_topic_configs("t", set={"a": "10", "c": "3"}, delete=["b", "zz"])
    assert dict(altered.configs) == {"a": "10", "c": "3"}
    assert dict(open_store(tmp_path).get("t").configs) == {"a": "10", "c": "3"}  # type: ignore
    with pytest.raises(InvalidConfigError):
        await store.alter_topic_configs("t", set={"bad": "x"})
    preview = await store.alter_topic_configs("t", delete=["a"], validate_only=True)
    assert dict(preview.configs) == {"c": "3"}
    assert store.get("t") == altered
    with pytest.raises(UnknownTopicError):
        await store.alter_topic_configs("nope", set={"a": "1"})


async def test_topics_are_immutable_snapshots(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    topic = await store.create_topic("t", 1, 1, configs={"a": "1"})
    with pytest.raises(TypeError):
        topic.configs["a"] = "2"  # type: ignore[index]
    with pytest.raises(TypeError):
        topic.partitions[0] = (1,)  # type: ignore[index]
    await store.alter_topic_configs("t", set={"a": "2"})
    assert topic.configs["a"] == "1"
    assert hash(topic) == hash(store.get("t"))


# --- ids ---------------------------------------------------------------------------------


async def test_topic_ids_skip_reserved_dash_prefixed_and_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path)
    taken = (await store.create_topic("t", 1, 1)).topic_id
    dash = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))
    good = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c8")
    queue = [ZERO_UUID, METADATA_TOPIC_ID, dash, taken, good]
    monkeypatch.setattr(uuid, "uuid4", lambda: queue.pop(0))
    assert (await store.create_topic("u", 1, 1)).topic_id == good
    assert queue == []


# --- persistence -------------------------------------------------------------------------


async def test_state_survives_reopening(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    await store.create_topic("b", 2, 1, configs={"retention.ms": "1"})
    await store.create_topic("a", 1, 1)
    again = open_store(tmp_path)
    assert again.topics() == store.topics()
    for t in store.topics():
        assert again.get_by_id(t.topic_id) == t


async def test_every_change_survives_reopening(tmp_path: Path) -> None:
    """The file re-encodes only changed topics: each kind of change must still land."""
    store = open_store(tmp_path)
    for name in "abcd":
        await store.create_topic(name, 2, 1)
    await store.alter_topic_configs("a", {"retention.ms": "5"})
    await store.create_partitions("b", 4)
    await store.delete_topic("c")
    await store.create_topic("e", 1, 1)
    await store.delete_topic("d")
    await store.create_topic("d", 3, 1)
    again = open_store(tmp_path)
    assert again.topics() == store.topics()
    assert [(t.name, t.num_partitions) for t in again.topics()] == [
        ("a", 2), ("b", 4), ("d", 3), ("e", 1)]
    assert again.get("a").configs == {"retention.ms": "5"}


async def test_file_format(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    topic = await store.create_topic("t", 2, 1, configs={"z": "1", "a": "2"})
    doc = json.loads(store.path.read_text())
    assert doc == {"version": 1, "cluster_id": store.cluster_id, "topics": [{
        "name": "t", "topic_id": kafka_uuid_str(topic.topic_id), "partitions": [[0], [0]],
        "configs": {"a": "2", "z": "1"}}]}
    assert sorted(p.name for p in store.path.parent.iterdir()) == [METADATA_FILE]


def test_metadata_file_is_never_a_partition_directory() -> None:
    assert parse_partition_dir(METADATA_FILE) is None
    assert parse_partition_dir(METADATA_FILE + ".tmp") is None


GOOD_ENTRY = ('{"name": "t", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": [[0]],'
              ' "configs": {}}')


@pytest.mark.parametrize("content", [
    "", "{", "[]", '{"version": 2, "cluster_id": "c", "topics": []}',
    '{"version": 1, "cluster_id": "c"}', '{"version": 1, "topics": []}',
    '{"version": 1, "cluster_id": "", "topics": []}',
    '{"version": 1, "cluster_id": 5, "topics": []}',
    '{"version": 1, "cluster_id": "c", "topics": [{"name": "t"}]}',
    '{"version": 1, "cluster_id": "c", "topics": [' + GOOD_ENTRY.replace('"AAAA', '"x') + ']}',
    '{"version": 1, "cluster_id": "c", "topics": [' + GOOD_ENTRY.replace("[[0]]", "[]") + ']}',
    '{"version": 1, "cluster_id": "c", "topics": [' + GOOD_ENTRY.replace("[[0]]", '[["a"]]')
    + ']}',
    '{"version": 1, "cluster_id": "c", "topics": [' + GOOD_ENTRY + ', ' + GOOD_ENTRY + ']}',
])
def test_corrupt_file_is_an_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / METADATA_FILE).write_text(content)
    with pytest.raises(MetadataCorruptError):
        open_store(tmp_path)


def test_a_good_entry_loads(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / METADATA_FILE).write_text(
        '{"version": 1, "cluster_id": "c", "topics": [' + GOOD_ENTRY + ']}')
    store = open_store(tmp_path)
    assert store.cluster_id == "c"
    assert store.get("t") == Topic.of("t", METADATA_TOPIC_ID, [[0]])


def test_cluster_id_is_created_once_and_kept(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    assert len(store.cluster_id) == 22
    assert open_store(tmp_path).cluster_id == store.cluster_id
    assert open_store(tmp_path, cluster_id=store.cluster_id).cluster_id == store.cluster_id
    with pytest.raises(InconsistentClusterIdError, match="doesn't match"):
        open_store(tmp_path, cluster_id="another")
    assert open_store(tmp_path / "x").cluster_id != store.cluster_id


def test_configured_cluster_id_is_used_for_a_new_store(tmp_path: Path) -> None:
    assert open_store(tmp_path, cluster_id="MkU3OEVBNTcwNTJENDM2Qk").cluster_id == (
        "MkU3OEVBNTcwNTJENDM2Qk")
    assert open_store(tmp_path).cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"


async def test_failed_write_changes_nothing(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path)
    await store.create_topic("t", 1, 1)

    def fail(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(md, "write_atomic", fail)
    with pytest.raises(OSError):
        await store.create_topic("u", 1, 1)
    with pytest.raises(OSError):
        await store.delete_topic("t")
    assert [t.name for t in store.topics()] == ["t"]
    assert [t.name for t in open_store(tmp_path).topics()] == ["t"]


# --- a random workload against a plain model ---------------------------------------------

names = st.sampled_from(["a", "b", "c.d", "c_d", "e-1"])
ops = st.lists(st.one_of(
    st.tuples(st.just("create"), names, st.integers(-1, 4)),
    st.tuples(st.just("delete"), names, st.just(0)),
    st.tuples(st.just("grow"), names, st.integers(0, 6)),
    st.tuples(st.just("alter"), names, st.integers(0, 3)),
), max_size=25)


def _refused(model: dict[str, tuple[int, dict[str, str]]], op: str, name: str, n: int) -> bool:
    if op == "create":
        return name in model or n == 0 or any(
            md.unify_collision_chars(o) == md.unify_collision_chars(name) for o in model)
    if op == "grow":
        return name not in model or n <= model[name][0]
    return name not in model


@settings(max_examples=60, deadline=None)
@given(ops)
def test_store_behaves_like_a_dict_of_topics(tmp_path_factory: pytest.TempPathFactory,
                                             operations: list[tuple[str, str, int]]) -> None:
    log_dir = tmp_path_factory.mktemp("store")
    store = LocalMetadataStore(log_dir, BROKER, default_num_partitions=2)
    model: dict[str, tuple[int, dict[str, str]]] = {}

    async def run() -> None:  # hypothesis can't drive an async test itself
        for op, name, n in operations:
            refused = _refused(model, op, name, n)
            try:
                if op == "create":
                    await store.create_topic(name, n, 1, configs={"n": str(n)})
                    model[name] = (2 if n == -1 else n, {"n": str(n)})
                elif op == "delete":
                    await store.delete_topic(name)
                    del model[name]
                elif op == "grow":
                    await store.create_partitions(name, n)
                    model[name] = (n, model[name][1])
                else:
                    await store.alter_topic_configs(name, set={"k": str(n)}, delete=["n"])
                    model[name] = (model[name][0], {"k": str(n)})
                assert not refused, (op, name, n)
            except ClusterError as e:
                assert refused, (op, name, n, e)

    trio.run(run)
    for s in (store, LocalMetadataStore(log_dir, BROKER)):
        assert {t.name: (t.num_partitions, dict(t.configs)) for t in s.topics()} == model
        assert all(isinstance(t, Topic) and t.replicas == [(0,)] * t.num_partitions
                   for t in s.topics())
        assert s.cluster_id == store.cluster_id


async def test_concurrent_changes_to_the_local_store_are_all_kept(tmp_path: Path) -> None:
    """Each change is written in a worker thread; changes made meanwhile wait their turn,
    so none is planned from a state another is replacing."""
    store = LocalMetadataStore(tmp_path, BrokerInfo(0, "127.0.0.1", 9092))
    async with trio.open_nursery() as nursery:
        for i in range(30):
            nursery.start_soon(store.create_topic, f"t{i}", 1, 1)
    names = {f"t{i}" for i in range(30)}
    assert {t.name for t in store.topics()} == names
    reopened = LocalMetadataStore(tmp_path, BrokerInfo(0, "127.0.0.1", 9092))
    assert {t.name for t in reopened.topics()} == names
