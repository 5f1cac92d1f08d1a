import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.protocol.exceptions import FramingError, ProtocolError
from josefk.protocol.framing import (
    DEFAULT_MAX_REQUEST_SIZE,
    MIN_REQUEST_SIZE,
    FrameDecoder,
    frame,
)


def payload(n: int, fill: int = 0x61) -> bytes:
    return bytes([fill]) * n


def test_defaults_match_kafka():
    assert DEFAULT_MAX_REQUEST_SIZE == 104857600  # socket.request.max.bytes
    assert MIN_REQUEST_SIZE == 10


def test_frame_prefixes_size():
    assert frame(b"abcdefghij") == b"\x00\x00\x00\x0aabcdefghij"


def test_single_frame():
    dec = FrameDecoder()
    dec.feed(frame(payload(12)))
    assert dec.next_frame() == payload(12)
    assert dec.next_frame() is None
    assert dec.buffered == 0


def test_byte_by_byte():
    data = frame(payload(10)) + frame(payload(20, 0x62))
    dec = FrameDecoder()
    out = []
    for i in range(len(data)):
        dec.feed(data[i : i + 1])
        out.extend(dec.frames())
    assert out == [payload(10), payload(20, 0x62)]


def test_several_frames_in_one_feed_and_a_partial_one():
    dec = FrameDecoder()
    dec.feed(frame(payload(10)) + frame(payload(11)) + frame(payload(30))[:7])
    assert list(dec.frames()) == [payload(10), payload(11)]
    assert dec.pending_size == 30
    assert dec.buffered == 7


def test_pending_size_unknown_until_prefix_complete():
    dec = FrameDecoder()
    dec.feed(b"\x00\x00\x00")
    assert dec.pending_size is None
    dec.feed(b"\x10")
    assert dec.pending_size == 16


def test_accepts_memoryview_and_bytearray():
    dec = FrameDecoder()
    data = frame(payload(10))
    dec.feed(memoryview(data)[:5])
    dec.feed(bytearray(data[5:]))
    assert dec.next_frame() == payload(10)


def test_exactly_max_and_min_accepted():
    dec = FrameDecoder(max_size=16, min_size=10)
    dec.feed(frame(payload(16)) + frame(payload(10)))
    assert list(dec.frames()) == [payload(16), payload(10)]


@pytest.mark.parametrize("size", [-1, -(2**31), 0, 9, 2**31 - 1, DEFAULT_MAX_REQUEST_SIZE + 1])
def test_bad_size_rejected_on_prefix_alone(size):
    dec = FrameDecoder()
    with pytest.raises(FramingError):
        dec.feed(struct.pack(">i", size))
    # The decoder is now out of sync and stays failed.
    with pytest.raises(FramingError):
        dec.feed(frame(payload(10)))


def test_bad_size_detected_after_a_good_frame_in_the_same_feed():
    dec = FrameDecoder(max_size=100)
    with pytest.raises(FramingError):
        dec.feed(frame(payload(10)) + struct.pack(">i", 101))


def test_bad_size_right_behind_the_end_of_a_split_frame():
    dec = FrameDecoder(max_size=100)
    dec.feed(frame(payload(20))[:10])
    with pytest.raises(FramingError):
        dec.feed(frame(payload(20))[10:] + struct.pack(">i", 101))


def test_bad_size_behind_untaken_frames_is_still_checked():
    dec = FrameDecoder(max_size=1000)
    dec.feed(frame(payload(10)))
    with pytest.raises(FramingError):
        dec.feed(struct.pack(">i", 5000))


def test_framing_error_is_a_protocol_error():
    assert issubclass(FramingError, ProtocolError)


@pytest.mark.parametrize(("lo", "hi"), [(-1, 10), (11, 10), (0, 2**31)])
def test_bad_bounds(lo, hi):
    with pytest.raises(ValueError):
        FrameDecoder(max_size=hi, min_size=lo)


def test_linear_work_for_small_chunks():
    # 5000 frames of 1000 bytes fed 7 bytes at a time. What is held between feeds never
    # exceeds one frame, so each feed copies a bounded amount: linear in the input (the
    # work counted, not timed: tests never assert on wall-clock speed).
    one = frame(payload(1000))
    data = one * 5000
    dec = FrameDecoder()
    count = 0
    for i in range(0, len(data), 7):
        dec.feed(data[i : i + 7])
        assert dec.buffered <= len(one) + 7
        for f in dec.frames():
            assert len(f) == 1000
            count += 1
    assert count == 5000


def test_linear_work_for_one_big_frame_in_small_chunks():
    # The big frame's own buffer at least doubles each time it grows: a logarithmic
    # number of reallocations, not one per chunk.
    size = 8 * 1024 * 1024
    data = frame(bytes(size))
    dec = FrameDecoder()
    growths, capacity = 0, 0
    for i in range(0, len(data), 512):
        dec.feed(data[i : i + 512])
        big = dec._big
        if big is not None and len(big) != capacity:
            growths, capacity = growths + 1, len(big)
    got = dec.next_frame()
    assert got is not None and len(got) == size
    assert growths <= 24


def test_buffer_is_compacted():
    dec = FrameDecoder()
    one = frame(payload(100))
    for _ in range(1000):
        dec.feed(one + one[:50])
        dec.feed(one[50:])
        assert len(list(dec.frames())) == 2
    assert dec.buffered == 0
    assert len(dec._partial) < 10 * len(one)


def receive(dec: FrameDecoder, data: bytes) -> int:
    """What a socket receive does: write into the decoder's buffer, then report."""
    target = dec.receive_buffer()
    n = min(len(target), len(data))
    target[:n] = data[:n]
    target.release()
    dec.received(n)
    return n


def test_a_big_frame_is_received_into_a_buffer_of_its_own():
    body = bytes(range(256)) * 1024  # 256 KiB
    data = frame(body)
    dec = FrameDecoder(own_buffer_from=64 * 1024)
    taken = receive(dec, data[:1000])
    target = dec.receive_buffer()
    owner = target.obj
    # Exactly the rest of the frame: nothing of a next frame can land in it.
    assert len(target) == len(data) - taken
    assert dec.pending_size == len(body)
    target[:] = data[taken:]
    target.release()
    dec.received(len(data) - taken)
    got = dec.next_frame()
    assert isinstance(got, bytearray) and got == body
    assert owner is got  # the receive went straight into the frame's buffer
    assert dec.buffered == 0


def test_a_small_frame_split_across_receives_is_whole():
    dec = FrameDecoder(own_buffer_from=64 * 1024)
    data = frame(payload(5000)) + frame(payload(20, 0x62))
    for i in range(0, len(data), 999):
        receive(dec, data[i:i + 999])
    assert list(dec.frames()) == [payload(5000), payload(20, 0x62)]


def test_decoders_sharing_a_scratch_buffer_keep_their_own_frames():
    scratch = bytearray(4096)
    a = FrameDecoder(scratch=scratch, own_buffer_from=1024)
    b = FrameDecoder(scratch=scratch, own_buffer_from=1024)
    data_a = frame(payload(700, 0x61)) + frame(payload(3000, 0x63))
    data_b = frame(payload(900, 0x62)) * 3
    out_a: list[bytes | bytearray] = []
    out_b: list[bytes | bytearray] = []
    pos_a = pos_b = 0
    while pos_a < len(data_a) or pos_b < len(data_b):
        pos_a += receive(a, data_a[pos_a:pos_a + 500])
        pos_b += receive(b, data_b[pos_b:pos_b + 700])
        out_a.extend(a.frames())
        out_b.extend(b.frames())
    assert out_a == [payload(700, 0x61), payload(3000, 0x63)]
    assert out_b == [payload(900, 0x62)] * 3


def test_own_buffer_threshold_must_fit_the_scratch_buffer():
    with pytest.raises(ValueError):
        FrameDecoder(scratch=bytearray(100), own_buffer_from=200)


@given(
    st.lists(st.binary(min_size=MIN_REQUEST_SIZE, max_size=200), max_size=10),
    st.lists(st.integers(min_value=0, max_value=2000), max_size=20),
)
def test_any_split_yields_the_frames(payloads, cuts):
    data = b"".join(frame(p) for p in payloads)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    dec = FrameDecoder()
    out = []
    for a, b in zip(points, points[1:], strict=False):
        dec.feed(data[a:b])
        out.extend(dec.frames())
    assert out == payloads
    assert dec.buffered == 0


@given(st.lists(st.binary(max_size=64), max_size=20))
def test_random_bytes_only_raise_framing_errors(chunks):
    dec = FrameDecoder(max_size=4096)
    try:
        for chunk in chunks:
            dec.feed(chunk)
            for f in dec.frames():
                assert MIN_REQUEST_SIZE <= len(f) <= 4096
    except FramingError:
        pass


def test_a_claimed_size_alone_does_not_reserve_its_memory():
    body = bytes(range(256)) * (8 * 1024 * 4)  # 8 MiB
    data = frame(body)
    dec = FrameDecoder()
    receive(dec, data[:1000])
    target = dec.receive_buffer()
    # The buffer follows what arrived (1 MiB to start), not the 8 MiB the prefix claims.
    assert len(target) == 1024 * 1024 - 996
    target.release()
    pos = 1000
    while pos < len(data):
        pos += receive(dec, data[pos:pos + 300_000])
    got = dec.next_frame()
    assert isinstance(got, bytearray) and len(got) == len(body) and got == body
    assert dec.buffered == 0
