"""Decompressing a batch's records, with a ceiling on what they may inflate to.

A compressed batch is small on the wire and checked against ``max.message.bytes`` as
it is, but it may decompress to far more: a few hundred KiB of gzip can hold a GiB of
zeros, and zstd more still. Kafka never holds a batch's records decompressed at once
(it streams them); josefk does, to read the keys of a compacted topic's batch and to
clean it, so it refuses a batch that would inflate past `MAX_INFLATED_BYTES` rather
than let one produce request exhaust the broker's memory.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable

import kafka.codec as codec
import lz4.frame
import zstandard

from josefk.protocol.record_batch import CorruptRecordError

#: What one batch's records may decompress to. Producers batch up to about
#: ``batch.size`` / ``message.max.bytes`` (1 MB by default) before compressing.
MAX_INFLATED_BYTES = 128 * 1024 * 1024

_GZIP = 16 + zlib.MAX_WBITS
_STEP = 1 << 20
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16


def inflate(codec_id: int, data: bytes, limit: int = MAX_INFLATED_BYTES) -> bytes | bytearray:
    """``data`` decompressed with Kafka's codec ``codec_id`` (1 gzip, 2 snappy, 3 lz4,
    4 zstd); CorruptRecordError if it is not valid or would exceed ``limit`` bytes."""
    decompress = _CODECS.get(codec_id)
    if decompress is None:
        raise CorruptRecordError(f"unknown compression codec {codec_id}")
    try:
        return decompress(data, limit)
    except CorruptRecordError:
        raise
    except Exception as e:  # each codec library raises its own errors
        raise CorruptRecordError(f"cannot decompress the batch's records: {e!r}") from e


def _too_big(limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"the batch's records decompress to more than {limit} bytes")


def _gunzip(data: bytes, limit: int) -> bytearray:
    """Every gzip member in ``data`` (as Python's GzipFile reads them), ``limit`` bounded."""
    out = bytearray()
    pending = data
    while pending:
        member = zlib.decompressobj(_GZIP)
        while not member.eof:
            out += member.decompress(pending, limit - len(out) + 1)
            if len(out) > limit:
                raise _too_big(limit)
            if not member.eof and not member.unconsumed_tail:
                raise CorruptRecordError("gzip data ends in the middle of a member")
            pending = member.unconsumed_tail
        pending = member.unused_data.lstrip(b"\0")
    return out


def _lz4(data: bytes, limit: int) -> bytes:
    frame = lz4.frame.LZ4FrameDecompressor()
    out = frame.decompress(data, max_length=limit + 1)
    if len(out) > limit:
        raise _too_big(limit)
    return out


def _zstd(data: bytes, limit: int) -> bytearray:
    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data),
                                                   read_across_frames=True) as reader:
        while chunk := reader.read(_STEP):
            out += chunk
            if len(out) > limit:
                raise _too_big(limit)
    return out


def _snappy(data: bytes, limit: int) -> bytes:
    _check_snappy_size(data, limit)
    return codec.snappy_decode(data)


def _check_snappy_size(data: bytes, limit: int) -> None:
    """Snappy blocks state their decompressed length up front: summed and checked before
    any is decompressed (the Java clients frame them as xerial blocks)."""
    if not data.startswith(_XERIAL_MAGIC):
        if _snappy_length(data, 0) > limit:
            raise _too_big(limit)
        return
    total, pos = 0, _XERIAL_HEADER
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        if size < 0:
            raise CorruptRecordError("negative snappy block size")
        total += _snappy_length(data, pos + 4)
        if total > limit:
            raise _too_big(limit)
        pos += 4 + size


def _snappy_length(data: bytes, pos: int) -> int:
    """The uncompressed length a raw snappy block at ``pos`` begins with (a varint)."""
    length = shift = 0
    for byte in data[pos:pos + 5]:
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            return length
        shift += 7
    raise CorruptRecordError("bad snappy block length")


_CODECS: dict[int, Callable[[bytes, int], bytes | bytearray]] = {
    1: _gunzip, 2: _snappy, 3: _lz4, 4: _zstd}
