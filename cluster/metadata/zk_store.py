"""The metadata store of a ZooKeeper cluster: Kafka 3.9's ZooKeeper-mode admin path.

Reads answer from the broker's `MetadataCache` (what the controller last said) and
the topic configs this store keeps from ``/config/topics``. Changes are written to
ZooKeeper exactly where a Kafka 3.9 broker writes them (``AdminZkClient``), whichever
broker received the request: a new topic is ``/config/topics/<t>`` then
``/brokers/topics/<t>``; a deletion is ``/admin/delete_topics/<t>``; new partitions
rewrite ``/brokers/topics/<t>`` conditionally on its version; a config change is
``/config/topics/<t>`` plus a ``/config/changes`` notification. The controller acts on
the znodes; the change returns once this broker's metadata shows the result (Kafka's
DelayedCreatePartitions / DelayedDeleteTopics), or REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import functools
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import trio

from josefk.cluster.metadata.cache import MetadataCache
from josefk.cluster.metadata.errors import (
    ClusterError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)
from josefk.cluster.metadata.store import (
    BrokerInfo,
    ConfigValidator,
    PlanningStore,
    Topic,
    unify_collision_chars,
    validate_topic_name,
)
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    ZkError,
    ZooKeeper,
)

logger = logging.getLogger(__name__)


RETRY_S = 1.0


class RequestTimedOutError(ClusterError):
    error_code = 7  # REQUEST_TIMED_OUT


class ZooKeeperUnavailableError(ClusterError):
    """The change could not be written: no ZooKeeper connection (UNKNOWN_SERVER_ERROR)."""


def _zk_failures(method: Callable[..., Awaitable[Topic]]) -> Callable[..., Awaitable[Topic]]:
    """A ZooKeeper failure in a change is answered with an error code, not a dropped
    connection."""

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Topic:
        try:
            return await method(*args, **kwargs)
        except ZkError as e:
            logger.warning("%s failed: ZooKeeper: %s", method.__name__, e)
            raise ZooKeeperUnavailableError(f"ZooKeeper: {e}") from e

    return wrapper


class ZkMetadataStore(PlanningStore):
    """A `MetadataStore` over ZooKeeper and the controller's UpdateMetadata."""

    def __init__(self, zk: ZooKeeper, cache: MetadataCache, listener: str, cluster_id: str,
                 *, validate_configs: ConfigValidator | None = None,
                 default_num_partitions: int = 1, default_replication_factor: int = 1,
                 wait_timeout_s: float = 30.0, rng: random.Random | None = None,
                 on_config_change: Callable[[str], None] = lambda _t: None,
                 on_user_change: Callable[[str], Awaitable[None]] | None = None,
                 on_entity_change: Callable[[str], Awaitable[None]] | None = None) -> None:
        super().__init__(validate_configs=validate_configs,
                         default_num_partitions=default_num_partitions,
                         default_replication_factor=default_replication_factor,
                         rng=rng or random.Random())
        self.zk = zk
        self.cache = cache
        self.listener = listener
        self._cluster_id = cluster_id
        self.wait_timeout_s = wait_timeout_s
        self.on_config_change = on_config_change
        self.on_user_change = on_user_change
        # Any other entity's change (brokers/, clients/, users/): its entity path.
        self.on_entity_change = on_entity_change
        self.configs: dict[str, Mapping[str, str]] = {}
        self._seen_changes: set[str] = set()

    # --- reads ------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def brokers(self, listener: str | None = None) -> list[BrokerInfo]:
        out = []
        for broker_id, registration in sorted(self.cache.brokers.items()):
            endpoint = (registration.endpoint(listener or self.listener)
                        or registration.endpoint())
            if endpoint is not None:
                out.append(BrokerInfo(broker_id, endpoint.host, endpoint.port,
                                      registration.rack))
        return out

    def _topic(self, name: str) -> Topic | None:
        infos = self.cache.topic_partitions(name)
        topic_id = self.cache.topic_ids.get(name)
        if not infos or topic_id is None:
            return None
        return Topic(name, topic_id, MappingProxyType({i.partition: i.replicas for i in infos}),
                     MappingProxyType(dict(self.configs.get(name, {}))))

    def topics(self) -> list[Topic]:
        return [t for name in self.cache.topics() if (t := self._topic(name)) is not None]

    def get(self, name: str) -> Topic | None:
        return self._topic(name)

    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        name = self.cache.topic_name(topic_id)
        return None if name is None else self._topic(name)

    # --- configs ------------------------------------------------------------------------

    def topic_configs(self, name: str) -> Mapping[str, str]:
        # Known from /config/topics as soon as LeaderAndIsr names the topic, before the
        # UpdateMetadata that lists it.
        return self.configs.get(name, {})

    async def load_configs(self, topics: Iterable[str]) -> None:
        """Read ``/config/topics/<t>`` for topics whose configs are not known yet."""
        for topic in topics:
            if topic not in self.configs:
                self.configs[topic] = await self._read_config(topic)

    async def _read_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(zn.topic_config_path(topic))
        except NoNodeError:
            return {}
        return zn.decode_config(data)

    async def watch_config_changes(self) -> None:
        """Follow ``/config/changes`` (Kafka's ZkConfigChangeNotification listener) for
        as long as the broker runs; the first pass only marks what is already there."""
        changed = trio.Event()
        first = True
        while True:
            try:
                children = await self.zk.get_children(zn.CONFIG_CHANGES, changed.set)
                for child in sorted(set(children) - self._seen_changes):
                    if not first:
                        await self._apply_change(child)
                    self._seen_changes.add(child)
            except NoNodeError:
                await self.zk.ensure_path(zn.CONFIG_CHANGES)
                continue
            except ZkError as e:
                # A lost connection or session: read the notifications again once back.
                logger.warning("config change notifications: %s; retrying", e)
                await trio.sleep(RETRY_S)
                continue
            first = False
            await changed.wait()
            changed = trio.Event()

    async def _apply_change(self, child: str) -> None:
        try:
            data, _ = await self.zk.get(f"{zn.CONFIG_CHANGES}/{child}")
            entity = zn.decode_config_change(data)
        except (NoNodeError, ValueError) as e:
            logger.warning("ignoring config change %s: %s", child, e)
            return
        kind, _, name = entity.partition("/")
        if kind in ("brokers", "clients", "users") and self.on_entity_change is not None:
            await self.on_entity_change(entity)
        if kind == "users" and self.on_user_change is not None and "/" not in name:
            await self.on_user_change(name)
            return
        if kind != "topics":
            return
        try:
            self.configs[name] = await self._read_config(name)
            self.on_config_change(name)
        except ZkError:
            raise  # not seen yet: read again once reconnected
        except Exception:
            # As Kafka's ZkNodeChangeNotificationListener: log it, go on with the next.
            logger.exception("error processing config change %s of topic %s; skipped",
                             child, name)

    # --- changes ------------------------------------------------------------------------------

    @_zk_failures
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: Sequence[Sequence[int]] | Mapping[int, Sequence[int]]
                           | None = None,
                           configs: Mapping[str, str] | None = None,
                           validate_only: bool = False) -> Topic:
        validate_topic_name(name)
        existing = await self.zk.get_children(zn.TOPICS)
        if name in existing:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        unified = unify_collision_chars(name)
        for other in existing:
            if unify_collision_chars(other) == unified:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")
        topic = self.plan_create(name, num_partitions, replication_factor, assignment, configs,
                                 self.new_topic_id())
        if validate_only:
            return topic
        await self._write_config(name, topic.configs, notify=False)
        try:
            await self.zk.create(zn.topic_path(name), zn.TopicAssignment(
                topic.topic_id, dict(topic.partitions)).encode())
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{name}' already exists.") from None
        self.configs[name] = dict(topic.configs)
        logger.info("created topic %s with %d partitions, replica assignment %s", name,
                    topic.num_partitions, {p: list(r) for p, r in topic.partitions.items()})
        await self._wait(lambda: self.cache.has_leaders(name, topic.partitions),
                         f"creating topic {name}")
        return self.get(name) or topic

    @_zk_failures
    async def delete_topic(self, name: str) -> Topic:
        topic = self.get(name)
        if await self.zk.exists(zn.topic_path(name)) is None or topic is None:
            raise UnknownTopicError(f"Unable to locate the topic {name}")
        try:
            await self.zk.create(zn.delete_topic_path(name), makepath=True)
        except NodeExistsError:
            logger.info("topic %s is already marked for deletion", name)
        await self._wait(lambda: self.cache.topic_ids.get(name) != topic.topic_id
                         or not self.cache.topic_partitions(name), f"deleting topic {name}")
        self.configs.pop(name, None)
        return topic

    @_zk_failures
    async def create_partitions(self, name: str, new_total: int,
                                assignment: Sequence[Sequence[int]] | None = None,
                                validate_only: bool = False) -> Topic:
        try:
            data, stat = await self.zk.get(zn.topic_path(name))
        except NoNodeError:
            raise UnknownTopicError(f"Unable to locate the topic {name}") from None
        grown = self.plan_create_partitions(name, new_total, assignment)
        if validate_only:
            return grown
        current = zn.TopicAssignment.decode(name, data)
        partitions = {**current.partitions, **{p: r for p, r in grown.partitions.items()
                                               if p not in current.partitions}}
        updated = zn.TopicAssignment(current.topic_id, partitions, current.adding,
                                     current.removing)
        try:
            await self.zk.set(zn.topic_path(name), updated.encode(), stat.version)
        except BadVersionError:
            raise ClusterError(f"topic {name} changed concurrently; retry") from None
        await self._wait(lambda: self.cache.has_leaders(name, grown.partitions),
                         f"adding partitions to {name}")
        return self.get(name) or grown

    @_zk_failures
    async def alter_topic_configs(self, name: str, set: Mapping[str, str] | None = None,
                                  delete: Iterable[str] = (),
                                  validate_only: bool = False) -> Topic:
        altered = self.plan_alter_configs(name, set, delete)
        if not validate_only:
            await self._write_config(name, altered.configs, notify=True)
            self.configs[name] = dict(altered.configs)
            # Our own notification is not read back: act on it here.
            self.on_config_change(name)
        return altered

    async def _write_config(self, name: str, configs: Mapping[str, str], notify: bool) -> None:
        path = zn.topic_config_path(name)
        data = zn.encode_config(configs)
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            await self.zk.create(path, data, makepath=True)
        if notify:
            created = await self.zk.create(
                f"{zn.CONFIG_CHANGES}/{zn.CONFIG_CHANGE_PREFIX}",
                zn.encode_config_change(f"topics/{name}"), sequence=True, makepath=True)
            # Our own notification: already applied.
            self._seen_changes.add(created.rsplit("/", 1)[-1])

    async def _wait(self, done: Callable[[], bool], what: str) -> None:
        with trio.move_on_after(self.wait_timeout_s):
            while not done():
                await self.cache.wait_changed()
            return
        raise RequestTimedOutError(f"timed out after {self.wait_timeout_s:.0f}s {what}")
