"""Producer ids in a cluster: blocks of 1000 from the controller (AllocateProducerIds),
so no two brokers ever hand out the same id (Kafka 3.9's ``RPCProducerIdManager``).
The next block is asked for once 90% of the current one is used."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import trio

from josefk.protocol.controller_messages import AllocateProducerIdsRequest
from josefk.protocol.error_codes import NONE
from josefk.server.network.peer import PeerConnection
from josefk.server.security.client import PLAINTEXT_PEERS, PeerSecurity

logger = logging.getLogger(__name__)

ALLOCATE_VERSION = 0
PREFETCH_REMAINING = 100  # of a block of 1000: ask for the next one at 90%
RETRY_S = 0.2


class ProducerIdUnavailableError(Exception):
    """No block could be had from the controller in time."""


class ProducerIdBlocks:
    """Hands out producer ids from blocks the controller allocates."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 controller_endpoint: Callable[[], tuple[str, int] | None],
                 timeout_s: float, security: PeerSecurity = PLAINTEXT_PEERS) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller_endpoint = controller_endpoint
        self.timeout_s = timeout_s
        self.security = security
        self._blocks: list[tuple[int, int]] = []  # (next id, end exclusive)
        self._lock = trio.Lock()

    async def next_id(self) -> int:
        """A producer id nobody else was given; ProducerIdUnavailableError after the
        request timeout without a controller answer."""
        async with self._lock:
            if not self._blocks or self._blocks[0][0] >= self._blocks[0][1]:
                self._blocks = [b for b in self._blocks if b[0] < b[1]]
                if not self._blocks:
                    self._blocks.append(await self._fetch_block())
            start, end = self._blocks[0]
            self._blocks[0] = (start + 1, end)
            if len(self._blocks) == 1 and end - (start + 1) <= PREFETCH_REMAINING:
                # If it cannot be had now, it is asked for again when this block runs out.
                with contextlib.suppress(ProducerIdUnavailableError):
                    self._blocks.append(await self._fetch_block(patient=False))
            return start

    async def _fetch_block(self, patient: bool = True) -> tuple[int, int]:
        with trio.move_on_after(self.timeout_s if patient else RETRY_S * 5):
            while True:
                block = await self._try_once()
                if block is not None:
                    return block
                await trio.sleep(RETRY_S)
        raise ProducerIdUnavailableError("no producer id block from the controller in time")

    async def _try_once(self) -> tuple[int, int] | None:
        endpoint = self.controller_endpoint()
        if endpoint is None:
            return None
        response = await PeerConnection.once(
            endpoint, f"broker-{self.broker_id}-producer-ids", self.timeout_s,
            AllocateProducerIdsRequest(broker_id=self.broker_id,
                                       broker_epoch=self.broker_epoch()),
            ALLOCATE_VERSION, "AllocateProducerIds", self.security)
        if response is None:
            return None
        if response.error_code != NONE:
            logger.info("AllocateProducerIds: controller answered error %d",
                        response.error_code)
            return None
        return response.producer_id_start, response.producer_id_start + response.producer_id_len
