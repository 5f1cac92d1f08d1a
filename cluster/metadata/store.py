"""Cluster metadata: which topics exist, their ids, replica assignments and config overrides.

`MetadataStore` is the interface the broker codes against; `LocalMetadataStore` is
the single-broker implementation that keeps everything (and the cluster id) in one
JSON file in the first log dir; ``josefk.cluster.metadata.zk_store.ZkMetadataStore`` is the
cluster implementation over Kafka's znodes.

Errors (`josefk.cluster.metadata.errors`) mirror what Kafka's controller answers, each
carrying the Kafka error code; replicas are placed as Kafka does
(`josefk.cluster.metadata.placement`).
"""

from __future__ import annotations

import json
import random
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import trio

from josefk.cluster.metadata.errors import (
    MAX_PARTITIONS_PER_BATCH,
    InconsistentClusterIdError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    ManualPartitionCountError,
    ManualReplicationFactorError,
    MetadataCorruptError,
    NonConsecutivePartitionsError,
    PartitionBatchOverflowError,
    TooManyPartitionsError,
    TopicExistsError,
    UnknownTopicError,
)
from josefk.cluster.metadata.placement import Rng, assign_replicas
from josefk.log.checkpoint import write_atomic
from josefk.log.partition_metadata import kafka_uuid_str, parse_kafka_uuid, random_kafka_uuid

METADATA_FILE = "__josefk_metadata.json"
METADATA_FILE_VERSION = 1
MAX_TOPIC_NAME_LENGTH = 249
#: Kafka's ``Topic.INTERNAL_TOPICS``: the coordinators' own; clients may not produce to them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
INT32_MAX = (1 << 31) - 1
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")

ConfigValidator = Callable[[Mapping[str, str]], None]
"""Checks a topic's complete set of config overrides; raises ValueError if invalid."""


# --- model -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class Topic:
    """A topic: ``partitions[p]`` lists partition p's replica broker ids, preferred leader
    first, for p = 0, 1, ...; ``configs`` are its topic-config overrides. Immutable."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, tuple[int, ...]]
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, name: str, topic_id: uuid.UUID, replicas: Iterable[Iterable[int]],
           configs: Mapping[str, str] | None = None) -> Topic:
        """A topic whose partition p has the p-th replica list."""
        return cls(name, topic_id,
                   MappingProxyType({p: tuple(r) for p, r in enumerate(replicas)}),
                   MappingProxyType(dict(configs or {})))

    def __hash__(self) -> int:
        return hash((self.name, self.topic_id))

    @property
    def replicas(self) -> list[tuple[int, ...]]:
        """The replica lists in partition order."""
        return [self.partitions[p] for p in range(len(self.partitions))]

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0]) if self.partitions else 0


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``; InvalidTopicError if ``name`` is not a legal topic name."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than "
                                f"{MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(f'Topic name "{name}" is illegal, it contains a character other '
                                "than ASCII alphanumerics, '.', '_' and '-'")


def unify_collision_chars(name: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: names equal under this collide in metric names."""
    return name.replace(".", "_")


# --- the interface -----------------------------------------------------------------------


class MetadataStore(ABC):
    """Where the cluster's topics live. Reads answer from memory; changes are async
    (in a cluster they go through ZooKeeper), raise a `ClusterError` subclass when
    refused and are durable when they return."""

    @property
    @abstractmethod
    def cluster_id(self) -> str:
        """The cluster id (Kafka's 22-character form), stable across restarts."""

    @abstractmethod
    def brokers(self, listener: str | None = None) -> list[BrokerInfo]:
        """The live brokers, by node id, with their endpoints on ``listener`` (the one a
        request came in on; None: the broker's own inter-broker listener)."""

    @abstractmethod
    def topics(self) -> list[Topic]:
        """Every topic, sorted by name."""

    @abstractmethod
    def get(self, name: str) -> Topic | None: ...

    @abstractmethod
    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None: ...

    def topic_configs(self, name: str) -> Mapping[str, str]:
        """A topic's config overrides (empty for an unknown topic)."""
        topic = self.get(name)
        return topic.configs if topic is not None else {}

    @abstractmethod
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: Sequence[Sequence[int]] | Mapping[int, Sequence[int]]
                           | None = None,
                           configs: Mapping[str, str] | None = None,
                           validate_only: bool = False) -> Topic:
        """CreateTopics for one topic. ``num_partitions`` / ``replication_factor`` of -1
        take the store's defaults; with a manual ``assignment`` (replica lists by
        partition) both must be -1. ``validate_only`` checks everything, changes nothing
        and returns the topic that would have been created."""

    @abstractmethod
    async def delete_topic(self, name: str) -> Topic:
        """Remove a topic; returns what it was. UnknownTopicError if there is none."""

    @abstractmethod
    async def create_partitions(self, name: str, new_total: int,
                                assignment: Sequence[Sequence[int]] | None = None,
                                validate_only: bool = False) -> Topic:
        """Grow a topic to ``new_total`` partitions; ``assignment`` lists the replicas of
        the new partitions only."""

    @abstractmethod
    async def alter_topic_configs(self, name: str, set: Mapping[str, str] | None = None,
                                  delete: Iterable[str] = (),
                                  validate_only: bool = False) -> Topic:
        """Set and remove config overrides (IncrementalAlterConfigs); the resulting
        overrides are validated as a whole."""


# --- planning changes, shared by both stores ---------------------------------------------


class PlanningStore(MetadataStore):
    """Validation and replica placement common to every store: each ``plan_*`` returns
    the topic a change would produce, or raises the ClusterError Kafka answers with.
    Subclasses supply the live brokers and commit the plans their own way."""

    def __init__(self, *, validate_configs: ConfigValidator | None = None,
                 default_num_partitions: int = 1, default_replication_factor: int = 1,
                 rng: Rng = random) -> None:
        self.validate_configs = validate_configs
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.rng = rng

    def plan_create(self, name: str, num_partitions: int, replication_factor: int,
                    assignment: Sequence[Sequence[int]] | Mapping[int, Sequence[int]] | None,
                    configs: Mapping[str, str] | None, topic_id: uuid.UUID) -> Topic:
        validate_topic_name(name)
        if self.get(name) is not None:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        unified = unify_collision_chars(name)
        for other in self.topics():
            if unify_collision_chars(other.name) == unified:
                raise InvalidTopicError(
                    f"Topic '{name}' collides with existing topic: {other.name}")
        configs = dict(configs or {})
        self._check_configs(configs)
        if assignment is not None and len(assignment) > 0:
            replicas = self._manual_assignment(assignment, num_partitions, replication_factor)
        else:
            replicas = self._placed(num_partitions, replication_factor)
        return Topic.of(name, topic_id, replicas, configs)

    def plan_create_partitions(self, name: str, new_total: int,
                               assignment: Sequence[Sequence[int]] | None) -> Topic:
        topic = self._existing(name)
        current = topic.num_partitions
        if new_total == current:
            raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
        if new_total < current:
            raise InvalidPartitionsError(f"The topic {name} currently has {current} partition(s); "
                                         f"{new_total} would not be an increase.")
        if new_total > INT32_MAX:
            raise InvalidPartitionsError(f"Number of partitions {new_total} is too large.")
        added = new_total - current
        rf = topic.replication_factor
        if assignment is not None:
            if len(assignment) != added:
                raise InvalidReplicaAssignmentError(
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(assignment)} assignment(s) were specified.")
            new = tuple(self._checked_replicas(r, rf) for r in assignment)
            if added > MAX_PARTITIONS_PER_BATCH:
                raise PartitionBatchOverflowError(added)
        else:
            # As Kafka's addPartitions: start at partition 0's first replica (or the next id)
            # in the brokers sorted by id, even when placing over the rack-alternated list.
            brokers = sorted(self.brokers(), key=lambda b: b.node_id)
            _check_replication_factor(brokers, rf)
            if added > MAX_PARTITIONS_PER_BATCH:  # before placing a single one
                raise PartitionBatchOverflowError(added)
            first = topic.replicas[0][0]
            start = next((i for i, b in enumerate(brokers) if b.node_id >= first), 0)
            new = tuple(tuple(r) for r in _place(brokers, added, rf, start, self.rng,
                                                 start_partition_id=current))
        return Topic.of(topic.name, topic.topic_id, topic.replicas + list(new), topic.configs)

    def plan_alter_configs(self, name: str, set: Mapping[str, str] | None,
                           delete: Iterable[str]) -> Topic:
        topic = self._existing(name)
        configs = {**topic.configs, **(set or {})}
        for key in delete:
            configs.pop(key, None)
        self._check_configs(configs)
        return Topic(topic.name, topic.topic_id, topic.partitions, MappingProxyType(configs))

    def _existing(self, name: str) -> Topic:
        topic = self.get(name)
        if topic is None:
            raise UnknownTopicError(f"Unable to locate the topic {name}")
        return topic

    def _broker_ids(self) -> list[int]:
        return sorted(b.node_id for b in self.brokers())

    def _check_configs(self, configs: Mapping[str, str]) -> None:
        if self.validate_configs is None:
            return
        try:
            self.validate_configs(configs)
        except ValueError as e:
            raise InvalidConfigError(str(e)) from e

    def _placed(self, num_partitions: int, replication_factor: int) -> tuple[tuple[int, ...], ...]:
        if replication_factor < -1 or replication_factor == 0:
            raise InvalidReplicationFactorError(
                "Replication factor must be larger than 0, or -1 to use the default value.")
        if num_partitions < -1 or num_partitions == 0:
            raise InvalidPartitionsError(
                "Number of partitions was set to an invalid non-positive value.")
        if num_partitions > INT32_MAX:
            raise InvalidPartitionsError(f"Number of partitions {num_partitions} is too large.")
        partitions = self.default_num_partitions if num_partitions == -1 else num_partitions
        if partitions > MAX_PARTITIONS_PER_BATCH:  # before placing a single one
            raise TooManyPartitionsError()
        rf = self.default_replication_factor if replication_factor == -1 else replication_factor
        return tuple(tuple(r) for r in _place(self.brokers(), partitions, rf, None, self.rng))

    def _manual_assignment(self, assignment: Sequence[Sequence[int]] | Mapping[int, Sequence[int]],
                           num_partitions: int, replication_factor: int
                           ) -> tuple[tuple[int, ...], ...]:
        """Kafka's controller on a manual assignment: the replica lists are checked in
        the order given (a Mapping's order: the request's), then that the partitions are
        0, 1, ...; returns the lists by partition."""
        if replication_factor != -1:
            raise ManualReplicationFactorError("A manual partition assignment was specified, "
                                               "but replication factor was not set to -1.")
        if num_partitions != -1:
            raise ManualPartitionCountError("A manual partition assignment was specified, "
                                            "but numPartitions was not set to -1.")
        if len(assignment) > MAX_PARTITIONS_PER_BATCH:
            raise TooManyPartitionsError()
        by_partition = dict(assignment.items() if isinstance(assignment, Mapping)
                            else enumerate(assignment))
        rf: int | None = None
        for replicas in by_partition.values():
            self._checked_replicas(replicas, rf)
            rf = len(replicas)
        if sorted(by_partition) != list(range(len(by_partition))):
            raise NonConsecutivePartitionsError(
                "partitions should be a consecutive 0-based integer sequence")
        return tuple(tuple(by_partition[p]) for p in range(len(by_partition)))

    def _checked_replicas(self, replicas: Sequence[int], rf: int | None) -> tuple[int, ...]:
        """Kafka's ``validateManualPartitionAssignment``."""
        if not replicas:
            raise InvalidReplicaAssignmentError(
                "The manual partition assignment includes an empty replica list.")
        live = set(self._broker_ids())
        seen: set[int] = set()
        for broker in sorted(replicas):
            if broker not in live:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes broker {broker}, but no such "
                    "broker is registered.")
            if broker in seen:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes the broker {broker} more than "
                    "once.")
            seen.add(broker)
        if rf is not None and len(replicas) != rf:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes a partition with {len(replicas)} "
                f"replica(s), but this is not consistent with previous partitions, which have "
                f"{rf} replica(s).")
        return tuple(replicas)

    def new_topic_id(self) -> uuid.UUID:
        while True:
            topic_id = random_kafka_uuid()
            if self.get_by_id(topic_id) is None:
                return topic_id


# --- the local implementation ------------------------------------------------------------


class LocalMetadataStore(PlanningStore):
    """One broker's metadata, persisted in ``<log_dir>/__josefk_metadata.json``.

    The file name has no ``-<partition>`` suffix, so it is never a partition directory.
    Opening creates ``log_dir`` and the file (with a new random cluster id, unless
    ``cluster_id`` is given); an existing file must hold the same ``cluster_id`` if one is
    given. Every change is written (atomically) before it becomes visible, in a worker
    thread (its fsyncs would stall every connection), one change at a time. ``broker``
    is what `brokers` reports; assign a new BrokerInfo once the listener's port is known.
    """

    def __init__(self, log_dir: Path, broker: BrokerInfo, *,
                 validate_configs: ConfigValidator | None = None,
                 cluster_id: str | None = None,
                 default_num_partitions: int = 1, default_replication_factor: int = 1,
                 rng: Rng = random) -> None:
        super().__init__(validate_configs=validate_configs,
                         default_num_partitions=default_num_partitions,
                         default_replication_factor=default_replication_factor, rng=rng)
        self.path = Path(log_dir) / METADATA_FILE
        self.broker = broker
        # Its endpoint on each listener (Metadata names the one a request came in on).
        self.endpoints: dict[str, BrokerInfo] = {}
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._lines: dict[str, tuple[Topic, str]] = {}
        self._changing = trio.Lock()
        loaded = _load(self.path)
        if loaded is None:
            self._cluster_id = cluster_id or kafka_uuid_str(random_kafka_uuid())
            self._write({})
            self._show({})
            return
        stored_id, topics = loaded
        if cluster_id is not None and cluster_id != stored_id:
            raise InconsistentClusterIdError(
                f"The cluster id {cluster_id} doesn't match the stored one ({stored_id}) "
                f"in {self.path}")
        self._cluster_id = stored_id
        self._topics = topics
        self._by_id = {t.topic_id: t for t in topics.values()}

    # reads

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def brokers(self, listener: str | None = None) -> list[BrokerInfo]:
        return [self.endpoints.get(listener, self.broker) if listener else self.broker]

    def topics(self) -> list[Topic]:
        return [self._topics[name] for name in sorted(self._topics)]

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    # changes

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: Sequence[Sequence[int]] | Mapping[int, Sequence[int]]
                           | None = None,
                           configs: Mapping[str, str] | None = None,
                           validate_only: bool = False) -> Topic:
        async with self._changing:
            topic = self.plan_create(name, num_partitions, replication_factor, assignment,
                                     configs, self.new_topic_id())
            if not validate_only:
                await self._commit({**self._topics, name: topic})
            return topic

    async def delete_topic(self, name: str) -> Topic:
        async with self._changing:
            topic = self._existing(name)
            await self._commit({n: t for n, t in self._topics.items() if n != name})
            return topic

    async def create_partitions(self, name: str, new_total: int,
                                assignment: Sequence[Sequence[int]] | None = None,
                                validate_only: bool = False) -> Topic:
        async with self._changing:
            grown = self.plan_create_partitions(name, new_total, assignment)
            if not validate_only:
                await self._commit({**self._topics, name: grown})
            return grown

    async def alter_topic_configs(self, name: str, set: Mapping[str, str] | None = None,
                                  delete: Iterable[str] = (),
                                  validate_only: bool = False) -> Topic:
        async with self._changing:
            altered = self.plan_alter_configs(name, set, delete)
            if not validate_only:
                await self._commit({**self._topics, name: altered})
            return altered

    async def _commit(self, topics: dict[str, Topic]) -> None:
        """Write ``topics`` (under `_changing`), then make them the store's."""
        await trio.to_thread.run_sync(self._write, topics)
        self._show(topics)

    def _write(self, topics: dict[str, Topic]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, _dump(self._cluster_id, topics, self._lines))

    def _show(self, topics: dict[str, Topic]) -> None:
        self._topics = topics
        self._by_id = {t.topic_id: t for t in topics.values()}


def _place(brokers: Sequence[BrokerInfo], num_partitions: int, replication_factor: int,
           start_index: int | None, rng: Rng, *, start_partition_id: int = 0) -> list[list[int]]:
    """assign_replicas over ``brokers`` and their racks, with Kafka's controller wording
    for too few brokers."""
    _check_replication_factor(brokers, replication_factor)
    return assign_replicas([b.node_id for b in brokers], num_partitions, replication_factor,
                           start_index, rng, start_partition_id=start_partition_id,
                           racks={b.node_id: b.rack for b in brokers})


def _dump(cluster_id: str, topics: Mapping[str, Topic],
          cache: dict[str, tuple[Topic, str]] | None = None) -> bytes:
    """The file's bytes: a JSON document with one topic per line. ``cache`` keeps each
    topic's line (topics are immutable), so a change re-encodes only the topics it
    touched, not every partition of every topic."""
    cache = {} if cache is None else cache
    lines = []
    for name in sorted(topics):
        topic = topics[name]
        cached = cache.get(name)
        if cached is None or cached[0] is not topic:
            cached = cache[name] = (topic, _topic_json(topic))
        lines.append(cached[1])
    for name in [n for n in cache if n not in topics]:
        del cache[name]
    head = json.dumps({"version": METADATA_FILE_VERSION, "cluster_id": cluster_id})[:-1]
    return (head + ', "topics": [\n' + ",\n".join(lines) + "\n]}\n").encode()


def _topic_json(t: Topic) -> str:
    return json.dumps({"name": t.name, "topic_id": kafka_uuid_str(t.topic_id),
                       "partitions": [list(r) for r in t.replicas],
                       "configs": dict(sorted(t.configs.items()))})


def _load(path: Path) -> tuple[str, dict[str, Topic]] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(data)
        if doc["version"] != METADATA_FILE_VERSION:
            raise ValueError(f"unknown version {doc['version']!r}")
        topics = {}
        for entry in doc["topics"]:
            name = entry["name"]
            replicas = tuple(tuple(int(b) for b in r) for r in entry["partitions"])
            configs = {str(k): str(v) for k, v in entry["configs"].items()}
            if not isinstance(name, str) or name in topics or not replicas:
                raise ValueError(f"bad topic entry {entry!r}")
            topics[name] = Topic.of(name, parse_kafka_uuid(entry["topic_id"]), replicas, configs)
        cluster_id = doc["cluster_id"]
        if not isinstance(cluster_id, str) or not cluster_id:
            raise ValueError(f"bad cluster id {cluster_id!r}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise MetadataCorruptError(f"{path}: {e}") from e
    return cluster_id, topics


def _check_replication_factor(brokers: Sequence[BrokerInfo], replication_factor: int) -> None:
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered.")
