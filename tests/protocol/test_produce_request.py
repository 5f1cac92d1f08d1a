"""The Produce decoder that leaves records in the frame, against kafka-python's encoder."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest

from josefk.protocol.exceptions import MalformedRequestError
from josefk.protocol.messages import decode_request
from josefk.protocol.produce_request import ProduceRequestData

TopicData = ProduceRequest.TopicProduceData
PartitionData = TopicData.PartitionProduceData

partitions = st.lists(st.builds(PartitionData, index=st.integers(-(2**31), 2**31 - 1),
                                records=st.none() | st.binary(max_size=300)), max_size=4)
topics = st.lists(st.builds(TopicData, name=st.text(max_size=20), partition_data=partitions),
                  max_size=4)


def frame_of(version, transactional_id, acks, timeout_ms, topic_data) -> bytearray:
    request = ProduceRequest[version](transactional_id=transactional_id, acks=acks,
                                      timeout_ms=timeout_ms, topic_data=topic_data)
    request.with_header(correlation_id=7, client_id="producer-1")
    return bytearray(request.encode(header=True, framed=True)[4:])


@given(version=st.integers(3, 12), transactional_id=st.none() | st.text(max_size=30),
       acks=st.sampled_from([-1, 0, 1, 2]), timeout_ms=st.integers(-(2**31), 2**31 - 1),
       topic_data=topics)
def test_decodes_what_kafka_python_encodes(version, transactional_id, acks, timeout_ms,
                                           topic_data):
    frame = frame_of(version, transactional_id, acks, timeout_ms, topic_data)
    body = decode_request(frame).body
    assert isinstance(body, ProduceRequestData)
    assert (body.transactional_id, body.acks, body.timeout_ms) == (
        transactional_id, acks, timeout_ms)
    assert [t.name for t in body.topic_data] == [t.name for t in topic_data]
    for got, sent in zip(body.topic_data, topic_data, strict=True):
        assert [(p.index, None if p.records is None else bytes(p.records))
                for p in got.partition_data] == [(p.index, p.records)
                                                 for p in sent.partition_data]


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_records_are_views_into_the_frame_not_copies(version):
    records = bytes(range(256)) * 64
    frame = frame_of(version, None, 1, 1000,
                     [TopicData(name="t", partition_data=[PartitionData(index=0,
                                                                        records=records)])])
    data = decode_request(frame).body.topic_data[0].partition_data[0].records
    assert isinstance(data, memoryview) and data.obj is frame
    assert data == records


@pytest.mark.parametrize("version", [3, 9, 12])
def test_a_truncated_produce_is_malformed(version):
    frame = frame_of(version, "tx", 1, 1000, [TopicData(
        name="t", partition_data=[PartitionData(index=0, records=b"x" * 100)])])
    with pytest.raises(MalformedRequestError):
        decode_request(frame[:-10])
