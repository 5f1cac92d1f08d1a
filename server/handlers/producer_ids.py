"""InitProducerId: producer ids and epochs for idempotent producers (a transactional id's
go to the transaction coordinator)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafka.protocol.api_key import ApiKey

from josefk.cluster.txn_state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnError
from josefk.protocol.error_codes import INVALID_REQUEST
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.handlers.transactions import init_transactional_producer_id

if TYPE_CHECKING:
    from josefk.server.broker import Broker


logger = logging.getLogger(__name__)


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    if request.api_version >= 3 and (
            (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH)):
        # KafkaApis.handleInitProducerIdRequest, before anything else: a producer id
        # without an epoch, or an epoch without an id.
        return _answer(INVALID_REQUEST)
    if body.transactional_id is not None:
        return await init_transactional_producer_id(broker, request)
    # As Kafka's TransactionCoordinator without a transactional id: whatever producer id
    # and epoch the request carries, a new id at epoch 0 (never a bump of an id that
    # may be another producer's).
    try:
        producer_id = await broker.next_producer_id()
    except TxnError as e:
        logger.warning("InitProducerId: %s", e.__cause__ or f"error {e.code}")
        return _answer(e.code)
    return _answer(0, producer_id, 0)


def _answer(error_code: int, producer_id: int = NO_PRODUCER_ID,
            producer_epoch: int = NO_PRODUCER_EPOCH) -> Response:
    return {"throttle_time_ms": 0, "error_code": error_code, "producer_id": producer_id,
            "producer_epoch": producer_epoch}


HANDLERS = {ApiKey.InitProducerId: handle}
