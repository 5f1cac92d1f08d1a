"""Members' regular expressions resolved in the background, as Kafka 4.3 resolves them.

A heartbeat never matches an expression itself: it asks for a resolution when an
expression is new to the group, when topics were created or deleted since the last one,
or when ``group.consumer.regex.refresh.interval.ms`` has passed, but never sooner than
10 s after the last. The group's timer then resolves every expression its members use,
writes a ConsumerGroupRegularExpression record for each, and bumps the group epoch if
what they match changed, which starts a new target assignment. An expression no member
uses any more gets a tombstone.

Kafka writes the metadata image's offset as a resolution's version; josefk has no such
log, so it writes the time of the resolution, and remembers the topic names it resolved
against to know when topics came or went.
"""

from __future__ import annotations

from collections.abc import Iterable

from josefk.cluster.coordinator.group.consumer.api import TopicImage
from josefk.cluster.coordinator.group.consumer.group import ConsumerGroup
from josefk.cluster.coordinator.group.consumer.member import ConsumerMember
from josefk.cluster.coordinator.group.consumer.records import (
    METADATA,
    REGULAR_EXPRESSION,
    ConsumerKey,
    ConsumerValue,
    GroupEpochValue,
    ResolvedRegexValue,
)
from josefk.cluster.coordinator.group.consumer.regex import matching_topics
from josefk.cluster.coordinator.group.consumer.subscriptions import (
    group_hash,
    subscription_metadata,
)

MIN_INTERVAL_MS = 10_000  # Kafka's least time between two resolutions of a group's
_UNRESOLVED = ResolvedRegexValue((), -1, -1)
Records = list[tuple[ConsumerKey, ConsumerValue | None]]


def _regexes(members: Iterable[ConsumerMember]) -> set[str]:
    return {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}


def unused(group_id: str, before: Iterable[ConsumerMember], after: Iterable[ConsumerMember]
           ) -> Records:
    """Tombstones of the expressions ``before`` used and ``after`` does not."""
    return [(ConsumerKey(REGULAR_EXPRESSION, group_id, regex=regex), None)
            for regex in sorted(_regexes(before) - _regexes(after))]


def wants_refresh(group: ConsumerGroup, members: Iterable[ConsumerMember], image: TopicImage,
                  now: int, interval_ms: int) -> bool:
    """Whether a heartbeat leaving the group with ``members`` asks for a resolution."""
    regexes = _regexes(members)
    if not regexes or group.regex_refresh_due is not None:
        return False
    last = group.last_regex_refresh
    if now <= last + MIN_INTERVAL_MS:
        return False
    return regexes != set(group.regexes) or now > last + interval_ms or \
        group.regex_names_seen != frozenset(t.name for t in image.topics())


def resolve(group: ConsumerGroup, image: TopicImage, now: int) -> Records:
    """Every expression the members use, resolved now; a new group epoch if what they
    match (or the metadata hash of the topics) changed."""
    names = [t.name for t in image.topics()]
    group.regex_names_seen = frozenset(names)
    group.regex_refresh_due = None
    resolved = {regex: ResolvedRegexValue(tuple(sorted(matching_topics(regex, names))), now, now)
                for regex in sorted(_regexes(group.members.values()))}
    if not resolved:
        return []
    records: Records = [(ConsumerKey(REGULAR_EXPRESSION, group.group_id, regex=regex), value)
                        for regex, value in resolved.items()]
    changed = any(group.regexes.get(regex, _UNRESOLVED).topics != value.topics
                  for regex, value in resolved.items())
    metadata_hash = group_hash(
        subscription_metadata(group.members.values(), image, resolved).values())
    if changed or metadata_hash != group.metadata_hash:
        records.append((ConsumerKey(METADATA, group.group_id),
                        GroupEpochValue(group.group_epoch + 1, metadata_hash)))
    return records


__all__ = ["MIN_INTERVAL_MS", "resolve", "unused", "wants_refresh"]
