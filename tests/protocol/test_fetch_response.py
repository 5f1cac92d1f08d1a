"""The hand-written FetchResponse encoder against kafka-python's generic one."""

import uuid
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from josefk.protocol.fetch_response import encode_fetch_response
from josefk.protocol.messages import encode_response

TopicResp = FetchResponse.FetchableTopicResponse
PartitionResp = TopicResp.PartitionData

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@dataclass
class FileBytes:
    """Stands in for a file region: the encoder sees its length, the test its bytes."""

    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)


@dataclass
class Answer:
    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None
    diverging_epoch: tuple[int, int] | None
    current_leader: tuple[int, int] | None
    records: bytes | None
    region: FileBytes | None


answers = st.builds(
    Answer, index=int32, error_code=int16, high_watermark=int64, last_stable_offset=int64,
    log_start_offset=int64, aborted=st.none() | st.lists(st.tuples(int64, int64), max_size=3),
    diverging_epoch=st.none() | st.tuples(int32, int64),
    current_leader=st.none() | st.tuples(int32, int32),
    records=st.none() | st.binary(max_size=300),
    region=st.none() | st.builds(FileBytes, st.binary(min_size=1, max_size=300)))
topics = st.lists(st.tuples(st.none() | st.text(max_size=300), st.none() | st.uuids(),
                            st.lists(answers, max_size=3)), max_size=3)
endpoints = st.lists(st.tuples(int32, st.text(max_size=50), int32,
                               st.none() | st.text(max_size=20)), max_size=3)


def kafka_python(version, correlation_id, topics, error_code, session_id, throttle,
                 node_endpoints=()):
    responses = []
    for name, topic_id, partitions in topics:
        parts = []
        for p in partitions:
            part = PartitionResp(
                partition_index=p.index, error_code=p.error_code,
                high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                log_start_offset=p.log_start_offset, preferred_read_replica=-1,
                aborted_transactions=None if p.aborted is None else [
                    PartitionResp.AbortedTransaction(producer_id=pid, first_offset=first)
                    for pid, first in p.aborted],
                records=p.region.data if p.region is not None else p.records)
            if p.diverging_epoch is not None:
                part.diverging_epoch = PartitionResp.EpochEndOffset(
                    epoch=p.diverging_epoch[0], end_offset=p.diverging_epoch[1])
            if p.current_leader is not None:
                part.current_leader = PartitionResp.LeaderIdAndEpoch(
                    leader_id=p.current_leader[0], leader_epoch=p.current_leader[1])
            parts.append(part)
        responses.append(TopicResp(topic=name or "", topic_id=topic_id or uuid.UUID(int=0),
                                   partitions=parts))
    fields = {"throttle_time_ms": throttle, "error_code": error_code,
              "session_id": session_id, "responses": responses}
    if node_endpoints:
        fields["node_endpoints"] = [
            FetchResponse.NodeEndpoint(node_id=n, host=h, port=port, rack=rack)
            for n, h, port, rack in node_endpoints]
    return bytes(encode_response(1, version, correlation_id, fields))


def joined(parts):
    return b"".join(p.data if isinstance(p, FileBytes) else p for p in parts)


@given(version=st.integers(4, 18), correlation_id=int32, topics=topics, error_code=int16,
       session_id=int32, throttle=int32, node_endpoints=endpoints)
def test_same_bytes_as_kafka_python(version, correlation_id, topics, error_code, session_id,
                                    throttle, node_endpoints):
    if version < 12:  # no diverging epoch nor current leader to carry before v12
        for _, _, partitions in topics:
            for p in partitions:
                p.diverging_epoch = p.current_leader = None
    if version < 7:
        error_code = session_id = 0
    if version < 16:
        node_endpoints = []
    parts = encode_fetch_response(version, correlation_id, topics, error_code, session_id,
                                  throttle, node_endpoints)
    assert joined(parts) == kafka_python(version, correlation_id, topics, error_code,
                                         session_id, throttle, node_endpoints)
    # Each region is a part of its own, for sendfile.
    regions = [p.region for _, _, ps in topics for p in ps if p.region is not None]
    assert [p for p in parts if isinstance(p, FileBytes)] == regions


@pytest.mark.parametrize("version", [3, 19])
def test_unsupported_version(version):
    with pytest.raises(ValueError):
        encode_fetch_response(version, 1, [])
