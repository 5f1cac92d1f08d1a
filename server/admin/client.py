"""``open_admin``: an admin client of a Kafka cluster over the Kafka protocol, as
Kafka's AdminClient and its command-line tools use it."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest

from josefk.protocol.error_codes import TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION
from josefk.server.admin import groups
from josefk.server.admin.brokers import Brokers, check, parse_bootstrap
from josefk.server.admin.errors import AdminError
from josefk.server.admin.views import (
    BrokerView,
    ClusterView,
    GroupListing,
    GroupView,
    PartitionLag,
    PartitionView,
    TopicView,
)
from josefk.server.security.client import PLAINTEXT_PEERS, PeerSecurity

CREATE_TOPICS_VERSION = 5
DELETE_TOPICS_VERSION = 5
_Creatable = CreateTopicsRequest.CreatableTopic
# A topic with another error (LEADER_NOT_AVAILABLE, say) is listed with what it has.
_NOT_LISTED = (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED)


@asynccontextmanager
async def open_admin(bootstrap: str, *, security: PeerSecurity = PLAINTEXT_PEERS,
                     client_id: str = "josefk-admin",
                     timeout_s: float = 10.0) -> AsyncIterator[Admin]:
    """An Admin connected to the cluster behind ``bootstrap`` (``host:port[,...]``); its
    connections close on exit. AdminError when no bootstrap server answers."""
    brokers = Brokers(parse_bootstrap(bootstrap), security, client_id, timeout_s)
    try:
        await brokers.metadata([])
        yield Admin(brokers)
    finally:
        await brokers.aclose()


class Admin:
    """The cluster, its topics and its consumer groups; every method raises AdminError."""

    def __init__(self, brokers: Brokers) -> None:
        self._brokers = brokers

    async def cluster(self) -> ClusterView:
        """Brokers, controller and every topic's partitions, from one Metadata."""
        response = await self._brokers.metadata(None)
        brokers = sorted((BrokerView(b.node_id, b.host, b.port, b.rack)
                          for b in response.brokers), key=lambda b: b.id)
        topics = sorted((_topic_view(t) for t in response.topics
                         if t.error_code not in _NOT_LISTED), key=lambda t: t.name)
        return ClusterView(response.cluster_id, response.controller_id, brokers, topics)

    async def list_groups(self) -> list[GroupListing]:
        """Every group of every broker (ListGroups on each), by group id."""
        return await groups.list_groups(self._brokers)

    async def describe_group(self, group_id: str) -> GroupView:
        """A group's state, members and lag per partition, as
        ``kafka-consumer-groups.sh --describe`` shows it."""
        return await groups.describe_group(self._brokers, group_id)

    async def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                           config: Mapping[str, str] | None = None) -> None:
        """CreateTopics (-1: the broker's default partitions and replication factor)."""
        configs = [_Creatable.CreatableTopicConfig(name=k, value=v)
                   for k, v in (config or {}).items()]
        topic = _Creatable(name=name, num_partitions=partitions,
                           replication_factor=replication_factor, assignments=[],
                           configs=configs)
        request = CreateTopicsRequest(topics=[topic], timeout_ms=self._timeout_ms(),
                                      validate_only=False)
        response = await self._brokers.retrying(
            lambda: self._to_controller(request, CREATE_TOPICS_VERSION))
        for result in response.topics:
            check(result.error_code, f"create topic {result.name!r}", result.error_message)

    async def delete_topic(self, name: str) -> None:
        """DeleteTopics of one topic by name."""
        request = DeleteTopicsRequest(topic_names=[name], timeout_ms=self._timeout_ms())
        response = await self._brokers.retrying(
            lambda: self._to_controller(request, DELETE_TOPICS_VERSION))
        for result in response.responses:
            check(result.error_code, f"delete topic {result.name!r}", result.error_message)

    async def wait_for_topic(self, name: str, present: bool = True,
                             timeout_s: float = 30.0) -> None:
        """Until every broker's Metadata lists ``name`` with a leader for each partition
        (``present``), or none lists it; AdminError REQUEST_TIMED_OUT after ``timeout_s``."""
        with trio.move_on_after(timeout_s):
            while not await self._all_brokers_agree(name, present):
                await trio.sleep(0.1)
            return
        state = "present" if present else "gone"
        raise AdminError("REQUEST_TIMED_OUT",
                         f"topic {name!r} not {state} on every broker after {timeout_s:g} s")

    async def reset_offsets(self, group_id: str, topic: str,
                            to: str | int | datetime.datetime, *,
                            execute: bool = True) -> list[PartitionLag]:
        """Set an inactive group's committed offsets on every partition of ``topic`` to
        ``"earliest"``, ``"latest"``, an offset (kept within the log, as Kafka's tool does)
        or the first offset at or after a time; ``execute=False`` only computes them.
        The answer's ``committed`` is the new offset."""
        return await groups.reset_offsets(self._brokers, group_id, topic, to, execute)

    async def _all_brokers_agree(self, name: str, present: bool) -> bool:
        await self._brokers.metadata([])
        for broker_id in list(self._brokers.endpoints):
            try:
                response = await self._brokers.metadata_of(broker_id, [name])
            except AdminError:
                return False
            topic = response.topics[0]
            if present:
                seen = not topic.error_code and bool(topic.partitions) and all(
                    p.leader_id >= 0 for p in topic.partitions)
            else:
                seen = topic.error_code == UNKNOWN_TOPIC_OR_PARTITION
            if not seen:
                return False
        return True

    async def _to_controller(self, request: Any, version: int) -> Any:
        response = await self._brokers.metadata([])
        controller = response.controller_id
        if controller < 0:
            return await self._brokers.send_any(request, version)
        return await self._brokers.send(controller, request, version)

    def _timeout_ms(self) -> int:
        # The broker's own deadline, within ours, so that its answer (a timeout) arrives.
        return int(self._brokers.timeout_s * 800)


def _topic_view(topic: Any) -> TopicView:
    partitions = sorted(
        (PartitionView(p.partition_index, p.leader_id, list(p.replica_nodes),
                       list(p.isr_nodes), list(p.offline_replicas)) for p in topic.partitions),
        key=lambda p: p.partition)
    return TopicView(topic.name, bool(topic.is_internal), partitions)
