"""A broker's cluster mode (``zookeeper.connect`` set): ZooKeeper, registration, the
controller when elected, and what the controller's requests do to this broker.

Kafka 3.9's ZooKeeper mode is the reference: the broker connects to ZooKeeper
(creating the chroot and the top-level paths), takes the cluster id from
``/cluster/id``, starts its listeners, registers ``/brokers/ids/<id>`` and joins the
controller election (`Membership`). Partitions come and go only as the controller's
LeaderAndIsr and StopReplica say; UpdateMetadata fills the `MetadataCache` that
Metadata answers from. On SIGTERM the broker asks the controller to move its
leaderships away (ControlledShutdown) before it stops.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from josefk.cluster.configs.zk_store import ZkEntityConfigStore
from josefk.cluster.controller.controller import Controller, ControllerConfig
from josefk.cluster.controller.membership import (
    Membership,
    create_top_level_paths,
    ensure_cluster_id,
)
from josefk.cluster.metadata.cache import MetadataCache
from josefk.cluster.metadata.requests import (
    ControllerResponse,
    LeaderAndIsr,
    StopReplica,
    UpdateMetadata,
)
from josefk.cluster.metadata.zk_security_store import ZkSecurityStore
from josefk.cluster.metadata.zk_store import ZkMetadataStore
from josefk.cluster.partition import Partition, PartitionView
from josefk.cluster.zk.znodes import BrokerRegistration, Endpoint
from josefk.log.clock import now_ms
from josefk.log.partition_metadata import (
    kafka_uuid_str,
    random_kafka_uuid,
    read_partition_metadata,
    write_partition_metadata,
)
from josefk.protocol.controller_messages import ControlledShutdownRequest
from josefk.protocol.error_codes import (
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    NONE,
    STALE_BROKER_EPOCH,
    STALE_CONTROLLER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.server.config.broker import validate_topic_configs
from josefk.server.control.channel import BrokerChannels
from josefk.server.control.producer_id_blocks import ProducerIdBlocks
from josefk.server.control.zk_bridge import KazooZooKeeper
from josefk.server.network.peer import PeerConnection
from josefk.server.replication.fetchers import IsrUpdates, ReplicaFetchers
from josefk.server.security.client import PeerSecurity, inter_broker_listener

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3
EPOCH_DURING_DELETE = -2


class ClusterNode:
    """The cluster-mode half of a `Broker`."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.config = config
        assert config.zookeeper_connect is not None
        session_ms = config.values["zookeeper.session.timeout.ms"]
        connect_ms = config.values["zookeeper.connection.timeout.ms"] or session_ms
        self.zk = KazooZooKeeper(config.zookeeper_connect, session_ms, connect_ms)
        self.cache = MetadataCache()
        self.security = ZkSecurityStore(self.zk)
        self.entity_configs = ZkEntityConfigStore(self.zk)
        self.listener = inter_broker_listener(config)
        self.store = ZkMetadataStore(
            self.zk, self.cache, self.listener, cluster_id="",
            validate_configs=lambda configs: validate_topic_configs(
                configs, broker=self.broker.config),
            default_num_partitions=config.num_partitions,
            default_replication_factor=config.default_replication_factor,
            wait_timeout_s=config.request_timeout_ms / 1000,
            on_config_change=self._on_topic_config_change,
            on_user_change=self.security.reload_sanitized_user,
            on_entity_change=self.entity_configs.on_change)
        self.membership: Membership | None = None
        self.controller_epoch = -1
        self.node_id = broker.node_id
        self.live_leaders: dict[int, tuple[str, int]] = {}
        self.fetchers: ReplicaFetchers | None = None
        self.producer_ids = ProducerIdBlocks(
            broker.node_id, lambda: self.broker_epoch,
            lambda: self.endpoint_of(self.cache.controller_id), config.request_timeout_ms / 1000,
            broker.peer_security)
        self.isr_updates: IsrUpdates | None = None

    # --- start-up ------------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect to ZooKeeper and learn the cluster id (before the logs load)."""
        await self.zk.start()
        await create_top_level_paths(self.zk)
        proposed = self.config.cluster_id or kafka_uuid_str(random_kafka_uuid())
        cluster_id = await ensure_cluster_id(self.zk, proposed)
        if self.config.cluster_id and cluster_id != self.config.cluster_id:
            raise ValueError(f"The cluster id {self.config.cluster_id} doesn't match the one "
                             f"in ZooKeeper ({cluster_id})")
        self.store._cluster_id = cluster_id
        self.broker.cluster_id = cluster_id
        await self.security.load(acl_paths=self.broker.authorizer.enabled)
        await self.entity_configs.load()

    async def join(self, nursery: trio.Nursery, endpoints: tuple[Endpoint, ...]) -> None:
        """Register (listeners are up, ``endpoints`` the advertised ones) and take part in
        the controller election."""
        registration = BrokerRegistration(self.broker.node_id, endpoints,
                                          self.config.values["broker.rack"])
        self.membership = Membership(self.zk, registration, self._make_controller)
        self.fetchers = ReplicaFetchers(self, nursery, self.broker.replication_quotas.follower)
        self.isr_updates = IsrUpdates(self, nursery, self._led_partitions)
        nursery.start_soon(self.isr_updates.shrink_forever)
        await self.membership.register()
        nursery.start_soon(self.store.watch_config_changes)
        nursery.start_soon(self.security.watch_acl_changes)
        await nursery.start(self.membership.run)

    def _make_controller(self, epoch: int, epoch_zk_version: int) -> Controller:
        config = self.config
        channels = BrokerChannels(self.broker.node_id, self.listener,
                                  config.values["controller.socket.timeout.ms"] / 1000,
                                  self.broker.peer_security)
        return Controller(self.zk, channels, self.broker.node_id, ControllerConfig(
            unclean_leader_election=self._unclean_enabled,
            load_topic_configs=self.store.load_configs,
            auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_s=config.values[
                "leader.imbalance.check.interval.seconds"],
            leader_imbalance_per_broker_percentage=config.values[
                "leader.imbalance.per.broker.percentage"],
            delete_topic_enable=config.delete_topic_enable), epoch, epoch_zk_version)

    def _unclean_enabled(self, topic: str) -> bool:
        value = self.store.configs.get(topic, {}).get("unclean.leader.election.enable")
        if value is None:  # the broker default, which may change (dynamic broker configs)
            return self.broker.config.unclean_leader_election_enable
        return value.strip().lower() == "true"

    def on_unclean_default_enabled(self) -> None:
        """``unclean.leader.election.enable`` turned on for the broker: offline partitions
        of topics without an override may now elect (Kafka's
        ``enableDefaultUncleanLeaderElection``)."""
        controller = self.controller
        if controller is not None:
            for topic in self.cache.topics():
                controller.put(lambda t=topic: controller.on_topic_config_change(t))

    def _on_topic_config_change(self, topic: str) -> None:
        self.broker.reconfigure(topic)
        controller = self.controller
        if controller is not None:
            # Kafka's TopicUncleanLeaderElectionEnable: offline partitions may now elect.
            controller.put(lambda: controller.on_topic_config_change(topic))

    def _led_partitions(self) -> list[Partition]:
        return [p for p in self.broker.partitions.values() if p.is_leader]

    # --- what replication needs (ReplicationHost) ---------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.broker.partition(topic, index)

    @property
    def peer_security(self) -> PeerSecurity:
        return self.broker.peer_security

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        registration = self.cache.brokers.get(broker_id)
        if registration is not None:
            endpoint = registration.endpoint(self.listener) or registration.endpoint()
            if endpoint is not None:
                return endpoint.host, endpoint.port
        return self.live_leaders.get(broker_id)

    @property
    def controller_id(self) -> int:
        return self.cache.controller_id

    def on_follower_fetch(self, partition: Partition, replica: int) -> None:
        if self.isr_updates is not None:
            self.isr_updates.maybe_expand(partition, replica)

    @property
    def controller(self) -> Controller | None:
        return self.membership.controller if self.membership else None

    @property
    def broker_epoch(self) -> int:
        return self.membership.broker_epoch if self.membership else -1

    async def stop(self) -> None:
        await self.zk.stop()

    # --- what Metadata reports ------------------------------------------------------------

    def partition_view(self, topic: str, index: int) -> PartitionView | None:
        info = self.cache.partition(topic, index)
        if info is None:
            return None
        return PartitionView(info.leader, info.leader_epoch, info.replicas, info.isr,
                             info.offline)

    # --- the controller's requests ------------------------------------------------------

    def _stale(self, controller_epoch: int, broker_epoch: int, what: str) -> int | None:
        if controller_epoch < self.controller_epoch:
            logger.warning("ignoring %s from a controller with stale epoch %d (current %d)",
                           what, controller_epoch, self.controller_epoch)
            return STALE_CONTROLLER_EPOCH
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            logger.warning("ignoring %s for stale broker epoch %d (current %d)", what,
                           broker_epoch, self.broker_epoch)
            return STALE_BROKER_EPOCH
        self.controller_epoch = controller_epoch
        return None

    async def leader_and_isr(self, request: LeaderAndIsr) -> ControllerResponse:
        """Become leader or follower of the listed partitions (Kafka's
        ``becomeLeaderOrFollower``)."""
        stale = self._stale(request.controller_epoch, request.broker_epoch, "LeaderAndIsr")
        if stale is not None:
            return ControllerResponse(stale, {i.key: stale for i in request.partitions})
        await self.store.load_configs({i.topic for i in request.partitions})
        for leader in request.live_leaders:
            endpoint = leader.endpoint()
            if endpoint is not None:
                self.live_leaders[leader.broker_id] = (endpoint.host, endpoint.port)
        broker = self.broker
        now = now_ms()
        errors: dict[tuple[str, int], int] = {}
        for info in request.partitions:
            partition = broker.partitions.get(info.key)
            if broker.node_id not in info.replicas:
                errors[info.key] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            manager = broker.log_manager
            if manager.is_offline(*info.key) or (
                    partition is None and not manager.may_create(*info.key,
                                                                 is_new=info.is_new)):
                # Kafka's HostedPartition.Offline; nor does it make a replica's log afresh
                # while a directory that may hold it is offline (it marks it offline). The
                # controller takes the replica offline.
                manager.mark_offline(*info.key)
                errors[info.key] = KAFKA_STORAGE_ERROR
                continue
            if partition is not None and (
                    info.leader_epoch < partition.leader_epoch
                    or (info.leader_epoch == partition.leader_epoch
                        and info.partition_epoch <= partition.partition_epoch)):
                # Older, or the state this replica has already (a new controller's resend):
                # ignored, as Kafka does, or it would undo an ISR change in flight.
                logger.info("broker %d: ignoring LeaderAndIsr for %s-%d at leader epoch %d, "
                            "partition epoch %d: it has %d, %d", broker.node_id, *info.key,
                            info.leader_epoch, info.partition_epoch, partition.leader_epoch,
                            partition.partition_epoch)
                errors[info.key] = STALE_CONTROLLER_EPOCH
                continue
            topic_id = request.topic_ids.get(info.topic) or self.cache.topic_ids.get(info.topic)
            if partition is None:
                if topic_id is None:
                    errors[info.key] = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                partition = broker.open_replica(info.topic, info.partition, topic_id,
                                                list(info.replicas))
            follow = partition.apply_leadership(info.leader, info.leader_epoch, list(info.isr),
                                                list(info.replicas), info.partition_epoch, now)
            assert self.fetchers is not None
            if partition.is_leader:
                self.fetchers.stop(info.key)
            elif follow:
                self.fetchers.follow(partition)
            errors[info.key] = NONE
            logger.info("broker %d is %s of %s-%d at leader epoch %d (isr %s)",
                        broker.node_id, "leader" if partition.is_leader else
                        f"a follower of broker {info.leader}", *info.key, info.leader_epoch,
                        list(info.isr))
        broker.on_leadership_change()
        return ControllerResponse(NONE, errors)

    async def update_metadata(self, request: UpdateMetadata) -> ControllerResponse:
        stale = self._stale(request.controller_epoch, request.broker_epoch, "UpdateMetadata")
        if stale is not None:
            return ControllerResponse(stale)
        for topic in {t for t, _ in self.cache.update(request)}:
            if topic not in self.cache.topic_ids:
                self.store.configs.pop(topic, None)  # deleted: a new one may differ
        await self.store.load_configs(self.cache.topics())
        return ControllerResponse(NONE)

    async def stop_replica(self, request: StopReplica) -> ControllerResponse:
        stale = self._stale(request.controller_epoch, request.broker_epoch, "StopReplica")
        if stale is not None:
            return ControllerResponse(stale, {(p.topic, p.partition): stale
                                              for p in request.partitions})
        errors: dict[tuple[str, int], int] = {}
        for p in request.partitions:
            key = (p.topic, p.partition)
            partition = self.broker.partitions.get(key)
            if (partition is not None and p.leader_epoch not in (-1, EPOCH_DURING_DELETE)
                    and p.leader_epoch < partition.leader_epoch):
                errors[key] = FENCED_LEADER_EPOCH
                continue
            if self.fetchers is not None:
                self.fetchers.stop(key)
            if self.broker.log_manager.is_offline(*key):
                # Its log stays as the failed directory left it, until a restart.
                if partition is not None:
                    partition.stop()
                self.broker.purgatory.notify(key)
                errors[key] = KAFKA_STORAGE_ERROR
                continue
            self.broker.stop_replica(p.topic, p.partition, delete=p.delete)
            errors[key] = NONE
        self.broker.on_leadership_change()
        return ControllerResponse(NONE, errors)

    # --- shutting down ----------------------------------------------------------------------

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away, as Kafka does
        before it stops (``controlled.shutdown.max.retries`` attempts)."""
        config = self.config
        if not config.values["controlled.shutdown.enable"] or self.membership is None:
            return
        retries = config.values["controlled.shutdown.max.retries"]
        backoff = config.values["controlled.shutdown.retry.backoff.ms"] / 1000
        for attempt in range(1, retries + 1):
            remaining = await self._try_controlled_shutdown()
            if remaining == []:
                logger.info("broker %d: controlled shutdown succeeded", self.broker.node_id)
                return
            logger.warning("broker %d: controlled shutdown attempt %d/%d: %s",
                           self.broker.node_id, attempt, retries,
                           "no controller reachable" if remaining is None else
                           f"still leading {len(remaining)} partitions")
            if attempt < retries:
                await trio.sleep(backoff)
        logger.warning("broker %d: proceeding with an unclean shutdown", self.broker.node_id)

    async def _try_controlled_shutdown(self) -> list[Any] | None:
        controller_id = self.cache.controller_id
        registration = self.cache.brokers.get(controller_id)
        endpoint = registration and (registration.endpoint(self.listener)
                                     or registration.endpoint())
        if not endpoint:
            return None
        response = await PeerConnection.once(
            (endpoint.host, endpoint.port), f"broker-{self.broker.node_id}-controlled-shutdown",
            self.config.request_timeout_ms / 1000, ControlledShutdownRequest(
                broker_id=self.broker.node_id, broker_epoch=self.broker_epoch),
            CONTROLLED_SHUTDOWN_VERSION, "controlled shutdown request",
            self.broker.peer_security)
        if response is None:
            return None
        if response.error_code != NONE:
            logger.warning("controlled shutdown: controller answered error %d",
                           response.error_code)
            return None
        return list(response.remaining_partitions)


def open_replica_partition(broker: Broker, topic: str, index: int, topic_id: Any,
                           replicas: list[int]) -> Partition:
    """Create or load the log of a replica this broker hosts (not yet leading)."""
    config = broker.log_config_for(topic)
    log = broker.log_manager.get_or_create_log(topic, index, config)
    log.producer_state.expiration_ms = broker.config.producer_id_expiration_ms
    if read_partition_metadata(log.directory) != topic_id:
        write_partition_metadata(log.directory, topic_id)
    return Partition(topic=topic, index=index, topic_id=topic_id, log=log,
                     node_id=broker.node_id, replicas=replicas, isr=[], leader_epoch=-1,
                     on_data=broker.on_partition_data, on_append=broker.on_partition_append,
                     leader=-1, partition_epoch=-1)
