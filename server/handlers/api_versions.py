"""ApiVersions: the version ranges this broker serves."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kafka.protocol.api_key import ApiKey

from josefk.protocol.error_codes import INVALID_REQUEST
from josefk.protocol.messages import Request, api_versions_response
from josefk.server.handlers import Response

if TYPE_CHECKING:
    from josefk.server.broker import Broker

#: Kafka's ``ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN`` (KIP-511), for the client
#: software name and version of v3+.
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


async def handle(broker: Broker, request: Request) -> Response:
    body = request.body
    if request.api_version >= 3 and not (
            _valid(body.client_software_name) and _valid(body.client_software_version)):
        # As Kafka's ApiVersionsRequest.getErrorResponse: the error and no api keys.
        return api_versions_response(request.api_version, {}, error_code=INVALID_REQUEST)
    return api_versions_response(request.api_version, broker.advertised_versions)


def _valid(value: str | None) -> bool:
    return value is not None and SOFTWARE_NAME_VERSION.fullmatch(value) is not None


HANDLERS = {ApiKey.ApiVersions: handle}
