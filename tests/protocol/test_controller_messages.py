"""The inter-broker apis of ZooKeeper mode: our schemas, their codecs, Kafka 3.9.1's specs.

(a) every version of every message round-trips, also through josefk's request
decoder and response encoder; (b) our JSON specs equal Kafka 3.9.1's (from its
kafka-clients jar) but for the `about` texts, and the classes kafka-python
builds from them have the right fields; (c) hand-derived golden bytes; (d)
Kafka's own Java codec reads what we encode and writes the same bytes back.
(b) and (d) skip without the jar (or java) unless JOSEFK_REQUIRE_KAFKA=1.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import random
import re
import shutil
import struct
import subprocess
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_header import RequestHeader, ResponseClassRegistry
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas import BaseField

from josefk.protocol import controller_messages as cm
from josefk.protocol.controller_messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ControlRequestType,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderRecoveryState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from josefk.protocol.exceptions import MalformedRequestError, ProtocolError, UnknownApiError
from josefk.protocol.header import is_flexible, parse_request_header
from josefk.protocol.messages import API_CLASSES, decode_request, encode_response, walk_body
from josefk.protocol.versions import SUPPORTED_VERSIONS, advertised_versions, enabled_api_keys

REPO = Path(__file__).resolve().parents[2]
KAFKA_CLIENTS_JAR = REPO / ".cache" / "kafka39" / "libs" / "kafka-clients-3.9.1.jar"

PAIRS: list[tuple[type[ApiMessage], type[ApiMessage]]] = [
    (LeaderAndIsrRequest, LeaderAndIsrResponse),
    (StopReplicaRequest, StopReplicaResponse),
    (UpdateMetadataRequest, UpdateMetadataResponse),
    (ControlledShutdownRequest, ControlledShutdownResponse),
    (AlterPartitionRequest, AlterPartitionResponse),
    (AllocateProducerIdsRequest, AllocateProducerIdsResponse),
]
CLASSES = [cls for pair in PAIRS for cls in pair]
# Kafka 3.9.1: api key, validVersions, flexibleVersions (first flexible version).
KAFKA_3_9 = {
    "LeaderAndIsr": (4, (0, 7), 4),
    "StopReplica": (5, (0, 4), 2),
    "UpdateMetadata": (6, (0, 8), 6),
    "ControlledShutdown": (7, (0, 3), 3),
    "AlterPartition": (56, (0, 3), 0),
    "AllocateProducerIds": (67, (0, 0), 0),
}
EVERY_VERSION = [(cls, v) for cls in CLASSES for v in range(cls.max_version + 1)]
REQUEST_VERSIONS = [(cls, v) for cls, v in EVERY_VERSION if cls.is_request()]
RESPONSE_VERSIONS = [(cls, v) for cls, v in EVERY_VERSION if not cls.is_request()]
ZERO_UUID = uuid.UUID(int=0)
TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def version_id(param: Any) -> str:
    return f"{param[0].__name__}-v{param[1]}" if isinstance(param, tuple) else str(param)


def require_kafka_clients_jar() -> Path:
    """Kafka 3.9.1's kafka-clients jar; skips without it unless JOSEFK_REQUIRE_KAFKA=1."""
    if not KAFKA_CLIENTS_JAR.is_file():
        missing = f"no {KAFKA_CLIENTS_JAR.relative_to(REPO)} (tools/kafka39/fetch.sh)"
        if os.environ.get("JOSEFK_REQUIRE_KAFKA") == "1":
            pytest.fail(missing + " and JOSEFK_REQUIRE_KAFKA=1")
        pytest.skip(missing)
    return KAFKA_CLIENTS_JAR


# --- messages with every field set, from a random source -----------------------

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_CHARS = "abcXYZ09._-é€𝄞"


def _simple_value(type_str: str, rnd: random.Random) -> Any:
    if type_str in _INT_BITS:
        bits = _INT_BITS[type_str]
        return rnd.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if type_str == "bool":
        return rnd.random() < 0.5
    if type_str == "uuid":  # kafka-python decodes the zero uuid (Kafka's "none") as None
        return uuid.UUID(int=rnd.getrandbits(128) or 1)
    if type_str == "string":
        return "".join(rnd.choice(_CHARS) for _ in range(rnd.randint(0, 6)))
    raise AssertionError(f"no value rule for {type_str}")


def _field_values(fields: dict[str, Any], version: int, rnd: random.Random) -> dict[str, Any]:
    values = {}
    for f in fields.values():
        if not f.for_version_q(version):
            continue
        if f.nullable_for_version_q(version) and rnd.random() < 0.25:
            values[f.name] = None
        elif f.is_struct_array():
            values[f.name] = [
                f.data_class(**_field_values(f.fields, version, rnd))
                for _ in range(rnd.randint(0, 2))
            ]
        elif f.is_array():
            values[f.name] = [
                _simple_value(f.array_of.type_str, rnd) for _ in range(rnd.randint(0, 3))
            ]
        else:
            assert not f.is_struct(), "these apis have no plain struct fields"
            values[f.name] = _simple_value(f.type_str, rnd)
    return values


def build(cls: type[ApiMessage], version: int, rnd: random.Random) -> ApiMessage:
    """A message of `cls` at `version` with every field of that version set."""
    return cls[version](**_field_values(cls.fields, version, rnd))


# --- (a) round trips -----------------------------------------------------------


@pytest.mark.parametrize("cls_version", EVERY_VERSION, ids=version_id)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=st.randoms(use_true_random=False))
def test_every_version_roundtrips(cls_version, rnd):
    cls, version = cls_version
    message = build(cls, version, rnd)
    body = bytes(message.encode(version=version))
    assert walk_body(cls, version, body)[0] == len(body)
    decoded = cls.decode(body, version=version)
    assert decoded == message
    assert bytes(decoded.encode()) == body  # decoded: version set, no _header slot


@pytest.mark.parametrize("cls_version", EVERY_VERSION, ids=version_id)
def test_default_message_roundtrips(cls_version):
    cls, version = cls_version
    body = bytes(cls[version]().encode(version=version))
    assert bytes(cls.decode(body, version=version).encode()) == body


@pytest.mark.parametrize("cls_version", REQUEST_VERSIONS, ids=version_id)
@settings(max_examples=5, deadline=None)
@given(rnd=st.randoms(use_true_random=False))
def test_requests_through_josefk_decoder(cls_version, rnd):
    """A controller's (or broker's) request, framed with its header, as a broker decodes it."""
    cls, version = cls_version
    message = build(cls, version, rnd)
    message.with_header(correlation_id=version + 100, client_id="controller-1")
    frame = bytes(message.encode(header=True, framed=True))
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    request = decode_request(frame[4:])
    assert (request.api_key, request.api_version) == (cls.API_KEY, version)
    assert request.correlation_id == version + 100
    header_v0 = (cls.API_KEY, version) == (ApiKey.ControlledShutdown, 0)
    assert request.header.flexible == cls.flexible_version_q(version)
    assert request.client_id == (None if header_v0 else "controller-1")
    assert type(request.body) is cls and request.body == message
    # What kafka-python's own decoder makes of the header and body.
    again = cls.decode(frame, version=version, header=True, framed=True)
    assert again == message
    assert again.header.correlation_id == version + 100
    assert again.header.client_id == (None if header_v0 else "controller-1")


@pytest.mark.parametrize("cls_version", RESPONSE_VERSIONS, ids=version_id)
@settings(max_examples=5, deadline=None)
@given(rnd=st.randoms(use_true_random=False))
def test_responses_through_josefk_encoder(cls_version, rnd):
    """A response josefk encodes, as the requesting side decodes (and walks) it."""
    cls, version = cls_version
    message = build(cls, version, rnd)
    frame = bytes(encode_response(cls.API_KEY, version, 0x0A0B0C0D, message))
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert frame[4:8] == b"\x0a\x0b\x0c\x0d"
    flexible = cls.flexible_version_q(version)
    body = frame[9:] if flexible else frame[8:]
    if flexible:
        assert frame[8] == 0  # response header v1: no tagged fields
    assert walk_body(cls, version, body)[0] == len(body)
    decoded = cls.decode(frame, version=version, header=True, framed=True)
    assert decoded == message
    assert decoded.header.correlation_id == 0x0A0B0C0D


def test_walk_rejects_every_truncation():
    message = build(UpdateMetadataRequest, 8, random.Random(1))
    body = bytes(message.encode(version=8))
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            walk_body(UpdateMetadataRequest, 8, body[:cut])


def test_truncated_request_is_malformed():
    message = LeaderAndIsrRequest[7](controller_id=1, live_leaders=[])
    message.with_header(correlation_id=3, client_id="c")
    frame = bytes(message.encode(header=True, framed=True))[4:]
    with pytest.raises(MalformedRequestError):
        decode_request(frame[:-2])


# --- registration, headers, class shape -------------------------------------------


def test_registered_with_kafka_3_9_ranges():
    for request_class, response_class in PAIRS:
        key = request_class.API_KEY
        assert API_CLASSES[key] == (request_class, response_class)
        name = ApiKey(key).name
        api_key, valid, first_flexible = KAFKA_3_9[name]
        assert key == api_key == response_class.API_KEY
        assert tuple(SUPPORTED_VERSIONS[key]) == valid
        for cls in (request_class, response_class):
            assert cls.valid_versions == valid
            assert [v for v in range(valid[1] + 1) if cls.flexible_version_q(v)] == list(
                range(first_flexible, valid[1] + 1)
            )
        for version in range(-1, valid[1] + 3):
            assert is_flexible(key, version) == request_class.flexible_version_q(version)


def test_not_served_or_advertised_without_a_handler():
    from josefk.server.handlers import MODULES

    keys = {int(req.API_KEY) for req, _ in PAIRS}
    enabled = enabled_api_keys(MODULES)
    advertised = advertised_versions(MODULES)
    for key in keys:
        assert (key in enabled) == (key in advertised) == (key in MODULES)
    assert not keys & set(advertised_versions([]))
    message = StopReplicaRequest[4](controller_id=1)
    message.with_header(correlation_id=5, client_id="c")
    frame = bytes(message.encode(header=True, framed=True))[4:]
    with pytest.raises(UnknownApiError):
        decode_request(frame, enabled=frozenset({int(ApiKey.ApiVersions)}))
    assert decode_request(frame).body == message


def test_requests_and_responses_are_told_apart():
    # LeaderAndIsr and UpdateMetadata have a top-level `type` field, whose slot
    # hides kafka-python's `type` class property.
    for request_class, response_class in PAIRS:
        assert request_class.is_request() and not response_class.is_request()
        assert request_class.header_class is RequestHeader
        assert request_class.json["type"] == "request"
        version = request_class.max_version
        header = RequestHeader(request_api_key=request_class.API_KEY,
                               request_api_version=version)
        assert ResponseClassRegistry.get_response_class(header) is response_class[version]
    message = LeaderAndIsrRequest[5](type=ControlRequestType.FULL)
    assert message.type == 2


def test_field_names_and_nested_classes():
    assert "is_kraft_controller" in LeaderAndIsrRequest.fields
    assert "is_kraft_controller" in StopReplicaRequest.fields
    assert "is_kraft_controller" in UpdateMetadataRequest.fields
    grouped = LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState
    assert grouped is not LeaderAndIsrRequest.LeaderAndIsrPartitionState
    assert "leader_recovery_state" in grouped.fields
    assert UpdateMetadataRequest.UpdateMetadataBroker.UpdateMetadataEndpoint
    assert AlterPartitionRequest.TopicData.PartitionData.BrokerState
    assert AlterPartitionResponse.TopicData is not AlterPartitionRequest.TopicData
    assert ControlledShutdownResponse.RemainingPartition
    assert StopReplicaRequest.StopReplicaTopicState.StopReplicaPartitionState


def test_defaults():
    assert LeaderAndIsrRequest[7]().broker_epoch == -1
    assert LeaderAndIsrRequest[7]().is_kraft_controller is False
    assert UpdateMetadataRequest[8]().type == 0
    assert ControlledShutdownRequest[3]().broker_epoch == -1
    state = StopReplicaRequest.StopReplicaTopicState.StopReplicaPartitionState(version=4)
    assert state.leader_epoch == -1
    assert AlterPartitionRequest.TopicData.PartitionData.BrokerState(version=3).broker_epoch == -1
    assert UpdateMetadataRequest.UpdateMetadataBroker(version=8).rack == ""


def test_controlled_shutdown_v0_has_request_header_v0():
    message = ControlledShutdownRequest[0](broker_id=5)
    message.with_header(correlation_id=0x11223344, client_id="ignored")
    frame = bytes(message.encode(header=True, framed=True))
    assert frame == bytes.fromhex("0000000c" "0007" "0000" "11223344" "00000005")
    header = parse_request_header(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (7, 0, 0x11223344)
    assert (header.client_id, header.flexible, header.body_offset) == (None, False, 8)
    assert decode_request(frame[4:]).body == message
    decoded = ControlledShutdownRequest.decode(frame, version=0, header=True, framed=True)
    assert decoded == message and decoded.header.correlation_id == 0x11223344
    # Exactly eight bytes: a header and no body, still a header.
    assert parse_request_header(frame[4:12]).body_offset == 8
    # v1 has the usual header v1.
    message = ControlledShutdownRequest[1](broker_id=5)
    message.with_header(correlation_id=1, client_id="b")
    assert parse_request_header(bytes(message.encode(header=True))).client_id == "b"


# --- (b) conformance with Kafka 3.9.1's JSON specs ------------------------------------

_COMMENT_LINE = re.compile(r"(?m)^\s*//.*$")
PYTHON_NAMES = {"isKRaftController": "is_kraft_controller"}  # see controller_messages.py


def parse_spec(text: str) -> dict[str, Any]:
    """A Kafka JSON message spec: JSON with whole-line `//` comments."""
    return json.loads(_COMMENT_LINE.sub("", text))


def kafka_spec(name: str) -> dict[str, Any]:
    with zipfile.ZipFile(require_kafka_clients_jar()) as jar:
        return parse_spec(jar.read(f"common/message/{name}.json").decode())


def our_spec(name: str) -> dict[str, Any]:
    resource = importlib.resources.files(cm.SCHEMA_PACKAGE) / f"{name}.json"
    return parse_spec(resource.read_text(encoding="utf-8"))


def without_about(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_about(v) for k, v in node.items() if k != "about"}
    if isinstance(node, list):
        return [without_about(v) for v in node]
    return node


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two specs differ, as readable paths (fields named, not numbered)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            if key not in ours or key not in theirs:
                side = "ours" if key in ours else "Kafka's"
                out.append(f"{path}/{key}: only in {side}")
            else:
                out += differences(ours[key], theirs[key], f"{path}/{key}")
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} entries, Kafka has {len(theirs)}"]
        out = []
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            label = b.get("name", i) if isinstance(b, dict) else i
            out += differences(a, b, f"{path}[{label}]")
        return out
    if ours != theirs or type(ours) is not type(theirs):
        return [f"{path}: ours {ours!r}, Kafka's {theirs!r}"]
    return []


def test_shipped_schema_files():
    files = {p.name for p in importlib.resources.files(cm.SCHEMA_PACKAGE).iterdir()}
    assert {f"{cls.__name__}.json" for cls in CLASSES} <= files


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_spec_matches_kafka_3_9_1(cls):
    theirs = without_about(kafka_spec(cls.__name__))
    ours = without_about(our_spec(cls.__name__))
    assert differences(ours, theirs) == []
    assert ours == theirs


def resolve_common_structs(fields: list[dict[str, Any]], common: dict[str, Any]) -> None:
    for field in fields:
        inner = field["type"].removeprefix("[]")
        if "fields" not in field and inner in common:
            field["fields"] = common[inner]
        resolve_common_structs(field.get("fields", []), common)


def check_fields(spec_fields: list[dict[str, Any]], fields: dict[str, Any], path: str) -> None:
    """The fields kafka-python built (in wire order) against Kafka's spec of them."""
    assert len(fields) == len(spec_fields), path
    for spec, field in zip(spec_fields, fields.values(), strict=True):
        where = f"{path}/{spec['name']}"
        expected_name = PYTHON_NAMES.get(spec["name"], BaseField.underscore_name(spec["name"]))
        assert field.name == expected_name, where
        assert field._type_str == spec["type"], where
        assert field.is_array() == spec["type"].startswith("[]"), where
        assert field._versions == BaseField.parse_versions(spec["versions"]), where
        assert field._nullable_versions == BaseField.parse_versions(
            spec.get("nullableVersions")
        ), where
        assert field.tag == spec.get("tag"), where
        assert field._tagged_versions == BaseField.parse_versions(
            spec.get("taggedVersions")
        ), where
        assert field._json.get("default") == spec.get("default"), where
        assert field._entity_type == spec.get("entityType"), where
        assert field.is_struct_array() == ("fields" in spec), where
        if "fields" in spec:
            check_fields(spec["fields"], field.fields, where)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_classes_match_kafka_3_9_1(cls):
    spec = kafka_spec(cls.__name__)
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    resolve_common_structs(spec["fields"], common)
    assert spec["apiKey"] == cls.API_KEY
    assert cls.json["type"] == spec["type"]
    assert cls.valid_versions == BaseField.parse_versions(spec["validVersions"])
    assert cls._flexible_versions == BaseField.parse_versions(spec["flexibleVersions"])
    check_fields(spec["fields"], cls.fields, cls.__name__)


# --- (c) golden bytes, derived by hand from the specs --------------------------------


def framed(*hex_parts: str) -> bytes:
    payload = bytes.fromhex("".join(hex_parts))
    return struct.pack(">i", len(payload)) + payload


def request_frame(message: ApiMessage, correlation_id: int) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id="c")
    return bytes(message.encode(header=True, framed=True))


def assert_golden_request(message: ApiMessage, correlation_id: int, expected: bytes) -> None:
    frame = request_frame(message, correlation_id)
    assert frame.hex() == expected.hex()
    assert decode_request(expected[4:]).body == message


def test_golden_leader_and_isr_request_v7():
    R = LeaderAndIsrRequest
    partition = R.LeaderAndIsrTopicState.LeaderAndIsrPartitionState(
        partition_index=4, controller_epoch=2, leader=5, leader_epoch=6, isr=[5, 8],
        partition_epoch=9, replicas=[5, 8, 10], adding_replicas=[10], removing_replicas=[],
        is_new=True, leader_recovery_state=LeaderRecoveryState.RECOVERING,
    )
    message = R[7](
        controller_id=1, is_kraft_controller=False, controller_epoch=2, broker_epoch=3,
        type=ControlRequestType.INCREMENTAL,
        topic_states=[R.LeaderAndIsrTopicState(
            topic_name="t", topic_id=TOPIC_ID, partition_states=[partition])],
        live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=5, host_name="h1", port=9092)],
    )
    expected = framed(
        "0004" "0007" "00000007" "000163" "00",  # header v2: key, version, corr, "c", tags
        "00000001",  # controller_id
        "00",  # is_kraft_controller
        "00000002",  # controller_epoch
        "0000000000000003",  # broker_epoch
        "01",  # type
        "02",  # topic_states: 1 (compact)
        "0274",  # topic_name "t"
        TOPIC_ID.hex,  # topic_id
        "02",  # partition_states: 1
        "00000004" "00000002" "00000005" "00000006",  # index, controller_epoch, leader, epoch
        "03" "00000005" "00000008",  # isr [5, 8]
        "00000009",  # partition_epoch
        "04" "00000005" "00000008" "0000000a",  # replicas [5, 8, 10]
        "02" "0000000a",  # adding_replicas [10]
        "01",  # removing_replicas []
        "01",  # is_new
        "01",  # leader_recovery_state
        "00",  # partition state tags
        "00",  # topic state tags
        "02" "00000005" "036831" "00002384" "00",  # live_leaders: 5, "h1", 9092, tags
        "00",  # tags
    )
    assert_golden_request(message, 7, expected)


def test_golden_update_metadata_request_v8():
    R = UpdateMetadataRequest
    partition = R.UpdateMetadataTopicState.UpdateMetadataPartitionState(
        partition_index=0, controller_epoch=2, leader=5, leader_epoch=6, isr=[5], zk_version=7,
        replicas=[5, 8], offline_replicas=[8],
    )
    endpoint = R.UpdateMetadataBroker.UpdateMetadataEndpoint(
        port=9092, host="h1", listener="PLAINTEXT", security_protocol=0
    )
    message = R[8](
        controller_id=1, is_kraft_controller=True, type=ControlRequestType.FULL,
        controller_epoch=2, broker_epoch=3,
        topic_states=[R.UpdateMetadataTopicState(
            topic_name="t", topic_id=TOPIC_ID, partition_states=[partition])],
        live_brokers=[R.UpdateMetadataBroker(id=5, endpoints=[endpoint], rack=None)],
    )
    expected = framed(
        "0006" "0008" "00000008" "000163" "00",  # header v2
        "00000001",  # controller_id
        "01",  # is_kraft_controller
        "00000002",  # controller_epoch (type is tagged: it goes last)
        "0000000000000003",  # broker_epoch
        "02" "0274",  # topic_states: 1, topic_name "t"
        TOPIC_ID.hex,  # topic_id
        "02",  # partition_states: 1
        "00000000" "00000002" "00000005" "00000006",  # index, controller_epoch, leader, epoch
        "02" "00000005",  # isr [5]
        "00000007",  # zk_version
        "03" "00000005" "00000008",  # replicas [5, 8]
        "02" "00000008",  # offline_replicas [8]
        "00" "00",  # partition state tags, topic state tags
        "02" "00000005",  # live_brokers: 1, id 5
        "02" "00002384" "036831" "0a" + b"PLAINTEXT".hex() + "0000" "00",  # endpoint
        "00",  # rack null
        "00",  # broker tags
        "01" "00" "01" "02",  # tags: 1 field, tag 0 (type), 1 byte, FULL
    )
    assert_golden_request(message, 8, expected)


def test_golden_stop_replica_request_v4():
    R = StopReplicaRequest
    state = R.StopReplicaTopicState.StopReplicaPartitionState
    message = R[4](
        controller_id=1, is_kraft_controller=False, controller_epoch=2, broker_epoch=3,
        topic_states=[R.StopReplicaTopicState(topic_name="t", partition_states=[
            state(partition_index=0, leader_epoch=6, delete_partition=True),
            state(partition_index=1, leader_epoch=-2, delete_partition=False),
        ])],
    )
    expected = framed(
        "0005" "0004" "00000009" "000163" "00",  # header v2
        "00000001" "00" "00000002",  # controller_id, is_kraft_controller, controller_epoch
        "0000000000000003",  # broker_epoch
        "02" "0274",  # topic_states: 1, topic_name "t"
        "03",  # partition_states: 2
        "00000000" "00000006" "01" "00",  # 0, leader_epoch 6, delete, tags
        "00000001" "fffffffe" "00" "00",  # 1, leader_epoch -2, keep, tags
        "00",  # topic state tags
        "00",  # tags
    )
    assert_golden_request(message, 9, expected)


def test_golden_alter_partition_request_v3():
    R = AlterPartitionRequest
    data = R.TopicData.PartitionData
    message = R[3](
        broker_id=5, broker_epoch=3,
        topics=[R.TopicData(topic_id=TOPIC_ID, partitions=[data(
            partition_index=4, leader_epoch=6,
            new_isr_with_epochs=[
                data.BrokerState(broker_id=5, broker_epoch=3),
                data.BrokerState(broker_id=8, broker_epoch=-1),
            ],
            leader_recovery_state=LeaderRecoveryState.RECOVERED, partition_epoch=9,
        )])],
    )
    expected = framed(
        "0038" "0003" "0000000a" "000163" "00",  # header v2 (api key 56)
        "00000005",  # broker_id
        "0000000000000003",  # broker_epoch
        "02",  # topics: 1
        TOPIC_ID.hex,  # topic_id
        "02",  # partitions: 1
        "00000004" "00000006",  # partition_index, leader_epoch
        "03",  # new_isr_with_epochs: 2
        "00000005" "0000000000000003" "00",  # broker 5, epoch 3, tags
        "00000008" "ffffffffffffffff" "00",  # broker 8, epoch -1, tags
        "00",  # leader_recovery_state
        "00000009",  # partition_epoch
        "00" "00" "00",  # partition tags, topic tags, tags
    )
    assert_golden_request(message, 10, expected)


def test_golden_controlled_shutdown_request_v3():
    message = ControlledShutdownRequest[3](broker_id=5, broker_epoch=3)
    expected = framed(
        "0007" "0003" "0000000b" "000163" "00",  # header v2
        "00000005" "0000000000000003" "00",  # broker_id, broker_epoch, tags
    )
    assert_golden_request(message, 11, expected)


def test_golden_leader_and_isr_response_v7():
    R = LeaderAndIsrResponse
    error = R.LeaderAndIsrTopicError.LeaderAndIsrPartitionError
    message = R[7](error_code=0, topics=[R.LeaderAndIsrTopicError(
        topic_id=TOPIC_ID, partition_errors=[error(partition_index=4, error_code=6)])])
    expected = framed(
        "00000007" "00",  # response header v1: correlation id, tags
        "0000",  # error_code
        "02", TOPIC_ID.hex,  # topics: 1, topic_id
        "02" "00000004" "0006" "00",  # partition_errors: 1, index 4, NOT_LEADER (6), tags
        "00" "00",  # topic tags, tags
    )
    frame = bytes(encode_response(ApiKey.LeaderAndIsr, 7, 7, message))
    assert frame.hex() == expected.hex()
    assert R.decode(expected, version=7, header=True, framed=True) == message


def test_golden_old_versions():
    R = LeaderAndIsrRequest
    message = R[1](
        controller_id=1, controller_epoch=2,
        ungrouped_partition_states=[R.LeaderAndIsrPartitionState(
            topic_name="t", partition_index=0, controller_epoch=2, leader=5, leader_epoch=6,
            isr=[5], partition_epoch=9, replicas=[5], is_new=False)],
        live_leaders=[],
    )
    expected = framed(
        "0004" "0001" "0000000c" "000163",  # header v1
        "00000001" "00000002",  # controller_id, controller_epoch
        "00000001" "0001" "74",  # ungrouped_partition_states: 1, topic_name "t"
        "00000000" "00000002" "00000005" "00000006",  # index, controller_epoch, leader, epoch
        "00000001" "00000005" "00000009" "00000001" "00000005",  # isr, partition_epoch, replicas
        "00",  # is_new
        "00000000",  # live_leaders: 0
    )
    assert_golden_request(message, 12, expected)
    response = UpdateMetadataResponse[5](error_code=0x22)
    assert bytes(encode_response(ApiKey.UpdateMetadata, 5, 1, response)) == framed(
        "00000001" "0022"
    )


# --- (d) Kafka's Java codec reads our bytes and writes them back unchanged ------------------

REENCODE_JAVA = """
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.Readable;

public class Reencode {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        HexFormat hex = HexFormat.of();
        for (String line; (line = in.readLine()) != null; ) {
            String[] parts = line.split(" ", -1);
            short version = Short.parseShort(parts[1]);
            ByteBuffer buffer = ByteBuffer.wrap(hex.parseHex(parts[2]));
            try {
                String name = "org.apache.kafka.common.message." + parts[0] + "Data";
                Class<?> data = Class.forName(name);
                Message message = (Message) data.getConstructor(Readable.class, short.class)
                    .newInstance(new ByteBufferAccessor(buffer), version);
                String out = hex.formatHex(
                    MessageUtil.byteBufferToArray(MessageUtil.toByteBuffer(message, version)));
                System.out.println(buffer.remaining() == 0 ? out : "left " + buffer.remaining());
            } catch (Exception e) {
                System.out.println("error " + e.getCause());
            }
        }
    }
}
"""


def test_kafka_java_codec_agrees(tmp_path):
    jar = require_kafka_clients_jar()
    java = shutil.which("java")
    if java is None:
        if os.environ.get("JOSEFK_REQUIRE_KAFKA") == "1":
            pytest.fail("no java on PATH and JOSEFK_REQUIRE_KAFKA=1")
        pytest.skip("no java on PATH")
    source = tmp_path / "Reencode.java"
    source.write_text(REENCODE_JAVA)
    cases = []
    for cls, version in EVERY_VERSION:
        for seed in range(4):
            body = bytes(build(cls, version, random.Random(seed)).encode(version=version))
            cases.append((cls.__name__, version, body.hex()))
    lines = "".join(f"{name} {version} {body}\n" for name, version, body in cases)
    run = subprocess.run(
        [java, "-cp", str(jar), str(source)], input=lines, capture_output=True, text=True,
        timeout=120, check=False,
    )
    assert run.returncode == 0, run.stderr
    answers = run.stdout.splitlines()
    assert len(answers) == len(cases), run.stderr
    wrong = [(name, version, body, answer) for (name, version, body), answer
             in zip(cases, answers, strict=True) if answer != body]
    assert wrong == []
