"""The hand-written ProduceResponse encoder against kafka-python's generic one."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceResponse

from josefk.protocol.messages import encode_response
from josefk.protocol.produce_response import PartitionResult, encode_produce_response

TopicResp = ProduceResponse.TopicProduceResponse
PartitionResp = TopicResp.PartitionProduceResponse
RecordError = PartitionResp.BatchIndexAndErrorMessage

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.none() | st.text(max_size=200)
results = st.builds(
    PartitionResult, index=int32, error_code=st.integers(-(2**15), 2**15 - 1),
    base_offset=int64, log_append_time_ms=int64, log_start_offset=int64,
    record_errors=st.lists(st.tuples(int32, text), max_size=3), error_message=text)
topics = st.lists(st.tuples(st.text(max_size=300), st.lists(results, max_size=3)), max_size=3)


def kafka_python(version, correlation_id, topics, throttle):
    responses = [TopicResp(name=name, partition_responses=[PartitionResp(
        index=p.index, error_code=p.error_code, base_offset=p.base_offset,
        log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
        record_errors=[RecordError(batch_index=i, batch_index_error_message=m)
                       for i, m in p.record_errors],
        error_message=p.error_message) for p in partitions]) for name, partitions in topics]
    return bytes(encode_response(0, version, correlation_id,
                                 {"responses": responses, "throttle_time_ms": throttle}))


@given(version=st.integers(3, 12), correlation_id=int32, topics=topics, throttle=int32)
def test_same_bytes_as_kafka_python(version, correlation_id, topics, throttle):
    # Before v8 there are no record errors or messages to carry.
    if version < 8:
        for _, partitions in topics:
            for p in partitions:
                p.record_errors, p.error_message = [], None
    assert encode_produce_response(version, correlation_id, topics, throttle) == kafka_python(
        version, correlation_id, topics, throttle)


@given(correlation_id=int32, topic_ids=st.lists(st.uuids(), max_size=3),
       partitions=st.lists(results, max_size=3), throttle=int32)
def test_v13_topic_ids_same_bytes_as_kafka_python(correlation_id, topic_ids, partitions,
                                                  throttle):
    topics = [(topic_id, partitions) for topic_id in topic_ids]
    responses = [TopicResp(topic_id=topic_id, partition_responses=[PartitionResp(
        index=p.index, error_code=p.error_code, base_offset=p.base_offset,
        log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
        record_errors=[RecordError(batch_index=i, batch_index_error_message=m)
                       for i, m in p.record_errors],
        error_message=p.error_message) for p in ps]) for topic_id, ps in topics]
    expected = bytes(encode_response(0, 13, correlation_id,
                                     {"responses": responses, "throttle_time_ms": throttle}))
    assert encode_produce_response(13, correlation_id, topics, throttle) == expected


@pytest.mark.parametrize("version", [2, 14])
def test_unsupported_version(version):
    with pytest.raises(ValueError):
        encode_produce_response(version, 1, [])
