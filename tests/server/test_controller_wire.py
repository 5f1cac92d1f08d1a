"""server/controller_wire.py: the controller's values -> Kafka's wire messages -> bytes ->
josefk's request decoder -> the broker side's values again (LeaderAndIsr v7,
UpdateMetadata v8, StopReplica v4), and brokers' answers -> per-partition errors."""

from __future__ import annotations

import dataclasses
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.cluster.metadata.requests import (
    ControllerResponse,
    LeaderAndIsr,
    PartitionInfo,
    StopReplica,
    StopReplicaPartition,
    UpdateMetadata,
)
from josefk.cluster.zk.znodes import BrokerRegistration, Endpoint
from josefk.protocol.controller_messages import (
    LeaderAndIsrResponse,
    StopReplicaResponse,
)
from josefk.protocol.messages import decode_request, encode_response
from josefk.server.control.wire import (
    decode_leader_and_isr,
    decode_response,
    decode_stop_replica,
    decode_update_metadata,
    encode_request,
)

T1 = uuid.UUID("11111111-2222-3333-4444-555555555555")
T2 = uuid.UUID("99999999-8888-7777-6666-555555555555")

B1 = BrokerRegistration(1, (Endpoint("PLAINTEXT", "10.0.0.1", 9092),), rack="r1", epoch=100)
B2 = BrokerRegistration(2, (Endpoint("INTERNAL", "b2.example", 9093, "SSL"),
                            Endpoint("PLAINTEXT", "b2.example", 9092)), epoch=200)
B3 = BrokerRegistration(3, (Endpoint("PLAINTEXT", "::1", 9094),), epoch=300)


def info(topic: str, p: int, **kw: Any) -> PartitionInfo:
    values: dict[str, Any] = dict(
        topic=topic, partition=p, controller_epoch=4, leader=1, leader_epoch=7, isr=(1, 2),
        partition_epoch=12, replicas=(1, 2, 3))
    values.update(kw)
    return PartitionInfo(**values)


def through_the_wire(request: Any, api_key: int, version: int) -> Any:
    """encode_request -> framed bytes -> decode_request (as a broker reads it)."""
    message, sent_version = encode_request(request)
    assert sent_version == version
    message.with_header(correlation_id=42, client_id="controller-1")
    frame = bytes(message.encode(version=version, header=True, framed=True))
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    decoded = decode_request(frame[4:])
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (
        api_key, version, 42)
    return decoded.body


def endpoints_of(brokers: tuple[BrokerRegistration, ...]) -> list[tuple[Any, ...]]:
    return [(b.broker_id, b.rack, tuple((e.listener, e.host, e.port, e.security_protocol)
                                        for e in b.endpoints)) for b in brokers]


def test_leader_and_isr_v7_round_trip() -> None:
    partitions = (
        info("t1", 0, is_new=True),
        info("t1", 1, leader=2, isr=(2,), adding=(4,), removing=(3,), replicas=(2, 3, 4),
             leader_recovery_state=1),
        info("t2", 5, leader=-1, leader_epoch=0, isr=(), partition_epoch=0),
    )
    request = LeaderAndIsr(1, 4, 300, partitions, {"t1": T1, "t2": T2}, (B1, B3))
    decoded = decode_leader_and_isr(through_the_wire(request, 4, 7))
    assert (decoded.controller_id, decoded.controller_epoch, decoded.broker_epoch) == (1, 4, 300)
    assert decoded.topic_ids == {"t1": T1, "t2": T2}
    assert decoded.partitions == partitions  # LeaderAndIsr carries no offline replicas
    assert not decoded.full
    # Live leaders travel as id, host and port.
    assert [(b.broker_id, b.endpoint().host, b.endpoint().port)
            for b in decoded.live_leaders] == [(1, "10.0.0.1", 9092), (3, "::1", 9094)]


def test_leader_and_isr_full_flag_and_topic_without_id() -> None:
    request = LeaderAndIsr(1, 4, 300, (info("t", 0),), {}, (), full=True)
    decoded = decode_leader_and_isr(through_the_wire(request, 4, 7))
    assert decoded.full
    assert decoded.topic_ids == {}
    assert decoded.partitions == request.partitions


def test_update_metadata_v8_round_trip() -> None:
    partitions = (info("t1", 0, offline=(3,)), info("t1", 1, leader=-2),
                  info("t2", 0, isr=(3,), leader=3, replicas=(3,)))
    request = UpdateMetadata(2, 9, 200, partitions, {"t1": T1, "t2": T2}, (B1, B2, B3))
    decoded = decode_update_metadata(through_the_wire(request, 6, 8))
    assert (decoded.controller_id, decoded.controller_epoch, decoded.broker_epoch) == (2, 9, 200)
    assert decoded.topic_ids == {"t1": T1, "t2": T2}
    assert decoded.partitions == partitions
    assert endpoints_of(decoded.live_brokers) == endpoints_of((B1, B2, B3))


def test_update_metadata_drops_what_it_does_not_carry() -> None:
    """UpdateMetadata has no adding/removing replicas, is_new or recovery state."""
    full = info("t", 0, adding=(4,), removing=(3,), is_new=True, leader_recovery_state=1)
    request = UpdateMetadata(1, 1, -1, (full,), {}, ())
    decoded = decode_update_metadata(through_the_wire(request, 6, 8))
    assert decoded.partitions == (dataclasses.replace(
        full, adding=(), removing=(), is_new=False, leader_recovery_state=0),)
    assert decoded.broker_epoch == -1 and decoded.live_brokers == ()


def test_stop_replica_v4_round_trip() -> None:
    partitions = (StopReplicaPartition("t1", 0, 7, False),
                  StopReplicaPartition("t1", 3, -2, True),
                  StopReplicaPartition("t2", 1, -1, True))
    request = StopReplica(3, 5, 400, partitions, {"t1": T1})
    decoded = decode_stop_replica(through_the_wire(request, 5, 4))
    assert (decoded.controller_id, decoded.controller_epoch, decoded.broker_epoch) == (3, 5, 400)
    assert decoded.partitions == partitions


def test_encode_request_refuses_other_values() -> None:
    with pytest.raises(TypeError):
        encode_request(ControllerResponse(0))  # type: ignore[arg-type]


def response_over_the_wire(cls: Any, api_key: int, version: int, body: Any) -> Any:
    frame = bytes(encode_response(api_key, version, 7, body))
    return cls.decode(frame[4:], version=version, header=True)


def test_leader_and_isr_response_errors_by_topic_name() -> None:
    request = LeaderAndIsr(1, 4, 300, (info("t1", 0), info("t1", 1), info("t2", 2)),
                           {"t1": T1, "t2": T2}, ())
    E = LeaderAndIsrResponse.LeaderAndIsrTopicError
    PE = E.LeaderAndIsrPartitionError
    response = response_over_the_wire(LeaderAndIsrResponse, 4, 7, LeaderAndIsrResponse[7](
        error_code=0, topics=[
            E(topic_id=T1, partition_errors=[PE(partition_index=0, error_code=0),
                                             PE(partition_index=1, error_code=11)]),
            E(topic_id=T2, partition_errors=[PE(partition_index=2, error_code=3)])]))
    assert decode_response(request, response) == ControllerResponse(
        0, {("t1", 0): 0, ("t1", 1): 11, ("t2", 2): 3})


def test_leader_and_isr_response_top_level_error() -> None:
    request = LeaderAndIsr(1, 4, 300, (info("t1", 0),), {"t1": T1}, ())
    response = response_over_the_wire(LeaderAndIsrResponse, 4, 7, LeaderAndIsrResponse[7](
        error_code=11, topics=[]))
    assert decode_response(request, response) == ControllerResponse(11, {})


def test_stop_replica_response_errors() -> None:
    request = StopReplica(1, 4, 300, (StopReplicaPartition("t1", 0, -2, True),
                                      StopReplicaPartition("t2", 4, -2, True)))
    PE = StopReplicaResponse.StopReplicaPartitionError
    response = response_over_the_wire(StopReplicaResponse, 5, 4, StopReplicaResponse[4](
        error_code=0, partition_errors=[
            PE(topic_name="t1", partition_index=0, error_code=0),
            PE(topic_name="t2", partition_index=4, error_code=75)]))
    assert decode_response(request, response) == ControllerResponse(
        0, {("t1", 0): 0, ("t2", 4): 75})


# --- random requests ------------------------------------------------------------------------

topics = st.sampled_from(["a", "b", "topic.with-dots_x"])
brokers = st.integers(-1, 2**31 - 1)
epochs = st.integers(0, 2**31 - 1)
replica_sets = st.lists(st.integers(0, 2**31 - 1), max_size=4, unique=True).map(tuple)


@st.composite
def infos(draw: st.DrawFn) -> PartitionInfo:
    return PartitionInfo(
        topic=draw(topics), partition=draw(st.integers(0, 2**31 - 1)),
        controller_epoch=draw(epochs), leader=draw(brokers), leader_epoch=draw(epochs),
        isr=draw(replica_sets), partition_epoch=draw(epochs), replicas=draw(replica_sets),
        adding=draw(replica_sets), removing=draw(replica_sets), is_new=draw(st.booleans()),
        leader_recovery_state=draw(st.sampled_from([0, 1])))


def unique_partitions(items: list[PartitionInfo]) -> tuple[PartitionInfo, ...]:
    seen: dict[tuple[str, int], PartitionInfo] = {}
    for item in items:
        seen.setdefault(item.key, item)
    return tuple(seen.values())


def grouped(items: tuple[Any, ...]) -> list[Any]:
    """The wire groups partitions by topic (in order of first appearance)."""
    order = list(dict.fromkeys(i.topic for i in items))
    return sorted(items, key=lambda i: order.index(i.topic))


@settings(max_examples=50)
@given(st.lists(infos(), max_size=6), st.dictionaries(topics, st.uuids(), max_size=3),
       epochs, st.integers(-1, 2**62))
def test_leader_and_isr_random_round_trip(items: list[PartitionInfo],
                                          topic_ids: dict[str, uuid.UUID],
                                          controller_epoch: int, broker_epoch: int) -> None:
    partitions = unique_partitions(items)
    ids = {t: i for t, i in topic_ids.items() if i != uuid.UUID(int=0)}
    request = LeaderAndIsr(5, controller_epoch, broker_epoch, partitions, ids, ())
    decoded = decode_leader_and_isr(through_the_wire(request, 4, 7))
    assert list(decoded.partitions) == grouped(partitions)
    assert decoded.topic_ids == {t: i for t, i in ids.items()
                                 if any(p.topic == t for p in partitions)}
    assert decoded.broker_epoch == broker_epoch


@settings(max_examples=50)
@given(st.lists(st.builds(StopReplicaPartition, topics, st.integers(0, 2**31 - 1),
                          st.integers(-2, 2**31 - 1), st.booleans()), max_size=6))
def test_stop_replica_random_round_trip(items: list[StopReplicaPartition]) -> None:
    partitions = tuple({(p.topic, p.partition): p for p in items}.values())
    decoded = decode_stop_replica(through_the_wire(StopReplica(1, 2, 3, partitions), 5, 4))
    assert list(decoded.partitions) == grouped(partitions)
