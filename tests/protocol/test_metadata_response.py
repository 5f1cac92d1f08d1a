"""The hand-written MetadataResponse encoder against kafka-python's generic one, byte for
byte, at every version josefk serves."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import MetadataResponse

from josefk.protocol import metadata_response as wire
from josefk.protocol.messages import encode_response
from josefk.protocol.versions import SUPPORTED_VERSIONS

BrokerResp = MetadataResponse.MetadataResponseBroker
TopicResp = MetadataResponse.MetadataResponseTopic
PartitionResp = TopicResp.MetadataResponsePartition
VERSIONS = list(range(SUPPORTED_VERSIONS[3].min_version, SUPPORTED_VERSIONS[3].max_version + 1))

ids = st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=5)
partitions = st.lists(st.tuples(st.sampled_from([0, 5, 9]), st.integers(0, 1 << 20),
                                st.integers(-1, 9), st.integers(-1, 1 << 20), ids, ids, ids),
                      max_size=4)
topics = st.lists(st.tuples(st.sampled_from([0, 3, 5]), st.text(max_size=8),
                            st.uuids(), st.booleans(), partitions), max_size=4)
brokers = st.lists(st.tuples(st.integers(0, 1000), st.text(max_size=8),
                             st.integers(0, 65535), st.none() | st.text(max_size=4)),
                   max_size=3)


def reference(version: int, correlation_id: int, brokers: list, cluster_id: str | None,
              controller_id: int, topics: list) -> bytes:
    return bytes(encode_response(3, version, correlation_id, {
        "throttle_time_ms": 0,
        "brokers": [BrokerResp(node_id=n, host=h, port=p, rack=r) for n, h, p, r in brokers],
        "cluster_id": cluster_id, "controller_id": controller_id, "error_code": 0,
        "topics": [TopicResp(error_code=e, name=name, topic_id=tid, is_internal=internal,
                             partitions=[PartitionResp(
                                 error_code=pe, partition_index=i, leader_id=leader,
                                 leader_epoch=epoch, replica_nodes=r, isr_nodes=isr,
                                 offline_replicas=off)
                                 for pe, i, leader, epoch, r, isr, off in parts])
                   for e, name, tid, internal, parts in topics]}))


def ours(version: int, correlation_id: int, brokers: list, cluster_id: str | None,
         controller_id: int, topics: list) -> bytes:
    encoded = [wire.encode_topic(version, e, name, tid, internal,
                                 [wire.encode_partition(version, *p) for p in parts])
               for e, name, tid, internal, parts in topics]
    return wire.encode_response(version, correlation_id,
                                [wire.BrokerEntry(*b) for b in brokers], cluster_id,
                                controller_id, encoded)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(correlation_id=st.integers(-(1 << 31), (1 << 31) - 1), brokers=brokers,
       cluster_id=st.none() | st.text(max_size=8), controller_id=st.integers(-1, 5),
       topics=topics)
def test_same_bytes_as_kafka_python(version: int, correlation_id: int, brokers: list,
                                    cluster_id: str | None, controller_id: int,
                                    topics: list) -> None:
    if version < 2:
        cluster_id = None
    args = (version, correlation_id, brokers, cluster_id, controller_id, topics)
    assert ours(*args) == reference(*args)


@pytest.mark.parametrize("version", VERSIONS)
def test_long_arrays_and_null_names(version: int) -> None:
    """Compact lengths above one varint byte; a null topic name (v12+, unknown topic id)."""
    many = list(range(200))
    parts = [(0, i, 1, 0, many, many[:127], many[:126]) for i in range(130)]
    topics = [(0, "big", uuid.uuid4(), False, parts)]
    if version >= 12:
        topics.append((100, None, uuid.uuid4(), False, []))
    args = (version, 7, [(1, "host", 9092, "rack")], "cid", 1, topics)
    assert ours(*args) == reference(*args)


def test_unsupported_version() -> None:
    with pytest.raises(ValueError):
        wire.encode_response(14, 1, [], None, -1, [])
