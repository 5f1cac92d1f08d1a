"""The topics a consumer group subscribes to (by name or regular expression), their
metadata, and its hash of KIP-1101 as Kafka 4.1+ computes it: the group epoch's record
carries the hash, and a hash different from the group's starts a new target
assignment (a topic created, deleted or given partitions, by name or by regex).

Each topic hashes (XXH3-64, seed 0) a magic byte 0, its id's two halves, its name, its
partition count and, per partition, its replicas' racks (sorted, each length-prefixed);
the group hashes its topics' hashes in name order. Values are written as Java's hash
streams write them: little-endian integers, a string as its UTF-16LE code units followed
by its length in code units.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence

import xxhash

from josefk.cluster.coordinator.group.consumer.api import TopicImage
from josefk.cluster.coordinator.group.consumer.member import ConsumerMember
from josefk.cluster.coordinator.group.consumer.records import ResolvedRegexValue, TopicMetadata

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


def _string(s: str) -> bytes:
    units = s.encode("utf-16-le", "surrogatepass")
    return units + _I32.pack(len(units) // 2)


def _signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h


def topic_hash(topic: TopicMetadata, racks: Sequence[Iterable[str]] = ()) -> int:
    """One topic's hash (``racks[p]``: partition p's replicas' racks; none known: empty)."""
    ids = topic.topic_id.int
    data = bytearray(b"\x00")
    data += _I64.pack(_signed(ids >> 64)) + _I64.pack(_signed(ids & ((1 << 64) - 1)))
    data += _string(topic.name) + _I32.pack(topic.num_partitions)
    for p in range(topic.num_partitions):
        data += _I32.pack(p)
        for rack in sorted(racks[p]) if p < len(racks) else ():
            data += _I32.pack(len(rack)) + _string(rack)
    return _signed(xxhash.xxh3_64_intdigest(bytes(data)))


def group_hash(topics: Iterable[TopicMetadata]) -> int:
    """The group's hash over its existing subscribed topics; 0 for none."""
    hashes = sorted((t.name, topic_hash(t)) for t in topics)
    if not hashes:
        return 0
    return _signed(xxhash.xxh3_64_intdigest(b"".join(_I64.pack(h) for _, h in hashes)))


def subscribed_names(member: ConsumerMember, regexes: Mapping[str, ResolvedRegexValue]
                     ) -> set[str]:
    """The topic names a member subscribes to: by name, and those its regular expression
    matched when last resolved (none before it is)."""
    names = set(member.subscribed_topic_names)
    resolved = regexes.get(member.subscribed_topic_regex or "")
    if member.subscribed_topic_regex and resolved is not None:
        names.update(resolved.topics)
    return names


def subscription_metadata(members: Iterable[ConsumerMember], image: TopicImage,
                          regexes: Mapping[str, ResolvedRegexValue]
                          ) -> dict[str, TopicMetadata]:
    """The existing topics the members subscribe to, with their ids and partition counts."""
    result: dict[str, TopicMetadata] = {}
    for member in members:
        for name in subscribed_names(member, regexes):
            if name not in result and (topic := image.get(name)) is not None:
                result[name] = TopicMetadata(topic.topic_id, name, len(topic.partitions))
    return result


__all__ = ["group_hash", "subscribed_names", "subscription_metadata", "topic_hash"]
