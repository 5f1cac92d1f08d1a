"""The server-side assignors of consumer groups: ``uniform`` (balanced, sticky, within
each member's subscription) and ``range`` (contiguous ranges per topic)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.cluster.coordinator.group.consumer.assignors import (
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
    configured,
)

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def counts(result: dict) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def owners(result: dict) -> dict[tuple[uuid.UUID, int], list[str]]:
    out: dict[tuple[uuid.UUID, int], list[str]] = {}
    for member, assignment in result.items():
        for topic_id, parts in assignment.items():
            for p in parts:
                out.setdefault((topic_id, p), []).append(member)
    return out


def test_uniform_balances_one_topic() -> None:
    members = {m: MemberSpec(frozenset({T1}), {}) for m in "abc"}
    result = UniformAssignor().assign(members, {T1: 8})
    assert counts(result) == [2, 3, 3]
    assert sorted(owners(result)) == [(T1, p) for p in range(8)]


def test_uniform_is_sticky() -> None:
    current = {"a": {T1: frozenset({0, 1, 2, 3})}, "b": {}}
    members = {m: MemberSpec(frozenset({T1}), current[m]) for m in "ab"}
    result = UniformAssignor().assign(members, {T1: 4})
    assert result["a"][T1] < frozenset({0, 1, 2, 3}) and len(result["a"][T1]) == 2
    # A third member takes one partition from each: nothing else moves.
    members = {"a": MemberSpec(frozenset({T1}), result["a"]),
               "b": MemberSpec(frozenset({T1}), result["b"]),
               "c": MemberSpec(frozenset({T1}), {})}
    again = UniformAssignor().assign(members, {T1: 4})
    assert counts(again) == [1, 1, 2]
    assert again["a"][T1] <= result["a"][T1] and again["b"][T1] <= result["b"][T1]


def test_uniform_respects_subscriptions() -> None:
    members = {"a": MemberSpec(frozenset({T1}), {}), "b": MemberSpec(frozenset({T1, T2}), {})}
    result = UniformAssignor().assign(members, {T1: 2, T2: 4})
    assert result["a"] == {T1: frozenset({0, 1})}  # all it may take
    assert result["b"] == {T2: frozenset({0, 1, 2, 3})}


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    members = {m: MemberSpec(frozenset({T1, T2}), {}) for m in ("m2", "m1", "m3")}
    result = RangeAssignor().assign(members, {T1: 7, T2: 2})
    assert result["m1"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    assert result["m2"] == {T1: frozenset({3, 4}), T2: frozenset({1})}
    assert result["m3"] == {T1: frozenset({5, 6})}


def test_range_orders_static_members_by_instance_id() -> None:
    members = {"x": MemberSpec(frozenset({T1}), {}, instance_id="b"),
               "y": MemberSpec(frozenset({T1}), {}, instance_id="a")}
    assert RangeAssignor().assign(members, {T1: 2})["y"] == {T1: frozenset({0})}


def test_configured_assignors() -> None:
    assert list(configured(["range", "uniform"])) == ["range", "uniform"]
    assert list(configured(["org.apache.kafka.coordinator.group.assignor.UniformAssignor"])) \
        == ["uniform"]
    with pytest.raises(ValueError):
        configured(["sticky"])


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]:
    topics = {T: draw(st.integers(0, 12)) for T in draw(st.sets(st.sampled_from([T1, T2, T3]),
                                                                 min_size=1))}
    members = {}
    for i in range(draw(st.integers(1, 6))):
        subscribed = draw(st.sets(st.sampled_from(sorted(topics)), min_size=1))
        current = {t: frozenset(draw(st.sets(st.integers(0, 14), max_size=5)))
                   for t in draw(st.sets(st.sampled_from([T1, T2, T3]), max_size=3))}
        members[f"m{i}"] = MemberSpec(frozenset(subscribed), current)
    return members, topics


@settings(max_examples=200, deadline=None)
@given(groups(), st.sampled_from([UniformAssignor(), RangeAssignor()]))
def test_every_partition_has_one_subscribed_owner(group: tuple, assignor: object) -> None:
    members, topics = group
    result = assignor.assign(members, topics)  # type: ignore[attr-defined]
    assert set(result) == set(members)
    taken = owners(result)
    for topic_id, n in topics.items():
        subscribers = [m for m, spec in members.items() if topic_id in spec.subscribed]
        for p in range(n):
            if subscribers:
                assert len(taken[(topic_id, p)]) == 1
                assert taken[(topic_id, p)][0] in subscribers
    assert all(p < topics[t] for t, p in taken)


@settings(max_examples=200, deadline=None)
@given(groups())
def test_uniform_is_balanced_when_everyone_subscribes_alike(group: tuple) -> None:
    members, topics = group
    same = {m: MemberSpec(frozenset(topics), spec.current) for m, spec in members.items()}
    result = UniformAssignor().assign(same, topics)
    sizes = counts(result)
    assert sizes[-1] - sizes[0] <= 1
    # Stickiness: the result, fed back as the current assignment, stays as it is.
    again = UniformAssignor().assign(
        {m: MemberSpec(frozenset(topics), result[m]) for m in same}, topics)
    assert again == result
