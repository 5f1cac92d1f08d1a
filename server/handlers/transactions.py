"""Transaction APIs answered by the transaction coordinator (InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions) and WriteTxnMarkers, which a coordinator sends to partition leaders."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DescribeTransactionsResponse, ListTransactionsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import AddPartitionsToTxnResponse, WriteTxnMarkersResponse

from josefk.cluster.txn_effects import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    error_for_version,
    unknown_partition_errors,
)
from josefk.cluster.txn_log import TopicPartition
from josefk.protocol import error_codes as ec
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.txn_markers import append_markers

if TYPE_CHECKING:
    from josefk.server.broker import Broker

TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
DescribedTxn = DescribeTransactionsResponse.TransactionState
DescribedTopic = DescribedTxn.TopicData
ListedTxn = ListTransactionsResponse.TransactionState
MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
MarkerTopicResult = MarkerResult.WritableTxnMarkerTopicResult
MarkerPartitionResult = MarkerTopicResult.WritableTxnMarkerPartitionResult


async def init_transactional_producer_id(broker: Broker, request: Request) -> Response:
    """InitProducerId for a transactional id (`producer_ids` hands the rest out)."""
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
                         producer_epoch: int, topics: Iterable[Any], verify_only: bool
                         ) -> dict[TopicPartition, int]:
    partitions = _partitions(topics)
    service = broker.txn_service
    if verify_only:
        return service.coordinator.verify_partitions(transactional_id, producer_id,
                                                     producer_epoch, partitions)
    refused = unknown_partition_errors(partitions, lambda tp: _exists(broker, tp))
    if refused is not None:
        return refused
    error = await service.add_partitions(transactional_id, producer_id, producer_epoch,
                                         partitions)
    return dict.fromkeys(partitions, error)


async def handle_add_partitions(broker: Broker, request: Request) -> Response:
    body = request.body
    version = request.api_version
    if version < 4:
        errors = await _add_or_verify(broker, body.v3_and_below_transactional_id,
                                      body.v3_and_below_producer_id,
                                      body.v3_and_below_producer_epoch,
                                      body.v3_and_below_topics, verify_only=False)
        return {"throttle_time_ms": 0,
                "results_by_topic_v3_and_below": _topic_results(errors, version)}
    results = []
    for txn in body.transactions:
        errors = await _add_or_verify(broker, txn.transactional_id, txn.producer_id,
                                      txn.producer_epoch, txn.topics, txn.verify_only)
        results.append(TxnResult(transactional_id=txn.transactional_id,
                                 topic_results=_topic_results(errors, version)))
    return {"throttle_time_ms": 0, "error_code": ec.NONE, "results_by_transaction": results}


# --- AddOffsetsToTxn, EndTxn ----------------------------------------------------------------


async def handle_add_offsets(broker: Broker, request: Request) -> Response:
    body = request.body
    error = await broker.txn_service.add_offsets(body.transactional_id, body.producer_id,
                                                 body.producer_epoch, body.group_id)
    return {"throttle_time_ms": 0,
            "error_code": error_for_version(error, ADD_OFFSETS_TO_TXN, request.api_version)}


async def handle_end_txn(broker: Broker, request: Request) -> Response:
    body = request.body
    error = await broker.txn_service.end_txn(body.transactional_id, body.producer_id,
                                             body.producer_epoch, body.committed)
    return {"throttle_time_ms": 0,
            "error_code": error_for_version(error, END_TXN, request.api_version),
            "producer_id": -1, "producer_epoch": -1}


# --- DescribeTransactions, ListTransactions --------------------------------------------------


async def handle_describe(broker: Broker, request: Request) -> Response:
    states = []
    for transactional_id in request.body.transactional_ids:
        d = broker.txn_service.coordinator.describe(transactional_id)
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(d.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
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
    listing = broker.txn_service.coordinator.list_transactions(
        body.producer_id_filters, body.state_filters, duration)
    return {"throttle_time_ms": 0, "error_code": listing.error,
            "unknown_state_filters": list(listing.unknown_state_filters),
            "transaction_states": [
                ListedTxn(transactional_id=t, producer_id=pid, transaction_state=state)
                for t, pid, state in listing.transactions]}


# --- WriteTxnMarkers -------------------------------------------------------------------------


async def handle_write_markers(broker: Broker, request: Request) -> Response:
    results = []
    for marker in request.body.markers:
        partitions = [TopicPartition(t.name, p) for t in marker.topics
                      for p in t.partition_indexes]
        errors = await append_markers(broker, marker.producer_id, marker.producer_epoch,
                                      marker.coordinator_epoch, marker.transaction_result,
                                      partitions)
        by_topic: dict[str, list[Any]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(
                MarkerPartitionResult(partition_index=tp.partition, error_code=errors[tp]))
        results.append(MarkerResult(producer_id=marker.producer_id, topics=[
            MarkerTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]))
    return {"markers": results}


HANDLERS = {
    ApiKey.AddPartitionsToTxn: handle_add_partitions,
    ApiKey.AddOffsetsToTxn: handle_add_offsets,
    ApiKey.EndTxn: handle_end_txn,
    ApiKey.DescribeTransactions: handle_describe,
    ApiKey.ListTransactions: handle_list,
    ApiKey.WriteTxnMarkers: handle_write_markers,
}
