"""ApiVersions: the version ranges this broker serves, and its features (KIP-584).

A single broker finalizes ``transaction.version`` 2, as a one-node Kafka 4 formatted with
its latest features: Java 4.x transactional producers then take transactions v2 (KIP-890
part 2: Produce v12+ adds partitions, EndTxn v5 bumps the epoch). A ZooKeeper cluster
finalizes nothing, as Kafka 3.9 in ZooKeeper mode, whose brokers may share it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kafka.protocol.api_key import ApiKey

from josefk.protocol.error_codes import INVALID_REQUEST
from josefk.protocol.messages import Request, api_versions_response
from josefk.server.handlers import Response

#: Feature -> (min, max) supported level; Kafka 4's TransactionVersion TV_0..TV_2.
SUPPORTED_FEATURES = {"transaction.version": (0, 2)}
#: Feature -> finalized level on a single broker.
FINALIZED_FEATURES = {"transaction.version": 2}
#: The features' epoch: fixed, as they never change on a running single broker (Kafka's
#: is the metadata offset; clients only compare epochs to see a newer answer).
FINALIZED_FEATURES_EPOCH = 1
FEATURES_VERSION = 3

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
    response = api_versions_response(request.api_version, broker.advertised_versions)
    if request.api_version >= FEATURES_VERSION and broker.cluster is None:
        _add_features(response)
    return response


def _add_features(response: Any) -> None:
    response.supported_features = [
        response.SupportedFeatureKey(name=name, min_version=low, max_version=high)
        for name, (low, high) in SUPPORTED_FEATURES.items()]
    response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH
    response.finalized_features = [
        response.FinalizedFeatureKey(name=name, min_version_level=level,
                                     max_version_level=level)
        for name, level in FINALIZED_FEATURES.items()]


def _valid(value: str | None) -> bool:
    return value is not None and SOFTWARE_NAME_VERSION.fullmatch(value) is not None


HANDLERS = {ApiKey.ApiVersions: handle}
