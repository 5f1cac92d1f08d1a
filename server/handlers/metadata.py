"""Metadata: brokers, controller, topics and their partitions' leaders.

Each topic's part of the response is encoded once per api version and kept in a
`TopicBytesCache` until something it depends on changes: the topic itself (its id,
partitions, replicas), the set of live brokers, or the broker's metadata generation
(`metadata_generation`: in a cluster, every UpdateMetadata; on a single broker, every
partition opened or closed). A full Metadata response is then a join of cached bytes.
"""

from __future__ import annotations

import struct
import uuid
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka.protocol.api_key import ApiKey

from josefk.cluster.coordinator.records import OFFSETS_TOPIC
from josefk.cluster.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from josefk.cluster.metadata.errors import ClusterError
from josefk.cluster.metadata.store import INTERNAL_TOPICS, Topic
from josefk.cluster.security.acls import AclOperation, ResourceType
from josefk.protocol import metadata_response as wire
from josefk.protocol.error_codes import (
    LEADER_NOT_AVAILABLE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.security.checks import (
    bit_field,
    cluster_operations,
    creatable_topics,
    topic_operations,
)

if TYPE_CHECKING:
    from josefk.server.broker import Broker

ZERO_UUID = uuid.UUID(int=0)

# What a topic's encoded bytes depend on besides the topic: (generation, live broker ids).
_Key = tuple[int, frozenset[int]]


@dataclass(slots=True)
class _Entry:
    topic: Topic
    key: _Key
    data: bytes


class TopicBytesCache:
    """Encoded MetadataResponseTopic bytes per api version and topic name."""

    def __init__(self) -> None:
        self._by_version: dict[int, dict[str, _Entry]] = {}

    def get(self, version: int, topic: Topic, key: _Key) -> bytes | None:
        entry = self._by_version.get(version, {}).get(topic.name)
        if entry is None or entry.key != key:
            return None
        # Topics are immutable: a store that hands out the same object has not changed it.
        if entry.topic is not topic and entry.topic != topic:
            return None
        return entry.data

    def put(self, version: int, topic: Topic, key: _Key, data: bytes) -> None:
        self._by_version.setdefault(version, {})[topic.name] = _Entry(topic, key, data)

    def forget(self, name: str) -> None:
        for entries in self._by_version.values():
            entries.pop(name, None)

    def keep_only(self, version: int, names: Iterable[str]) -> None:
        """Drop the entries of ``version`` for topics not in ``names`` (deleted ones)."""
        entries = self._by_version.get(version, {})
        self._by_version[version] = {n: e for n in names if (e := entries.get(n)) is not None}


_caches: weakref.WeakKeyDictionary[Broker, TopicBytesCache] = weakref.WeakKeyDictionary()


def topic_cache(broker: Broker) -> TopicBytesCache:
    cache = _caches.get(broker)
    if cache is None:
        cache = _caches[broker] = TopicBytesCache()
    return cache


def metadata_generation(broker: Broker) -> int:
    """Changes whenever any partition's leader, epoch, replicas or ISR as reported by
    `Broker.partition_view` may have changed."""
    if broker.cluster is not None:
        return broker.cluster.cache.generation
    return broker.partitions.generation


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    allow_create = body.allow_auto_topic_creation if version >= 4 else True
    cache = topic_cache(broker)
    authorizer = broker.authorizer
    with_operations = version >= 8 and body.include_topic_authorized_operations
    refused: list[bytes] = []  # Kafka answers the topics the client may not see last
    # As Kafka's isAllTopics: null, or (v0 only) an empty list.
    if body.topics is None or (version == 0 and not body.topics):
        topics = sorted(broker.store.topics(), key=lambda t: t.name)
        key = _key(broker)
        shown = topics if not authorizer.enabled else [
            t for t in topics
            if authorizer.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name,
                                  log_denial=False)]
        encoded = [_encoded(broker, cache, version, t, key) for t in shown]
        if with_operations:
            encoded = [_with_operations(broker, version, t.name, data)
                       for t, data in zip(shown, encoded, strict=True)]
        cache.keep_only(version, (t.name for t in topics))
    else:
        # Each topic once, however often named (Kafka takes the request's topics as a set).
        asked = dict.fromkeys((t.name, getattr(t, "topic_id", None)) for t in body.topics)
        encoded = []
        for name, topic_id in asked:
            denial = _denial(broker, version, name, topic_id, allow_create)
            if denial is not None:
                refused.append(denial)
                continue
            data = await _requested(broker, cache, version, name, topic_id, allow_create)
            if with_operations:
                by_id = broker.store.get_by_id(topic_id) if not name and topic_id else None
                data = _with_operations(broker, version, by_id.name if by_id else name, data)
            encoded.append(data)
    brokers = [wire.BrokerEntry(b.node_id, b.host, b.port, b.rack)
               for b in broker.live_brokers()]
    frame = wire.encode_response(version, request.correlation_id, brokers, broker.cluster_id,
                                 broker.controller_id, encoded + refused)
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        frame = _set_last_int32(frame, version,
                                bit_field(cluster_operations(broker.authorizer)))
    return [frame]


def _denial(broker: Broker, version: int, name: str | None, topic_id: uuid.UUID | None,
            allow_create: bool) -> bytes | None:
    """The TOPIC_AUTHORIZATION_FAILED entry Kafka answers for a topic the client may not
    DESCRIBE (by id: its id, no name; by name: neither) or may not auto-create."""
    authorizer = broker.authorizer
    if not authorizer.enabled:
        return None
    if not name and topic_id is not None and topic_id != ZERO_UUID:
        topic = broker.store.get_by_id(topic_id)
        if topic is None or authorizer.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                               topic.name):
            return None
        return wire.encode_topic(version, TOPIC_AUTHORIZATION_FAILED, None, topic_id, False, [])
    name = name or ""
    if not authorizer.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _error(version, TOPIC_AUTHORIZATION_FAILED, name)
    if (broker.store.get(name) is None and allow_create
            and broker.config.auto_create_topics_enable
            and not creatable_topics(authorizer, [name])):
        return wire.encode_topic(version, TOPIC_AUTHORIZATION_FAILED, name, ZERO_UUID,
                                 name in INTERNAL_TOPICS, [])
    return None


def _with_operations(broker: Broker, version: int, name: str | None, data: bytes) -> bytes:
    """The topic's bytes with its authorized operations in place of "not requested"."""
    if not name:
        return data
    return _set_last_int32(data, version, topic_operations(broker.authorizer, name))


def _set_last_int32(data: bytes, version: int, value: int) -> bytes:
    # The authorized-operations field is the last of a topic (and of a v8-10 response),
    # followed by the empty tagged fields from v9 (flexible) on.
    end = len(data) - (1 if version >= wire.FLEXIBLE_VERSION else 0)
    return data[:end - 4] + struct.pack(">i", value) + data[end:]


def _key(broker: Broker) -> _Key:
    return metadata_generation(broker), frozenset(b.node_id for b in broker.live_brokers())


async def _requested(broker: Broker, cache: TopicBytesCache, version: int, name: str | None,
                     topic_id: uuid.UUID | None, allow_create: bool) -> bytes:
    if not name and topic_id is not None and topic_id != ZERO_UUID:
        topic = broker.store.get_by_id(topic_id)
        if topic is None:
            return wire.encode_topic(version, UNKNOWN_TOPIC_ID, None, topic_id, False, [])
        return _encoded(broker, cache, version, topic, _key(broker))
    topic = broker.store.get(name or "")
    if topic is not None:
        return _encoded(broker, cache, version, topic, _key(broker))
    cache.forget(name or "")
    if not (allow_create and broker.config.auto_create_topics_enable):
        return _error(version, UNKNOWN_TOPIC_OR_PARTITION, name)
    try:
        topic = await _auto_create(broker, name or "")
    except ClusterError as e:
        return _error(version, e.error_code, name)
    if topic is None:
        return _error(version, UNKNOWN_TOPIC_OR_PARTITION, name)
    return _encoded(broker, cache, version, topic, _key(broker))


async def _auto_create(broker: Broker, name: str) -> Topic | None:
    """Kafka's AutoTopicCreationManager: the internal topics get their own partition
    counts, replication factors and configs, any other topic the broker defaults."""
    if name == OFFSETS_TOPIC:
        await broker.group_coordinator.ensure_topic()
        return broker.store.get(name)
    if name == TRANSACTION_STATE_TOPIC:
        await broker.txn_service.ensure_topic()
        return broker.store.get(name)
    return await broker.create_topic(name)


def _encoded(broker: Broker, cache: TopicBytesCache, version: int, topic: Topic,
             key: _Key) -> bytes:
    data = cache.get(version, topic, key)
    if data is None:
        data = _describe(broker, version, topic, key[1])
        cache.put(version, topic, key, data)
    return data


def _describe(broker: Broker, version: int, topic: Topic, live: frozenset[int]) -> bytes:
    partitions = []
    for index, replicas in sorted(topic.partitions.items()):
        view = broker.partition_view(topic.name, index)
        if view is None:
            partitions.append(wire.encode_partition(version, LEADER_NOT_AVAILABLE, index, -1,
                                                    -1, replicas, (), ()))
            continue
        # As Kafka's metadata cache: a leader that is not a live broker (it just died and
        # the controller has not moved its partitions yet) is reported as none, with
        # LEADER_NOT_AVAILABLE, so clients wait instead of looking for a broker they
        # were not told about.
        leader = view.leader if view.leader in live else -1
        partitions.append(wire.encode_partition(
            version, 0 if leader >= 0 else LEADER_NOT_AVAILABLE, index, leader,
            view.leader_epoch, replicas, view.isr, view.offline))
    return wire.encode_topic(version, 0, topic.name, topic.topic_id,
                             topic.name in INTERNAL_TOPICS, partitions)


def _error(version: int, code: int, name: str | None) -> bytes:
    return wire.encode_topic(version, code, name, ZERO_UUID, False, [])


HANDLERS = {ApiKey.Metadata: handle}
