"""The throttle time lands where Kafka's schema puts it in each hand-encoded response:
decoded back with kafka-python's response classes, version by version."""

from __future__ import annotations

import io

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceResponse

from josefk.protocol.fetch_response import encode_fetch_response
from josefk.protocol.produce_response import PartitionResult, encode_produce_response
from josefk.server.quotas.responses import FETCH, PRODUCE, part_length, with_throttle


def _decode(response_class: type, version: int, parts: list[bytes]) -> object:
    frame = b"".join(parts)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    return response_class.decode(io.BytesIO(frame[4:]), version=version, header=True)


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_produce_response_carries_the_throttle_time(version: int) -> None:
    parts = [encode_produce_response(version, 7, [("t", [PartitionResult(0, base_offset=5)])])]
    response = _decode(ProduceResponse, version, with_throttle(PRODUCE, version, parts, 1234))
    assert response.throttle_time_ms == 1234
    assert response.responses[0].partition_responses[0].base_offset == 5


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_response_carries_the_throttle_time(version: int) -> None:
    parts = encode_fetch_response(version, 9, [], session_id=0)
    patched = with_throttle(FETCH, version, list(parts), 4321)
    assert sum(map(part_length, patched)) == sum(map(part_length, parts))
    response = _decode(FetchResponse, version, patched)
    assert response.throttle_time_ms == 4321


def test_fields_get_the_throttle_time_where_they_have_one() -> None:
    assert with_throttle(19, 7, {"throttle_time_ms": 0, "topics": []}, 50) == {
        "throttle_time_ms": 50, "topics": []}
    assert with_throttle(19, 7, {"topics": []}, 50) == {"topics": []}
    assert with_throttle(0, 3, None, 50) is None
