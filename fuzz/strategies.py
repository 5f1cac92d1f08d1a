"""Hypothesis strategies for live fuzz cases: requests built from the schemas (``schema``) with
values drawn by hypothesis, then sizes, lengths and counts corrupted on some of them."""

from __future__ import annotations

import functools
import struct
from typing import Any

from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from josefk.server.security.scram_client import ScramClient

from .schema import FIXED_SIZES, encode_request, record_batch
from .seeds import PLAIN_LOGIN, versions

VERSIONS = list(versions())
SASL_VERSIONS = [(cls, v) for cls, v in VERSIONS
                 if cls in (ApiVersionsRequest, SaslHandshakeRequest, SaslAuthenticateRequest)]
NAMES = [b"fuzz-topic", b"", b"PLAIN", b"SCRAM-SHA-256", b"SCRAM-SHA-512", b"__consumer_offsets",
         b"x" * 249, b"fuzz.group", b"\xff\xfe"]
TOKENS = [PLAIN_LOGIN, b"\0alice\0wrong", b"", b"\0\0",
          ScramClient("SCRAM-SHA-256", "scram-alice", "x", nonce="fuzznonce").evaluate(b""),
          b"n,,n=nobody,r=abc", b"c=biws,r=abc,p=AAAA"]


def _ints(size: int) -> list[bytes]:
    bits = 8 * size
    values = [0, 1, -1, 2, (1 << (bits - 1)) - 1, -(1 << (bits - 1)), 1000]
    return [(v % (1 << bits)).to_bytes(size, "big") for v in values]


INTERESTING = {size: _ints(size) for size in set(FIXED_SIZES.values())}
LENGTHS = [-2, -1, 0, 1, 0x7FFF, 0x8000, 0x7FFFFFFF, -0x80000000]
# Built once: hypothesis does not cache strategies made from lists.
FIXED = {size: st.sampled_from(values) | st.binary(min_size=size, max_size=size)
         for size, values in INTERESTING.items()}
TEXT = st.sampled_from(NAMES) | st.text(max_size=16).map(str.encode)
RECORDS = st.builds(record_batch, st.integers(0, 3), st.sampled_from([1, 2])) | st.binary(
    max_size=96)
BLOB = st.sampled_from(TOKENS) | st.binary(max_size=48)
COUNT = st.integers(0, 3)
ODDS = {n: st.integers(0, n - 1) for n in (4, 6, 16, 64)}
WRONG = st.sampled_from(LENGTHS) | st.integers(-(1 << 31), (1 << 31) - 1)
OFF_BY_ONE = st.sampled_from([-1, 1])


class Drawn:
    """A ``schema.Chooser`` whose picks are hypothesis draws; 1 in ``corrupt`` lengths and
    counts wrong (never, with 0)."""

    def __init__(self, draw: Any, corrupt: int) -> None:
        self.draw, self.corrupt = draw, corrupt

    def null(self, name: str) -> bool:
        return self.draw(ODDS[6]) == 0

    def count(self, name: str) -> int:
        return self.draw(COUNT)

    def fixed(self, type_str: str, name: str) -> bytes:
        return self.draw(FIXED[FIXED_SIZES[type_str]])

    def text(self, name: str) -> bytes:
        return self.draw(TEXT)

    def blob(self, type_str: str, name: str) -> bytes:
        return self.draw(RECORDS if type_str == "records" else BLOB)

    def length(self, n: int) -> int:
        if not self.corrupt or self.draw(ODDS[self.corrupt]) != 0:
            return n
        return n + self.draw(OFF_BY_ONE) if self.draw(ODDS[4]) else self.draw(WRONG)


CORRUPT = st.sampled_from([0, 0, 4, 16, 64])
VERSION_SHIFT = st.sampled_from([0, 0, 0, 0, 0, 0, -1, 1])
TAIL = st.sampled_from(["", "", "", "", "cut", "extra"])


@st.composite
def frames(draw: Any, pool: list[tuple[type[ApiMessage], int]]) -> bytes:
    """One request frame of an api in ``pool``, at its version or just outside its range;
    clean, or with some lengths corrupted, sometimes cut short or with bytes after it."""
    cls, version = draw(st.sampled_from(pool))
    version = max(0, version + draw(VERSION_SHIFT))
    chooser = Drawn(draw, draw(CORRUPT))
    cid = draw(st.integers(-(1 << 31), (1 << 31) - 1))
    frame = encode_request(cls, version, chooser, correlation_id=cid)
    tail = draw(TAIL)
    if tail == "cut":
        frame = frame[:draw(st.integers(0, len(frame) - 1))]
    elif tail == "extra":
        extra = draw(st.binary(min_size=1, max_size=16))
        frame = struct.pack(">i", len(frame) - 4 + len(extra)) + frame[4:] + extra
    return frame


@st.composite
def cases(draw: Any, enabled: frozenset[int]) -> tuple[int, bytes]:
    """A live case: flags (bit 0: after authentication; bits 1-2: SASL mechanism; bit 3:
    client certificate) and 1 to 3 frames sent in one go, of the ``enabled`` apis but now and
    then. Before authentication, mostly the requests a SASL exchange is made of."""
    flags = draw(st.integers(0, 15))
    if not flags & 1 and draw(st.integers(0, 3)):
        pool = SASL_FRAMES
    elif draw(st.integers(0, 15)):
        pool = _served(enabled)
    else:
        pool = ALL_FRAMES
    count = draw(st.integers(1, 3))
    return flags, b"".join(draw(pool) for _ in range(count))


ALL_FRAMES = frames(VERSIONS)
SASL_FRAMES = frames(SASL_VERSIONS)


@functools.cache
def _served(enabled: frozenset[int]) -> st.SearchStrategy[bytes]:
    return frames([(cls, v) for cls, v in VERSIONS if int(cls.API_KEY) in enabled] or VERSIONS)
