"""Replication between brokers (Kafka's ReplicaManager fetchers and ISR updates).

A follower copies its leader's log with `ReplicaFetcher`, one per leading broker:
first it truncates where its log diverges from the leader's (OffsetForLeaderEpoch,
`truncation_point`), then it fetches from its log end offset with its broker id as
the replica id, appends the leader's batches unchanged and follows the leader's high
watermark. A leader changes its ISR only through the controller, with AlterPartition
(`IsrUpdates`): it adds a follower once that follower has caught up to the high
watermark, and drops one that has not been caught up within
``replica.lag.time.max.ms``.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest

from josefk.cluster.partition import Partition
from josefk.cluster.truncation import truncation_point
from josefk.log.clock import now_ms
from josefk.log.errors import StorageError
from josefk.log.leader_epoch import UNDEFINED_EPOCH
from josefk.protocol.controller_messages import AlterPartitionRequest
from josefk.protocol.error_codes import NONE, OFFSET_OUT_OF_RANGE
from josefk.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    CorruptRecordError,
    RecordBatchError,
)
from josefk.server.network.peer import PeerConnection, PeerError
from josefk.server.quotas.replication import ReplicaQuota
from josefk.server.replication.session_handler import FetchSessionHandler, FetchState
from josefk.server.security.client import PeerSecurity

logger = logging.getLogger(__name__)

FETCH_VERSION = 12  # by topic name, with last fetched epoch (Kafka 3.9 serves 4-17)
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 4  # with the current leader epoch
LATEST, EARLIEST = -1, -2
ALTER_PARTITION_VERSION = 3
ALTER_PARTITION_RETRY_S = 0.5
# Truncations applied in one round, at most this long (the others wait for the next).
TRUNCATION_SLICE_S = 0.1
TP = tuple[str, int]

_FetchTopic = FetchRequest.FetchTopic
_Forgotten = FetchRequest.ForgottenTopic
_OfleTopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_AlterTopic = AlterPartitionRequest.TopicData
_ListTopic = ListOffsetsRequest.ListOffsetsTopic


class ReplicationHost(Protocol):
    """What replication needs of the broker."""

    node_id: int
    config: Any

    def partition(self, topic: str, index: int) -> Partition | None: ...

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None: ...

    @property
    def peer_security(self) -> PeerSecurity:
        """How to connect to the other brokers' inter-broker listener."""
        ...

    @property
    def broker_epoch(self) -> int: ...

    @property
    def controller_id(self) -> int: ...


def whole_batches(records: bytes) -> bytes:
    """The complete record batches at the front of a fetch answer (the leader may cut
    the last one short at the size limit); CorruptRecordError for an impossible size."""
    end = 0
    while end + LOG_OVERHEAD <= len(records):
        size = LOG_OVERHEAD + struct.unpack_from(">i", records, end + 8)[0]
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"a batch of {size} bytes at byte {end} of the records")
        if end + size > len(records):
            break
        end += size
    return records[:end]


@dataclass
class _Following:
    truncating: bool = True
    retry_at: float = 0.0
    since_round: int = 0  # the first fetch round that may carry it
    partition: Partition | None = None
    caught_up: bool = False  # at the leader's high watermark after the last fetch


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one leading broker.

    Only partitions whose state changed (added, fetched into, truncated, backing off)
    are looked at again before a round, so a round costs time in proportion to what
    changed, not to the thousands of partitions a broker may follow.
    """

    def __init__(self, host: ReplicationHost, leader_id: int,
                 quota: ReplicaQuota | None = None) -> None:
        self.host = host
        self.leader_id = leader_id
        self.quota = quota  # follower.replication.throttled.rate
        self.partitions: dict[TP, _Following] = {}
        self._dirty: set[TP] = set()  # to look at again before the next round
        self._round_id = 0
        self._changed = trio.Event()
        self.scope = trio.CancelScope()
        values = host.config.values
        self.max_wait_ms = values["replica.fetch.wait.max.ms"]
        self.min_bytes = values["replica.fetch.min.bytes"]
        self.max_bytes = values["replica.fetch.response.max.bytes"]
        self.partition_max_bytes = values["replica.fetch.max.bytes"]
        self.backoff_s = values["replica.fetch.backoff.ms"] / 1000
        self.timeout_s = values["replica.socket.timeout.ms"] / 1000
        self.receive_buffer = values["replica.socket.receive.buffer.bytes"]
        self.session = FetchSessionHandler()

    def add(self, tp: TP) -> None:
        self.partitions[tp] = _Following(since_round=self._round_id + 1)
        self._dirty.add(tp)
        self._wake()

    def remove(self, tp: TP) -> None:
        if self.partitions.pop(tp, None) is not None:
            self._dirty.add(tp)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def run(self) -> None:
        with self.scope:
            peer: PeerConnection | None = None
            while True:
                if not self.partitions and not self._dirty:
                    await self._changed.wait()
                    continue
                endpoint = self.host.endpoint_of(self.leader_id)
                if endpoint is None:
                    await trio.sleep(self.backoff_s)
                    continue
                if peer is None or (peer.host, peer.port) != endpoint:
                    if peer is not None:
                        await peer.aclose()
                    self.session.reset()
                    peer = PeerConnection(*endpoint, f"broker-{self.host.node_id}-fetcher-0",
                                          self.timeout_s, self.receive_buffer,
                                          security=self.host.peer_security)
                try:
                    await self._round(peer)
                except PeerError as e:
                    logger.warning("broker %d: fetching from broker %d failed: %s",
                                   self.host.node_id, self.leader_id, e)
                    self.session.reset()
                    await trio.sleep(self.backoff_s)
                except Exception:
                    # As Kafka's fetcher thread: one bad answer must not stop replication
                    # (nor, here, the broker); logged, and the round is tried again.
                    logger.exception("broker %d: fetching from broker %d failed",
                                     self.host.node_id, self.leader_id)
                    self.session.reset()
                    await trio.sleep(self.backoff_s)

    def _refresh(self, now: float) -> dict[TP, tuple[_Following, Partition]]:
        """Bring the session's wanted partitions up to date with the partitions that
        changed; the partitions to truncate now."""
        truncating = {}
        later = set()
        for tp in self._dirty:
            following = self.partitions.get(tp)
            partition = None if following is None else self.host.partition(*tp)
            if following is None or partition is None or partition.leader_id != self.leader_id:
                self.partitions.pop(tp, None)
                self.session.drop(tp)
                continue
            following.partition = partition
            if following.retry_at > now or following.truncating:
                self.session.drop(tp)
                later.add(tp)
                if following.retry_at <= now:
                    truncating[tp] = (following, partition)
                continue
            if self._throttled(tp, following):
                # Kafka's shouldFollowerThrottle: left out of the fetch while over the rate.
                self.session.drop(tp)
                later.add(tp)
                continue
            log = partition.log
            self.session.want(tp, FetchState(log.log_end_offset, partition.leader_epoch,
                                             log.leader_epochs.latest_epoch,
                                             log.log_start_offset))
        self._dirty = later
        return truncating

    async def _round(self, peer: PeerConnection) -> None:
        truncating = self._refresh(trio.current_time())
        if truncating:
            await self._truncate(peer, truncating)
        elif self.session.wanted:
            await self._fetch(peer)
        else:
            with trio.move_on_after(self.backoff_s):
                await self._changed.wait()

    def _throttled(self, tp: TP, following: _Following) -> bool:
        quota = self.quota
        return (quota is not None and quota.enabled and not following.caught_up
                and quota.is_throttled(*tp) and quota.exceeded())

    def _back_off(self, following: _Following) -> None:
        following.retry_at = trio.current_time() + self.backoff_s

    # --- truncation -----------------------------------------------------------------

    async def _truncate(self, peer: PeerConnection,
                        partitions: dict[TP, tuple[_Following, Partition]]) -> None:
        asks: dict[str, list[Any]] = {}
        sent_epochs = {tp: partition.leader_epoch for tp, (_, partition) in partitions.items()}
        for (topic, index), (following, partition) in partitions.items():
            latest = partition.log.leader_epochs.latest_epoch
            if latest == UNDEFINED_EPOCH:
                # No epochs here (an empty log): nothing can diverge; the high watermark.
                partition.log.truncate_to(partition.log.high_watermark)
                following.truncating = False
                continue
            asks.setdefault(topic, []).append(_OfleTopic.OffsetForLeaderPartition(
                partition=index, current_leader_epoch=partition.leader_epoch,
                leader_epoch=latest))
        if not asks:
            return
        request = OffsetForLeaderEpochRequest(replica_id=self.host.node_id, topics=[
            _OfleTopic(topic=t, partitions=ps) for t, ps in asks.items()])
        response = await peer.request(request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        began = time.monotonic()
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.topic, p.partition)
                entry = partitions.get(tp)
                if entry is None or not self._unchanged(tp, *entry, sent_epochs[tp]):
                    continue
                if time.monotonic() - began > TRUNCATION_SLICE_S:
                    # Each truncation replays producer state on the event loop: the
                    # rest wait for the next round (asked again), others run meanwhile.
                    continue
                following, partition = entry
                if p.error_code != NONE:
                    logger.info("broker %d: OffsetForLeaderEpoch %s-%d from broker %d: "
                                "error %d", self.host.node_id, topic.topic, p.partition,
                                self.leader_id, p.error_code)
                    self._back_off(following)
                    continue
                self._apply_truncation(partition, following, p.leader_epoch, p.end_offset)

    def _unchanged(self, tp: TP, following: _Following, partition: Partition,
                   leader_epoch: int) -> bool:
        """True while ``tp`` is fetched from this leader as when the request went out.

        An answer to a request sent before a leadership change (a new leader, a new
        epoch, the partition followed afresh) must change nothing: a stale
        OffsetForLeaderEpoch answer from a deposed leader, applied after this replica
        fetched from the new one, cut acknowledged records out of the middle of its
        log (found by `make chaos`, seed 103; Kafka's fetcher checks the same).
        """
        return (self.partitions.get(tp) is following and partition.leader_id == self.leader_id
                and partition.leader_epoch == leader_epoch)

    def _apply_truncation(self, partition: Partition, following: _Following, epoch: int,
                          end_offset: int) -> None:
        log = partition.log
        cut = truncation_point(epoch, end_offset, log.leader_epochs, log.log_end_offset,
                               log.high_watermark)
        if cut.offset >= log.log_end_offset:
            log.truncate_to(cut.offset)  # drops an epoch we started but never wrote in
        else:
            logger.info("broker %d: truncating %s-%d from %d to %d (leader %d says epoch %d "
                        "ends at %d)", self.host.node_id, partition.topic, partition.index,
                        log.log_end_offset, cut.offset, self.leader_id, epoch, end_offset)
            log.truncate_to(cut.offset)
        following.truncating = not cut.complete

    # --- fetching ---------------------------------------------------------------------

    async def _fetch(self, peer: PeerConnection) -> None:
        send, forget = self.session.build()
        sent = self.session.in_flight
        self._round_id += 1
        round_id = self._round_id
        topics: dict[str, list[Any]] = {}
        for (topic, index), state in send.items():
            topics.setdefault(topic, []).append(_FetchTopic.FetchPartition(
                partition=index, current_leader_epoch=state.leader_epoch,
                fetch_offset=state.fetch_offset, last_fetched_epoch=state.last_fetched_epoch,
                log_start_offset=state.log_start_offset,
                partition_max_bytes=self.partition_max_bytes))
        forgotten: dict[str, list[int]] = {}
        for topic, index in forget:
            forgotten.setdefault(topic, []).append(index)
        request = FetchRequest(
            replica_id=self.host.node_id, max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes, max_bytes=self.max_bytes, isolation_level=0,
            session_id=self.session.session_id, session_epoch=self.session.epoch, rack_id="",
            forgotten_topics_data=[_Forgotten(topic=t, partitions=ps)
                                   for t, ps in forgotten.items()],
            topics=[_FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        response = await peer.request(request, FETCH_VERSION)
        if not self.session.on_response(response.error_code, response.session_id):
            logger.info("broker %d: fetch session with broker %d ended (error %d); "
                        "starting a new one", self.host.node_id, self.leader_id,
                        response.error_code)
            return
        out_of_range: list[tuple[TP, _Following, Partition, int]] = []
        for topic in response.responses:
            for data in topic.partitions:
                tp = (topic.topic, data.partition_index)
                state = sent.get(tp)
                following = self.partitions.get(tp)
                if state is None or following is None or following.since_round > round_id:
                    continue
                partition = following.partition
                assert partition is not None  # set before it was wanted
                # The records start at the fetch offset: appended anywhere else (the log
                # was truncated meanwhile) they would leave a hole or overlap.
                if (self._unchanged(tp, following, partition, state.leader_epoch)
                        and partition.log.log_end_offset == state.fetch_offset):
                    if data.error_code == OFFSET_OUT_OF_RANGE:
                        out_of_range.append((tp, following, partition, state.leader_epoch))
                    else:
                        self._process(partition, following, data)
                    self._dirty.add(tp)
        if out_of_range:
            await self._reset_out_of_range(peer, out_of_range)

    async def _reset_out_of_range(self, peer: PeerConnection,
                                  partitions: list[tuple[TP, _Following, Partition, int]]
                                  ) -> None:
        """The fetch offset is outside the leader's log: as Kafka's fetcher, cut back to
        the leader's log end if the replica has more, else start over at the leader's log
        start if the replica's log ends before it (retention ran while it was away, or it
        is new). Otherwise only the epoch truncation is done again."""
        ends = await self._list_offsets(peer, partitions, LATEST)
        starts = await self._list_offsets(peer, partitions, EARLIEST)
        for tp, following, partition, epoch in partitions:
            end, start = ends.get(tp), starts.get(tp)
            self._back_off(following)
            if not self._unchanged(tp, following, partition, epoch):
                continue
            log = partition.log
            if end is not None and end < log.log_end_offset:
                logger.info("broker %d: truncating %s-%d to %d, broker %d's log end",
                            self.host.node_id, *tp, end, self.leader_id)
                log.truncate_to(end)
            elif start is not None and start > log.log_end_offset:
                logger.info("broker %d: %s-%d starts over at %d, broker %d's log start "
                            "(it ended at %d)", self.host.node_id, *tp, start,
                            self.leader_id, log.log_end_offset)
                log.truncate_fully_and_start_at(start)
            else:
                following.truncating = True

    async def _list_offsets(self, peer: PeerConnection,
                            partitions: list[tuple[TP, _Following, Partition, int]],
                            timestamp: int) -> dict[TP, int]:
        """The leader's offsets of ``partitions`` at LATEST (as a follower: its log end)
        or EARLIEST; a partition it answers with an error is left out."""
        topics: dict[str, list[Any]] = {}
        for (topic, index), _, _, epoch in partitions:
            topics.setdefault(topic, []).append(_ListTopic.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=epoch, timestamp=timestamp))
        request = ListOffsetsRequest(replica_id=self.host.node_id, isolation_level=0,
                                     topics=[_ListTopic(name=t, partitions=ps)
                                             for t, ps in topics.items()])
        response = await peer.request(request, LIST_OFFSETS_VERSION)
        return {(t.name, p.partition_index): p.offset for t in response.topics
                for p in t.partitions if p.error_code == NONE and p.offset >= 0}

    def _process(self, partition: Partition, following: _Following, data: Any) -> None:
        if data.error_code != NONE:
            logger.info("broker %d: fetch of %s-%d from broker %d: error %d",
                        self.host.node_id, partition.topic, partition.index, self.leader_id,
                        data.error_code)
            self._back_off(following)
            return
        diverging = getattr(data, "diverging_epoch", None)
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            self._apply_truncation(partition, following, diverging.epoch,
                                   diverging.end_offset)
            return
        try:
            records = whole_batches(bytes(data.records or b""))
            partition.append_as_follower(records, data.high_watermark, data.log_start_offset)
            following.caught_up = partition.log.log_end_offset >= data.high_watermark
            quota = self.quota
            if (quota is not None and quota.enabled and records
                    and quota.is_throttled(partition.topic, partition.index)):
                quota.record(len(records))
        except StorageError:
            # Its log directory just failed (logged there): the partition leaves the
            # fetcher once the failure is handled.
            self._back_off(following)
        except RecordBatchError as e:
            logger.error("broker %d: cannot append %s-%d from broker %d: %s",
                         self.host.node_id, partition.topic, partition.index, self.leader_id, e)
            following.truncating = True
            self._back_off(following)


class ReplicaFetchers:
    """One `ReplicaFetcher` per leading broker, in the broker's nursery."""

    def __init__(self, host: ReplicationHost, nursery: trio.Nursery,
                 quota: ReplicaQuota | None = None) -> None:
        self.host = host
        self.nursery = nursery
        self.quota = quota
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def follow(self, partition: Partition) -> None:
        """Start (again) fetching ``partition`` from its leader, truncating first."""
        tp = (partition.topic, partition.index)
        self.stop(tp)
        leader = partition.leader_id
        if leader < 0 or leader == self.host.node_id:
            return
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = ReplicaFetcher(self.host, leader, self.quota)
            self.nursery.start_soon(fetcher.run)
        fetcher.add(tp)

    def stop(self, tp: TP) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)


class IsrUpdates:
    """A leader's ISR changes, proposed to the controller with AlterPartition."""

    def __init__(self, host: ReplicationHost, nursery: trio.Nursery,
                 led_partitions: Callable[[], list[Partition]]) -> None:
        self.host = host
        self.nursery = nursery
        self.led_partitions = led_partitions
        self.max_lag_ms = host.config.replica_lag_time_max_ms
        self._queued: list[_Proposal] = []
        self._sending = False
        # Kafka's IsrShrinksPerSec and IsrExpandsPerSec, read by the metrics.
        self.shrinks = 0
        self.expands = 0

    def maybe_expand(self, partition: Partition, replica: int) -> None:
        """``replica`` just fetched: propose it for the ISR if it has caught up."""
        if partition.pending_isr is not None or not partition.is_leader:
            return
        if partition.may_join_isr(replica):
            # In replica order; a broker a reassignment removed (still in the ISR the
            # election wrote, until the controller takes it out) is left out.
            members = {*partition.isr, replica}
            self._propose(partition, [r for r in partition.replicas if r in members])

    async def shrink_forever(self) -> None:
        """Every half ``replica.lag.time.max.ms``, drop followers that fell behind."""
        while True:
            await trio.sleep(self.max_lag_ms / 2000)
            now = now_ms()
            for partition in self.led_partitions():
                if partition.pending_isr is not None or getattr(partition.log, "offline", False):
                    # An offline log's leader proposes nothing: the controller moves it.
                    continue
                lagging = partition.replicas_out_of_sync(now, self.max_lag_ms)
                if lagging:
                    logger.info("broker %d: shrinking the ISR of %s-%d: %s not caught up "
                                "within %d ms", self.host.node_id, partition.topic,
                                partition.index, lagging, self.max_lag_ms)
                    self._propose(partition, [r for r in partition.isr if r not in lagging])

    def _propose(self, partition: Partition, new_isr: list[int]) -> None:
        partition.pending_isr = new_isr
        self.nursery.start_soon(self._send, partition, new_isr, partition.leader_epoch)

    async def _send(self, partition: Partition, new_isr: list[int], leader_epoch: int) -> None:
        try:
            while True:
                answer = await self._request(partition, new_isr, leader_epoch)
                if (answer is not None or partition.leader_epoch != leader_epoch
                        or not partition.is_leader):
                    break
                # No answer (no controller, or one too slow): the same change again, as
                # Kafka's AlterPartitionManager retries. It may have been written; only
                # this very request learns it (a repeat is answered with the current
                # state), where a different one would be refused as out of date.
                await trio.sleep(ALTER_PARTITION_RETRY_S)
        finally:
            # Still this change in flight, or did a LeaderAndIsr replace the state since?
            ours = partition.pending_isr is new_isr
            if ours:
                partition.pending_isr = None
        if answer is None or partition.leader_epoch != leader_epoch:
            return
        if answer.error_code != NONE:
            logger.info("broker %d: AlterPartition %s-%d to %s refused: error %d",
                        self.host.node_id, partition.topic, partition.index, new_isr,
                        answer.error_code)
            return
        if not ours or answer.partition_epoch <= partition.partition_epoch:
            # As Kafka's Partition: an answer for a state no longer the one proposed from
            # is dropped; an ISR admitted then could hold a follower below the HW.
            logger.info("broker %d: dropping the answer to AlterPartition %s-%d: the "
                        "partition's state changed meanwhile", self.host.node_id,
                        partition.topic, partition.index)
            return
        if answer.leader_epoch == partition.leader_epoch:
            if len(answer.isr) != len(partition.isr):
                if len(answer.isr) < len(partition.isr):
                    self.shrinks += 1
                else:
                    self.expands += 1
            partition.isr = list(answer.isr)
            partition.partition_epoch = answer.partition_epoch
            logger.info("broker %d: ISR of %s-%d is now %s", self.host.node_id,
                        partition.topic, partition.index, partition.isr)
            partition.maybe_advance_high_watermark()
            partition.on_data(partition)

    async def _request(self, partition: Partition, new_isr: list[int], leader_epoch: int
                       ) -> Any:
        """The controller's answer for this partition (None if it could not be asked).
        Proposals wait while one AlterPartition is in flight and go out together in the
        next, as Kafka's AlterPartitionManager sends them: after a broker fails, its
        followers leave thousands of ISRs at once."""
        item = _Proposal(partition, new_isr, leader_epoch)
        self._queued.append(item)
        if not self._sending:
            self._sending = True
            self.nursery.start_soon(self._send_batches)
        await item.answered.wait()
        return item.answer

    async def _send_batches(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                answers: dict[TP, Any] = {}
                try:
                    answers = await self._request_batch(batch)
                finally:
                    for item in batch:
                        item.answer = answers.get((item.partition.topic, item.partition.index))
                        item.answered.set()
        finally:
            self._sending = False
            for item in self._queued:  # cancelled: no one sends these
                item.answered.set()

    async def _request_batch(self, batch: list[_Proposal]) -> dict[TP, Any]:
        endpoint = self.host.endpoint_of(self.host.controller_id)
        if endpoint is None:
            return {}
        topics: dict[str, Any] = {}
        for item in batch:
            partition = item.partition
            topic = topics.get(partition.topic)
            if topic is None:
                topic = topics[partition.topic] = _AlterTopic(
                    topic_name=partition.topic, topic_id=partition.topic_id, partitions=[])
            topic.partitions.append(_AlterTopic.PartitionData(
                partition_index=partition.index, leader_epoch=item.leader_epoch,
                new_isr=item.new_isr,
                new_isr_with_epochs=[_AlterTopic.PartitionData.BrokerState(
                    broker_id=b, broker_epoch=-1) for b in item.new_isr],
                leader_recovery_state=0, partition_epoch=partition.partition_epoch))
        response = await PeerConnection.once(
            endpoint, f"broker-{self.host.node_id}-alter-partition",
            self.host.config.request_timeout_ms / 1000, AlterPartitionRequest(
                broker_id=self.host.node_id, broker_epoch=self.host.broker_epoch,
                topics=list(topics.values())), ALTER_PARTITION_VERSION,
            f"AlterPartition for {len(batch)} partition(s)", self.host.peer_security)
        if response is None:
            return {}
        if response.error_code != NONE:
            return {(item.partition.topic, item.partition.index): response for item in batch}
        # Version 2+ names topics by id in the answer.
        names = {item.partition.topic_id: item.partition.topic for item in batch}
        return {(names.get(topic.topic_id, topic.topic_name), p.partition_index): p
                for topic in response.topics for p in topic.partitions}


@dataclass(eq=False)
class _Proposal:
    """One partition's ISR change, waiting for the AlterPartition that carries it."""

    partition: Partition
    new_isr: list[int]
    leader_epoch: int
    answered: trio.Event = field(default_factory=trio.Event)
    answer: Any = None
