"""Transaction markers: COMMIT/ABORT control batches written to a transaction's
partitions, locally or with WriteTxnMarkers to each partition's leader (Kafka's
``TransactionMarkerChannelManager`` and the broker side of ``handleWriteTxnMarkersRequest``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

import trio

from josefk.cluster.coordinator.records import OFFSETS_TOPIC
from josefk.cluster.coordinator.transaction.records import TopicPartition, partitions_by_topic
from josefk.cluster.partition import Partition, PartitionError
from josefk.protocol import error_codes as ec
from josefk.protocol.record_batch import RecordBatchError
from josefk.server.network.peer import PeerError, PeerPool

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1


async def wait_replicated(broker: Broker, partition: Partition, end_offset: int,
                          timeout_s: float) -> int:
    """acks=all: wait for the high watermark to reach ``end_offset`` (Kafka's
    DelayedProduce); the error code the append answers with."""
    deadline = trio.current_time() + timeout_s
    key = (partition.topic, partition.index)
    while True:
        if broker.partition(*key) is not partition or not partition.is_leader:
            return ec.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark >= end_offset:
            if len(partition.isr) < partition.log.config.min_insync_replicas:
                return ec.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return ec.NONE
        remaining = deadline - trio.current_time()
        if remaining <= 0:
            return ec.REQUEST_TIMED_OUT
        await broker.purgatory.wait_any([key], remaining)


async def append_markers(broker: Broker, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, commit: bool,
                         partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Append a marker to each partition this broker leads, acks=all; then complete the
    group coordinator's pending transactional offsets of ``__consumer_offsets`` ones."""
    results: dict[TopicPartition, int] = {}
    waiting: list[tuple[TopicPartition, Partition, int]] = []
    for tp in partitions:
        partition = broker.partition(tp.topic, tp.partition)
        if partition is None:
            known = broker.partition_view(tp.topic, tp.partition) is not None
            results[tp] = ec.NOT_LEADER_OR_FOLLOWER if known else ec.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if not partition.is_leader:
            results[tp] = ec.NOT_LEADER_OR_FOLLOWER
            continue
        try:
            info = partition.append_control_batch(producer_id, producer_epoch,
                                                  coordinator_epoch, commit)
        except (RecordBatchError, PartitionError) as e:
            logger.info("marker for producer %d on %s-%d refused: %s", producer_id, *tp, e)
            results[tp] = e.error_code
            continue
        except OSError as e:
            logger.error("marker for producer %d on %s-%d failed: %s", producer_id, *tp, e)
            results[tp] = ec.KAFKA_STORAGE_ERROR
            continue
        broker.txn_verifier.on_marker(tp.topic, tp.partition, producer_id)
        waiting.append((tp, partition, info.last_offset + 1))
    timeout_s = broker.config.request_timeout_ms / 1000
    for tp, partition, end in waiting:
        results[tp] = await wait_replicated(broker, partition, end, timeout_s)
        if tp.topic == OFFSETS_TOPIC and results[tp] == ec.NONE:
            broker.group_coordinator.complete_txn_offsets(producer_id, tp.partition, commit)
    return results


class MarkerChannel:
    """Sends markers to the leaders of a transaction's partitions, one connection per
    leader kept open between jobs."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._peers = PeerPool(f"broker-{broker.node_id}-txn-markers",
                               broker.config.request_timeout_ms / 1000, broker.peer_security)

    async def write(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                    commit: bool, partitions: Iterable[TopicPartition]
                    ) -> tuple[dict[TopicPartition, int], set[TopicPartition]]:
        """(partition → error, partitions of deleted topics)."""
        broker = self.broker
        results: dict[TopicPartition, int] = {}
        gone: set[TopicPartition] = set()
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in map(TopicPartition._make, partitions):
            view = broker.partition_view(tp.topic, tp.partition)
            if view is None:
                if broker.store.get(tp.topic) is None:
                    gone.add(tp)
                else:
                    results[tp] = ec.NOT_LEADER_OR_FOLLOWER
            elif view.leader < 0:
                results[tp] = ec.NOT_LEADER_OR_FOLLOWER  # leaderless: retried later
            else:
                by_leader.setdefault(view.leader, []).append(tp)

        async def send(leader: int, tps: list[TopicPartition]) -> None:
            if leader == broker.node_id:
                results.update(await append_markers(broker, producer_id, producer_epoch,
                                                    coordinator_epoch, commit, tps))
            else:
                results.update(await self._remote(leader, producer_id, producer_epoch,
                                                  coordinator_epoch, commit, tps))

        async with trio.open_nursery() as nursery:
            for leader, tps in by_leader.items():
                nursery.start_soon(send, leader, tps)
        return results, gone

    async def _remote(self, leader: int, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int, commit: bool, tps: list[TopicPartition]
                      ) -> dict[TopicPartition, int]:
        failed = dict.fromkeys(tps, ec.NOT_LEADER_OR_FOLLOWER)
        cluster = self.broker.cluster
        peer = self._peers.get(leader, cluster.endpoint_of(leader) if cluster else None)
        if peer is None:
            return failed
        # A cluster's only: kafka-python's producer classes are imported on first use.
        from kafka.protocol.producer import WriteTxnMarkersRequest

        marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(markers=[marker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch,
            topics=[marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in partitions_by_topic(tps).items()])])
        try:
            response = await peer.request(request, WRITE_TXN_MARKERS_VERSION)
        except PeerError as e:
            logger.warning("WriteTxnMarkers to broker %d failed: %s", leader, e)
            return failed
        results = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    results[TopicPartition(topic.name, p.partition_index)] = p.error_code
        return {tp: results.get(tp, ec.NOT_LEADER_OR_FOLLOWER) for tp in tps}
