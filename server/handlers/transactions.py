"""Producer ids and transactions: InitProducerId (a transactional id's from the
transaction coordinator), the APIs the coordinator answers (AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions) and WriteTxnMarkers,
which a coordinator sends to partition leaders."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import re2
from kafka.protocol.admin.transactions import DescribeTransactionsResponse, ListTransactionsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import AddPartitionsToTxnResponse, WriteTxnMarkersResponse

from josefk.cluster.coordinator.transaction.effects import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    error_for_version,
    unknown_partition_errors,
)
from josefk.cluster.coordinator.transaction.records import TopicPartition
from josefk.cluster.coordinator.transaction.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV2,
    TxnError,
)
from josefk.cluster.metadata.store import INTERNAL_TOPICS
from josefk.cluster.security.acls import AclOperation as Op
from josefk.cluster.security.acls import ResourceType as Rt
from josefk.protocol import error_codes as ec
from josefk.protocol.error_codes import INVALID_REQUEST
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.transactions.markers import append_markers

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)

#: KIP-890 part 2: EndTxn v5 bumps the epoch on every transaction and answers the new one;
#: AddPartitionsToTxn v5 is a leader adding a partition for a Produce v12+.
END_TXN_V2_VERSION = 5
ADD_PARTITIONS_V2_VERSION = 5
#: ListTransactions v2 filters by a transactional id pattern (KIP-1152); one that does not
#: compile is Kafka's INVALID_REGULAR_EXPRESSION. Matched with RE2, in linear time: a client's
#: pattern cannot stall the event loop (Java's backreferences and lookarounds are refused).
PATTERN_VERSION = 2
INVALID_REGULAR_EXPRESSION = 128

TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
DescribedTxn = DescribeTransactionsResponse.TransactionState
DescribedTopic = DescribedTxn.TopicData
ListedTxn = ListTransactionsResponse.TransactionState
MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
MarkerTopicResult = MarkerResult.WritableTxnMarkerTopicResult
MarkerPartitionResult = MarkerTopicResult.WritableTxnMarkerPartitionResult


async def handle_init_producer_id(broker: Broker, request: Request) -> Response:
    """InitProducerId: a new producer id (and epoch 0), or a transactional id's from the
    transaction coordinator."""
    body = request.body
    refusal = _init_producer_id_refusal(broker, body.transactional_id)
    if refusal is not None:
        return _producer_id_answer(refusal)
    if request.api_version >= 3 and (
            (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH)):
        # KafkaApis.handleInitProducerIdRequest, before anything else: a producer id
        # without an epoch, or an epoch without an id.
        return _producer_id_answer(INVALID_REQUEST)
    if body.transactional_id is not None:
        return await init_transactional_producer_id(broker, request)
    # As Kafka's TransactionCoordinator without a transactional id: whatever producer id
    # and epoch the request carries, a new id at epoch 0 (never a bump of an id that
    # may be another producer's).
    try:
        producer_id = await broker.next_producer_id()
    except TxnError as e:
        logger.warning("InitProducerId: %s", e.__cause__ or f"error {e.code}")
        return _producer_id_answer(e.code)
    return _producer_id_answer(0, producer_id, 0)


def _init_producer_id_refusal(broker: Broker, transactional_id: str | None) -> int | None:
    """WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic."""
    authorizer = broker.authorizer
    if not authorizer.enabled:
        return None
    if transactional_id is not None:
        if authorizer.allowed(Op.WRITE, Rt.TRANSACTIONAL_ID, transactional_id):
            return None
        return ec.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if (authorizer.cluster_allowed(Op.IDEMPOTENT_WRITE, log_denial=False)
            or authorizer.allowed_some(Op.WRITE, Rt.TOPIC)):
        return None
    return ec.CLUSTER_AUTHORIZATION_FAILED


def _producer_id_answer(error_code: int, producer_id: int = NO_PRODUCER_ID,
            producer_epoch: int = NO_PRODUCER_EPOCH) -> Response:
    return {"throttle_time_ms": 0, "error_code": error_code, "producer_id": producer_id,
            "producer_epoch": producer_epoch}


async def init_transactional_producer_id(broker: Broker, request: Request) -> Response:
    """InitProducerId for a transactional id."""
    body = request.body
    version = request.api_version
    producer_id, epoch = (body.producer_id, body.producer_epoch) if version >= 3 else (-1, -1)
    result = await broker.txn_service.init_producer_id(
        body.transactional_id, body.transaction_timeout_ms, producer_id, epoch)
    return {"throttle_time_ms": 0,
            "error_code": error_for_version(result.error, INIT_PRODUCER_ID, version),
            "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}


# --- AddPartitionsToTxn ----------------------------------------------------------------------


def _topic_results(errors: dict[TopicPartition, int], version: int) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(PartitionResult(
            partition_index=tp.partition,
            partition_error_code=error_for_version(error, ADD_PARTITIONS_TO_TXN, version)))
    return [TopicResult(name=name, results_by_partition=parts)
            for name, parts in by_topic.items()]


def _partitions(topics: Iterable[Any]) -> list[TopicPartition]:
    return list(dict.fromkeys(TopicPartition(t.name, p) for t in topics for p in t.partitions))


def _exists(broker: Broker, tp: TopicPartition) -> bool:
    topic = broker.store.get(tp.topic)
    return topic is not None and tp.partition in topic.partitions


async def _add_or_verify(broker: Broker, transactional_id: str, producer_id: int,
                         producer_epoch: int, topics: Iterable[Any], verify_only: bool,
                         from_client: bool = False, txn_version: int = 0
                         ) -> dict[TopicPartition, int]:
    partitions = _partitions(topics)
    service = broker.txn_service
    if from_client:
        refused = _client_refusals(broker, transactional_id, partitions)
        if refused is not None:
            return refused
    if verify_only:
        return service.coordinator.verify_partitions(transactional_id, producer_id,
                                                     producer_epoch, partitions)
    refused = unknown_partition_errors(partitions, lambda tp: _exists(broker, tp))
    if refused is not None:
        return refused
    error = await service.add_partitions(transactional_id, producer_id, producer_epoch,
                                         partitions, txn_version)
    return dict.fromkeys(partitions, error)


def _client_refusals(broker: Broker, transactional_id: str,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, int] | None:
    """A client's AddPartitionsToTxn (v0-3): WRITE on the transactional id, then on each
    topic; internal topics are never the client's to add. Any refusal fails the whole
    request: OPERATION_NOT_ATTEMPTED for the partitions that passed (unknown ones
    UNKNOWN_TOPIC_OR_PARTITION)."""
    authorizer = broker.authorizer
    if not authorizer.allowed(Op.WRITE, Rt.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ec.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    topics = {tp.topic for tp in partitions}
    denied = authorizer.denied_names(Op.WRITE, Rt.TOPIC, topics - INTERNAL_TOPICS)
    denied |= topics & INTERNAL_TOPICS
    if not denied:
        return None
    return {tp: ec.TOPIC_AUTHORIZATION_FAILED if tp.topic in denied
            else ec.OPERATION_NOT_ATTEMPTED if _exists(broker, tp)
            else ec.UNKNOWN_TOPIC_OR_PARTITION for tp in partitions}


async def handle_add_partitions(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    if version < 4:
        errors = await _add_or_verify(broker, body.v3_and_below_transactional_id,
                                      body.v3_and_below_producer_id,
                                      body.v3_and_below_producer_epoch,
                                      body.v3_and_below_topics, verify_only=False,
                                      from_client=True)
        return {"throttle_time_ms": 0,
                "results_by_topic_v3_and_below": _topic_results(errors, version)}
    if not broker.authorizer.cluster_allowed(Op.CLUSTER_ACTION):  # only brokers send v4+
        return {"throttle_time_ms": 0, "error_code": ec.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    results = []
    # v5: a partition leader adds the partitions of a Produce v12+ (transactions v2).
    txn_version = TV2 if version >= ADD_PARTITIONS_V2_VERSION else 0
    for txn in body.transactions:
        errors = await _add_or_verify(broker, txn.transactional_id, txn.producer_id,
                                      txn.producer_epoch, txn.topics, txn.verify_only,
                                      txn_version=txn_version)
        results.append(TxnResult(transactional_id=txn.transactional_id,
                                 topic_results=_topic_results(errors, version)))
    return {"throttle_time_ms": 0, "error_code": ec.NONE, "results_by_transaction": results}


# --- AddOffsetsToTxn, EndTxn ----------------------------------------------------------------


async def handle_add_offsets(broker: Broker, request: Request) -> Response:
    body = request.body
    authorizer = broker.authorizer
    if not authorizer.allowed(Op.WRITE, Rt.TRANSACTIONAL_ID, body.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ec.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not authorizer.allowed(Op.READ, Rt.GROUP, body.group_id):
        return {"throttle_time_ms": 0, "error_code": ec.GROUP_AUTHORIZATION_FAILED}
    error = await broker.txn_service.add_offsets(body.transactional_id, body.producer_id,
                                                 body.producer_epoch, body.group_id)
    return {"throttle_time_ms": 0,
            "error_code": error_for_version(error, ADD_OFFSETS_TO_TXN, request.api_version)}


async def handle_end_txn(broker: Broker, request: Request) -> Response:
    body = request.body
    if not broker.authorizer.allowed(Op.WRITE, Rt.TRANSACTIONAL_ID, body.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ec.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    txn_version = TV2 if request.api_version >= END_TXN_V2_VERSION else 0
    error, producer_id, epoch = await broker.txn_service.end_txn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed,
        txn_version)
    return {"throttle_time_ms": 0,
            "error_code": error_for_version(error, END_TXN, request.api_version),
            "producer_id": producer_id, "producer_epoch": epoch}


# --- DescribeTransactions, ListTransactions --------------------------------------------------


async def handle_describe(broker: Broker, request: Request) -> Response:
    """DESCRIBE on each transactional id; only the topics the client may DESCRIBE."""
    authorizer = broker.authorizer
    states = []
    for transactional_id in request.body.transactional_ids:
        if not authorizer.allowed(Op.DESCRIBE, Rt.TRANSACTIONAL_ID, transactional_id):
            states.append(DescribedTxn(
                error_code=ec.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                transactional_id=transactional_id, transaction_state="",
                transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                producer_epoch=0, topics=[]))
            continue
        d = broker.txn_service.coordinator.describe(transactional_id)
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(d.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic in authorizer.denied_names(Op.DESCRIBE, Rt.TOPIC, list(by_topic)):
            del by_topic[topic]
        states.append(DescribedTxn(
            error_code=d.error, transactional_id=transactional_id,
            transaction_state=d.state, transaction_timeout_ms=d.timeout_ms,
            transaction_start_time_ms=d.start_timestamp, producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            topics=[DescribedTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return {"throttle_time_ms": 0, "transaction_states": states}


async def handle_list(broker: Broker, request: Request) -> Response:
    body = request.body
    duration = body.duration_filter if request.api_version >= 1 else -1
    pattern = body.transactional_id_pattern if request.api_version >= PATTERN_VERSION else None
    try:
        # As Java's Pattern.matcher(id).matches(): the whole id.
        matches = re2.compile(pattern).fullmatch if pattern else None
    except re2.error:
        logger.info("ListTransactions: invalid transactional id pattern %r", pattern[:200])
        return {"throttle_time_ms": 0, "error_code": INVALID_REGULAR_EXPRESSION,
                "unknown_state_filters": [], "transaction_states": []}
    listing = broker.txn_service.coordinator.list_transactions(
        body.producer_id_filters, body.state_filters, duration)
    hidden = broker.authorizer.denied_names(Op.DESCRIBE, Rt.TRANSACTIONAL_ID,
                                            (t for t, _, _ in listing.transactions))
    return {"throttle_time_ms": 0, "error_code": listing.error,
            "unknown_state_filters": list(listing.unknown_state_filters),
            "transaction_states": [
                ListedTxn(transactional_id=t, producer_id=pid, transaction_state=state)
                for t, pid, state in listing.transactions
                if t not in hidden and (matches is None or matches(t))]}


# --- WriteTxnMarkers -------------------------------------------------------------------------


async def handle_write_markers(broker: Broker, request: Request) -> Response:
    """Sent by transaction coordinators: ALTER or CLUSTER_ACTION on the cluster."""
    authorizer = broker.authorizer
    allowed = (not authorizer.enabled or authorizer.cluster_allowed(Op.ALTER, log_denial=False)
               or authorizer.cluster_allowed(Op.CLUSTER_ACTION))
    results = []
    for marker in request.body.markers:
        partitions = [TopicPartition(t.name, p) for t in marker.topics
                      for p in t.partition_indexes]
        errors = await append_markers(broker, marker.producer_id, marker.producer_epoch,
                                      marker.coordinator_epoch, marker.transaction_result,
                                      partitions) if allowed else dict.fromkeys(
            partitions, ec.CLUSTER_AUTHORIZATION_FAILED)
        by_topic: dict[str, list[Any]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(
                MarkerPartitionResult(partition_index=tp.partition, error_code=errors[tp]))
        results.append(MarkerResult(producer_id=marker.producer_id, topics=[
            MarkerTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]))
    return {"markers": results}


HANDLERS = {
    ApiKey.InitProducerId: handle_init_producer_id,
    ApiKey.AddPartitionsToTxn: handle_add_partitions,
    ApiKey.AddOffsetsToTxn: handle_add_offsets,
    ApiKey.EndTxn: handle_end_txn,
    ApiKey.DescribeTransactions: handle_describe,
    ApiKey.ListTransactions: handle_list,
    ApiKey.WriteTxnMarkers: handle_write_markers,
}
