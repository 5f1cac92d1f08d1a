"""Bounded decompression of a batch's records (`josefk.log.inflate`): the same bytes as
kafka-python's codecs for every codec Kafka has, and a refusal past the bound."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec

from josefk.log.inflate import inflate
from josefk.protocol.record_batch import CorruptRecordError

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
ENCODE = {GZIP: codec.gzip_encode, SNAPPY: codec.snappy_encode, LZ4: codec.lz4_encode,
          ZSTD: codec.zstd_encode}
DECODE = {GZIP: codec.gzip_decode, SNAPPY: codec.snappy_decode, LZ4: codec.lz4_decode,
          ZSTD: codec.zstd_decode}


def xerial(data: bytes) -> bytes:
    """Snappy as the Java clients frame it: a header, then sized blocks."""
    return codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=4096)


@settings(max_examples=60, deadline=None)
@given(codec_id=st.sampled_from(sorted(ENCODE)),
       data=st.binary(min_size=1, max_size=20_000)
       | st.builds(lambda n: b"a" * n, st.integers(1, 50_000)))
def test_inflates_what_kafka_pythons_codecs_do(codec_id: int, data: bytes) -> None:
    compressed = ENCODE[codec_id](data)
    assert inflate(codec_id, compressed) == DECODE[codec_id](compressed) == data


@given(data=st.binary(min_size=1, max_size=30_000))
def test_java_framed_snappy(data: bytes) -> None:
    assert inflate(SNAPPY, xerial(data)) == data


@pytest.mark.parametrize("codec_id", sorted(ENCODE))
def test_past_the_bound_is_refused(codec_id: int) -> None:
    data = bytes(10_000) + b"tail"
    compressed = ENCODE[codec_id](data)
    assert inflate(codec_id, compressed, limit=len(data)) == data
    with pytest.raises(CorruptRecordError, match="more than 10003 bytes"):
        inflate(codec_id, compressed, limit=len(data) - 1)


def test_java_framed_snappy_past_the_bound_is_refused_before_decompressing() -> None:
    data = bytes(20_000)
    with pytest.raises(CorruptRecordError, match="more than 12000 bytes"):
        inflate(SNAPPY, xerial(data), limit=12_000)


def test_gzip_members_are_concatenated_and_padding_skipped() -> None:
    data = codec.gzip_encode(b"abc") + codec.gzip_encode(b"def") + bytes(8)
    assert inflate(GZIP, data) == DECODE[GZIP](data) == b"abcdef"


@pytest.mark.parametrize("bad", [codec.gzip_encode(b"x" * 1000)[:-12], b"not gzip at all"],
                         ids=["truncated", "not-gzip"])
def test_broken_gzip_is_an_error(bad: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        inflate(GZIP, bad)


@pytest.mark.parametrize("codec_id", [SNAPPY, LZ4, ZSTD])
def test_garbage_is_an_error(codec_id: int) -> None:
    with pytest.raises(CorruptRecordError, match="cannot decompress"):
        inflate(codec_id, b"\x05garbage that no codec wrote")


def test_unknown_codec() -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        inflate(5, b"")
