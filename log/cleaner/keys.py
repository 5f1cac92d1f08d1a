"""The offset map's read of a batch: each keyed record's offset and key, and nothing else
(and its value, for a group coordinator folding ``__consumer_offsets`` at load).

The map is built from every record of the dirty section, so this loop bounds the
cleaner's speed: it builds no record object, reads one-byte varints in line, and
returns two plain lists the map takes in one ``dict.update``.
"""

from __future__ import annotations

from josefk.protocol.record_batch import CorruptRecordError, InvalidRecordError
from josefk.protocol.varint import read_varint


def keyed_records(data: bytes, count: int, base_offset: int,
                  values: list[bytes | None] | None = None) -> tuple[list[int], list[bytes]]:
    """(offsets, keys) of the records with a key among the ``count`` records of ``data`` (a
    batch's uncompressed record bytes); the count and the bytes must agree. With ``values``,
    each keyed record's value (None for a tombstone) is appended to it as well."""
    offsets: list[int] = []
    keys: list[bytes] = []
    add_offset, add_key = offsets.append, keys.append
    add_value = None if values is None else values.append
    pos = 0
    size = len(data)
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            end = pos + 1 + ((b >> 1) ^ -(b & 1))
            pos += 1
        elif (c := data[pos + 1]) < 0x80:  # records of 64 bytes to 8 KiB
            z = (b & 0x7F) | (c << 7)
            end = pos + 2 + ((z >> 1) ^ -(z & 1))
            pos += 2
        else:
            length, pos = read_varint(data, pos)
            end = pos + length
        if end > size:
            raise CorruptRecordError("record runs past the end of its batch")
        # The attributes byte, then the timestamp delta, which only the copy needs.
        pos = pos + 2 if data[pos + 1] < 0x80 else read_varint(data, pos + 1)[1]
        b = data[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif (c := data[pos + 1]) < 0x80:  # the 65th to the 8,192nd record of a batch
            z = (b & 0x7F) | (c << 7)
            offset_delta = (z >> 1) ^ -(z & 1)
            pos += 2
        else:
            offset_delta, pos = read_varint(data, pos)
        b = data[pos]
        if b < 0x80:
            key_len = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            key_len, pos = read_varint(data, pos)
        if key_len >= 0:
            add_offset(base_offset + offset_delta)
            pos += key_len
            add_key(data[pos - key_len:pos])
            if add_value is not None:
                if pos < end and (b := data[pos]) < 0x80:  # a value under 64 bytes, a tombstone
                    length = (b >> 1) ^ -(b & 1)
                    pos += 1
                    if pos + length > end:
                        raise CorruptRecordError("a record's value runs past the record")
                    add_value(data[pos:pos + length] if length >= 0 else None)
                else:
                    add_value(_value(data, pos, end))
        pos = end
    if pos != size:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining")
    return offsets, keys


def _value(data: bytes, pos: int, end: int) -> bytes | None:
    """The value whose length varint is at ``pos``, of a record ending at ``end``."""
    if pos >= end:
        raise CorruptRecordError("a record's key runs past the record")
    length, pos = read_varint(data, pos)
    if length < 0:
        return None
    if pos + length > end:
        raise CorruptRecordError("a record's value runs past the record")
    return data[pos:pos + length]
