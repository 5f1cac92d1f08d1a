"""Consumer lag of the groups this broker coordinates, gathered at scrape time.

A committed offset is compared with its partition's high watermark, which is what
``kafka-consumer-groups.sh --describe`` shows as LOG-END-OFFSET. A partition led
elsewhere is asked of its leader with ListOffsets (as a consumer: the high watermark),
all leaders at once, within a bound; one that does not answer in time has no lag.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import trio
from kafka.protocol.consumer import ListOffsetsRequest

from josefk.server.metrics.collector import TP, Lag, MetricsHost
from josefk.server.network.peer import PeerError, PeerPool

logger = logging.getLogger(__name__)

LATEST = -1
LIST_OFFSETS_VERSION = 4  # with isolation level and the current leader epoch
_Topic = ListOffsetsRequest.ListOffsetsTopic


def committed_offsets(host: MetricsHost) -> list[tuple[str, str, int, int]]:
    """(group, topic, partition, committed offset) of every group coordinated here."""
    out = []
    for group, offsets in list(host.group_coordinator.groups.offsets.items()):
        for (topic, index), committed in list(offsets.items()):
            out.append((group, topic, index, committed.offset))
    return out


class LagGatherer:
    """Finds high watermarks, here or at their leaders (all at once, each bounded)."""

    def __init__(self, host: MetricsHost, peers: PeerPool) -> None:
        self.host = host
        self.peers = peers  # its timeout bounds each leader's answer

    async def gather(self) -> list[Lag]:
        commits = committed_offsets(self.host)
        if not commits:
            return []
        watermarks = await self._watermarks({(t, p) for _, t, p, _ in commits})
        return [Lag(g, t, p, offset, watermarks.get((t, p))) for g, t, p, offset in commits]

    async def _watermarks(self, tps: set[TP]) -> dict[TP, int]:
        found: dict[TP, int] = {}
        remote: dict[int, list[TP]] = {}
        cluster = self.host.cluster
        for tp in tps:
            partition = self.host.partitions.get(tp)
            if partition is not None and partition.is_leader:
                found[tp] = partition.high_watermark
                continue
            info = cluster.cache.partitions.get(tp) if cluster is not None else None
            if info is not None and info.leader >= 0:
                remote.setdefault(info.leader, []).append(tp)
        if remote:
            # Each request is bounded by the pool's timeout (cancelling one from outside
            # would leave its connection mid-answer).
            async with trio.open_nursery() as nursery:
                for leader, leader_tps in remote.items():
                    nursery.start_soon(self._ask, leader, leader_tps, found)
        return found

    async def _ask(self, leader: int, tps: Iterable[TP], found: dict[TP, int]) -> None:
        peer = self.peers.get(leader, self.host.cluster.endpoint_of(leader))
        if peer is None:
            return
        by_topic: dict[str, list[Any]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(_Topic.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=-1, timestamp=LATEST))
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            _Topic(name=t, partitions=ps) for t, ps in by_topic.items()])
        try:
            response = await peer.request(request, LIST_OFFSETS_VERSION)
        except PeerError as e:
            logger.info("metrics: broker %d did not give its high watermarks: %s", leader, e)
            return
        for t in response.topics:
            for p in t.partitions:
                if p.error_code == 0 and p.offset >= 0:
                    found[(t.name, p.partition_index)] = p.offset
