"""Produce: append each partition's record batch as leader (v13: topics named by id)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NamedTuple

import trio
from kafka.protocol.api_key import ApiKey

from josefk.cluster.coordinator.transaction.records import TopicPartition
from josefk.cluster.metadata.store import INTERNAL_TOPICS
from josefk.cluster.partition import Partition, PartitionError
from josefk.cluster.security.acls import AclOperation, ResourceType
from josefk.log.errors import StorageError
from josefk.log.log import RecordValidationError
from josefk.protocol.error_codes import (
    CORRUPT_MESSAGE,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TOPIC_EXCEPTION,
    INVALID_TXN_STATE,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    REQUEST_TIMED_OUT,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID,
)
from josefk.protocol.header import Buffer
from josefk.protocol.messages import Request
from josefk.protocol.produce_request import TOPIC_ID_VERSION, ProduceRequestData
from josefk.protocol.produce_response import PartitionResult, encode_produce_response
from josefk.protocol.record_batch import RecordBatchError
from josefk.server.handlers import Response, partition_or_error
from josefk.server.network.connection import CloseConnection
from josefk.server.security.checks import produce_denied_topics
from josefk.server.transactions.verification import (
    ADD_PRODUCE_VERSION,
    produce_error,
    transactional_producer,
)

if TYPE_CHECKING:
    from josefk.server.broker import Broker


logger = logging.getLogger(__name__)

#: The client id whose produce requests may write to internal topics (Kafka's
#: ``AdminUtils.ADMIN_CLIENT_ID``); josefk's own coordinators append directly.
ADMIN_CLIENT_ID = "__admin_client"


class Guard(NamedTuple):
    """A verification guard taken for one partition of this produce."""

    partition: Partition
    producer_id: int
    token: object


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    if request.api_version >= TOPIC_ID_VERSION:
        body = _named(broker, body)
    denied: frozenset[str] = frozenset()
    if broker.authorizer.enabled:
        if not _transactional_id_allowed(broker, body):
            return _refuse_all(request, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        denied = produce_denied_topics(broker.authorizer, body)
    if len(_transactional_producers(body, denied)) > 1:
        # Kafka's handleProduceAppend throws InvalidPidMappingException: the whole request.
        logger.info("produce refused: transactional batches of more than one producer id")
        return _refuse_all(request, INVALID_PRODUCER_ID_MAPPING)
    refused: dict[TopicPartition, int] = {}
    guards: dict[TopicPartition, Guard] = {}
    add = request.api_version >= ADD_PRODUCE_VERSION
    if body.transactional_id and broker.txn_verifier.checks(add):
        refused, guards = await _verify(broker, body, request.api_version, denied)
    topics = []
    failed = False
    waiting: list[tuple[PartitionResult, Partition, int]] = []
    internal_allowed = request.client_id == ADMIN_CLIENT_ID
    for topic_data in body.topic_data:
        partitions = []
        for data in topic_data.partition_data:
            key = TopicPartition(topic_data.name, data.index)
            if topic_data.topic_id is not None and not topic_data.name:  # an unknown id
                result, appended = PartitionResult(data.index, UNKNOWN_TOPIC_ID), None
            elif topic_data.name in denied:
                result, appended = PartitionResult(data.index, TOPIC_AUTHORIZATION_FAILED), None
            elif key in refused:
                result, appended = _refused(data.index, refused[key]), None
            else:
                result, appended = _append(broker, topic_data.name, data.index, data.records,
                                           body.acks, guards.get(key), internal_allowed)
            failed = failed or result.error_code != 0
            partitions.append(result)
            if body.acks == -1 and appended is not None:
                waiting.append((result, *appended))
        topics.append((_topic_key(topic_data, request.api_version), partitions))
    if waiting:
        await _until_replicated(broker, waiting, body.timeout_ms / 1000)
    if failed and broker.metrics is not None:
        for _, results in topics:
            for result in results:
                if result.error_code:
                    broker.metrics.error("Produce", result.error_code)
    if body.acks == 0:
        if failed:
            # The producer reads no response; Kafka drops the connection so it
            # refreshes its metadata and notices.
            raise CloseConnection("acks=0 produce failed")
        return None
    return [encode_produce_response(request.api_version, request.correlation_id, topics)]


def _transactional_id_allowed(broker: Broker, body: Any) -> bool:
    """A produce carrying transactional batches needs WRITE on its transactional id."""
    transactional = any(transactional_producer(d.records) is not None
                        for t in body.topic_data for d in t.partition_data)
    return not transactional or (
        body.transactional_id is not None and broker.authorizer.allowed(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id))


def _named(broker: Broker, body: ProduceRequestData) -> ProduceRequestData:
    """Produce v13+: each topic id's name, or "" for ids this broker does not know."""
    return body._replace(topic_data=[
        t._replace(name=(broker.topic_name_for_id(t.topic_id) if t.topic_id else None) or "")
        for t in body.topic_data])


def _topic_key(topic_data: Any, version: int) -> Any:
    """How the response names a topic: by id from v13, else by name."""
    return topic_data.topic_id if version >= TOPIC_ID_VERSION else topic_data.name


def _transactional_producers(body: Any, denied: frozenset[str]) -> set[tuple[int, int]]:
    """The (producer id, epoch) pairs of the transactional batches the request may write
    (none looked for in a request of one partition: it cannot hold two)."""
    if sum(len(t.partition_data) for t in body.topic_data) < 2:
        return set()
    return {found for t in body.topic_data if t.name not in denied for d in t.partition_data
            if (found := transactional_producer(d.records)) is not None}


def _refuse_all(request: Request, error: int) -> Response:
    """Kafka's ProduceRequest error response: every partition gets ``error``; with acks=0
    there is none, and the connection is closed instead."""
    body = request.body
    if body.acks == 0:
        raise CloseConnection(f"acks=0 produce refused: error {error}")
    topics = [(_topic_key(t, request.api_version),
               [PartitionResult(p.index, error) for p in t.partition_data])
              for t in body.topic_data]
    return [encode_produce_response(request.api_version, request.correlation_id, topics)]


async def _verify(broker: Broker, body: Any, version: int, denied: frozenset[str]
                  ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, Guard]]:
    """KIP-890: ask the coordinator about each partition where this transactional produce
    would start the producer's transaction (part 1: is it in the transaction? part 2,
    Produce v12+: add it); (refused partitions with the produce error, guards of the
    verified ones). Topics the producer may not write are left out."""
    verifier = broker.txn_verifier
    guards: dict[TopicPartition, Guard] = {}
    producer = None
    for topic_data in body.topic_data:
        if topic_data.name in denied:
            continue
        for data in topic_data.partition_data:
            found = transactional_producer(data.records)
            partition = broker.partition(topic_data.name, data.index)
            if found is None or partition is None or not partition.is_leader:
                continue  # the append answers for these
            producer = found
            if verifier.needs(partition, *found):
                guards[TopicPartition(topic_data.name, data.index)] = Guard(
                    partition, found[0], verifier.start(partition, found[0]))
    if not guards or producer is None:
        return {}, {}
    answers = await verifier.verify(body.transactional_id, *producer, list(guards),
                                    add=version >= ADD_PRODUCE_VERSION)
    refused = {}
    for tp, code in answers.items():
        if code != NONE:
            refused[tp] = produce_error(code, version)
            verifier.release(guards[tp].partition, guards[tp].producer_id, guards[tp].token)
            del guards[tp]
    return refused, guards


def _refused(index: int, error: int) -> PartitionResult:
    message = ("Partition was not added to the transaction" if error == INVALID_TXN_STATE
               else "Unable to verify the partition has been added to the transaction"
               if error == NOT_ENOUGH_REPLICAS else None)
    return PartitionResult(index, error, error_message=message)


def _append(broker: Broker, topic: str, index: int, records: Buffer | None, acks: int,
            guard: Guard | None = None, internal_allowed: bool = False
            ) -> tuple[PartitionResult, tuple[Partition, int] | None]:
    """The partition's answer, and (the partition, the offset after what was appended)
    when something was.

    Internal topics take appends only from ``__admin_client`` (Kafka's
    ``ReplicaManager.appendToLocalLog``): anyone else could forge committed offsets or
    coordinator state."""
    partition = partition_or_error(broker, topic, index)
    if guard is not None:
        verifier = broker.txn_verifier
        holds = verifier.holds(guard.partition, guard.producer_id, guard.token)
        verifier.release(guard.partition, guard.producer_id, guard.token)
        if not holds:
            # A marker ended the transaction while the coordinator was asked.
            return _refused(index, INVALID_TXN_STATE), None
    if isinstance(partition, int):  # not served here
        return PartitionResult(index, partition), None
    if topic in INTERNAL_TOPICS and not internal_allowed:
        logger.info("produce to internal topic %s-%d refused", topic, index)
        return PartitionResult(index, INVALID_TOPIC_EXCEPTION), None
    if not partition.is_leader:
        return PartitionResult(index, NOT_LEADER_OR_FOLLOWER), None
    if not records:
        return PartitionResult(index, CORRUPT_MESSAGE, error_message="no records"), None
    try:
        info = partition.append_records(records, acks)
    except StorageError as e:
        # Logged where it happened; the partition and everything it holds stay as they were.
        return PartitionResult(index, e.error_code, error_message=str(e)), None
    except (RecordBatchError, PartitionError) as e:
        logger.info("produce to %s-%d rejected: %s", topic, index, e)
        result = PartitionResult(index, e.error_code, error_message=str(e),
                                 log_start_offset=partition.log.log_start_offset)
        if isinstance(e, RecordValidationError):
            result.record_errors = list(e.record_errors)
        return result, None
    if broker.metrics is not None and not info.duplicate:
        broker.metrics.produced(topic, len(records), info.last_offset - info.first_offset + 1)
    return (PartitionResult(index, NONE, info.first_offset, info.log_append_time,
                            info.log_start_offset), (partition, info.last_offset + 1))


async def _until_replicated(broker: Broker,
                            waiting: list[tuple[PartitionResult, Partition, int]],
                            timeout_s: float) -> None:
    """acks=all: hold the answer until each partition's high watermark passes what was
    appended (Kafka's DelayedProduce), or ``timeout.ms`` runs out (REQUEST_TIMED_OUT).
    Replicated with fewer in-sync replicas than ``min.insync.replicas`` answers
    NOT_ENOUGH_REPLICAS_AFTER_APPEND; a leader that lost its leadership meanwhile
    answers NOT_LEADER_OR_FOLLOWER."""
    pending = _settle(broker, waiting)
    if not pending:
        return  # the usual case with one replica: nothing to wait for
    deadline = trio.current_time() + timeout_s
    while pending:
        remaining = deadline - trio.current_time()
        if remaining <= 0:
            for response, _, _ in pending:
                response.error_code = REQUEST_TIMED_OUT
            return
        await broker.purgatory.wait_any({(p.topic, p.index) for _, p, _ in pending}, remaining)
        pending = _settle(broker, pending)


def _settle(broker: Broker, waiting: list[tuple[PartitionResult, Partition, int]]
            ) -> list[tuple[PartitionResult, Partition, int]]:
    """Answer the partitions whose wait is over; return the others."""
    still = []
    for response, partition, end in waiting:
        current = broker.partition(partition.topic, partition.index)
        if current is not partition or not partition.is_leader:
            response.error_code = NOT_LEADER_OR_FOLLOWER
        elif partition.high_watermark >= end:
            if len(partition.isr) < partition.log.config.min_insync_replicas:
                response.error_code = NOT_ENOUGH_REPLICAS_AFTER_APPEND
        else:
            still.append((response, partition, end))
    return still


HANDLERS = {ApiKey.Produce: handle}
