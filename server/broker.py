"""The broker: listeners, request dispatch, partitions and background work."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio

# trio.testing.wait_all_tasks_blocked itself: importing trio.testing imports pytest (when
# installed), a fifth of a second of start-up.
try:
    from trio._core import wait_all_tasks_blocked
except ImportError:  # trio moved it: the public way
    from trio.testing import wait_all_tasks_blocked

from josefk.cluster.configs.store import EntityConfigStore, LocalEntityConfigStore
from josefk.cluster.coordinator.records import OFFSETS_TOPIC
from josefk.cluster.coordinator.transaction.records import TRANSACTION_STATE_TOPIC, TopicPartition
from josefk.cluster.metadata.security_store import LocalSecurityStore, SecurityStore
from josefk.cluster.metadata.store import BrokerInfo, LocalMetadataStore, MetadataStore, Topic
from josefk.cluster.partition import Partition, PartitionMap, PartitionView
from josefk.cluster.producer_ids import ProducerIdManager
from josefk.log.clock import now_ms
from josefk.log.config import LogConfig
from josefk.log.errors import StorageError
from josefk.log.manager import LogManager
from josefk.log.partition_metadata import read_partition_metadata, write_partition_metadata
from josefk.protocol.error_codes import COORDINATOR_LOAD_IN_PROGRESS
from josefk.protocol.messages import Request, encode_response
from josefk.protocol.versions import VersionRange, advertised_versions, enabled_api_keys
from josefk.server.config.broker import BrokerConfig, topic_config_entries, validate_topic_configs
from josefk.server.handlers import CLUSTER_ONLY_KEYS, MODULES, handler
from josefk.server.heap import keep_frozen
from josefk.server.jobs import BackgroundJobs
from josefk.server.log_cleaner import LogCleanerService
from josefk.server.network.connection import Connection, throttle_s
from josefk.server.network.ip_rates import IpConnectionRates
from josefk.server.network.quotas import ConnectionQuotas
from josefk.server.network.socket_server import SocketServer
from josefk.server.network.zero_copy import Part
from josefk.server.purgatory import Purgatory, follower_key
from josefk.server.quotas.rate import RateConfig
from josefk.server.quotas.replication import ReplicationQuotas
from josefk.server.quotas.service import ClientQuotas
from josefk.server.reconfiguration import BrokerReconfiguration
from josefk.server.replication.log_dirs import LogDirFailureHandler, propagate_log_dir_event
from josefk.server.replication.sessions import FetchSessionCache
from josefk.server.security.authorizer import Authorizer
from josefk.server.security.client import PLAINTEXT_PEERS, peer_security
from josefk.server.security.listener import listener_security
from josefk.server.security.session import current_session
from josefk.server.transactions.markers import MarkerChannel, wait_replicated
from josefk.server.transactions.verification import TxnVerifier
from josefk.server.trim import keep_trimmed, one_arena

if TYPE_CHECKING:
    from josefk.cluster.coordinator.group.coordinator import GroupCoordinator
    from josefk.cluster.coordinator.transaction.service import TxnService
    from josefk.cluster.zk.znodes import Endpoint
    from josefk.server.control.node import ClusterNode
    from josefk.server.metrics.recorder import Recorder

logger = logging.getLogger(__name__)

# How long the background creation of deferred partitions holds the event loop at a time:
# a request arriving meanwhile waits for the slice, plus the log being created (~0.4 ms).
DEFERRED_OPEN_SLICE_S = 0.0005
# ... and resumes only after the loop has been idle this long (a big Metadata answer at
# 10,000 partitions is written in several rounds as the client reads it).
DEFERRED_OPEN_CUSHION_S = 0.0003


class Broker:
    """One josefk broker process: owns the log manager, the metadata store and the sockets."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self._last_log_config: tuple[str, BrokerConfig, dict[str, str], LogConfig] | None = None
        # The api keys served; their handlers are imported on each api's first request.
        handled = [key for key in MODULES if config.zookeeper_connect
                   or key not in CLUSTER_ONLY_KEYS]
        self.enabled = enabled_api_keys(handled)
        self.advertised_versions: dict[int, VersionRange] = advertised_versions(handled)
        self.log_manager = LogManager(
            config.log_dirs, self.log_config_for,
            threads_per_dir=config.values["num.recovery.threads.per.data.dir"])
        host, port = self._advertised_listener()
        self.local_broker = BrokerInfo(self.node_id, host, port, config.values["broker.rack"])
        self.endpoints: dict[str, BrokerInfo] = {}  # by listener, once bound
        # How this broker connects to the others (their inter-broker listener), and who may
        # do what (the ACLs of the security store below).
        self.peer_security = (peer_security(config) if config.zookeeper_connect
                              else PLAINTEXT_PEERS)
        self.authorizer = Authorizer.from_config(config, lambda: self.security_store.acls)
        # Cluster mode (zookeeper.connect): ZooKeeper, the controller, the metadata cache.
        self.cluster: ClusterNode | None = None
        self.store: MetadataStore
        self.security_store: SecurityStore
        # Dynamic broker configs and client quotas (cluster.configs).
        self.entity_configs: EntityConfigStore
        if config.zookeeper_connect:
            # Cluster mode's code (kazoo, the controller) is imported only when it is used.
            from josefk.server.control.node import ClusterNode

            self.cluster = ClusterNode(self)
            self.store = self.cluster.store
            self.security_store = self.cluster.security
            self.entity_configs = self.cluster.entity_configs
        else:
            self.store = LocalMetadataStore(
                config.log_dirs[0], self.local_broker,
                validate_configs=lambda configs: validate_topic_configs(configs,
                                                                       broker=self.config),
                cluster_id=config.cluster_id, default_num_partitions=config.num_partitions,
                default_replication_factor=config.default_replication_factor)
            self.security_store = LocalSecurityStore(config.log_dirs[0])
            self.entity_configs = LocalEntityConfigStore(config.log_dirs[0])
        # Dynamic broker configs: the store's "brokers" entities over the static settings,
        # followed while the broker runs (a cluster's arrive once ZooKeeper is read).
        self.reconfiguration = BrokerReconfiguration(self)
        config = self.config = self.reconfiguration.initial(config)
        self.listener_security = {
            listener.name: listener_security(config, listener,
                                             self.security_store.scram_credential)
            for listener in config.listeners}
        self.partitions = PartitionMap()
        # Created partitions whose logs are not open yet (open_partitions(defer=True)).
        self._unopened: dict[tuple[str, int], Topic] = {}
        # Partitions whose log a failed directory may hold, refused at start-up: led by
        # no one until a restart with the directory repaired (Kafka's controller takes
        # the replica offline).
        self._leaderless: set[tuple[str, int]] = set()
        self._unopened_added = trio.Event()
        self.producer_ids = ProducerIdManager(config.log_dirs[0])
        self.purgatory = Purgatory()
        self.fetch_sessions = FetchSessionCache(
            config.values["max.incremental.fetch.session.cache.slots"], self.purgatory)
        self.cluster_id = self.store.cluster_id
        # Client and replication quotas, kept current from the entity configs.
        self.client_quotas = ClientQuotas.from_config(config.values)
        self.client_quotas.attach(self.entity_configs)
        self.replication_quotas = ReplicationQuotas.from_config(
            self.node_id, config.values, self.store.topic_configs)
        self.replication_quotas.attach(self.entity_configs)
        # Prometheus metrics (metrics.port, metrics.listener; off by default): the counters
        # the request path bumps, and the address /metrics is served on once bound.
        self.metrics: Recorder | None = None
        self.metrics_address: tuple[str, int] | None = None
        if config.values["metrics.port"] >= 0 or config.values["metrics.listener"]:
            from josefk.server.metrics.recorder import Recorder, api_names

            self.metrics = Recorder(api_names())
        # A closure, not the bound method: what dispatches may be swapped (tests do).
        self.sockets = SocketServer(config, lambda request: self.dispatch(request),
                                    self.enabled, self.listener_security, self.metrics)
        self.sockets.ip_rates = IpConnectionRates(self.entity_configs, RateConfig(
            config.values["quota.window.num"], config.values["quota.window.size.seconds"] * 1000))
        # Coordinators plug in here: run after the logs load / for the broker's lifetime.
        self.startup_hooks: list[Callable[[], None]] = []
        self.background_tasks: list[Callable[[], Awaitable[None]]] = []
        # serve()'s nursery once it runs the background tasks (`_run_in_background`).
        self._nursery: trio.Nursery | None = None
        self.startup_hooks.append(self._start_coordinators)
        self.txn_markers = MarkerChannel(self)
        self.txn_verifier = TxnVerifier(self)
        self.log_cleaner = LogCleanerService(self)
        self.startup_hooks.insert(0, self.log_cleaner.startup)
        self.background_tasks.append(self.log_cleaner.run)
        self.background_tasks.append(self._open_deferred)
        # A log directory that fails goes offline; in a cluster the controller is told.
        cluster = self.cluster
        self.log_dir_failures = LogDirFailureHandler(
            self.log_manager, self, None if cluster is None
            else lambda: propagate_log_dir_event(cluster.zk, self.node_id))
        self.background_tasks.insert(0, self.log_dir_failures.run)

    # --- coordinators ---------------------------------------------------------------

    # Built on first use (or at start-up when their topic exists), so a broker no client
    # asked about groups or transactions never imports them.
    @functools.cached_property
    def group_coordinator(self) -> GroupCoordinator:
        from josefk.cluster.coordinator.group.coordinator import GroupCoordinator

        coordinator = GroupCoordinator(self)
        self._run_in_background(coordinator.run)
        return coordinator

    @functools.cached_property
    def txn_service(self) -> TxnService:
        from josefk.cluster.coordinator.transaction.service import TxnService

        service = TxnService(self)
        self._run_in_background(service.run)
        return service

    def _start_coordinators(self) -> None:
        """Start-up hook: load the coordinators' partitions, if their topics exist."""
        if self.store.get(OFFSETS_TOPIC) is not None:
            self.group_coordinator.startup()
        if self.store.get(TRANSACTION_STATE_TOPIC) is not None:
            self.txn_service.startup()

    def _run_in_background(self, task: Callable[[], Awaitable[None]]) -> None:
        """Run ``task`` for the broker's lifetime: now if serving, else once it serves."""
        if self._nursery is None:
            self.background_tasks.append(task)
        else:
            self._nursery.start_soon(task)

    # --- topics and partitions ----------------------------------------------------

    def log_config_for(self, topic: str) -> LogConfig:
        """``topic``'s LogConfig under the current broker config; the last one is kept, as
        the partitions of one topic are opened one after another (10,000 at first write)."""
        overrides = self.store.topic_configs(topic)
        last = self._last_log_config
        if (last is not None and last[0] == topic and last[1] is self.config
                and last[2] == overrides):
            return last[3]
        config = self.config.log_config(overrides)
        self._last_log_config = (topic, self.config, dict(overrides), config)
        return config

    def partition(self, topic: str, index: int) -> Partition | None:
        partition = self.partitions.get((topic, index))
        if partition is None and self._unopened:
            partition = self._open_unopened((topic, index))
        return partition

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        topic = self.store.get_by_id(topic_id)
        return topic.name if topic else None

    def open_partitions(self, topic: Topic, *, defer: bool = False) -> None:
        """Create or load the logs of every partition of ``topic`` placed on this broker
        (a single broker; in a cluster, the controller's LeaderAndIsr does it).

        With ``defer`` the partitions are only noted: `_open_deferred` creates their
        logs in the background, and the first request for one (`partition`) creates
        it on the spot. So CreateTopics answers once the metadata is written, as
        Kafka's does (its brokers create the logs after the controller commits)."""
        if self.cluster is not None:
            return
        config = self.log_config_for(topic.name)
        for index, replicas in topic.partitions.items():
            key = (topic.name, index)
            if (self.node_id not in replicas or key in self.partitions
                    or key in self._leaderless or self.log_manager.is_offline(*key)):
                continue
            if defer:
                self._unopened[key] = topic
            else:
                try:
                    self._open_partition(topic, index, config, is_new=False)
                except StorageError as e:
                    logger.error("%s: %s-%d has no leader", e, topic.name, index)
                    self._leaderless.add(key)
        if self._unopened:
            self._unopened_added.set()

    def _open_partition(self, topic: Topic, index: int, config: LogConfig,
                        reported: PartitionView | None = None, *, is_new: bool) -> Partition:
        log = self.log_manager.get_or_create_log(topic.name, index, config, is_new=is_new)
        log.producer_state.expiration_ms = self.config.producer_id_expiration_ms
        if read_partition_metadata(log.directory) != topic.topic_id:
            write_partition_metadata(log.directory, topic.topic_id)
        partition = Partition(
            topic=topic.name, index=index, topic_id=topic.topic_id, log=log,
            node_id=self.node_id, replicas=list(topic.partitions[index]),
            on_data=self._on_data, on_append=self.on_partition_append)
        # Metadata answers cached while it was pending stay valid if it says the same.
        self.partitions.put_same_view((topic.name, index), partition, reported)
        return partition

    def _open_unopened(self, key: tuple[str, int]) -> Partition | None:
        reported = self.partition_view(*key)
        topic = self._unopened.pop(key, None)
        if topic is None:
            return None
        return self._open_partition(topic, key[1], self.log_config_for(topic.name), reported,
                                    is_new=True)

    async def open_deferred_partitions(self, keys: Collection[tuple[str, int]] | None = None
                                       ) -> None:
        """Create the deferred partitions' logs now (every one, or those of ``keys``) for
        answers about the logs; other tasks run between slices, as thousands may wait."""
        deadline = trio.current_time() + DEFERRED_OPEN_SLICE_S
        for key in [k for k in self._unopened if keys is None or k in keys]:
            if trio.current_time() >= deadline:
                await trio.sleep(0)
                deadline = trio.current_time() + DEFERRED_OPEN_SLICE_S
            self._open_unopened(key)

    async def _open_deferred(self) -> None:
        """Create the deferred partitions' logs a few milliseconds' worth at a time,
        whenever the event loop has nothing else to do."""
        while True:
            await self._unopened_added.wait()
            self._unopened_added = trio.Event()
            deadline = trio.current_time() + DEFERRED_OPEN_SLICE_S
            # A snapshot of the keys: taking the first key of a dict emptied from the
            # front gets slower with every key removed.
            for key in list(self._unopened):
                if trio.current_time() >= deadline:
                    # Idle priority: resume only once no other task can run, so requests
                    # wait for at most one slice (trio.testing's helper is plain trio);
                    # the cushion keeps a response that waits for the client to drain its
                    # socket from losing a slice at every wait.
                    await wait_all_tasks_blocked(DEFERRED_OPEN_CUSHION_S)
                    deadline = trio.current_time() + DEFERRED_OPEN_SLICE_S
                try:
                    self._open_unopened(key)
                except Exception:
                    logger.exception("cannot create the log of %s-%d", *key)

    def open_replica(self, topic: str, index: int, topic_id: uuid.UUID, replicas: list[int]
                     ) -> Partition:
        """A replica the controller placed here, not leading anything yet."""
        from josefk.server.control.node import open_replica_partition

        partition = open_replica_partition(self, topic, index, topic_id, replicas)
        self.partitions[(topic, index)] = partition
        return partition

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        """StopReplica: stop serving a replica, and delete its log when asked."""
        key = (topic, index)
        partition = self.partitions.pop(key, None)
        if partition is not None:
            partition.stop()
        if delete:
            self.log_manager.delete_log(topic, index)
        self.purgatory.notify(key)

    def on_partition_data(self, partition: Partition) -> None:
        self._on_data(partition)

    def on_partitions_offline(self, keys: list[tuple[str, int]]) -> None:
        """Their log directory failed: no longer followed here, and whoever waits on them
        is woken (their logs answer KAFKA_STORAGE_ERROR from now on)."""
        if self.cluster is None and keys:
            self.partitions.touch()  # Metadata now reports them leaderless
        for key in keys:
            if self.cluster is not None and self.cluster.fetchers is not None:
                self.cluster.fetchers.stop(key)
            partition = self.partitions.get(key)
            if partition is not None:
                self.on_partition_append(partition)  # followers' long polls too
            self.purgatory.notify(key)

    def on_follower_fetch(self, partition: Partition, replica: int, fetch_offset: int) -> None:
        """A follower fetched ``partition`` from ``fetch_offset`` (it has everything below)."""
        partition.record_follower_fetch(replica, fetch_offset, now_ms())
        if self.cluster is not None:
            self.cluster.on_follower_fetch(partition, replica)

    async def group_write_replicated(self, group_id: str) -> bool:
        """Wait until what the group coordinator last wrote for ``group_id`` is replicated
        to the ISR (``offsets.commit.timeout.ms``), as Kafka's coordinator does before it
        answers; False if the partition moved away or the time ran out."""
        index = self.group_coordinator.partition_for(group_id)
        partition = self.partition(OFFSETS_TOPIC, index)
        if partition is None or not partition.is_leader:
            return False
        target = partition.log.log_end_offset
        deadline = trio.current_time() + self.config.values["offsets.commit.timeout.ms"] / 1000
        while partition.high_watermark < target:
            remaining = deadline - trio.current_time()
            if (remaining <= 0 or self.partition(OFFSETS_TOPIC, index) is not partition
                    or not partition.is_leader):
                return False
            await self.purgatory.wait_any([(OFFSETS_TOPIC, index)], remaining)
        return True

    def on_leadership_change(self) -> None:
        """LeaderAndIsr or StopReplica changed what this broker leads."""
        self.group_coordinator.on_leadership_change()
        self.txn_service.on_leadership_change()

    # --- what the transaction coordinator needs (cluster.txn_host.TxnHost) ---

    async def next_producer_id(self) -> int:
        if self.cluster is None:
            return self.producer_ids.next_id()
        from josefk.cluster.coordinator.transaction.state import TxnError
        from josefk.server.control.producer_id_blocks import ProducerIdUnavailableError

        try:
            return await self.cluster.producer_ids.next_id()
        except ProducerIdUnavailableError as e:
            raise TxnError(COORDINATOR_LOAD_IN_PROGRESS) from e

    async def wait_replicated(self, partition: Partition, end_offset: int,
                              timeout_s: float) -> int:
        return await wait_replicated(self, partition, end_offset, timeout_s)

    async def write_txn_markers(self, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int, commit: bool,
                                partitions: Iterable[TopicPartition]
                                ) -> tuple[dict[TopicPartition, int], set[TopicPartition]]:
        return await self.txn_markers.write(producer_id, producer_epoch, coordinator_epoch,
                                            commit, partitions)

    def partition_view(self, topic: str, index: int) -> PartitionView | None:
        """The partition's leader, epoch, replicas and ISR as the cluster knows them."""
        if self.cluster is not None:
            return self.cluster.partition_view(topic, index)
        partition = self.partitions.get((topic, index))
        if partition is not None:
            if self.log_manager.is_offline(topic, index):
                # As a one-node Kafka's controller: no leader, the replica offline.
                return PartitionView(-1, partition.leader_epoch, tuple(partition.replicas),
                                     (), (self.node_id,))
            return partition.view()
        stored = self.store.get(topic) if (topic, index) in self._leaderless else None
        if stored is not None:
            return PartitionView(-1, 0, stored.partitions[index], (), (self.node_id,))
        unopened = self._unopened.get((topic, index))
        # What the Partition will say once opened: this broker leads, alone in the ISR.
        return (PartitionView(self.node_id, 0, unopened.partitions[index], (self.node_id,))
                if unopened is not None else None)

    def live_brokers(self) -> list[BrokerInfo]:
        """The live brokers as the client asking sees them: on its listener."""
        return self.store.brokers(current_session.get().listener or None)

    @property
    def controller_id(self) -> int:
        """The active controller (a single broker is its own)."""
        return self.cluster.cache.controller_id if self.cluster is not None else self.node_id

    def close_partitions(self, name: str) -> None:
        for key in [k for k in self._unopened if k[0] == name]:
            del self._unopened[key]
        for key in [k for k in self.partitions if k[0] == name]:
            del self.partitions[key]
            self.log_manager.delete_log(*key)
            self.purgatory.notify(key)
        self._leaderless = {k for k in self._leaderless if k[0] != name}

    def reconfigure(self, name: str) -> None:
        """Apply a topic's changed configs to its open logs."""
        config = self.log_config_for(name)
        for (topic, _), partition in self.partitions.items():
            if topic == name:
                partition.log.reconfigure(config)

    def _advertised_listener(self) -> tuple[str, int]:
        listener = (self.config.advertised_listeners or self.config.listeners)[0]
        return listener.host or "127.0.0.1", listener.port

    def _endpoints(self, bound: Mapping[str, int]) -> dict[str, BrokerInfo]:
        """This broker on each advertised listener (a port 0 listener: the port bound)."""
        rack = self.config.values["broker.rack"]
        return {x.name: BrokerInfo(self.node_id, x.host or "127.0.0.1", x.port or bound[x.name],
                                   rack)
                for x in self.config.advertised_listeners or self.config.listeners}

    def _registered_endpoints(self) -> tuple[Endpoint, ...]:
        """Every advertised listener, for ``/brokers/ids/<id>`` (Kafka registers all)."""
        from josefk.cluster.zk.znodes import Endpoint

        protocols = {x.name: x.security_protocol for x in self.config.listeners}
        return tuple(Endpoint(name, info.host, info.port, protocols[name])
                     for name, info in self.endpoints.items())

    def advertised_endpoint(self) -> tuple[str, int]:
        """The host and port clients are told to connect to: on the listener of the request
        in hand (FindCoordinator), else the first advertised listener."""
        endpoint = self.endpoints.get(current_session.get().listener)
        if endpoint is not None:
            return endpoint.host, endpoint.port
        return self.local_broker.host, self.local_broker.port

    def describe_topic_configs(self, name: str, overrides: Mapping[str, str]) -> list[Any]:
        return topic_config_entries(overrides, self.config)

    def _on_data(self, partition: Partition) -> None:
        self.purgatory.notify((partition.topic, partition.index))

    def on_partition_append(self, partition: Partition) -> None:
        """New records: wake the followers' long polls (they wait on their own key)."""
        self.purgatory.notify(follower_key(partition.topic, partition.index))

    async def create_topic(self, name: str, num_partitions: int = -1,
                           replication_factor: int = -1,
                           assignment: dict[int, list[int]] | None = None,
                           configs: dict[str, str] | None = None, validate_only: bool = False
                           ) -> Topic:
        topic = await self.store.create_topic(name, num_partitions, replication_factor,
                                        assignment=assignment, configs=configs,
                                        validate_only=validate_only)
        if not validate_only:
            self.open_partitions(topic, defer=True)
        return topic

    # --- requests -----------------------------------------------------------------------

    async def dispatch(self, request: Request) -> list[Part] | None:
        result: Any
        if self.client_quotas.enabled:
            result, throttle_ms = await self.client_quotas.serve(
                request, current_session.get().principal,
                functools.partial(handler(request.api_key), self, request))
            if throttle_ms:
                throttle_s.set(throttle_ms / 1000)  # the connection mutes itself
        else:
            result = await handler(request.api_key)(self, request)
        if result is None:
            return None
        if self.metrics is not None:
            # The response's own error code (not its partitions' or resources').
            code = (result.get("error_code") if isinstance(result, dict)
                    else getattr(result, "error_code", None))
            if code:
                self.metrics.error(self.metrics.name(request), int(code))
        if isinstance(result, list):
            return result
        return [encode_response(request.api_key, request.api_version, request.correlation_id,
                                result)]

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def bound_ports(self) -> list[int]:
        return self.sockets.bound_ports

    @property
    def quotas(self) -> ConnectionQuotas | None:
        return self.sockets.quotas

    @property
    def connection_listeners(self) -> dict[Connection, str]:
        return self.sockets.connection_listeners

    def startup(self) -> None:
        self.log_manager.startup()
        for topic in self.store.topics():
            self.open_partitions(topic)
        for hook in self.startup_hooks:
            hook()
        logger.info("broker %d loaded %d partitions from %s", self.node_id,
                    len(self.partitions), ", ".join(map(str, self.config.log_dirs)))

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled, then shut down cleanly (flush, checkpoints, marker)."""
        one_arena()  # before the first thread (kazoo's, the startup's worker)
        if self.cluster is not None:
            await self.cluster.connect()
        await trio.to_thread.run_sync(self.startup)
        try:
            async with trio.open_nursery() as nursery:
                bound = await self.sockets.start(nursery)
                host, port = self._advertised_listener()
                # Port 0 binds an ephemeral port: advertise the one we got.
                self.local_broker = BrokerInfo(self.node_id, host, port or self.bound_ports[0],
                                               self.config.values["broker.rack"])
                self.endpoints = self._endpoints(bound)
                if isinstance(self.store, LocalMetadataStore):
                    self.store.broker = self.local_broker
                    self.store.endpoints = self.endpoints
                if self.cluster is not None:
                    await self.cluster.join(nursery, self._registered_endpoints())
                nursery.start_soon(BackgroundJobs(self).run)
                nursery.start_soon(keep_frozen)
                nursery.start_soon(keep_trimmed)
                for task in self.background_tasks:
                    nursery.start_soon(task)
                self._nursery = nursery
                if self.metrics is not None:
                    await self._start_metrics(nursery)
                logger.info("josefk broker %d serving on %s (advertised %s:%d)", self.node_id,
                            ", ".join(map(str, self.config.listeners)), *self.advertised_endpoint())
                task_status.started(self)
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.shutdown)
                if self.cluster is not None:
                    await self.cluster.stop()

    async def _start_metrics(self, nursery: trio.Nursery) -> None:
        """Serve /metrics (and the console) on metrics.listener or metrics.port."""
        from josefk.server.metrics.http import metrics_endpoint
        from josefk.server.metrics.service import serve_metrics

        assert self.metrics is not None
        endpoint = metrics_endpoint(self.config.values, self.config.listeners[0].host)
        assert endpoint is not None
        self.metrics_address = await nursery.start(serve_metrics, self, self.metrics,
                                                   *endpoint)

    async def controlled_shutdown(self) -> None:
        """Before a clean stop: move this broker's leaderships elsewhere (a cluster)."""
        if self.cluster is not None:
            with trio.move_on_after(self.config.request_timeout_ms / 1000 * 2):
                await self.cluster.controlled_shutdown()

    def shutdown(self) -> None:
        logger.info("broker %d shutting down: flushing logs and writing checkpoints",
                    self.node_id)
        self.log_manager.shutdown()
        self.partitions.clear()

    # --- admin (topics, configs, records) ---

    async def delete_topic(self, name: str) -> Topic:
        """Drop a topic from the metadata, then close and delete its partitions' logs."""
        topic = await self.store.delete_topic(name)
        self.close_partitions(name)
        self.group_coordinator.on_topic_deleted(name)
        return topic

    async def create_partitions(self, name: str, total: int,
                                assignment: list[list[int]] | None = None,
                                validate_only: bool = False) -> Topic:
        """Grow a topic to ``total`` partitions and open the new partitions' logs."""
        topic = await self.store.create_partitions(name, total, assignment,
                                             validate_only=validate_only)
        if not validate_only:
            self.open_partitions(topic, defer=True)
        return topic

    async def alter_topic_configs(self, name: str, set: Mapping[str, str],
                                  delete: list[str], validate_only: bool = False) -> Topic:
        """Set and remove a topic's config overrides, then apply them to its open logs."""
        topic = await self.store.alter_topic_configs(name, set=set, delete=delete,
                                               validate_only=validate_only)
        if not validate_only:
            self.reconfigure(name)
        return topic
