"""Request handlers, one module per API (or family of APIs).

A handler is ``async def handle(broker, request) -> Response``: the fields of
the response (a mapping kafka-python's response class takes as keywords, or a
response object), ready frame parts (zero-copy fetch), or None for no response
at all (acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafka.protocol.api_message import ApiMessage

from josefk.protocol.messages import Request
from josefk.server.network.zero_copy import Part

if TYPE_CHECKING:
    from josefk.server.broker import Broker

Response = Mapping[str, Any] | ApiMessage | Sequence[Part] | None
Handler = Callable[["Broker", Request], Awaitable[Response]]
