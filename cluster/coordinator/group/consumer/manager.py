"""The consumer groups of the ``__consumer_offsets`` partitions a coordinator leads:
heartbeats, timers, descriptions, deletion and the member checks of offset requests.

As for classic groups, a request returns the records to write and its answer; state
changes only when :meth:`ConsumerGroups.replay` applies the records (after writing them,
or loading the partition). Session and revocation timers live in memory: a loaded group
gives every member a new session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from josefk.cluster.coordinator.group.api import Clock, Error, Result
from josefk.cluster.coordinator.group.consumer import regex_refresh
from josefk.cluster.coordinator.group.consumer.api import (
    ConsumerGroupConfig,
    ConsumerGroupDescription,
    DescribedConsumerMember,
    HeartbeatRequest,
    HeartbeatResponse,
    NoTopics,
    Refused,
    TopicImage,
)
from josefk.cluster.coordinator.group.consumer.classic_members import ClassicMembers
from josefk.cluster.coordinator.group.consumer.group import ConsumerGroup, Deadlines
from josefk.cluster.coordinator.group.consumer.heartbeat import Heartbeat, Records
from josefk.cluster.coordinator.group.consumer.member import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerMember,
    MemberState,
)
from josefk.cluster.coordinator.group.consumer.migration import (
    downgrade_records,
    may_downgrade,
)
from josefk.cluster.coordinator.group.consumer.records import (
    KEY_TYPES,
    REGULAR_EXPRESSION,
    Assignment,
    ConsumerKey,
    ConsumerValue,
)
from josefk.cluster.coordinator.group.consumer.regex import InvalidRegex, compile_re2
from josefk.cluster.coordinator.group.records import Record

logger = logging.getLogger(__name__)


class ConsumerGroups:
    """Every consumer group of a coordinator."""

    def __init__(self, config: ConsumerGroupConfig, clock: Clock,
                 image: TopicImage | None = None) -> None:
        self.config = config
        self.clock = clock
        self.image = image or NoTopics()
        self.groups: dict[str, ConsumerGroup] = {}
        self.classic = ClassicMembers(self)
        # Groups whose downgrade records are being written: the classic group they become
        # starts a rebalance (see Groups.replay).
        self.downgrading: set[str] = set()

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    # --- replay -----------------------------------------------------------------------

    def replay(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        group = self.groups.get(key.group)
        if group is None:
            if value is None:
                return
            group = self.groups[key.group] = ConsumerGroup(key.group)
        group.replay(key, value)
        if key.type == 3 and value is None:
            del self.groups[key.group]  # the group's last record: it is deleted

    def unload(self, in_partition: Callable[[str], bool]) -> None:
        for group_id in [g for g in self.groups if in_partition(g)]:
            del self.groups[group_id]

    # --- ConsumerGroupHeartbeat -----------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, converted: ConsumerGroup | None = None
                  ) -> Result[HeartbeatResponse]:
        """Records and answer of a heartbeat (join, leave, or beat); ``converted`` is the
        group a classic group becomes with this heartbeat's records."""
        try:
            _validate(req, self.config)
            group = converted or self.groups.get(req.group_id)
            if group is None:
                if req.member_epoch != 0:
                    raise Refused(Error.GROUP_ID_NOT_FOUND,
                                  f"Consumer group {req.group_id} not found.")
                group = ConsumerGroup(req.group_id)
            beat = Heartbeat(group, self.config, self.image, self.clock())
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                response = beat.leave(req)
                records: list[Record] = list(beat.records)
                if req.member_epoch == LEAVE_EPOCH:
                    records = self._maybe_downgrade(group, req.member_id, records)
                return Result(records, response,
                              on_success=lambda: self._after_leave(req.group_id, beat))
            response, member = beat.run(req)
        except Refused as e:
            return Result([], HeartbeatResponse(e.code, e.message))
        return Result(beat.records, response,
                      on_success=lambda: self._after_join(req.group_id, member, beat, converted))

    def _after_join(self, group_id: str, member: ConsumerMember, beat: Heartbeat,
                    converted: ConsumerGroup | None) -> None:
        if converted is not None:  # the classic members' sessions start now, as Kafka's
            group = self.groups.get(group_id)
            for member_id, m in converted.members.items():
                if group is not None:
                    group.deadlines[member_id] = Deadlines(self.clock() +
                                                           self._session_timeout(m))
        self.after_heartbeat(group_id, member, beat)

    def _maybe_downgrade(self, group: ConsumerGroup, leaving: str, records: list[Record]
                         ) -> list[Record]:
        """The records of a member's removal, or of the group's downgrade to a classic
        group when it was the last member speaking the consumer protocol."""
        if not may_downgrade(group, leaving, self.config):
            return records
        logger.info("consumer group %s becomes a classic group: its last member speaking "
                    "the consumer protocol, %s, left", group.group_id, leaving)
        self.downgrading.add(group.group_id)
        return downgrade_records(group, leaving, self.image, self.clock())

    def _after_leave(self, group_id: str, beat: Heartbeat) -> None:
        group = self.groups.get(group_id)
        if group is not None and beat.topics_known:
            group.topics = beat.topics

    def after_heartbeat(self, group_id: str, member: ConsumerMember, beat: Heartbeat) -> None:
        group = self.groups.get(group_id)
        if group is None or member.member_id not in group.members:
            return
        group.topics = beat.topics
        now = self.clock()
        if beat.regex_refresh:
            group.regex_refresh_due = now
        timers = group.deadlines.setdefault(member.member_id, Deadlines())
        timers.session = now + self._session_timeout(member)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if timers.revocation is None or timers.revocation[1] != member.member_epoch:
                timers.revocation = (now + max(member.rebalance_timeout_ms, 0),
                                     member.member_epoch)
        else:
            timers.revocation = None

    def _session_timeout(self, member: ConsumerMember) -> int:
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self.config.session_timeout_ms

    # --- timers ----------------------------------------------------------------------------

    def next_deadline(self, group_id: str) -> int | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        now = self.clock()
        deadlines = [] if group.regex_refresh_due is None else [group.regex_refresh_due]
        for member_id, member in group.members.items():
            # Members replayed from the log get a whole session to come back.
            timers = group.deadlines.setdefault(
                member_id, Deadlines(now + self._session_timeout(member)))
            deadlines += timers.due()
        return min(deadlines, default=None)

    def on_timer(self, group_id: str) -> list[Record]:
        """Fence the members whose session or revocation time is up, else resolve the
        regular expressions if asked to."""
        group = self.groups.get(group_id)
        if group is None:
            return []
        now = self.clock()
        records: list[Record] = []
        for member in list(group.members.values()):
            timers = group.deadlines.get(member.member_id)
            if timers is None:
                continue
            revoked_late = timers.revocation is not None and timers.revocation[0] <= now and \
                member.state is MemberState.UNREVOKED_PARTITIONS and \
                member.member_epoch == timers.revocation[1]
            if timers.revocation is not None and timers.revocation[0] <= now and \
                    not revoked_late:
                timers.revocation = None  # it revoked in time: a stale deadline
            late = [name for name, d in (("session", timers.session), ("join", timers.join),
                                         ("sync", timers.sync)) if d is not None and d <= now]
            if revoked_late or late:
                logger.info("fencing member %s of consumer group %s: its %s expired",
                            member.member_id, group_id,
                            "rebalance timeout" if revoked_late else " and ".join(late))
                beat = Heartbeat(group, self.config, self.image, self.clock())
                beat.fence(member)
                records += self._maybe_downgrade(group, member.member_id, list(beat.records))
                group.topics = beat.topics
                group.deadlines.pop(member.member_id, None)
                break  # one at a time: the next fencing needs this one's new epoch
        due = group.regex_refresh_due
        if not records and due is not None and due <= now:
            records += regex_refresh.resolve(group, self.image, now)
        return records

    # --- reads, deletion, offsets -----------------------------------------------------------

    def describe(self, group_id: str) -> ConsumerGroupDescription | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        names = {t.topic_id: name for name, t in (group.topics or {}).items()}

        def named(a: Assignment) -> tuple[tuple, ...]:
            out = []
            for topic_id, parts in sorted(a.items()):
                name = names.get(topic_id)
                if name is None and (topic := self.image.get_by_id(topic_id)) is not None:
                    name = topic.name
                out.append((topic_id, name or "", tuple(sorted(parts))))
            return tuple(out)

        beat = Heartbeat(group, self.config, self.image, self.clock())
        return ConsumerGroupDescription(
            group_id, group.state.value, group.group_epoch, group.assignment_epoch,
            beat.assignor(group.members.values()).name, tuple(
                DescribedConsumerMember(
                    m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                    m.client_host, m.subscribed_topic_names, m.subscribed_topic_regex,
                    named(m.assigned), named(group.target.get(m.member_id, {})),
                    m.classic is not None)
                for m in group.members.values()))

    def list_groups(self, states: set[str]) -> list[tuple[str, str]]:
        """(group id, state) of the groups in one of ``states`` (lower case; empty: all)."""
        return [(g.group_id, g.state.value) for g in self.groups.values()
                if not states or g.state.value.lower() in states]

    def tombstones(self, group_id: str) -> Records:
        """The records deleting an empty group (its offsets are the caller's)."""
        group = self.groups.get(group_id)
        if group is None:
            return []
        records: Records = [(ConsumerKey(7, group_id, m), None) for m in group.target]
        records += [(ConsumerKey(REGULAR_EXPRESSION, group_id, regex=r), None)
                    for r in sorted(group.regexes)]
        records += [(ConsumerKey(t, group_id), None) for t in (6, 4, 3)]
        return records

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int,
                               api_version: int) -> Error:
        """Kafka's ConsumerGroup.validateOffsetCommit: a member commits at its epoch (a
        classic one at its generation, with any version); an empty group takes commits
        from anyone (the admin client, manual assignment)."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return Error.NONE
        member = group.members.get(member_id)
        if member is None:
            return Error.UNKNOWN_MEMBER_ID
        if member.classic is not None:  # a classic member commits at its generation
            return Error.NONE if member_epoch == member.member_epoch else \
                Error.ILLEGAL_GENERATION
        if api_version < 9:
            return Error.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return Error.STALE_MEMBER_EPOCH
        return Error.NONE

    def validate_offset_fetch(self, group_id: str, member_id: str | None,
                              member_epoch: int) -> Error:
        group = self.groups.get(group_id)
        if group is None or (member_epoch < 0 and not member_id):
            return Error.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return Error.UNKNOWN_MEMBER_ID
        return Error.NONE if member_epoch == member.member_epoch else Error.STALE_MEMBER_EPOCH


def _validate(req: HeartbeatRequest, config: ConsumerGroupConfig) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    def invalid(message: str) -> Refused:
        return Refused(Error.INVALID_REQUEST, message)

    if not req.group_id:
        raise invalid("GroupId can't be empty.")
    if req.instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if req.rack_id == "":
        raise invalid("RackId can't be empty.")
    epoch = req.member_epoch
    if epoch > 0 or epoch == LEAVE_EPOCH:
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
    elif epoch == 0:
        if req.api_version >= 1 and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or any(list(parts) for _, parts in req.owned):
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if not req.subscribed_topic_names and not req.subscribed_topic_regex:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                          "first request.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
    else:
        raise invalid("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in config.assignors:
        raise Refused(Error.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is "
                      "not supported. Supported assignors: "
                      f"{', '.join(config.assignors)}.")
    if req.subscribed_topic_regex:
        try:
            compile_re2(req.subscribed_topic_regex)
        except InvalidRegex as e:
            raise Refused(Error.INVALID_REGULAR_EXPRESSION, str(e)) from e


def is_consumer_key(key: object) -> bool:
    return isinstance(key, ConsumerKey) and key.type in KEY_TYPES


__all__ = ["ConsumerGroups", "is_consumer_key"]


