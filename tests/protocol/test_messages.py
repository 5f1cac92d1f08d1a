import contextlib
import struct
import tracemalloc
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeTopicPartitionsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import EndTxnRequest, InitProducerIdRequest, ProduceRequest

from josefk.protocol import messages
from josefk.protocol.exceptions import (
    MalformedRequestError,
    ProtocolError,
    RequestError,
    UnknownApiError,
    UnsupportedVersionError,
)
from josefk.protocol.header import parse_request_header
from josefk.protocol.messages import (
    API_CLASSES,
    api_versions_response,
    api_versions_unsupported_frame,
    decode_request,
    encode_response,
    walk_body,
)
from josefk.protocol.produce_request import ProduceRequestData, decode_produce
from josefk.protocol.versions import SUPPORTED_VERSIONS, VersionRange, advertised_versions

RECORDS = bytes(range(256)) * 3  # opaque to this layer


def client_frame(msg, correlation_id=42, client_id="josefk-test") -> bytes:
    """A request frame as kafka-python's client would send it, minus the size prefix."""
    msg.with_header(correlation_id=correlation_id, client_id=client_id)
    framed = bytes(msg.encode(header=True, framed=True))
    assert struct.unpack(">i", framed[:4])[0] == len(framed) - 4
    return framed[4:]


def header(api_key, version, correlation_id=1, client_id=b"c", tags=None) -> bytes:
    raw = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return raw + (b"\x00" if tags is None else tags)


def assert_roundtrip(frame: bytes):
    request = decode_request(frame)
    body = frame[request.header.body_offset :]
    assert bytes(encoded_body(request)) == body
    return request


def encoded_body(request):
    """The request body encoded again by kafka-python (Produce decodes to our own tuples)."""
    body = request.body
    if request.api_key != ApiKey.Produce:
        return body.encode(version=request.api_version)
    topic_cls = ProduceRequest.TopicProduceData
    part_cls = topic_cls.PartitionProduceData
    topics = [topic_cls(name=t.name, **({} if t.topic_id is None else {"topic_id": t.topic_id}),
                        partition_data=[
        part_cls(index=p.index, records=None if p.records is None else bytes(p.records))
        for p in t.partition_data]) for t in body.topic_data]
    return ProduceRequest[request.api_version](
        transactional_id=body.transactional_id, acks=body.acks, timeout_ms=body.timeout_ms,
        topic_data=topics).encode(version=request.api_version)


# --- round trips of client-encoded requests ---------------------------------

ALL_SUPPORTED = [(k, v) for k, r in SUPPORTED_VERSIONS.items() for v in range(r[0], r[1] + 1)]


@pytest.mark.parametrize(("api_key", "version"), ALL_SUPPORTED)
def test_default_request_of_every_supported_version_roundtrips(api_key, version):
    request_class = API_CLASSES[api_key][0]
    request = assert_roundtrip(client_frame(request_class[version](), correlation_id=version))
    assert (request.api_key, request.api_version) == (api_key, version)
    assert request.correlation_id == version
    # ControlledShutdown v0 has request header v0, without a client id.
    no_client_id = (api_key, version) == (ApiKey.ControlledShutdown, 0)
    assert request.client_id == (None if no_client_id else "josefk-test")
    expected = ProduceRequestData if api_key == ApiKey.Produce else request_class
    assert type(request.body) is expected


def produce(version):
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=3, records=RECORDS)
    topic = ProduceRequest.TopicProduceData(name="events", partition_data=[part])
    return ProduceRequest[version](
        transactional_id="tx-1", acks=-1, timeout_ms=30000, topic_data=[topic]
    )


def test_produce_v13_names_topics_by_id():
    topic_id = uuid.uuid4()
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=3, records=RECORDS)
    topic = ProduceRequest.TopicProduceData(topic_id=topic_id, partition_data=[part])
    request = assert_roundtrip(client_frame(ProduceRequest[13](
        transactional_id=None, acks=1, timeout_ms=30000, topic_data=[topic])))
    (decoded,) = request.body.topic_data
    assert (decoded.name, decoded.topic_id) == ("", topic_id)
    assert decoded.partition_data[0].records == RECORDS


@pytest.mark.parametrize("version", [3, 7, 8, 9, 11, 12])
def test_produce(version):
    request = assert_roundtrip(client_frame(produce(version)))
    body = request.body
    assert body.transactional_id == "tx-1" and body.acks == -1
    (topic,) = body.topic_data
    assert topic.name == "events"
    assert topic.partition_data[0].index == 3
    assert topic.partition_data[0].records == RECORDS
    assert request.header.flexible is (version >= 9)


def fetch(version, partitions=2, **extra):
    FetchTopic = FetchRequest.FetchTopic
    parts = [
        FetchTopic.FetchPartition(
            partition=i,
            current_leader_epoch=5,
            fetch_offset=1000 + i,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for i in range(partitions)
    ]
    topic = FetchTopic(topic="t", topic_id=uuid.UUID(int=7), partitions=parts)
    return FetchRequest[version](
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[topic],
        forgotten_topics_data=[],
        rack_id="rack-a",
        **extra,
    )


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15, 17, 18])
def test_fetch(version):
    request = assert_roundtrip(client_frame(fetch(version)))
    body = request.body
    assert body.isolation_level == 1
    assert [p.fetch_offset for p in body.topics[0].partitions] == [1000, 1001]
    if version >= 13:
        assert body.topics[0].topic_id == uuid.UUID(int=7)
    else:
        assert body.topics[0].topic == "t"
    if version >= 11:
        assert body.rack_id == "rack-a"


def test_fetch_with_tagged_fields():
    replica_state = FetchRequest.ReplicaState(replica_id=1, replica_epoch=9)
    request = assert_roundtrip(
        client_frame(fetch(17, cluster_id="cluster-x", replica_state=replica_state))
    )
    assert request.body.cluster_id == "cluster-x"
    assert request.body.replica_state.replica_epoch == 9
    assert request.body.tags == {"cluster_id", "replica_state"}


@pytest.mark.parametrize("version", [0, 1, 4, 9, 10, 12, 13])
def test_metadata(version):
    topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in "ab"]
    request = assert_roundtrip(
        client_frame(MetadataRequest[version](topics=topics, allow_auto_topic_creation=False))
    )
    assert [t.name for t in request.body.topics] == ["a", "b"]


@pytest.mark.parametrize("version", [1, 9, 13])
def test_metadata_all_topics_is_null(version):
    request = assert_roundtrip(client_frame(MetadataRequest[version](topics=None)))
    assert request.body.topics is None


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_apiversions(version):
    msg = ApiVersionsRequest[version](client_software_name="josefk", client_software_version="0.1")
    request = assert_roundtrip(client_frame(msg))
    if version >= 3:
        assert request.body.client_software_name == "josefk"
        assert request.header.flexible


@pytest.mark.parametrize("version", [0, 5, 6, 9])
def test_join_group(version):
    proto = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01meta")
    msg = JoinGroupRequest[version](
        group_id="g",
        session_timeout_ms=10000,
        rebalance_timeout_ms=30000,
        member_id="",
        group_instance_id="inst-1",
        protocol_type="consumer",
        protocols=[proto],
        reason="joining",
    )
    body = assert_roundtrip(client_frame(msg)).body
    assert body.protocols[0].metadata == b"\x00\x01meta"
    assert body.group_instance_id == ("inst-1" if version >= 5 else None)


@pytest.mark.parametrize("version", [2, 5, 7, 8, 9])
def test_offset_commit(version):
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    part = Topic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=77, committed_leader_epoch=3, committed_metadata=None
    )
    msg = OffsetCommitRequest[version](
        group_id="g",
        generation_id_or_member_epoch=4,
        member_id="m",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[Topic(name="t", partitions=[part])],
    )
    body = assert_roundtrip(client_frame(msg)).body
    assert body.topics[0].partitions[0].committed_offset == 77
    assert body.topics[0].partitions[0].committed_metadata is None


@pytest.mark.parametrize("version", [1, 2, 5, 6, 10])
def test_list_offsets(version):
    Topic = ListOffsetsRequest.ListOffsetsTopic
    part = Topic.ListOffsetsPartition(partition_index=2, current_leader_epoch=-1, timestamp=-2)
    msg = ListOffsetsRequest[version](
        replica_id=-1,
        isolation_level=0,
        topics=[Topic(name="t", partitions=[part])],
        timeout_ms=100,
    )
    body = assert_roundtrip(client_frame(msg)).body
    assert body.topics[0].partitions[0].timestamp == -2


@pytest.mark.parametrize("version", [0, 3, 4, 6])
def test_find_coordinator(version):
    msg = FindCoordinatorRequest[version](key="g", key_type=0, coordinator_keys=["g", "h"])
    body = assert_roundtrip(client_frame(msg)).body
    if version >= 4:
        assert body.coordinator_keys == ["g", "h"]
    else:
        assert body.key == "g"


def test_group_requests_flexible():
    assignment = SyncGroupRequest.SyncGroupRequestAssignment(member_id="m", assignment=b"x")
    sync = SyncGroupRequest[5](
        group_id="g",
        generation_id=1,
        member_id="m",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[assignment],
    )
    assert assert_roundtrip(client_frame(sync)).body.assignments[0].assignment == b"x"
    hb = HeartbeatRequest[4](group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert assert_roundtrip(client_frame(hb)).body.member_id == "m"
    member = LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None, reason="bye")
    leave = LeaveGroupRequest[5](group_id="g", members=[member])
    assert assert_roundtrip(client_frame(leave)).body.members[0].reason == "bye"


def test_transactions():
    init = InitProducerIdRequest[5](
        transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
    )
    assert assert_roundtrip(client_frame(init)).body.transactional_id == "tx"
    end = EndTxnRequest[3](transactional_id="tx", producer_id=5, producer_epoch=1, committed=True)
    assert assert_roundtrip(client_frame(end)).body.committed is True


@pytest.mark.parametrize("with_cursor", [False, True])
def test_nullable_struct(with_cursor):
    Req = DescribeTopicPartitionsRequest
    cursor = Req.Cursor(topic_name="t", partition_index=4) if with_cursor else None
    msg = Req[0](topics=[Req.TopicRequest(name="t")], response_partition_limit=2000, cursor=cursor)
    body = assert_roundtrip(client_frame(msg)).body
    assert (body.cursor is not None) is with_cursor


def test_decoded_body_views_are_copies_except_produce_records():
    assignment = SyncGroupRequest.SyncGroupRequestAssignment(member_id="m", assignment=RECORDS)
    sync = SyncGroupRequest[5](group_id="g", generation_id=1, member_id="m",
                               protocol_type="consumer", protocol_name="range",
                               assignments=[assignment])
    frame = bytearray(client_frame(sync))
    request = decode_request(frame)
    produced = bytearray(client_frame(produce(9)))
    records = decode_request(produced).body.topic_data[0].partition_data[0].records
    frame[:] = bytes(len(frame))
    produced[:] = bytes(len(produced))
    assert request.body.assignments[0].assignment == RECORDS
    # Produce's records are the frame's own bytes (the frame must not change under them).
    assert records == bytes(len(RECORDS))


def test_trailing_bytes_are_ignored_like_kafka():
    frame = client_frame(MetadataRequest[9](topics=None)) + b"junk"
    assert decode_request(frame).body.topics is None


# --- version and api checks --------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (ApiKey.Produce, 0),
        (ApiKey.Produce, 2),
        (ApiKey.Produce, 14),
        (ApiKey.Fetch, 3),
        (ApiKey.Fetch, 19),
        (ApiKey.ListOffsets, 0),
        (ApiKey.OffsetCommit, 11),
        (ApiKey.Metadata, 14),
        (ApiKey.Metadata, -1),
        (ApiKey.ApiVersions, 5),
    ],
)
def test_unsupported_versions(api_key, version):
    frame = header(api_key, version, correlation_id=99, client_id=b"cli") + b"\x00" * 64
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    err = info.value
    assert (err.api_key, err.api_version, err.correlation_id, err.client_id) == (
        api_key,
        version,
        99,
        "cli",
    )
    assert isinstance(err, ProtocolError)


def test_produce_v2_from_a_client_is_rejected():
    frame = client_frame(produce(2))
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)


@pytest.mark.parametrize(
    "api_key", [ApiKey.CreateDelegationToken, ApiKey.DescribeDelegationToken, 70, 999, -1])
def test_unknown_apis(api_key):
    with pytest.raises(UnknownApiError) as info:
        decode_request(header(api_key, 0, correlation_id=5) + b"\x00" * 8)
    assert info.value.api_key == api_key and info.value.correlation_id == 5


def test_disabled_api_is_unknown():
    frame = client_frame(MetadataRequest[9](topics=None))
    assert decode_request(frame, enabled=frozenset({3})).api_key == 3
    with pytest.raises(UnknownApiError):
        decode_request(frame, enabled=frozenset({18}))


def test_apiversions_fallback_frame_exact_bytes():
    frame = bytes(api_versions_unsupported_frame(7))
    # size, correlation id (header v0), error 35, one entry: key 18, 0..4
    assert frame == bytes.fromhex("00000010" "00000007" "0023" "00000001" "0012" "0000" "0004")


def test_apiversions_fallback_for_a_future_client():
    msg = ApiVersionsRequest[4](client_software_name="future", client_software_version="9")
    frame = bytearray(client_frame(msg, correlation_id=1234))
    frame[2:4] = struct.pack(">h", 7)  # pretend the client speaks ApiVersions v7
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    err = info.value
    assert err.api_key == ApiKey.ApiVersions
    reply = bytes(api_versions_unsupported_frame(err.correlation_id))
    # kafka-python's client reads it the way the Java client does: v0 on error.
    response = ApiVersionsResponse.decode(reply, version=4, header=True, framed=True)
    assert response.header.correlation_id == 1234
    assert response.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]


def test_apiversions_fallback_can_list_all_ranges():
    ranges = advertised_versions([ApiKey.Produce, ApiKey.Fetch])
    reply = bytes(api_versions_unsupported_frame(3, ranges))
    response = ApiVersionsResponse.decode(reply, version=0, header=True, framed=True)
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
        (0, 0, 13),
        (1, 4, 18),
        (18, 0, 4),
    ]


# --- malformed bodies ---------------------------------------------------------

SAMPLES = [
    client_frame(produce(3)),
    client_frame(produce(12)),
    client_frame(fetch(4)),
    client_frame(fetch(17, cluster_id="c")),
    client_frame(fetch(18, cluster_id="c")),
    client_frame(MetadataRequest[4](topics=[MetadataRequest.MetadataRequestTopic(name="abc")])),
    client_frame(ApiVersionsRequest[3](client_software_name="a", client_software_version="1")),
]


@pytest.mark.parametrize("frame", SAMPLES)
def test_every_truncation_is_rejected(frame):
    body_offset = decode_request(frame).header.body_offset
    for cut in range(len(frame)):
        exc = MalformedRequestError if cut >= body_offset else ProtocolError
        with pytest.raises(exc):
            decode_request(frame[:cut])


def test_truncated_string_kafka_python_alone_would_accept():
    body = struct.pack(">ih", 1, 100) + b"abc"  # Metadata v0: one topic, name "claims" 100 bytes
    assert MetadataRequest.decode(body, version=0).topics[0].name == "abc"  # silently short
    with pytest.raises(MalformedRequestError):
        decode_request(header(3, 0, tags=b"") + body)


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        # Metadata v0: topics not nullable, name not nullable, negative counts
        (3, 0, struct.pack(">i", -1)),
        (3, 0, struct.pack(">ih", 1, -1)),
        (3, 1, struct.pack(">i", -2)),
        # Metadata v9 (compact): name not nullable, string over 32767 bytes
        (3, 9, bytes([2, 0]) + b"\x00\x00\x00\x00"),
        (3, 9, bytes([2, 0xC2, 0xB8, 0x02]) + b"a" * 40001 + b"\x00\x00\x00\x00"),
        # invalid UTF-8 in a topic name
        (3, 0, struct.pack(">ih", 1, 2) + b"\xff\xfe"),
        # ApiVersions v3: bad varint (6 bytes) and varint over 2**31
        (18, 3, b"\x80\x80\x80\x80\x80\x00"),
        (18, 3, b"\xff\xff\xff\xff\x0f"),
        # DescribeTopicPartitions: cursor marker neither 0xff nor < 0x80
        (75, 0, bytes([1]) + struct.pack(">i", 10) + b"\x80" + bytes([2]) + b"t" + bytes(5)),
    ],
)
def test_invalid_bodies(api_key, version, body):
    flexible_tags = b"\x00" if version >= {3: 9, 18: 3, 75: 0}[api_key] else b""
    with pytest.raises(MalformedRequestError) as info:
        decode_request(header(api_key, version, correlation_id=11, tags=flexible_tags) + body)
    assert info.value.correlation_id == 11
    assert isinstance(info.value, RequestError)


@pytest.mark.parametrize(
    "count_bytes",
    [
        struct.pack(">i", 2**31 - 1),  # Metadata v4, classic int32 count
        b"\xff\xff\xff\xff\x07",  # Metadata v9, compact count 2**31 - 2
        b"\xff\xff\xff\xff\x0f",  # compact count over 2**31
    ],
)
def test_huge_array_count_fails_fast_without_allocating(count_bytes):
    version, tags = (4, b"") if len(count_bytes) == 4 else (9, b"\x00")
    frame = header(3, version, tags=tags) + count_bytes + b"\x00\x01a" * 1000
    tracemalloc.start()
    try:
        with pytest.raises(MalformedRequestError):
            decode_request(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A decoder that built the 2**31 elements first would hold gigabytes here.
    assert peak < 1 << 20


def test_fixed_size_array_longer_than_the_body_is_rejected():
    # []int32 elements take 4 bytes each: a count that passes Kafka's guard
    # (count <= bytes left) but not the real size must still fail.
    body = bytearray(client_frame(fetch(7, partitions=0)))
    # forgotten_topics_data: one topic "t" with partitions count 100 and no data
    offset = body.rindex(b"\x00\x00\x00\x00")  # the empty forgotten_topics_data count
    body[offset:] = struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 100)
    with pytest.raises(MalformedRequestError):
        decode_request(bytes(body) + b"\x00" * 200)


def fetch12_with_raw_tags(tags: bytes) -> bytes:
    frame = client_frame(fetch(12))
    assert frame.endswith(b"\x00")  # empty top-level tagged fields
    return frame[:-1] + tags


def test_unknown_tagged_field_is_kept():
    request = decode_request(fetch12_with_raw_tags(bytes([1, 9, 3]) + b"xyz"))
    assert request.body.unknown_tags == {"_9": b"xyz"}


@pytest.mark.parametrize(
    "tags",
    [
        bytes([1, 0, 4, 2]) + b"ab",  # cluster_id tag says 4 bytes, string takes 3
        bytes([1, 0, 2, 3]) + b"ab",  # cluster_id string overruns its tag size
        bytes([1, 9, 5]) + b"xyz",  # unknown tag overruns the body
        bytes([2, 9, 0]),  # second tag missing
    ],
)
def test_bad_tagged_fields(tags):
    with pytest.raises(MalformedRequestError):
        decode_request(fetch12_with_raw_tags(tags))


def test_nested_tags_inside_tagged_struct_are_rejected():
    # ReplicaState (tag 1, v15+) = replica_id int32, replica_epoch int64, tags.
    state = struct.pack(">iq", 1, 2) + bytes([1, 3, 1]) + b"z"
    frame = client_frame(fetch(15))[:-1] + bytes([1, 1, len(state)]) + state
    with pytest.raises(MalformedRequestError):
        decode_request(frame)


def test_many_tagged_sections_decode_in_linear_time(monkeypatch):
    # Each non-empty tagged section makes kafka-python's compiled decoder copy
    # the rest of the body: 60000 of them in a 3 MB frame would copy ~90 GB.
    parts = 60000
    msg = fetch(17, partitions=parts)
    for i, part in enumerate(msg.topics[0].partitions):
        part.replica_directory_id = uuid.UUID(int=i + 1)
        part.tags = {"replica_directory_id"}
    frame = client_frame(msg)
    body = memoryview(frame)[parse_request_header(frame).body_offset :]
    _, cost = walk_body(FetchRequest, 17, body)
    assert cost > 1000 * len(body)
    streamed = []
    real = messages._decode_streaming
    monkeypatch.setattr(messages, "_decode_streaming", lambda *a: streamed.append(1) or real(*a))
    request = decode_request(frame)
    assert streamed == [1]
    assert request.body.topics[0].partitions[-1].replica_directory_id == uuid.UUID(int=parts)


def test_streaming_and_compiled_decoders_agree():
    msg = fetch(17, cluster_id="c")
    msg.topics[0].partitions[0].replica_directory_id = uuid.UUID(int=5)
    msg.topics[0].partitions[0].tags = {"replica_directory_id"}
    frame = client_frame(msg)
    body = memoryview(frame)[decode_request(frame).header.body_offset :]
    compiled = FetchRequest.decode(body, version=17)
    streamed = messages._decode_streaming(FetchRequest, 17, body)
    assert compiled.to_dict() == streamed.to_dict()
    assert streamed.topics[0].partitions[0].replica_directory_id == uuid.UUID(int=5)


# --- responses ---------------------------------------------------------------


def metadata_response(version):
    Topic = MetadataResponse.MetadataResponseTopic
    Broker = MetadataResponse.MetadataResponseBroker
    part = Topic.MetadataResponsePartition(
        error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
        replica_nodes=[1], isr_nodes=[1], offline_replicas=[],
    )
    topic = Topic(error_code=0, name="t", topic_id=uuid.UUID(int=3), is_internal=False,
                  partitions=[part])
    return MetadataResponse[version](
        throttle_time_ms=0, brokers=[Broker(node_id=1, host="localhost", port=9092, rack=None)],
        cluster_id="cid", controller_id=1, topics=[topic],
    )


@pytest.mark.parametrize(("version", "flexible"), [(0, False), (8, False), (9, True), (12, True)])
def test_response_header_version_follows_flexibility(version, flexible):
    frame = bytes(encode_response(ApiKey.Metadata, version, 0x01020304, metadata_response(version)))
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert frame[4:8] == b"\x01\x02\x03\x04"
    body = metadata_response(version).encode(version=version)
    assert frame[8:] == (b"\x00" + body if flexible else body)
    decoded = MetadataResponse.decode(frame, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 0x01020304
    assert decoded.brokers[0].host == "localhost"
    assert decoded.topics[0].partitions[0].isr_nodes == [1]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_apiversions_response_always_has_header_v0(version):
    ranges = advertised_versions(SUPPORTED_VERSIONS)
    msg = api_versions_response(version, ranges, throttle_time_ms=5)
    frame = bytes(encode_response(ApiKey.ApiVersions, version, 77, msg))
    assert frame[4:8] == struct.pack(">i", 77)
    assert frame[8:10] == b"\x00\x00"  # error code right after the correlation id
    decoded = ApiVersionsResponse.decode(frame, version=version, header=True, framed=True)
    got = {k.api_key: VersionRange(k.min_version, k.max_version) for k in decoded.api_keys}
    assert got == ranges
    assert got[0] == VersionRange(0, 13)
    if version >= 1:
        assert decoded.throttle_time_ms == 5


def test_encode_response_from_fields():
    frame = bytes(
        encode_response(ApiKey.Heartbeat, 4, 9, {"throttle_time_ms": 0, "error_code": 27})
    )
    assert frame == bytes.fromhex("0000000c" "00000009" "00" "00000000" "001b" "00")


def test_encode_response_sets_the_version_of_an_unversioned_object():
    msg = MetadataResponse(
        throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=1, topics=[]
    )
    frame = bytes(encode_response(ApiKey.Metadata, 9, 1, msg))
    decoded = MetadataResponse.decode(frame, version=9, header=True, framed=True)
    assert decoded.cluster_id == "c"


def test_encode_response_rejects_the_wrong_class():
    with pytest.raises(TypeError):
        encode_response(ApiKey.Fetch, 4, 1, metadata_response(4))


# --- fuzzing -----------------------------------------------------------------


@given(st.binary(max_size=300))
def test_random_frames_only_raise_protocol_errors(frame):
    with contextlib.suppress(ProtocolError):
        decode_request(frame)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_SUPPORTED), st.binary(max_size=200), st.booleans())
def test_random_bodies_for_every_api_only_raise_protocol_errors(key_version, body, tags):
    api_key, version = key_version
    flexible = API_CLASSES[api_key][0].flexible_version_q(version)
    frame = header(api_key, version, tags=b"\x00" if flexible and tags else b"") + body
    try:
        request = decode_request(frame)
    except ProtocolError:
        return
    request.body.encode(version=version)  # what decoded must be encodable again


def mutate(draw, data: bytearray, max_ops: int = 4) -> bytes:
    """``data`` with a few bytes set, inserted, deleted or cut off."""
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "set" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 8))]
        else:
            del data[i:]
    return bytes(data)


@st.composite
def mutated(draw):
    return mutate(draw, bytearray(draw(st.sampled_from(SAMPLES))))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_frames_only_raise_protocol_errors(frame):
    try:
        request = decode_request(frame)
    except ProtocolError:
        return
    encoded_body(request)


@st.composite
def mutated_bodies(draw):
    """A valid Produce body, mutated."""
    version = draw(st.integers(3, 12))
    topic_data = [ProduceRequest.TopicProduceData(name=name, partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=records)
        for i, records in partitions]) for name, partitions in draw(st.lists(
            st.tuples(st.text(max_size=10), st.lists(st.tuples(
                st.integers(0, 9), st.none() | st.binary(max_size=40)), max_size=3)),
            max_size=3))]
    request = ProduceRequest[version](transactional_id=draw(st.none() | st.text(max_size=5)),
                                      acks=1, timeout_ms=1000, topic_data=topic_data)
    return version, mutate(draw, bytearray(request.encode(version=version)), max_ops=3)


@settings(max_examples=300)
@given(mutated_bodies())
def test_refuses_exactly_what_the_generic_walk_refuses(case):
    version, body = case
    try:
        walk_body(ProduceRequest, version, body)
        walked = None
    except ProtocolError as e:
        walked = e
    try:
        decoded = decode_produce(memoryview(body), version)
    except ProtocolError:
        assert walked is not None
        return
    except UnicodeDecodeError:
        return  # kafka-python's decoder fails on these too (a malformed request either way)
    assert walked is None
    reference = ProduceRequest[version].decode(body)
    assert decoded.transactional_id == reference.transactional_id
    assert [(t.name, [(p.index, None if p.records is None else bytes(p.records))
                      for p in t.partition_data]) for t in decoded.topic_data] == [
        (t.name, [(p.index, p.records) for p in t.partition_data])
        for t in reference.topic_data]
