"""KIP-890 part 1: a partition leader verifies with the transaction coordinator that a
transactional produce belongs to an ongoing transaction before it appends one that would
start a transaction on the partition (Kafka 3.9's ``handleProduceAppend``,
``AddPartitionsToTxnManager`` and ``VerificationGuard``). Part 2 (transactions v2): for a
Produce v12+ or a TxnOffsetCommit v5+ the leader asks the coordinator to add the partition
instead (AddPartitionsToTxn v5 without verify_only), whatever
``transaction.partition.verification.enable`` says: the client no longer adds it.

A guard is taken before asking the coordinator; a marker written for the producer on the
partition meanwhile drops it, and the append goes ahead only while it holds, so a late
batch cannot reopen a transaction the coordinator has just ended.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from josefk.cluster.coordinator.transaction.records import (
    TRANSACTION_STATE_TOPIC,
    TopicPartition,
    partitions_by_topic,
)
from josefk.cluster.coordinator.transaction.state import TV2
from josefk.cluster.partition import Partition
from josefk.protocol import error_codes as ec
from josefk.protocol.record_batch import RecordBatchError, parse_header
from josefk.server.network.peer import PeerError, PeerPool

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)

VERIFY_VERSION = 4
ADD_VERSION = 5
#: The first versions whose clients leave adding partitions to the leaders (KIP-890 part 2).
ADD_PRODUCE_VERSION = 12
ADD_TXN_OFFSET_COMMIT_VERSION = 5
NETWORK_EXCEPTION = 13  # Kafka's NetworkException: the coordinator did not answer
# Produce v11+ / TxnOffsetCommit v4+ clients handle TRANSACTION_ABORTABLE; older ones get
# INVALID_TXN_STATE.
ABORTABLE_PRODUCE_VERSION = 11
ABORTABLE_TXN_OFFSET_COMMIT_VERSION = 4
# Verification failures an old client would not retry become NOT_ENOUGH_REPLICAS,
# which it retries without refreshing metadata.
_RETRIABLE = {ec.CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, ec.COORDINATOR_LOAD_IN_PROGRESS,
              ec.COORDINATOR_NOT_AVAILABLE, ec.NOT_COORDINATOR}


def transactional_producer(records: bytes | None) -> tuple[int, int] | None:
    """(producer id, epoch) of a produce's first batch when it is transactional."""
    if not records:
        return None
    try:
        header = parse_header(records)
    except RecordBatchError:
        return None  # the append reports it
    if header.is_transactional and header.has_producer_id:
        return header.producer_id, header.producer_epoch
    return None


def produce_error(code: int, produce_version: int) -> int:
    """A coordinator's verification answer as the produce response carries it."""
    if code == ec.PRODUCER_FENCED:
        code = ec.INVALID_PRODUCER_EPOCH
    elif code == ec.TRANSACTION_ABORTABLE and produce_version < ABORTABLE_PRODUCE_VERSION:
        code = ec.INVALID_TXN_STATE
    return ec.NOT_ENOUGH_REPLICAS if code in _RETRIABLE else code


def txn_offset_commit_error(code: int, version: int) -> int:
    """A coordinator's verification answer as a TxnOffsetCommit response carries it: as
    for Produce, except that retriable trouble is COORDINATOR_NOT_AVAILABLE (Kafka's group
    coordinator)."""
    if code == ec.PRODUCER_FENCED:
        code = ec.INVALID_PRODUCER_EPOCH
    elif code == ec.TRANSACTION_ABORTABLE and version < ABORTABLE_TXN_OFFSET_COMMIT_VERSION:
        code = ec.INVALID_TXN_STATE
    return ec.COORDINATOR_NOT_AVAILABLE if code in _RETRIABLE else code


class TxnVerifier:
    """Guards and verification requests of one broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._guards: dict[tuple[str, int, int], object] = {}
        self._peers = PeerPool(f"broker-{broker.node_id}-txn-verification",
                               broker.config.request_timeout_ms / 1000, broker.peer_security)

    @property
    def enabled(self) -> bool:
        return bool(self.broker.config.values["transaction.partition.verification.enable"])

    def checks(self, add: bool) -> bool:
        """Whether a transactional write is checked: always when it adds partitions."""
        return add or self.enabled

    def needs(self, partition: Partition, producer_id: int, producer_epoch: int | None = None
              ) -> bool:
        """Whether a write of the producer must be checked: no transaction of its epoch is
        open on the partition (one of an older epoch is a transaction v2 whose markers
        are still on their way: the next one must wait for the coordinator)."""
        return not partition.log.has_ongoing_transaction(producer_id, producer_epoch)

    def start(self, partition: Partition, producer_id: int) -> object:
        guard = object()
        self._guards[(partition.topic, partition.index, producer_id)] = guard
        return guard

    def holds(self, partition: Partition, producer_id: int, guard: object) -> bool:
        key = (partition.topic, partition.index, producer_id)
        return (self._guards.get(key) is guard
                and self.broker.partition(partition.topic, partition.index) is partition)

    def release(self, partition: Partition, producer_id: int, guard: object) -> None:
        key = (partition.topic, partition.index, producer_id)
        if self._guards.get(key) is guard:
            del self._guards[key]

    def on_marker(self, topic: str, index: int, producer_id: int) -> None:
        """A marker ended the producer's transaction here: pending verifications fail."""
        self._guards.pop((topic, index, producer_id), None)

    async def verify_one(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         partition: Partition, add: bool = False
                         ) -> tuple[int, object | None]:
        """Verify (or ``add``) one partition (a group's ``__consumer_offsets`` partition for
        TxnOffsetCommit): (the coordinator's answer, the guard to check with `holds` just
        before the append, or None when there is nothing to check)."""
        if not self.checks(add) or not self.needs(partition, producer_id, producer_epoch):
            return ec.NONE, None
        guard = self.start(partition, producer_id)
        tp = TopicPartition(partition.topic, partition.index)
        answer = (await self.verify(transactional_id, producer_id, producer_epoch, [tp],
                                    add))[tp]
        if answer != ec.NONE:
            self.release(partition, producer_id, guard)
            return answer, None
        return ec.NONE, guard

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition], add: bool = False
                     ) -> dict[TopicPartition, int]:
        """The coordinator's answer per partition: locally, or AddPartitionsToTxn to the
        broker leading the transactional id's partition (v4 verify_only; v5 to ``add``)."""
        service = self.broker.txn_service
        view = self.broker.partition_view(TRANSACTION_STATE_TOPIC,
                                          service.partition_for(transactional_id))
        if view is None or view.leader < 0:
            return dict.fromkeys(partitions, ec.COORDINATOR_NOT_AVAILABLE)
        if view.leader == self.broker.node_id:
            if add:
                error = await service.add_partitions(transactional_id, producer_id,
                                                     producer_epoch, partitions, TV2)
                return dict.fromkeys(partitions, error)
            return service.coordinator.verify_partitions(transactional_id, producer_id,
                                                         producer_epoch, partitions)
        return await self._remote(view.leader, transactional_id, producer_id, producer_epoch,
                                  partitions, add)

    async def _remote(self, leader: int, transactional_id: str, producer_id: int,
                      producer_epoch: int, partitions: list[TopicPartition], add: bool
                      ) -> dict[TopicPartition, int]:
        failed = dict.fromkeys(partitions, ec.COORDINATOR_NOT_AVAILABLE)
        cluster = self.broker.cluster
        peer = self._peers.get(leader, cluster.endpoint_of(leader) if cluster else None)
        if peer is None:
            return failed
        # A cluster's only: kafka-python's producer classes are imported on first use.
        from kafka.protocol.producer import AddPartitionsToTxnRequest

        txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        request = AddPartitionsToTxnRequest(transactions=[txn(
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=not add,
            topics=[txn.AddPartitionsToTxnTopic(name=t, partitions=ps)
                    for t, ps in partitions_by_topic(partitions).items()])])
        try:
            response = await peer.request(request, ADD_VERSION if add else VERIFY_VERSION)
        except PeerError as e:
            logger.warning("verifying %s with broker %d failed: %s", transactional_id, leader, e)
            return dict.fromkeys(partitions, NETWORK_EXCEPTION)
        if response.error_code != ec.NONE:
            return dict.fromkeys(partitions, response.error_code)
        results: dict[TopicPartition, int] = {}
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    results[TopicPartition(topic.name, p.partition_index)] = (
                        p.partition_error_code)
        return {tp: results.get(tp, ec.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
