"""The console's bounded gathering (josefk.server.console.gather) against a fake admin
client: a slow coordinator or a failing one costs only its own group."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from josefk.server.admin import (
    AdminError,
    BrokerView,
    ClusterView,
    GroupListing,
    GroupView,
    MemberView,
    PartitionLag,
    PartitionView,
    TopicView,
)
from josefk.server.console.gather import gather

CLUSTER = ClusterView("c1", 1, [BrokerView(1, "h", 9092, None)], [
    TopicView("t", False, [PartitionView(0, 1, [1, 2], [1], [])])])


def group(group_id: str) -> GroupView:
    return GroupView(group_id, "Stable", "consumer", "range", 1,
                     [MemberView("m-1", "client", "/127.0.0.1", [("t", 0)])],
                     [PartitionLag("t", 0, 5, 8, 3, "m-1")])


class FakeAdmin:
    """Answers at once, except the groups named slow (never) or broken (an error)."""

    def __init__(self, slow: set[str] = frozenset(), broken: set[str] = frozenset(),
                 slow_cluster: bool = False, unlisted: bool = False) -> None:
        self.slow, self.broken, self.slow_cluster = slow, broken, slow_cluster
        self.unlisted = unlisted

    async def cluster(self) -> ClusterView:
        if self.slow_cluster:
            await trio.sleep(math.inf)
        return CLUSTER

    async def list_groups(self) -> list[GroupListing]:
        if self.unlisted:
            raise AdminError("NETWORK_EXCEPTION", "broker 2: timed out")
        return [GroupListing(g, "consumer", "Stable") for g in ("a", "b", "c")]

    async def describe_group(self, group_id: str) -> GroupView:
        if group_id in self.slow:
            await trio.sleep(math.inf)
        if group_id in self.broken:
            raise AdminError("COORDINATOR_NOT_AVAILABLE", f"no coordinator for {group_id}")
        return group(group_id)


def opener(admin: FakeAdmin):
    @asynccontextmanager
    async def open_admin() -> AsyncIterator[FakeAdmin]:
        yield admin
    return open_admin


async def test_everything_answered_is_complete() -> None:
    snapshot = await gather(opener(FakeAdmin()), budget_s=5)
    assert snapshot["complete"] and snapshot["errors"] == []
    assert snapshot["cluster"]["topics"][0]["partitions"][0]["under_replicated"] is True
    assert [g["group_id"] for g in snapshot["groups"]] == ["a", "b", "c"]
    assert snapshot["groups"][0]["offsets"][0]["lag"] == 3


async def test_a_slow_coordinator_costs_only_its_group(autojump_clock: trio.abc.Clock) -> None:
    began = trio.current_time()
    snapshot = await gather(opener(FakeAdmin(slow={"b"})), budget_s=3)
    assert trio.current_time() - began == 3  # the budget, not for ever (virtual clock)
    assert not snapshot["complete"]
    assert snapshot["cluster"]["cluster_id"] == "c1"
    by_id = {g["group_id"]: g for g in snapshot["groups"]}
    assert by_id["a"]["offsets"] and by_id["c"]["offsets"]
    assert by_id["b"] == {"group_id": "b", "protocol_type": "consumer", "state": "Stable",
                          "members": [], "offsets": [], "error": "no answer in time"}
    assert snapshot["errors"] == ["group b: no answer in time"]


async def test_a_missing_coordinator_is_named() -> None:
    snapshot = await gather(opener(FakeAdmin(broken={"c"})), budget_s=5)
    by_id = {g["group_id"]: g for g in snapshot["groups"]}
    assert by_id["c"]["error"] == "COORDINATOR_NOT_AVAILABLE: no coordinator for c"
    assert by_id["a"]["members"][0]["client_id"] == "client"
    assert snapshot["errors"] == ["group c: COORDINATOR_NOT_AVAILABLE: no coordinator for c"]


async def test_no_metadata_in_time(autojump_clock: trio.abc.Clock) -> None:
    snapshot = await gather(opener(FakeAdmin(slow_cluster=True)), budget_s=3)
    assert snapshot["cluster"] is None
    assert len(snapshot["groups"]) == 3
    assert snapshot["errors"] == ["cluster metadata: no answer in time"]


async def test_an_unreachable_listener_is_an_error_not_a_traceback() -> None:
    @asynccontextmanager
    async def refused() -> AsyncIterator[FakeAdmin]:
        raise AdminError("NETWORK_EXCEPTION", "127.0.0.1:1: connection refused")
        yield FakeAdmin()

    snapshot = await gather(refused, budget_s=5)
    assert snapshot == {"cluster": None, "groups": [], "complete": False, "errors": [
        "cannot reach the cluster: NETWORK_EXCEPTION: 127.0.0.1:1: connection refused"]}


async def test_known_groups_are_described_when_a_broker_cannot_list() -> None:
    known = [GroupListing("a", "consumer", "Stable"), GroupListing("gone", "consumer", "Empty")]
    snapshot = await gather(opener(FakeAdmin(unlisted=True, broken={"gone"})), budget_s=5,
                            known=known)
    by_id = {g["group_id"]: g for g in snapshot["groups"]}
    assert set(by_id) == {"a", "gone"}
    assert by_id["a"]["offsets"][0]["lag"] == 3
    assert snapshot["errors"] == [
        "list groups: NETWORK_EXCEPTION: broker 2: timed out",
        "group gone: COORDINATOR_NOT_AVAILABLE: no coordinator for gone"]


async def test_a_listing_drops_groups_no_longer_there() -> None:
    known = [GroupListing("deleted", "consumer", "Empty")]
    snapshot = await gather(opener(FakeAdmin(broken={"deleted"})), budget_s=5, known=known)
    assert [g["group_id"] for g in snapshot["groups"]] == ["a", "b", "c"]
    assert snapshot["complete"]
