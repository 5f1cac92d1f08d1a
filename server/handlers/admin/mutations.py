"""The controller mutation quota of a CreateTopics, CreatePartitions or DeleteTopics
request (``server.quotas.mutation``): built for the request's client, and its throttle
time put in the answer, with the connection muted for it, as Kafka's
``sendResponseMaybeThrottleWithControllerQuota`` does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.network.connection import throttle_s
from josefk.server.quotas.mutation import MutationQuota
from josefk.server.security.session import current_session

if TYPE_CHECKING:
    from josefk.server.broker import Broker

#: The first version of each request whose quota is strict (KIP-599).
STRICT_SINCE = {19: 6, 20: 5, 37: 3}  # CreateTopics, DeleteTopics, CreatePartitions


def mutation_quota(broker: Broker, request: Request) -> MutationQuota:
    strict = request.api_version >= STRICT_SINCE[request.api_key]
    return broker.client_quotas.mutation_quota(current_session.get().principal,
                                               request.client_id, strict)


def throttled(quota: MutationQuota, response: Response) -> Response:
    """``response`` with the quota's throttle time, the connection muted for it."""
    throttle_ms = quota.throttle_ms
    if throttle_ms and isinstance(response, dict):
        response["throttle_time_ms"] = throttle_ms
        throttle_s.set(max(throttle_s.get(), throttle_ms / 1000))
    return response
