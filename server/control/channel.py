"""The controller's connections to brokers (Kafka's ControllerChannelManager).

One queue and one sender task per live broker: requests go out in order, one at a
time, each retried (after a short backoff) until it is answered or the broker leaves
the cluster. The tasks live in the nursery of `run`, which lasts as long as this
broker is the controller.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from josefk.cluster.metadata.requests import ControllerRequest, ControllerResponse
from josefk.cluster.zk.znodes import BrokerRegistration
from josefk.server.control.wire import decode_response, encode_request
from josefk.server.network.peer import PeerConnection, PeerError
from josefk.server.security.client import PLAINTEXT_PEERS, PeerSecurity

logger = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1

Callback = Callable[[ControllerResponse], None] | None


@dataclass
class _Sender:
    broker: BrokerRegistration
    queue: trio.MemorySendChannel[tuple[ControllerRequest, Callback]]
    scope: trio.CancelScope


class BrokerChannels:
    """A `josefk.cluster.metadata.requests.ControllerChannel` over TCP."""

    def __init__(self, controller_id: int, listener: str | None, timeout_s: float,
                 security: PeerSecurity = PLAINTEXT_PEERS) -> None:
        self.controller_id = controller_id
        self.listener = listener
        self.timeout_s = timeout_s
        self.security = security
        self._senders: dict[int, _Sender] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def add_broker(self, broker: BrokerRegistration) -> None:
        self.remove_broker(broker.broker_id)
        assert self._nursery is not None, "BrokerChannels.run is not running"
        send, receive = trio.open_memory_channel[tuple[ControllerRequest, Callback]](math.inf)
        sender = _Sender(broker, send, trio.CancelScope())
        self._senders[broker.broker_id] = sender
        self._nursery.start_soon(self._send_loop, sender, receive)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.scope.cancel()
            sender.queue.close()

    def send(self, broker_id: int, request: ControllerRequest,
             on_response: Callback = None) -> None:
        sender = self._senders.get(broker_id)
        if sender is None:
            logger.debug("controller %d: broker %d is not live; dropping %s",
                         self.controller_id, broker_id, type(request).__name__)
            return
        sender.queue.send_nowait((request, on_response))

    async def _send_loop(self, sender: _Sender,
                         receive: trio.MemoryReceiveChannel[tuple[ControllerRequest, Callback]]
                         ) -> None:
        broker = sender.broker
        endpoint = broker.endpoint(self.listener) or broker.endpoint()
        if endpoint is None:
            logger.error("controller %d: broker %d has no endpoint", self.controller_id,
                         broker.broker_id)
            return
        peer = PeerConnection(endpoint.host, endpoint.port,
                              f"controller-{self.controller_id}-to-broker-{broker.broker_id}",
                              self.timeout_s, security=self.security)
        with sender.scope:
            try:
                async for request, on_response in receive:
                    response = await self._send_until_answered(peer, broker.broker_id, request)
                    if on_response is not None:
                        on_response(response)
            finally:
                await peer.aclose()

    async def _send_until_answered(self, peer: PeerConnection, broker_id: int,
                                   request: ControllerRequest) -> ControllerResponse:
        wire, version = encode_request(request)
        failures = 0
        while True:
            try:
                answer = await peer.request(wire, version)
                return decode_response(request, answer)
            except PeerError as e:
                failures += 1
                if failures == 1 or failures % 50 == 0:
                    logger.warning("controller %d: %s to broker %d failed (%s); retrying",
                                   self.controller_id, type(request).__name__, broker_id, e)
                await trio.sleep(RETRY_BACKOFF_S)
