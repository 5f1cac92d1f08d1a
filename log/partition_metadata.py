"""Kafka's ``partition.metadata`` file and Kafka's text form of UUIDs (topic ids).

Every partition directory holds ``partition.metadata`` naming the topic id the
partition belongs to, so a directory left behind by a deleted topic is never
mistaken for one of a recreated topic with the same name. Kafka 4.x writes exactly
``version: 0\\ntopic_id: <id>`` (no trailing newline) and reads each line as two
fields split on ``:`` plus whitespace, accepting any version >= 0.

Kafka prints a ``Uuid`` as the URL-safe base64 of its 16 bytes (most significant
long first, i.e. ``uuid.UUID.bytes``) without padding: 22 characters.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import uuid
from pathlib import Path

from josefk.log.checkpoint import write_atomic

PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0

#: Kafka's ``Uuid.ZERO_UUID``: never a valid topic id.
ZERO_UUID = uuid.UUID(int=0)
#: Kafka's ``Uuid.METADATA_TOPIC_ID`` (the ``__cluster_metadata`` topic), reserved.
METADATA_TOPIC_ID = uuid.UUID(int=1)

_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_FIELDS = re.compile(r":\s+")

logger = logging.getLogger(__name__)


def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: unpadded URL-safe base64 of the 16 bytes."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(s: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString()``; raises ValueError for anything but 16 bytes of base64url.

    Like Java's URL decoder it accepts padding and ignores the 4 unused low bits.
    """
    if not _BASE64URL.fullmatch(s):
        raise ValueError(f"not a base64url-encoded UUID: {s!r}")
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"not a base64url-encoded UUID: {s!r}") from None
    if len(raw) != 16:
        raise ValueError(f"{s!r} decodes to {len(raw)} bytes, not the 16 of a UUID")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    """Kafka's ``Uuid.randomUuid()``: a v4 UUID that is not reserved and whose text
    form does not start with ``-`` (which command-line tools would take for an option)."""
    while True:
        u = uuid.uuid4()
        if u not in (ZERO_UUID, METADATA_TOPIC_ID) and not kafka_uuid_str(u).startswith("-"):
            return u


def encode_partition_metadata(topic_id: uuid.UUID) -> bytes:
    """The file's bytes, exactly as Kafka 4.x writes them."""
    if topic_id == ZERO_UUID:
        raise ValueError("the zero UUID is not a topic id")
    return (f"version: {PARTITION_METADATA_VERSION}\n"
            f"topic_id: {kafka_uuid_str(topic_id)}").encode("ascii")


def write_partition_metadata(dir: Path, topic_id: uuid.UUID) -> None:
    """Atomically write ``dir/partition.metadata`` for ``topic_id``, without waiting for
    the disk: the topic id's durable home is the cluster metadata, and whoever opens
    the partition checks this file against it and rewrites it when missing, corrupt
    or wrong. (Kafka too keeps creation off the disk's critical path: it records the
    id and fsyncs the file later, from its scheduler.)"""
    write_atomic(dir / PARTITION_METADATA_FILE, encode_partition_metadata(topic_id),
                 sync=False)


def decode_partition_metadata(text: str) -> uuid.UUID:
    """Parse the file's text as Kafka's ``PartitionMetadataReadBuffer`` does; ValueError if bad."""
    lines = re.split(r"\r\n|\r|\n", text)  # Java's readLine()
    if len(lines) < 2:
        raise ValueError("expected a version line and a topic_id line")
    version_fields = _split_fields(lines[0])
    if len(version_fields) != 2 or not re.fullmatch(r"[+-]?[0-9]+", version_fields[1]):
        raise ValueError(f"malformed line: {lines[0]!r}")
    version = int(version_fields[1])
    if version < PARTITION_METADATA_VERSION:
        raise ValueError(f"unrecognized version {version}")
    id_fields = _split_fields(lines[1])
    if len(id_fields) != 2:
        raise ValueError(f"malformed line: {lines[1]!r}")
    topic_id = parse_kafka_uuid(id_fields[1])
    if topic_id == ZERO_UUID:
        raise ValueError("zero topic id")
    return topic_id


def read_partition_metadata(dir: Path) -> uuid.UUID | None:
    """The topic id in ``dir/partition.metadata``; None if absent, or (with a warning) corrupt."""
    path = dir / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        logger.warning("cannot read %s: %s", path, e)
        return None
    try:
        return decode_partition_metadata(text)
    except ValueError as e:
        logger.warning("ignoring corrupt %s: %s", path, e)
        return None


def _split_fields(line: str) -> list[str]:
    # Java's String.split drops trailing empty strings.
    fields = _FIELDS.split(line)
    while fields and fields[-1] == "":
        fields.pop()
    return fields
