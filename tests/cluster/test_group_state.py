"""The group state machine, driven by calling its methods and replaying records: no sockets.

A Harness stands in for the coordinator: it "writes" a result's records to a
list (the log) and replays them, and fires timers as a fake clock advances.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from josefk.cluster.coordinator.group.api import (
    Error,
    GroupConfig,
    GroupError,
    JoinRequest,
    JoinResult,
    PartitionCommit,
    Reply,
    Result,
    SyncRequest,
    SyncResult,
    append_error_to_response_error,
)
from josefk.cluster.coordinator.group.groups import Groups
from josefk.cluster.coordinator.group.pending_offsets import validate_txn_commit
from josefk.cluster.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from josefk.cluster.coordinator.group.state import (
    TRANSITIONS,
    Event,
    Group,
    GroupState,
    IllegalTransition,
    subscription_topics,
)

T0 = 1_700_000_000_000
SESSION, REBALANCE, DELAY = 10_000, 30_000, 3_000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0."""
    data = struct.pack(">hi", 0, len(topics))
    for t in topics:
        data += struct.pack(">h", len(t)) + t.encode()
    return data + struct.pack(">i", -1)


RANGE = (("range", subscription("t")),)


class Harness:
    """Groups, a log of written records, and a clock that fires timers as it advances."""

    def __init__(self, **config: Any) -> None:
        self.now = T0
        self.groups = Groups(GroupConfig(initial_rebalance_delay_ms=DELAY, **config),
                             lambda: self.now)
        self.log: list[Record] = []
        self.fail_writes: Error | None = None

    def apply(self, result: Result[Any]) -> Any:
        """Write the records (or fail), replay them, run the follow-ups; the response."""
        if result.records:
            if self.fail_writes is not None:
                assert result.on_failure is not None
                self.write(result.on_failure(self.fail_writes))
                return result.response
            self.write(result.records)
        if result.on_success is not None:
            result.on_success()
        return result.response

    def write(self, records: list[Record]) -> None:
        self.log += records
        for record in records:
            self.groups.replay(record)

    def advance(self, ms: int) -> None:
        """Move the clock on by ``ms``, firing each timer at its deadline on the way."""
        target = self.now + ms
        for _ in range(10_000):
            deadlines = [(d, g) for g in list(self.groups.groups)
                         if (d := self.groups.next_deadline(g)) is not None and d <= target]
            if not deadlines:
                self.now = target
                return
            deadline, group_id = min(deadlines)
            self.now = max(self.now, deadline)
            self.write(self.groups.on_timer(group_id))
        raise AssertionError("timers keep firing")

    def join(self, member_id: str = "", group: str = "g", *, protocols: Any = RANGE,
             instance: str | None = None, version: int = 9, protocol_type: str = "consumer",
             session: int = SESSION, rebalance: int = REBALANCE, client: str = "c"
             ) -> Reply[JoinResult]:
        req = JoinRequest(group, member_id, instance, protocol_type, protocols, session,
                          rebalance, client, "/127.0.0.1", version)
        return self.apply(self.groups.join(req))

    def member(self, group: str = "g", **kwargs: Any) -> Reply[JoinResult]:
        """A new dynamic member through KIP-394's two steps; its (parked) second join."""
        first = self.join("", group, **kwargs)
        assert first.value is not None and first.value.error is Error.MEMBER_ID_REQUIRED
        return self.join(first.value.member_id, group, **kwargs)

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             group: str = "g", instance: str | None = None) -> Reply[SyncResult]:
        req = SyncRequest(group, generation, member_id, instance, "consumer", "range",
                          tuple((assignments or {}).items()))
        return self.apply(self.groups.sync(req))

    def state(self, group: str = "g") -> GroupState:
        g = self.groups.get(group)
        return GroupState.DEAD if g is None else g.state

    def stable_group(self, n: int, group: str = "g", **kwargs: Any) -> list[JoinResult]:
        """n members joined and synced (leader assigns b"asg-<i>"); their join results.

        Static members (``instance``) join in one step, dynamic ones in two."""
        instance = kwargs.pop("instance", None)
        replies = [self.join("", group, instance=f"{instance}{i}", client=f"c{i}", **kwargs)
                   if instance else self.member(group, client=f"c{i}", **kwargs)
                   for i in range(n)]
        self.advance(DELAY * n)
        results = [r.value for r in replies]
        assert all(r is not None and r.error is Error.NONE for r in results), results
        joined: list[JoinResult] = [r for r in results if r is not None]
        leader = next(r for r in joined if r.members)
        assignment = {r.member_id: f"asg-{i}".encode() for i, r in enumerate(joined)}
        syncs = [self.sync(r.member_id, r.generation_id, assignment if r is leader else None,
                           group, f"{instance}{i}" if instance else None)
                 for i, r in enumerate(joined)]
        assert all(s.value is not None and s.value.error is Error.NONE for s in syncs)
        assert self.state(group) is GroupState.STABLE
        return joined


def test_transition_table_allows_only_its_moves() -> None:
    group = Group("g", lambda: T0)
    for state, moves in TRANSITIONS.items():
        for event in Event:
            group.state = state
            if event in moves:
                group.transition(event)
                assert (group.previous_state, group.state) == (state, moves[event])
            else:
                with pytest.raises(IllegalTransition):
                    group.transition(event)
    assert TRANSITIONS[GroupState.DEAD] == {Event.DELETE: GroupState.DEAD,
                                            Event.UNLOAD: GroupState.DEAD}
    # Any group can be deleted, or unloaded when another broker takes its partition.
    assert all(moves[e] is GroupState.DEAD for moves in TRANSITIONS.values()
               for e in (Event.DELETE, Event.UNLOAD))


def test_two_step_join_then_initial_delay() -> None:
    h = Harness()
    first = h.join(client="client-a")
    assert first.value is not None
    assert first.value.error is Error.MEMBER_ID_REQUIRED
    member_id = first.value.member_id
    assert member_id.startswith("client-a-")
    assert h.state() is GroupState.EMPTY
    # A new group is written at once (empty, generation 0).
    assert h.log == [(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None, T0, ()))]

    second = h.join(member_id)
    assert not second.done and h.state() is GroupState.PREPARING_REBALANCE
    h.advance(DELAY - 1)
    assert not second.done
    h.advance(1)
    assert second.value == JoinResult(
        Error.NONE, member_id, 1, "consumer", "range", member_id, False,
        (second.value.members[0],))
    assert second.value.members[0].metadata == subscription("t")
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_versions_before_4_join_in_one_step() -> None:
    h = Harness()
    reply = h.join(version=3)
    assert not reply.done
    h.advance(DELAY)
    assert reply.value is not None and reply.value.error is Error.NONE
    assert reply.value.member_id.startswith("c-")


def test_initial_delay_grows_while_members_keep_joining() -> None:
    h = Harness()
    a = h.member()
    h.advance(2000)
    b = h.member(client="b")
    h.advance(1000)  # the delay ran out, but b joined meanwhile: another delay
    assert not a.done and not b.done
    h.advance(DELAY - 1)
    assert not a.done
    h.advance(1)
    assert a.value is not None and b.value is not None
    assert a.value.generation_id == b.value.generation_id == 1
    assert {len(a.value.members), len(b.value.members)} == {0, 2}


def test_three_members_sync_through_the_leaders_record() -> None:
    h = Harness()
    replies = [h.member(client=f"c{i}") for i in range(3)]
    h.advance(3 * DELAY)
    results = [r.value for r in replies]
    assert all(r is not None for r in results)
    leader = [r for r in results if r is not None and r.members]
    assert len(leader) == 1 and len(leader[0].members) == 3
    leader_id = leader[0].member_id
    assert all(r is not None and r.leader == leader_id for r in results)
    followers = [r for r in results if r is not None and r.member_id != leader_id]
    parked = [h.sync(f.member_id, 1) for f in followers]
    assert not any(p.done for p in parked)
    assignment = {r.member_id: f"opaque-{i}".encode() for i, r in enumerate(results) if r}
    written = len(h.log)
    mine = h.sync(leader_id, 1, assignment)
    # The assignment takes effect when its record is replayed: then everyone is answered.
    [(key, value)] = h.log[written:]
    assert key == GroupMetadataKey("g") and isinstance(value, GroupMetadataValue)
    assert {m.member_id: m.assignment for m in value.members} == assignment
    assert (value.generation, value.protocol, value.leader) == (1, "range", leader_id)
    for reply, result in zip(parked + [mine], followers + leader, strict=True):
        assert reply.value == SyncResult(Error.NONE, "consumer", "range",
                                         assignment[result.member_id])
    assert h.state() is GroupState.STABLE


def test_leader_assignment_is_not_applied_when_the_write_fails() -> None:
    h = Harness()
    a, b = (h.member(client=n) for n in "ab")
    h.advance(2 * DELAY)
    assert a.value is not None and b.value is not None
    leader, follower = (a.value, b.value) if a.value.members else (b.value, a.value)
    waiting = h.sync(follower.member_id, 1)
    # The coordinator maps the append error before the state machine sees it.
    h.fail_writes = append_error_to_response_error(Error.NOT_ENOUGH_REPLICAS)
    mine = h.sync(leader.member_id, 1, {leader.member_id: b"x", follower.member_id: b"y"})
    for reply in (waiting, mine):
        assert reply.value == SyncResult(Error.COORDINATOR_NOT_AVAILABLE)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.fail_writes is Error.COORDINATOR_NOT_AVAILABLE


def test_protocol_every_member_supports_is_chosen() -> None:
    h = Harness()
    a = h.member(protocols=(("roundrobin", b"a-rr"), ("range", b"a-range")))
    b = h.member(protocols=(("range", b"b-range"), ("roundrobin", b"b-rr")))
    c = h.member(protocols=(("range", b"c-range"),))
    h.advance(3 * DELAY)
    results = [r.value for r in (a, b, c)]
    assert {r.protocol_name for r in results if r} == {"range"}
    leader = next(r for r in results if r and r.members)
    assert sorted(m.metadata for m in leader.members) == [b"a-range", b"b-range", b"c-range"]
    # Joining without a protocol the group uses, or of another type, is refused.
    nope = h.join(protocols=(("roundrobin", b""),))
    assert nope.value is not None and nope.value.error is Error.INCONSISTENT_GROUP_PROTOCOL
    other = h.join(protocol_type="connect")
    assert other.value is not None and other.value.error is Error.INCONSISTENT_GROUP_PROTOCOL
    empty = Harness().join(protocol_type="")
    assert empty.value is not None and empty.value.error is Error.INCONSISTENT_GROUP_PROTOCOL


def test_heartbeat_answers() -> None:
    h = Harness()
    [a, b] = h.stable_group(2)
    groups = h.groups
    assert groups.heartbeat("g", a.member_id, None, 1) is Error.NONE
    assert groups.heartbeat("g", a.member_id, None, 2) is Error.ILLEGAL_GENERATION
    assert groups.heartbeat("g", "nobody", None, 1) is Error.UNKNOWN_MEMBER_ID
    assert groups.heartbeat("missing", a.member_id, None, 1) is Error.UNKNOWN_MEMBER_ID
    h.join(b.member_id, protocols=(("range", subscription("t", "u")),))  # b changes metadata
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert groups.heartbeat("g", a.member_id, None, 1) is Error.REBALANCE_IN_PROGRESS


def test_session_timeout_removes_a_silent_member() -> None:
    h = Harness()
    [a, b] = h.stable_group(2)
    for _ in range(3):
        h.advance(SESSION // 3)
        assert h.groups.heartbeat("g", a.member_id, None, 1) is Error.NONE
    h.advance(SESSION // 3)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.groups.heartbeat("g", b.member_id, None, 1) is Error.UNKNOWN_MEMBER_ID
    assert h.groups.heartbeat("g", a.member_id, None, 1) is Error.REBALANCE_IN_PROGRESS
    again = h.join(a.member_id)  # the last one needed: the join completes at once
    assert again.value is not None
    assert (again.value.generation_id, [m.member_id for m in again.value.members]) == \
        (2, [a.member_id])


def test_members_that_do_not_rejoin_in_time_are_removed() -> None:
    h = Harness()
    [a, b] = h.stable_group(2)
    leader = a if a.members else b
    other = b if leader is a else a
    rejoin = h.join(leader.member_id)  # the leader rejoins: a rebalance
    assert not rejoin.done
    for _ in range(REBALANCE // (SESSION // 2)):
        h.advance(SESSION // 2)
        h.groups.heartbeat("g", other.member_id, None, 1)  # alive, but never rejoins
    h.advance(1)
    assert rejoin.value is not None and rejoin.value.generation_id == 2
    assert [m.member_id for m in rejoin.value.members] == [leader.member_id]
    assert h.groups.heartbeat("g", other.member_id, None, 1) is Error.UNKNOWN_MEMBER_ID


def test_members_that_never_sync_are_removed() -> None:
    h = Harness()
    a, b = (h.member(client=n) for n in "ab")
    h.advance(2 * DELAY)
    assert a.value is not None and b.value is not None
    leader, follower = (a.value, b.value) if a.value.members else (b.value, a.value)
    h.sync(leader.member_id, 1, {leader.member_id: b"l", follower.member_id: b"f"})
    assert h.state() is GroupState.STABLE
    for _ in range(REBALANCE // (SESSION // 2)):
        h.advance(SESSION // 2)
        h.groups.heartbeat("g", leader.member_id, None, 1)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert follower.member_id not in h.groups.groups["g"].members


def test_leaving_members_and_the_empty_group_record() -> None:
    h = Harness()
    [a, b] = h.stable_group(2)
    left = h.apply(h.groups.leave("g", [(b.member_id, None), ("nobody", None)]))
    assert left == [Error.NONE, Error.UNKNOWN_MEMBER_ID]
    assert h.state() is GroupState.PREPARING_REBALANCE
    again = h.join(a.member_id)
    assert again.value is not None and again.value.generation_id == 2
    written = len(h.log)
    assert h.apply(h.groups.leave("g", [(a.member_id, None)])) == [Error.NONE]
    # Nobody is left: the next generation is empty, and written.
    assert h.state() is GroupState.EMPTY
    assert h.log[written:] == [(GroupMetadataKey("g"), GroupMetadataValue(
        "consumer", 3, None, None, T0 + 2 * DELAY, ()))]
    assert h.groups.leave("missing", [("x", None)]).response == [Error.UNKNOWN_MEMBER_ID]


def test_static_member_restart_keeps_its_place() -> None:
    h = Harness()
    a = h.join(instance="a", client="ca")
    b = h.join(instance="b", client="cb")
    h.advance(2 * DELAY)
    assert a.value is not None and b.value is not None
    old_b = b.value.member_id
    assert old_b.startswith("b-")
    leader = a.value if a.value.members else b.value
    h.sync(a.value.member_id, 1, {a.value.member_id: b"A", old_b: b"B"}
           if leader is a.value else None, instance="a")
    h.sync(old_b, 1, {a.value.member_id: b"A", old_b: b"B"} if leader is b.value else None,
           instance="b")
    assert h.state() is GroupState.STABLE
    written = len(h.log)

    back = h.join(instance="b", client="cb")  # a new process: no member id yet
    assert back.value is not None
    new_b = back.value.member_id
    assert (back.value.error, back.value.generation_id) == (Error.NONE, 1)
    assert new_b != old_b and h.state() is GroupState.STABLE
    [(_, value)] = h.log[written:]  # the new member id is written
    assert isinstance(value, GroupMetadataValue)
    assert {m.member_id for m in value.members} == {a.value.member_id, new_b}
    assert h.groups.heartbeat("g", old_b, "b", 1) is Error.FENCED_INSTANCE_ID
    assert h.groups.heartbeat("g", new_b, "b", 1) is Error.NONE
    assert h.groups.heartbeat("g", a.value.member_id, "a", 1) is Error.NONE
    assert h.sync(new_b, 1, instance="b").value == SyncResult(Error.NONE, "consumer", "range",
                                                               b"B")


def test_static_member_replacement_is_undone_when_the_write_fails() -> None:
    h = Harness()
    [a] = h.stable_group(1, instance="a")
    h.fail_writes = append_error_to_response_error(Error.NOT_LEADER_OR_FOLLOWER)
    back = h.join(instance="a0")
    assert back.value is not None and back.value.error is Error.NOT_COORDINATOR
    assert h.groups.heartbeat("g", a.member_id, "a0", 1) is Error.NONE


def test_static_members_stay_through_a_rebalance_they_miss() -> None:
    h = Harness()
    [s, d] = h.stable_group(2, instance="s")
    [e] = h.stable_group(1, group="mixed")
    e2 = h.member("mixed", client="e2")
    # s never rejoins, but the rebalance timeout does not remove a static member.
    rejoin = h.join(d.member_id, instance="s1", protocols=(("range", subscription("u")),))
    for _ in range(REBALANCE // (SESSION // 2)):
        h.groups.heartbeat("g", s.member_id, "s0", 1)
        h.groups.heartbeat("mixed", e.member_id, None, 1)
        h.advance(SESSION // 2)
    assert rejoin.value is not None and rejoin.value.generation_id == 2
    assert s.member_id in h.groups.groups["g"].members
    # A dynamic member that does not rejoin is removed when the join phase ends.
    assert e2.value is not None and e2.value.generation_id == 2
    assert e.member_id not in h.groups.groups["mixed"].members


def test_offset_commit_checks() -> None:
    h = Harness(offset_metadata_max_bytes=10)
    groups = h.groups
    commit = [("t", [PartitionCommit(0, 5, 3, "meta")])]
    with pytest.raises(GroupError) as e:
        groups.commit_offsets("missing", "m", None, 1, -1, commit, 9)
    assert e.value.code is Error.GROUP_ID_NOT_FOUND
    with pytest.raises(GroupError) as e:
        groups.commit_offsets("missing", "m", None, 1, -1, commit, 8)
    assert e.value.code is Error.ILLEGAL_GENERATION
    # Without a generation a "simple" group is created, by replaying the commit.
    result = groups.commit_offsets("simple", "", None, -1, -1, commit)
    assert groups.fetch_offsets("simple", [("t", [0])])[0][1][0].offset == -1
    h.apply(result)
    [(_, [fetched])] = groups.fetch_offsets("simple", [("t", [0])])
    assert (fetched.offset, fetched.leader_epoch, fetched.metadata) == (5, 3, "meta")
    assert groups.groups["simple"].protocol_type is None

    [a] = h.stable_group(1, instance="i")
    for args, code in [((a.member_id, "i0", 2), Error.ILLEGAL_GENERATION),
                       (("nobody", None, 1), Error.UNKNOWN_MEMBER_ID),
                       (("other", "i0", 1), Error.FENCED_INSTANCE_ID),
                       (("", None, -1), Error.UNKNOWN_MEMBER_ID)]:
        with pytest.raises(GroupError) as e:
            groups.commit_offsets("g", *args, -1, commit)
        assert e.value.code is code
    too_long = [("t", [PartitionCommit(0, 1, -1, "x" * 11), PartitionCommit(1, 1, -1, None)])]
    result = groups.commit_offsets("g", a.member_id, "i0", 1, 60_000, too_long)
    assert result.response == {("t", 0): Error.OFFSET_METADATA_TOO_LARGE, ("t", 1): Error.NONE}
    assert result.records == [(OffsetCommitKey("g", "t", 1),
                               OffsetCommitValue(1, "", T0 + DELAY, -1, T0 + DELAY + 60_000))]


def test_no_commits_while_the_assignment_is_pending() -> None:
    h = Harness()
    reply = h.member()
    h.advance(DELAY)
    assert reply.value is not None
    with pytest.raises(GroupError) as e:
        h.groups.commit_offsets("g", reply.value.member_id, None, 1, -1, [])
    assert e.value.code is Error.REBALANCE_IN_PROGRESS


def test_commits_keep_a_session_alive() -> None:
    h = Harness()
    [a] = h.stable_group(1)
    for _ in range(5):
        h.advance(SESSION // 2)
        h.apply(h.groups.commit_offsets("g", a.member_id, None, 1, -1,
                                        [("t", [PartitionCommit(0, 1)])]))
    assert h.state() is GroupState.STABLE


def test_fetch_offsets() -> None:
    h = Harness()
    h.apply(h.groups.commit_offsets("g", "", None, -1, -1, [
        ("t", [PartitionCommit(0, 10, -1, "a"), PartitionCommit(2, 12, 4, "")]),
        ("u", [PartitionCommit(1, 7)])]))
    assert [(t, [(o.partition, o.offset) for o in offsets])
            for t, offsets in h.groups.fetch_offsets("g", None)] == \
        [("t", [(0, 10), (2, 12)]), ("u", [(1, 7)])]
    [(_, got)] = h.groups.fetch_offsets("g", [("t", [0, 1])])
    assert [(o.offset, o.metadata, o.error) for o in got] == [(10, "a", Error.NONE),
                                                              (-1, "", Error.NONE)]
    assert h.groups.fetch_offsets("missing", None) == []


def test_delete_groups_writes_tombstones() -> None:
    h = Harness()
    h.stable_group(1, group="busy")
    h.apply(h.groups.commit_offsets("idle", "", None, -1, -1,
                                    [("t", [PartitionCommit(0, 1), PartitionCommit(1, 2)])]))
    written = len(h.log)
    result = h.groups.delete_groups(["busy", "idle", "missing"])
    assert result.response == {"busy": Error.NON_EMPTY_GROUP, "idle": Error.NONE,
                               "missing": Error.GROUP_ID_NOT_FOUND}
    h.apply(result)
    assert h.log[written:] == [(OffsetCommitKey("idle", "t", 0), None),
                               (OffsetCommitKey("idle", "t", 1), None),
                               (GroupMetadataKey("idle"), None)]
    assert "idle" not in h.groups.groups and "idle" not in h.groups.offsets
    assert h.groups.describe("idle").state == "Dead"


def test_delete_offsets_of_topics_the_group_does_not_read() -> None:
    h = Harness()
    [a] = h.stable_group(1)  # subscribed to t
    h.apply(h.groups.commit_offsets("g", a.member_id, None, 1, -1, [
        ("t", [PartitionCommit(0, 1)]), ("old", [PartitionCommit(0, 1)])]))
    result = h.groups.delete_offsets("g", [("t", [0]), ("old", [0, 1])])
    assert result.response == [("t", [(0, Error.GROUP_SUBSCRIBED_TO_TOPIC)]),
                               ("old", [(0, Error.NONE), (1, Error.NONE)])]
    assert result.records == [(OffsetCommitKey("g", "old", 0), None)]
    h.apply(result)
    assert [t for t, _ in h.groups.fetch_offsets("g", None)] == ["t"]
    with pytest.raises(GroupError) as e:
        h.groups.delete_offsets("missing", [])
    assert e.value.code is Error.GROUP_ID_NOT_FOUND
    h.join(protocol_type="connect", group="connect", version=3)
    h.advance(DELAY)
    with pytest.raises(GroupError) as e:
        h.groups.delete_offsets("connect", [])
    assert e.value.code is Error.NON_EMPTY_GROUP


def test_offsets_expire_by_retention() -> None:
    retention = 60_000
    h = Harness(offsets_retention_ms=retention)
    [a] = h.stable_group(1)
    h.apply(h.groups.commit_offsets("g", a.member_id, None, 1, -1, [
        ("t", [PartitionCommit(0, 1)]), ("old", [PartitionCommit(0, 1)])]))
    h.apply(h.groups.commit_offsets("simple", "", None, -1, 5_000, [
        ("t", [PartitionCommit(0, 1)])]))
    for _ in range(retention // (SESSION // 2)):
        h.groups.heartbeat("g", a.member_id, None, 1)
        h.advance(SESSION // 2)
    # A Stable consumer group keeps the offsets of topics it reads; the explicit
    # retention (v1 value) of the simple group's commit has passed.
    assert h.groups.expire_offsets() == [
        (OffsetCommitKey("g", "old", 0), None), (OffsetCommitKey("simple", "t", 0), None),
        (GroupMetadataKey("simple"), None)]
    h.write(h.groups.expire_offsets())
    h.apply(h.groups.leave("g", [(a.member_id, None)]))
    assert h.state() is GroupState.EMPTY
    h.advance(retention - 1)
    assert h.groups.expire_offsets() == []
    h.advance(1)  # retention counts from when the group became empty
    assert h.groups.expire_offsets() == [(OffsetCommitKey("g", "t", 0), None),
                                         (GroupMetadataKey("g"), None)]


def test_replaying_the_log_restores_groups_and_offsets() -> None:
    h = Harness()
    joined = h.stable_group(3)
    h.stable_group(1, group="other", instance="x")
    assert h.groups.groups["other"].static_members
    h.apply(h.groups.commit_offsets("g", joined[0].member_id, None, 1, -1, [
        ("t", [PartitionCommit(0, 11, 2, "m")])]))
    h.apply(h.groups.commit_offsets("gone", "", None, -1, -1, [("t", [PartitionCommit(0, 1)])]))
    h.apply(h.groups.delete_groups(["gone"]))

    loaded = Groups(GroupConfig(), lambda: h.now)
    for record in h.log:
        loaded.replay(record)
    assert set(loaded.groups) == {"g", "other"}
    assert loaded.offsets == h.groups.offsets
    for group_id in ("g", "other"):
        live, back = h.groups.groups[group_id], loaded.groups[group_id]
        assert back.state is GroupState.STABLE
        assert (back.generation, back.protocol_type, back.protocol_name, back.leader_id) == \
            (live.generation, live.protocol_type, live.protocol_name, live.leader_id)
        assert {m: (x.assignment, x.group_instance_id) for m, x in back.members.items()} == \
            {m: (x.assignment, x.group_instance_id) for m, x in live.members.items()}
        assert back.static_members == live.static_members
    # Loaded members must heartbeat within their session, then the group goes on.
    g = loaded.groups["g"]
    assert all(m.heartbeat_deadline == h.now + SESSION for m in g.members.values())
    assert loaded.heartbeat("g", joined[1].member_id, None, 1) is Error.NONE
    assert loaded.describe("g").protocol_data == "range"


def test_records_of_a_live_group_do_not_reset_it() -> None:
    h = Harness()
    [a, b] = h.stable_group(2)
    snapshot = h.log[-1]
    rejoin = h.join(a.member_id)  # a rebalance is under way
    h.groups.replay(snapshot)
    assert h.state() is GroupState.PREPARING_REBALANCE and not rejoin.done
    stale = GroupMetadataValue("consumer", 0, None, None, -1, ())
    h.groups.replay((GroupMetadataKey("g"), stale))
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_describe_and_list() -> None:
    h = Harness()
    [a] = h.stable_group(1)
    described = h.groups.describe("g")
    assert (described.state, described.protocol_type, described.protocol_data) == \
        ("Stable", "consumer", "range")
    [m] = described.members
    assert (m.member_id, m.client_host, m.metadata, m.assignment) == \
        (a.member_id, "/127.0.0.1", subscription("t"), b"asg-0")
    h.join(a.member_id, protocols=(("range", subscription("u")),))  # a new generation
    [m] = h.groups.describe("g").members
    assert (h.groups.describe("g").protocol_data, m.metadata) == ("", b"")
    h.apply(h.groups.commit_offsets("simple", "", None, -1, -1, [("t", [PartitionCommit(0, 1)])]))
    assert sorted(h.groups.list_groups()) == [("g", "consumer", "CompletingRebalance"),
                                       ("simple", "", "Empty")]
    assert h.groups.list_groups(states=["empty"]) == [("simple", "", "Empty")]
    assert h.groups.list_groups(types=["consumer"]) == []
    assert len(h.groups.list_groups(types=["Classic"])) == 2
    assert h.groups.describe("missing").state == "Dead"


def test_new_members_wait_at_most_the_join_timeout() -> None:
    h = Harness()
    [a] = h.stable_group(1, rebalance=600_000)
    newcomer = h.member(client="late")  # the group waits for a to rejoin
    assert not newcomer.done
    h.groups.heartbeat("g", a.member_id, None, 1)
    for _ in range(300_000 // (SESSION // 2)):
        h.advance(SESSION // 2)
        h.groups.heartbeat("g", a.member_id, None, 1)
    assert newcomer.value is not None and newcomer.value.error is Error.UNKNOWN_MEMBER_ID


def test_pending_members_expire() -> None:
    h = Harness()
    first = h.join()
    assert first.value is not None
    assert h.groups.groups["g"].pending_members
    h.advance(SESSION)
    assert not h.groups.groups["g"].pending_members
    late = h.join(first.value.member_id)
    assert late.value is not None and late.value.error is Error.UNKNOWN_MEMBER_ID


def test_subscription_topics() -> None:
    assert subscription_topics(subscription("a", "bb")) == {"a", "bb"}
    with pytest.raises(ValueError):
        subscription_topics(struct.pack(">hi", 0, 1_000_000))


def test_offsets_of_a_deleted_topic() -> None:
    h = Harness()
    for group in ("a", "b"):
        h.apply(h.groups.commit_offsets(group, "", None, -1, -1, [
            ("gone", [PartitionCommit(0, 1), PartitionCommit(1, 1)]),
            ("kept", [PartitionCommit(0, 1)])]))
    h.write(h.groups.delete_topic_offsets("gone"))
    assert {g: [t for t, _ in h.groups.fetch_offsets(g, None)] for g in "ab"} == \
        {"a": ["kept"], "b": ["kept"]}


def test_a_pending_member_may_join_a_group_all_others_left() -> None:
    """Kafka's supportsProtocols counts the members supporting a protocol against the
    member count: with every member gone (PreparingRebalance, 0 members) any protocol
    of the group's type is supported, so the new member is not refused."""
    h = Harness()
    [a] = h.stable_group(1)
    first = h.join(client="b")
    assert first.value is not None and first.value.error is Error.MEMBER_ID_REQUIRED
    assert h.apply(h.groups.leave("g", [(a.member_id, None)])) == [Error.NONE]
    group = h.groups.groups["g"]
    assert (group.state, group.members) == (GroupState.PREPARING_REBALANCE, {})
    assert not group.supports_protocols("connect", {"range"})  # still of its type only
    assert not group.supports_protocols("consumer", set())
    again = h.join(first.value.member_id, client="b", protocols=(("other", b""),))
    assert again.value is not None
    assert (again.value.error, again.value.generation_id, again.value.leader) == \
        (Error.NONE, 2, first.value.member_id)
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_a_new_group_is_forgotten_when_its_first_write_fails() -> None:
    """Kafka reverts the group its first JoinGroup created when the empty group's
    record cannot be written."""
    h = Harness()
    h.fail_writes = Error.NOT_COORDINATOR
    parked = h.join(version=3)  # a one-step join: the member was parked in the group
    assert parked.value == JoinResult(Error.NOT_COORDINATOR)
    assert "g" not in h.groups.groups and h.groups.next_deadline("g") is None
    first = h.join()  # answered MEMBER_ID_REQUIRED before the write, as in Kafka
    assert first.value is not None and first.value.error is Error.MEMBER_ID_REQUIRED
    assert "g" not in h.groups.groups
    h.fail_writes = None
    late = h.join(first.value.member_id)  # its pending member id went with the group
    assert late.value is not None and late.value.error is Error.UNKNOWN_MEMBER_ID
    assert h.member().done is False and h.state() is GroupState.PREPARING_REBALANCE


def test_txn_offset_commit_checks() -> None:
    """Kafka's validateTransactionalOffsetCommit and ClassicGroup.validateOffsetCommit
    for a transactional commit."""
    h = Harness()
    [a] = h.stable_group(1)
    h.apply(h.groups.commit_offsets("empty", "", None, -1, -1, [("t", [PartitionCommit(0, 1)])]))
    stable, empty = h.groups.get("g"), h.groups.get("empty")
    cases = [
        (None, "", None, -1, Error.NONE),  # makes a "simple" group
        (None, "m", None, 0, Error.ILLEGAL_GENERATION),
        (None, "", None, 3, Error.ILLEGAL_GENERATION),
        (empty, "m", None, -1, Error.NONE),  # no generation: an empty group takes it
        (empty, "m", None, 0, Error.UNKNOWN_MEMBER_ID),
        (stable, "", None, -1, Error.NONE),  # old versions carry no member or generation
        (stable, a.member_id, None, 1, Error.NONE),
        (stable, a.member_id, None, -1, Error.ILLEGAL_GENERATION),
        (stable, a.member_id, None, 2, Error.ILLEGAL_GENERATION),
        (stable, "nobody", None, 1, Error.UNKNOWN_MEMBER_ID),
        (stable, a.member_id, "i", 1, Error.UNKNOWN_MEMBER_ID),
    ]
    assert [validate_txn_commit(*args) for *args, _ in cases] == [c[-1] for c in cases]
    h.join(a.member_id, protocols=(("range", subscription("u")),))
    h.advance(1)  # CompletingRebalance: transactional commits are still taken
    assert stable is not None and stable.state is GroupState.COMPLETING_REBALANCE
    assert validate_txn_commit(stable, a.member_id, None, 2) is Error.NONE
