import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from josefk.protocol.exceptions import ProtocolError
from josefk.protocol.header import (
    RequestHeader,
    is_flexible,
    parse_request_header,
    read_uvarint,
)
from josefk.protocol.messages import API_CLASSES


def client_frame(msg, correlation_id=7, client_id="my-client") -> bytes:
    msg.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(msg.encode(header=True, framed=True))[4:]


def raw_header(api_key, version, corr, client_id: bytes | None, length=None) -> bytes:
    if client_id is None:
        return struct.pack(">hhih", api_key, version, corr, -1 if length is None else length)
    n = len(client_id) if length is None else length
    return struct.pack(">hhih", api_key, version, corr, n) + client_id


def test_header_v1_from_kafka_python_client():
    frame = client_frame(MetadataRequest[4](topics=[], allow_auto_topic_creation=False))
    h = parse_request_header(frame)
    assert h == RequestHeader(3, 4, 7, "my-client", False, 10 + len("my-client"))


def test_header_v2_from_kafka_python_client():
    frame = client_frame(MetadataRequest[12](topics=None), correlation_id=-5)
    h = parse_request_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id) == (3, 12, -5)
    assert h.flexible
    assert h.client_id == "my-client"
    assert h.body_offset == 10 + len("my-client") + 1  # the empty tagged-field byte
    assert dict(h.tagged_fields) == {}


def test_flexible_apiversions_request_uses_header_v2():
    request = ApiVersionsRequest[3](client_software_name="x", client_software_version="1")
    frame = client_frame(request)
    h = parse_request_header(frame)
    assert h.flexible and h.body_offset == 10 + len("my-client") + 1


def test_null_client_id():
    h = parse_request_header(raw_header(18, 0, 1, None))
    assert h.client_id is None
    assert h.body_offset == 10


def test_any_negative_client_id_length_is_null_as_in_kafka():
    h = parse_request_header(raw_header(18, 0, 1, None, length=-7))
    assert h.client_id is None and h.body_offset == 10


def test_empty_client_id():
    h = parse_request_header(raw_header(18, 0, 1, b""))
    assert h.client_id == ""


def test_invalid_utf8_client_id_is_replaced_like_java():
    h = parse_request_header(raw_header(18, 0, 1, b"a\xffb"))
    assert h.client_id == "a\ufffdb"


def test_header_v2_tagged_fields_are_kept_raw():
    frame = raw_header(3, 12, 1, b"c") + bytes([2, 0, 2]) + b"hi" + bytes([5, 0]) + b"BODY"
    h = parse_request_header(frame)
    assert dict(h.tagged_fields) == {0: b"hi", 5: b""}
    assert frame[h.body_offset :] == b"BODY"


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x03\x00\x04\x00\x00\x00\x01\x00",  # 9 bytes
        raw_header(3, 4, 1, b"abc", length=4),  # client id overruns
        raw_header(3, 4, 1, b"abc", length=0x7FFF),
        raw_header(3, 12, 1, b"c"),  # flexible: tagged-field count missing
        raw_header(3, 12, 1, b"c") + bytes([1, 0, 5, 1, 2]),  # tag value overruns
        raw_header(3, 12, 1, b"c") + bytes([0x80] * 5 + [0]),  # 6-byte varint
    ],
)
def test_malformed_headers(frame):
    with pytest.raises(ProtocolError):
        parse_request_header(frame)


def test_unknown_api_key_is_not_flexible():
    h = parse_request_header(raw_header(999, 7, 1, b"c") + b"\x00")
    assert (h.api_key, h.flexible, h.body_offset) == (999, False, 11)
    assert not is_flexible(-1, 0)


@pytest.mark.parametrize(("version", "flexible"), [(0, False), (2, False), (3, True), (4, True)])
def test_apiversions_flexibility(version, flexible):
    assert is_flexible(ApiKey.ApiVersions, version) is flexible


def test_future_apiversions_version_is_flexible():
    # A client newer than us sends ApiVersions v5 with header v2; we must still
    # find the correlation id to answer it.
    assert is_flexible(ApiKey.ApiVersions, 5)


def test_flexibility_agrees_with_kafka_python_classes():
    for request_class, _ in API_CLASSES.values():
        for version in range(-1, request_class.max_version + 3):
            assert is_flexible(request_class.API_KEY, version) == request_class.flexible_version_q(
                version
            ), (request_class.__name__, version)
    assert is_flexible(ApiKey.Fetch, 12) and not is_flexible(ApiKey.Fetch, 11)
    assert FetchRequest.flexible_version_q(12)


@pytest.mark.parametrize(
    ("data", "value", "size"),
    [
        (b"\x00", 0, 1),
        (b"\x7f", 127, 1),
        (b"\x80\x01", 128, 2),
        (b"\xff\xff\xff\xff\x07", 2**31 - 1, 5),
        (b"\x80\x80\x80\x80\x00", 0, 5),  # non-canonical zero, as Java accepts
    ],
)
def test_read_uvarint(data, value, size):
    assert read_uvarint(data + b"junk", 0, len(data)) == (value, size)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80", b"\x80\x80\x80\x80\x80\x00", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08"],
)
def test_read_uvarint_rejects(data):
    with pytest.raises(ProtocolError):
        read_uvarint(data, 0, len(data))


def test_read_uvarint_respects_end():
    with pytest.raises(ProtocolError):
        read_uvarint(b"\x80\x01", 0, 1)


@given(st.binary(max_size=64))
def test_random_bytes_only_raise_protocol_errors(data):
    try:
        h = parse_request_header(data)
    except ProtocolError:
        return
    header_v0 = (h.api_key, h.api_version) == (ApiKey.ControlledShutdown, 0)
    assert (8 if header_v0 else 10) <= h.body_offset <= len(data)


@given(st.sampled_from(sorted(API_CLASSES)), st.integers(-2, 20), st.binary(max_size=40))
def test_random_tails_behind_valid_prefix(api_key, version, tail):
    data = struct.pack(">hhi", api_key, version, 1) + tail
    try:
        h = parse_request_header(data)
    except ProtocolError:
        return
    assert h.body_offset <= len(data)
    assert h.flexible == is_flexible(api_key, version)
