"""The records of ``__transaction_state``, byte for byte as Apache Kafka 3.9 writes them.

One record per change of a transactional id's metadata; the log is compacted, so the
last record per key is the state. Schemas (Kafka's ``transaction-coordinator`` JSON,
``TransactionLogKey.json`` / ``TransactionLogValue.json``):

- TransactionLogKey v0: int16 version 0, transactional_id (string). Other key versions
  are skipped when loading, as Kafka does.
- TransactionLogValue v0-1: int16 version, producer_id (int64), producer_epoch (int16),
  transaction_timeout_ms (int32), transaction_status (int8, a `TxnState` id),
  transaction_partitions (nullable array of {topic string, partition_ids [int32]}),
  transaction_last_update_timestamp_ms (int64), transaction_start_timestamp_ms (int64).
  Kafka writes null partitions for Empty and an array (maybe empty) otherwise; it writes
  v0 unless the ``transaction.version`` feature is 1 or more (never in ZooKeeper mode).
  v1 is "flexible": compact lengths (uvarint length + 1) and tagged fields after each
  partition entry and after the value; the value's tagged fields, written when not at
  their defaults, are 0 previous_producer_id (int64), 1 next_producer_id (int64) and 2
  client_transaction_version (int16): what transactions v2 need after a reload.
- A null value is a tombstone: the transactional id expired and was removed.

Strings are int16-length UTF-8 in v0, arrays int32-length, all big-endian. The readers
and writers are the ones of the ``__consumer_offsets`` codec (`group_records`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from josefk.cluster.coordinator.records import (
    RecordFormatError,
    RecordReader,
    RecordWriter,
)

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
FLEXIBLE_VALUE_VERSION = 1
EMPTY_STATUS = 0  # TxnState.EMPTY: the one status written with null partitions

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
# TransactionLogValue v1's tagged fields: tag -> (field, codec, default).
_TAGS = {0: ("previous_producer_id", _I64, -1), 1: ("next_producer_id", _I64, -1),
         2: ("client_transaction_version", _I16, 0)}

__all__ = [
    "RecordFormatError", "TRANSACTION_STATE_TOPIC", "TopicPartition", "TxnLogValue", "TxnRecord",
    "decode_key", "decode_record", "decode_value", "encode_key", "encode_record",
    "encode_value",
]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def partitions_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Topic -> its partition indexes, as the transactional requests group them."""
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One TransactionLogValue: a transactional id's metadata as stored."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


TxnRecord = tuple[str, TxnLogValue | None]
"""A transactional id and its value; a None value is a tombstone."""


# --- writing -------------------------------------------------------------------------------


class _FlexWriter(RecordWriter):
    """`RecordWriter` with the compact forms of flexible versions when ``flexible``."""

    def __init__(self, flexible: bool) -> None:
        super().__init__()
        self.flexible = flexible

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def length(self, n: int) -> None:
        """An array length (-1 for null)."""
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def string(self, s: str | None) -> None:
        if not self.flexible:
            super().string(s)
            return
        assert s is not None
        data = s.encode()
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes is too long")
        self.uvarint(len(data) + 1)
        self.buf += data

    def no_tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)


def encode_key(transactional_id: str) -> bytes:
    w = RecordWriter()
    w.i16(KEY_VERSION)
    w.string(transactional_id)
    return bytes(w.buf)


def encode_value(value: TxnLogValue, *, flexible: bool = False) -> bytes:
    """A value as Kafka writes it: v0, or v1 when ``flexible`` (transaction.version >= 1)."""
    if value.status == EMPTY_STATUS and value.partitions:
        raise RecordFormatError("an Empty transaction has no partitions")
    w = _FlexWriter(flexible)
    w.i16(FLEXIBLE_VALUE_VERSION if flexible else VALUE_VERSION)
    w.i64(value.producer_id)
    w.i16(value.producer_epoch)
    w.i32(value.timeout_ms)
    w.buf += _I8.pack(value.status)
    if value.status == EMPTY_STATUS:
        w.length(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(value.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        w.length(len(by_topic))
        for topic, ids in by_topic.items():
            w.string(topic)
            w.length(len(ids))
            for p in ids:
                w.i32(p)
            w.no_tagged_fields()
    w.i64(value.last_update_timestamp_ms)
    w.i64(value.start_timestamp_ms)
    if flexible:
        tags = [(tag, codec.pack(getattr(value, name)))
                for tag, (name, codec, default) in _TAGS.items()
                if getattr(value, name) != default]
        w.uvarint(len(tags))
        for tag, data in tags:
            w.uvarint(tag)
            w.uvarint(len(data))
            w.buf += data
    return bytes(w.buf)


def encode_record(record: TxnRecord, *, flexible: bool = False) -> tuple[bytes, bytes | None]:
    transactional_id, value = record
    return (encode_key(transactional_id),
            None if value is None else encode_value(value, flexible=flexible))


# --- reading -------------------------------------------------------------------------------


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key, or None for key versions Kafka 3.9 skips."""
    r = RecordReader(data)
    if r.i16() != KEY_VERSION:
        return None
    return r.str_()


def decode_value(data: bytes | None) -> TxnLogValue | None:
    """A value of either version, or None for a tombstone."""
    if data is None:
        return None
    r = RecordReader(data)
    version = r.i16()
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise RecordFormatError(f"unknown transaction log value version {version}")
    r.flexible = version == FLEXIBLE_VALUE_VERSION
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout_ms = r.i32()
    status = _I8.unpack(r._take(1))[0]
    partitions: set[TopicPartition] = set()
    for _ in range(max(r._length(4), 0)):
        topic = r.str_()
        n = r._length(4)
        if n < 0:
            raise RecordFormatError("null partition_ids")
        partitions.update(TopicPartition(topic, r.i32()) for _ in range(n))
        r.tagged_fields()
    last_update = r.i64()
    start = r.i64()
    tagged = _tagged_fields(r) if r.flexible else {}
    if status == EMPTY_STATUS:
        partitions.clear()  # Kafka ignores them for Empty
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, status, frozenset(partitions),
                       last_update, start, **tagged)


def _tagged_fields(r: RecordReader) -> dict[str, int]:
    """The value's known tagged fields by name; unknown tags are skipped, as Kafka does."""
    found: dict[str, int] = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        data = r._take(r.uvarint())
        known = _TAGS.get(tag)
        if known is not None:
            name, codec, _ = known
            if len(data) != codec.size:
                raise RecordFormatError(f"tagged field {tag} of {len(data)} bytes")
            found[name] = codec.unpack(data)[0]
    return found


def decode_record(key: bytes | None, value: bytes | None) -> TxnRecord | None:
    """A record read from the log, or None when its key is of a kind to skip.

    Raises `RecordFormatError` (or UnicodeDecodeError) for bytes that break the schema.
    """
    if key is None:
        raise RecordFormatError("a transaction log record without a key")
    transactional_id = decode_key(key)
    if transactional_id is None:
        return None
    return transactional_id, decode_value(value)
