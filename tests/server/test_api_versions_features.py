"""ApiVersions v3+ features (KIP-584): a single broker finalizes transaction.version 2, so
Java 4.x producers take transactions v2; a ZooKeeper cluster finalizes none, as Kafka 3.9."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
from kafka.protocol.metadata import ApiVersionsRequest

from josefk.protocol.messages import decode_request
from josefk.protocol.versions import VersionRange
from josefk.server.handlers import api_versions


def ask(version: int, cluster: object | None) -> Any:
    msg = ApiVersionsRequest[version](client_software_name="test",
                                      client_software_version="1")
    msg.with_header(correlation_id=1, client_id="c")
    request = decode_request(bytes(msg.encode(header=True, framed=True))[4:])
    broker = SimpleNamespace(cluster=cluster, advertised_versions={18: VersionRange(0, 4)})
    return trio.run(api_versions.handle, broker, request)


@pytest.mark.parametrize("version", [3, 4])
def test_single_broker_finalizes_transaction_version_2(version: int) -> None:
    response = ask(version, cluster=None)
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("transaction.version", 0, 2)]
    assert [(f.name, f.min_version_level, f.max_version_level)
            for f in response.finalized_features] == [("transaction.version", 2, 2)]
    # Clients take features only from an epoch newer than any seen: never -1.
    assert response.finalized_features_epoch >= 0


def test_a_cluster_has_no_features() -> None:
    response = ask(3, cluster=object())
    assert (response.supported_features, response.finalized_features) == ([], [])
