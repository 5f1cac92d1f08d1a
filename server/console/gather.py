"""What the console shows, gathered as a Kafka client of the cluster within a time budget:
the cluster (brokers, controller, topics and partitions), then every consumer group with
its members and lag. What has not come back when the budget ends is left out and named
in ``errors``; the page shows the rest."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import trio

from josefk.server.admin.errors import AdminError
from josefk.server.admin.views import ClusterView, GroupListing, GroupView

logger = logging.getLogger(__name__)

# Groups described at once: each is a FindCoordinator, DescribeGroups, OffsetFetch and
# ListOffsets round, so hundreds of groups must not open hundreds of requests together.
GROUP_CONCURRENCY = 8


class ClusterAdmin(Protocol):
    """The part of ``josefk.server.admin.Admin`` the console reads through."""

    async def cluster(self) -> ClusterView: ...

    async def list_groups(self) -> list[GroupListing]: ...

    async def describe_group(self, group_id: str) -> GroupView: ...


OpenAdmin = Callable[[], AbstractAsyncContextManager[ClusterAdmin]]


def _reason(what: str, e: Exception) -> str:
    """One line for the page. The admin client's errors (Kafka's error name and what
    failed) are expected and read well; anything else is a bug, logged in full."""
    if not isinstance(e, AdminError):
        logger.exception("console: %s failed", what)
    return str(e) or type(e).__name__


class Gathering:
    """One snapshot being filled in; whatever is in it when time runs out is the answer.

    The groups of the last snapshot (``known``) are described while ListGroups goes to
    every broker, so one broker that does not answer (paused, cut off) does not hide the
    groups the others coordinate."""

    def __init__(self, known: Sequence[GroupListing] = ()) -> None:
        self.known = list(known)
        self.cluster: ClusterView | None = None
        self.listed: list[GroupListing] | None = None
        self.described: dict[str, GroupView] = {}
        self.group_errors: dict[str, str] = {}
        self.errors: list[str] = []

    async def run(self, open_admin: OpenAdmin) -> None:
        try:
            async with open_admin() as admin, trio.open_nursery() as nursery:
                nursery.start_soon(self._cluster, admin)
                nursery.start_soon(self._groups, admin)
        except Exception as e:  # could not reach this broker's own listener at all
            self.errors.append(f"cannot reach the cluster: {_reason('open_admin', e)}")

    async def _cluster(self, admin: ClusterAdmin) -> None:
        try:
            self.cluster = await admin.cluster()
        except Exception as e:
            self.errors.append(f"cluster metadata: {_reason('cluster', e)}")

    async def _groups(self, admin: ClusterAdmin) -> None:
        limiter = trio.CapacityLimiter(GROUP_CONCURRENCY)
        started: set[str] = set()
        async with trio.open_nursery() as nursery:

            def describe(listings: Sequence[GroupListing]) -> None:
                for group_id in sorted({g.group_id for g in listings} - started):
                    started.add(group_id)
                    nursery.start_soon(self._describe, admin, group_id, limiter)

            describe(self.known)
            try:
                self.listed = await admin.list_groups()
            except Exception as e:
                self.errors.append(f"list groups: {_reason('list_groups', e)}")
                return
            describe(self.listed)

    async def _describe(self, admin: ClusterAdmin, group_id: str,
                        limiter: trio.CapacityLimiter) -> None:
        async with limiter:
            try:
                self.described[group_id] = await admin.describe_group(group_id)
            except Exception as e:
                self.group_errors[group_id] = _reason('describe_group', e)

    def as_json(self, timed_out: bool) -> dict[str, Any]:
        """The snapshot, with an entry (and an error) for each group not described."""
        errors = list(self.errors)
        groups: list[dict[str, Any]] = []
        listings = self.known if self.listed is None else self.listed
        for listing in sorted(listings, key=lambda g: g.group_id):
            view = self.described.get(listing.group_id)
            if view is not None:
                groups.append(view.as_json())
                continue
            reason = self.group_errors.get(listing.group_id, "no answer in time")
            errors.append(f"group {listing.group_id}: {reason}")
            groups.append({**listing.as_json(), "members": [], "offsets": [], "error": reason})
        if timed_out and self.cluster is None:
            errors.append("cluster metadata: no answer in time")
        if timed_out and self.listed is None:
            errors.append("list groups: no answer in time")
        return {"cluster": self.cluster.as_json() if self.cluster else None,
                "groups": groups, "errors": errors, "complete": not errors}


async def gather(open_admin: OpenAdmin, budget_s: float,
                 known: Sequence[GroupListing] = ()) -> dict[str, Any]:
    """The cluster and its groups as JSON-ready dicts, within ``budget_s`` seconds;
    ``known``: the groups of the last snapshot."""
    gathering = Gathering(known)
    with trio.move_on_after(budget_s) as scope:
        await gathering.run(open_admin)
    return gathering.as_json(timed_out=scope.cancelled_caught)
