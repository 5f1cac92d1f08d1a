"""ApiVersions: the version ranges this broker serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.api_key import ApiKey

from josefk.protocol.messages import Request, api_versions_response
from josefk.server.handlers import Response

if TYPE_CHECKING:
    from josefk.server.broker import Broker


async def handle(broker: Broker, request: Request) -> Response:
    return api_versions_response(request.api_version, broker.advertised_versions)


HANDLERS = {ApiKey.ApiVersions: handle}
