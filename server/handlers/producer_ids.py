"""InitProducerId: producer ids and epochs for idempotent producers (a transactional id's
go to the transaction coordinator)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafka.protocol.api_key import ApiKey

from josefk.protocol.error_codes import COORDINATOR_LOAD_IN_PROGRESS
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.handlers.transactions import init_transactional_producer_id
from josefk.server.producer_id_blocks import ProducerIdUnavailableError

if TYPE_CHECKING:
    from josefk.server.broker import Broker


logger = logging.getLogger(__name__)


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    if body.transactional_id is not None:
        return await init_transactional_producer_id(broker, request)
    if broker.cluster is not None:
        # As Kafka for a producer without a transactional id: always a new id, from a
        # block the controller gave this broker.
        try:
            producer_id, epoch = await broker.cluster.producer_ids.next_id(), 0
        except ProducerIdUnavailableError as e:
            logger.warning("InitProducerId: %s", e)
            return {"throttle_time_ms": 0, "error_code": COORDINATOR_LOAD_IN_PROGRESS,
                    "producer_id": -1, "producer_epoch": -1}
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id,
                "producer_epoch": epoch}
    if request.api_version >= 3:
        producer_id, epoch = body.producer_id, body.producer_epoch
    else:
        producer_id, epoch = -1, -1
    producer_id, epoch = broker.producer_ids.init_idempotent(producer_id, epoch)
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id,
            "producer_epoch": epoch}


HANDLERS = {ApiKey.InitProducerId: handle}
