"""A model of one partition replicated on three brokers: a hypothesis state machine.

Each replica is a real `Log` in a directory of its own and a real `Partition`; what
moves data between them is the broker's own code, called without a network:
`ReplicaFetcher._truncate` / `_fetch` / `_process` on the follower side, the Fetch
handler's `read_all` (`_diverging`, `record_follower_fetch`) and OffsetForLeaderEpoch's
`epoch_end_offset` on the leader side, `IsrUpdates.maybe_expand` / `_propose` / `_send`
for AlterPartition. Their coroutines are driven by hand: a fetch or OffsetForLeaderEpoch
is answered at once; an AlterPartition waits in flight until the controller handles it
and, maybe later, its answer reaches the leader.

The machine plays the controller (cluster/controller.py, ZooKeeper mode): an offline
election of the first live ISR member in assignment order when the leader dies (unclean
election off: with no live ISR member the partition is offline, its ISR the last
member, until that member returns), a leader epoch bump when a dead follower leaves the
ISR (never emptying it), controlled shutdown and preferred leader elections that leave
the old leader running as a follower, and AlterPartition checked against the leader and
partition epochs. LeaderAndIsr reaches each broker in order, at once or later: until
then a demoted leader still believes it leads, and producers may still write to it.

A crash kills a broker as kill -9 would (nothing flushed, indexes left preallocated,
the page cache kept); a restart reopens its log from disk, recovering from the last
checkpointed recovery point, with the last checkpointed high watermark. A clean stop
is LogManager.shutdown's flush, checkpoint and close. Time is a fake clock that only
`tick` moves; each tick lets every leader shrink its ISR by `replicas_out_of_sync`.

Checked after every step: every acknowledged acks=all record is at its offset on the
controller's leader and on every ISR member that caught up with it; a leader's high
watermark never goes back and never passes an ISR member's known log end offset; a
follower done truncating holds a prefix of its leader's log, batch for batch (offsets,
epochs, CRCs); leader epoch caches increase and agree with the batches; fetchers get no
error answers but fencing ones. `heal` brings every broker back and replicates until
all logs are equal, the ISR full and the high watermark at the log end.

``JOSEFK_MODEL_EXAMPLES`` / ``JOSEFK_MODEL_STEPS`` run it longer (100 / 40 by default)
and ``JOSEFK_MODEL_DIR`` puts its logs elsewhere (a tmpfs is several times faster).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Coroutine, Generator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from kafka.protocol.consumer import FetchRequest, OffsetForLeaderEpochRequest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from josefk.cluster.controller.leader_election import (
    controlled_shutdown_election,
    offline_election,
    preferred_election,
)
from josefk.cluster.partition import Partition, PartitionError
from josefk.log.config import LogConfig
from josefk.log.log import Log
from josefk.protocol.error_codes import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_UPDATE_VERSION,
    NONE,
    NOT_CONTROLLER,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    STALE_BROKER_EPOCH,
    UNKNOWN_LEADER_EPOCH,
)
from josefk.server.handlers.partition_reads import read_all, requested
from josefk.server.handlers.records import epoch_end_offset
from josefk.server.network.peer import PeerError
from josefk.server.quotas.rate import RateConfig
from josefk.server.quotas.replication import ReplicationQuotas
from josefk.server.replication.fetchers import IsrUpdates, ReplicaFetcher, _Following
from josefk.server.security.client import PLAINTEXT_PEERS, PeerSecurity

TOPIC = "model"
TP = (TOPIC, 0)
TOPIC_ID = uuid.UUID(int=0x70DE1)
BROKERS = (0, 1, 2)  # the partition's replicas; the assignment order is drawn
LAG_MS = 100  # replica.lag.time.max.ms
MAX_TRUNCATION_ROUNDS = 20
HEAL_ROUNDS = 400
# What a follower may hear while its LeaderAndIsr is late: back off and retry.
FENCING_ERRORS = {FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER}

START_MS = int(time.time() * 1000)
EXAMPLES = int(os.environ.get("JOSEFK_MODEL_EXAMPLES", "100"))
STEPS = int(os.environ.get("JOSEFK_MODEL_STEPS", "40"))
MODEL_DIR = os.environ.get("JOSEFK_MODEL_DIR")


def note(what: str) -> None:
    """hypothesis.event (statistics), also callable from the scripted runs."""
    with contextlib.suppress(InvalidArgument):
        event(what)


# --- coroutines driven by hand ---------------------------------------------------------


def run_now(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never really waits (its peer answers at once)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise AssertionError(f"{coro!r} waited for something")


class InFlight:
    """Awaiting it suspends the coroutine until the model sends it the answer."""

    def __init__(self, request: Any) -> None:
        self.request = request

    def __await__(self) -> Generator[Any, Any, Any]:
        answer = yield self.request
        return answer


def resume(coro: Coroutine[Any, Any, Any], answer: Any) -> None:
    try:
        coro.send(answer)
    except StopIteration:
        return
    coro.close()
    raise AssertionError(f"{coro!r} waited twice")


# --- logs -----------------------------------------------------------------------------


def make_batch(first_id: int, count: int, pad: int, timestamp: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for delta in range(count):
        builder.append(delta, timestamp=timestamp, key=None,
                       value=record_value(first_id + delta, pad), headers=[])
    return bytes(builder.build())


def record_value(record_id: int, pad: int = 0) -> bytes:
    return b"record-%d;" % record_id + b"x" * pad


def log_records(log: Log) -> dict[int, bytes]:
    """offset -> value of every record of the log, decoded by kafka-python."""
    out: dict[int, bytes] = {}
    for segment in log.segments:
        for position, header in segment.batches_from(0):
            for record in DefaultRecordBatch(segment.pread(position, header.size)):
                out[record.offset] = record.value
    return out


def log_batches(log: Log) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, leader epoch, CRC) of every batch of the log."""
    return [(h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc)
            for segment in log.segments for _, h in segment.batches_from(0)]


def kill(log: Log) -> None:
    """Drop a log's descriptors and maps as kill -9 would: nothing flushed or trimmed,
    no producer snapshot (the page cache keeps what was written)."""
    for segment in [*log.segments, *(s for _, s in log.pending_deletes)]:
        for index in (segment.offset_index, segment.time_index):
            index.drop()
        segment.release_fd()


# --- the controller's record and requests -----------------------------------------------


@dataclass(frozen=True)
class LeaderIsr:
    """The partition's state znode; ``partition_epoch`` is its version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True)
class AlterRequest:
    broker_id: int
    broker_epoch: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass
class AlterInFlight:
    coro: Coroutine[Any, Any, Any]
    request: AlterRequest
    answer: Any = None  # set once the controller has handled it


@dataclass
class PendingProduce:
    """An acks=all produce waiting for the high watermark (Kafka's DelayedProduce)."""

    replica: int
    partition: Partition
    end: int
    records: dict[int, bytes] = field(default_factory=dict)


# --- one broker, without a network ------------------------------------------------------


class ModelFetcher(ReplicaFetcher):
    """The real fetcher; backing off is recorded, not slept. It must follow a fencing
    error answer: anything else (a batch the log refused, offsets out of range) is a
    failure of the model's invariants."""

    host: ModelBroker

    def _back_off(self, following: _Following) -> None:
        machine = self.host.machine
        if machine.last_answer_error not in FENCING_ERRORS:
            machine.errors.append(f"broker {self.host.node_id} backed off fetching from "
                                  f"{self.leader_id} (answer error {machine.last_answer_error})")


class ModelIsrUpdates(IsrUpdates):
    """The real AlterPartition proposals; the request waits for the model's answer."""

    host: ModelBroker

    async def _request(self, partition: Partition, new_isr: list[int], leader_epoch: int
                       ) -> Any:
        return await InFlight(AlterRequest(self.host.node_id, self.host.broker_epoch,
                                           leader_epoch, tuple(new_isr),
                                           partition.partition_epoch))


class AlterChannel:
    """The nursery IsrUpdates starts its AlterPartition sends in: each runs until its
    request is sent, then waits in the model's in-flight list."""

    def __init__(self, machine: ReplicationModel) -> None:
        self.machine = machine

    def start_soon(self, fn: Any, *args: Any) -> None:
        coro = fn(*args)
        request = coro.send(None)
        assert isinstance(request, AlterRequest)
        self.machine.in_flight.append(AlterInFlight(coro, request))


class ModelPeer:
    """A connection to a broker: requests answered by its handlers' own code."""

    def __init__(self, machine: ReplicationModel, broker_id: int) -> None:
        self.machine = machine
        self.broker_id = broker_id

    async def request(self, request: Any, version: int) -> Any:
        broker = self.machine.brokers.get(self.broker_id)
        if broker is None:
            raise PeerError(f"broker {self.broker_id} is down")
        if isinstance(request, OffsetForLeaderEpochRequest):
            topics = [SimpleNamespace(topic=t.topic, partitions=[
                SimpleNamespace(partition=p.partition, **epoch_end_offset(
                    broker, t.topic, p.partition, p.current_leader_epoch, p.leader_epoch))
                for p in t.partitions]) for t in request.topics]
            self.check([p.error_code for t in topics for p in t.partitions])
            return SimpleNamespace(topics=topics)
        assert isinstance(request, FetchRequest)
        reads = requested(broker, request, version)
        read_all(broker, reads, request.max_bytes, False, request.replica_id)
        self.check([r.error_code for r in reads])
        topics_: dict[str, list[Any]] = {}
        for r in reads:
            records = r.records
            if r.region is not None:
                records = os.pread(r.region.fd, r.region.length, r.region.position)
                r.release()
            epoch, end = r.diverging_epoch if r.diverging_epoch is not None else (-1, -1)
            if r.diverging_epoch is not None:
                note("a fetch was answered with a diverging epoch")
            topics_.setdefault(r.topic or "", []).append(SimpleNamespace(
                partition_index=r.index, error_code=r.error_code,
                high_watermark=r.high_watermark, log_start_offset=r.log_start_offset,
                records=records, diverging_epoch=SimpleNamespace(epoch=epoch, end_offset=end)))
        # No fetch session (session id 0): the follower sends full requests.
        return SimpleNamespace(error_code=0, session_id=0, responses=[
            SimpleNamespace(topic=t, partitions=ps) for t, ps in topics_.items()])

    def check(self, codes: list[int]) -> None:
        code = max(codes, default=NONE, key=lambda c: c != NONE)
        self.machine.last_answer_error = code
        if code in FENCING_ERRORS:
            note("a fetcher was fenced")
        elif code != NONE:
            self.machine.errors.append(f"broker {self.broker_id} answered error {code}")


class ModelBroker:
    """What replication and the handlers need of a Broker, for one incarnation."""

    def __init__(self, machine: ReplicationModel, node_id: int, log: Log,
                 broker_epoch: int) -> None:
        self.machine = machine
        self.node_id = node_id
        self.broker_epoch = broker_epoch
        self.controller_id = 0
        self.log = log
        self.config = SimpleNamespace(
            replica_lag_time_max_ms=LAG_MS, request_timeout_ms=30_000,
            values={"replica.fetch.wait.max.ms": 0, "replica.fetch.min.bytes": 1,
                    "replica.fetch.response.max.bytes": 10 << 20,
                    "replica.fetch.max.bytes": machine.fetch_max_bytes,
                    "replica.fetch.backoff.ms": 1000, "replica.socket.timeout.ms": 30_000,
                    "replica.socket.receive.buffer.bytes": 65536})
        # As open_replica_partition: a replica not leading or following anything yet.
        self.partition_ = Partition(topic=TOPIC, index=0, topic_id=TOPIC_ID, log=log,
                                    node_id=node_id, replicas=list(machine.assignment),
                                    isr=[], leader_epoch=-1, leader=-1, partition_epoch=-1)
        self.fetchers: dict[int, ModelFetcher] = {}
        self.replication_quotas = ReplicationQuotas(node_id, RateConfig(), lambda topic: {})
        self.isr_updates = ModelIsrUpdates(self, AlterChannel(machine),  # type: ignore[arg-type]
                                           self.led_partitions)
        self.inbox: list[LeaderIsr] = []  # LeaderAndIsr sent, not delivered yet

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partition_ if (topic, index) == TP else None

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        return ("model", broker_id)

    @property
    def peer_security(self) -> PeerSecurity:
        return PLAINTEXT_PEERS

    def led_partitions(self) -> list[Partition]:
        return [self.partition_] if self.partition_.is_leader else []

    def on_follower_fetch(self, partition: Partition, replica: int, fetch_offset: int) -> None:
        """As Broker.on_follower_fetch, on the model's clock."""
        partition.record_follower_fetch(replica, fetch_offset, self.machine.clock)
        self.isr_updates.maybe_expand(partition, replica)

    def leader_and_isr(self, li: LeaderIsr) -> None:
        """As ClusterNode.leader_and_isr for this partition."""
        partition = self.partition_
        if li.leader_epoch < partition.leader_epoch or (
                li.leader_epoch == partition.leader_epoch
                and li.partition_epoch <= partition.partition_epoch):
            return
        follow = partition.apply_leadership(li.leader, li.leader_epoch, list(li.isr),
                                            list(self.machine.assignment), li.partition_epoch,
                                            self.machine.clock)
        if partition.is_leader:
            self.stop()
        elif follow:
            self.follow()

    def follow(self) -> None:
        """As ReplicaFetchers.follow."""
        self.stop()
        leader = self.partition_.leader_id
        if leader < 0 or leader == self.node_id:
            return
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = ModelFetcher(self, leader)  # type: ignore[arg-type]
        fetcher.add(TP)

    def stop(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(TP)

    def following(self) -> tuple[ModelFetcher, _Following] | None:
        for fetcher in self.fetchers.values():
            if TP in fetcher.partitions:
                return fetcher, fetcher.partitions[TP]
        return None

    def shrink_isr(self) -> None:
        """One pass of IsrUpdates.shrink_forever, on the model's clock."""
        updates = self.isr_updates
        for partition in self.led_partitions():
            if partition.pending_isr is not None:
                continue
            lagging = partition.replicas_out_of_sync(self.machine.clock, updates.max_lag_ms)
            if lagging:
                updates._propose(partition, [r for r in partition.isr if r not in lagging])


# --- the state machine ----------------------------------------------------------------------

replica_choice = st.sampled_from(BROKERS)
late = st.frozensets(replica_choice)  # brokers whose LeaderAndIsr arrives later


class ReplicationModel(RuleBasedStateMachine):
    base: Path = Path(tempfile.gettempdir())

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="replication-", dir=self.base))
        self.clock = 1_000_000
        self.config = LogConfig()
        self.fetch_max_bytes = 1 << 20
        self.assignment = BROKERS
        self.brokers: dict[int, ModelBroker] = {}
        self.broker_epochs = dict.fromkeys(BROKERS, 0)
        # The LogManager's checkpoints: recovery point, high watermark, clean shutdown.
        self.checkpoints = dict.fromkeys(BROKERS, (0, 0, False))
        self.li = LeaderIsr(-1, -1, (), 0)
        self.late: frozenset[int] = frozenset()
        self.in_flight: list[AlterInFlight] = []
        self.pending: list[PendingProduce] = []
        self.acked: dict[int, bytes] = {}
        self.next_id = 0
        self.timestamp = START_MS  # the producer's clock: records' CreateTime
        self.errors: list[str] = []
        self.last_answer_error = NONE
        self.high_watermarks: dict[int, tuple[Partition, int]] = {}
        self.steps = self.last_heal = 0

    # --- helpers ----------------------------------------------------------------------

    def log_dir(self, replica: int) -> Path:
        return self.root / f"broker-{replica}" / f"{TOPIC}-0"

    def believed_leaders(self) -> list[ModelBroker]:
        """Live brokers that believe they lead (a demoted one may not know yet)."""
        return [b for b in self.brokers.values() if b.partition_.is_leader]

    def current_leader(self) -> ModelBroker | None:
        """The controller's leader, once it knows it leads."""
        broker = self.brokers.get(self.li.leader)
        if broker is None or broker.partition_.leader_epoch != self.li.leader_epoch:
            return None
        return broker

    def caught_up_followers(self) -> list[tuple[ModelBroker, ModelBroker]]:
        """(follower, leader) for live followers done truncating against a live broker
        that leads in the follower's leader epoch."""
        out = []
        for broker in self.brokers.values():
            entry = broker.following()
            if entry is None or entry[1].truncating:
                continue
            leader = self.brokers.get(entry[0].leader_id)
            if (leader is not None and leader.partition_.is_leader
                    and leader.partition_.leader_epoch == broker.partition_.leader_epoch):
                out.append((broker, leader))
        return out

    def can_fetch(self, replica: int) -> bool:
        broker = self.brokers.get(replica)
        if broker is None or broker.partition_.is_leader:
            return False
        entry = broker.following()
        return entry is not None and entry[0].leader_id in self.brokers

    def write(self, li: LeaderIsr) -> None:
        assert li.isr, "the ISR never becomes empty"
        self.li = LeaderIsr(li.leader, li.leader_epoch, li.isr, self.li.partition_epoch + 1)

    def send_leader_and_isr(self, targets: list[int]) -> None:
        """LeaderAndIsr with the current state, in order per broker; to the brokers in
        ``self.late`` (drawn by the rule) it stays queued until delivered."""
        for b in targets:
            broker = self.brokers.get(b)
            if broker is None:
                continue
            broker.inbox.append(self.li)
            if b not in self.late:
                self.deliver_all(broker)

    def deliver_all(self, broker: ModelBroker) -> None:
        while broker.inbox:
            broker.leader_and_isr(broker.inbox.pop(0))

    def elect_offline(self) -> None:
        """Controller._elect_one("offline"), unclean election disabled."""
        li = self.li
        election = offline_election(self.assignment, li.isr, set(self.brokers), False)
        if election is None:
            note("the partition went offline")
            if li.leader != -1:  # _mark_offline: no LeaderAndIsr, only metadata
                self.write(LeaderIsr(-1, li.leader_epoch + 1, li.isr[-1:], 0))
            return
        note("offline election")
        self.write(LeaderIsr(election.leader, li.leader_epoch + 1, election.isr, 0))
        self.send_leader_and_isr(list(BROKERS))

    def remove_from_isr(self, failed: int) -> None:
        """IsrChanges.remove_from_isr: the ISR loses a dead follower, never emptying."""
        li = self.li
        if li.leader == failed:
            return
        isr = tuple(b for b in li.isr if b != failed) or li.isr[-1:]
        if isr == li.isr:
            return
        self.write(LeaderIsr(li.leader, li.leader_epoch + 1, isr, 0))
        self.send_leader_and_isr([b for b in BROKERS if b != failed])

    def alter_partition(self, request: AlterRequest) -> Any:
        """Controller.alter_partition."""
        def error(code: int) -> Any:
            return SimpleNamespace(error_code=code, leader_epoch=-1, isr=[], partition_epoch=-1)

        if (request.broker_id not in self.brokers
                or self.broker_epochs[request.broker_id] != request.broker_epoch):
            return error(STALE_BROKER_EPOCH)
        li = self.li
        if li.leader != request.broker_id:
            return error(NOT_CONTROLLER if li.leader == -1 else FENCED_LEADER_EPOCH)
        if request.leader_epoch < li.leader_epoch:
            return error(FENCED_LEADER_EPOCH)
        if request.leader_epoch > li.leader_epoch or request.partition_epoch > li.partition_epoch:
            return error(NOT_CONTROLLER)
        if request.partition_epoch < li.partition_epoch:
            if request.new_isr == li.isr:
                return SimpleNamespace(error_code=NONE, leader_epoch=li.leader_epoch,
                                       isr=list(li.isr), partition_epoch=li.partition_epoch)
            return error(INVALID_UPDATE_VERSION)
        if any(b not in self.brokers for b in request.new_isr if b not in li.isr):
            return error(INELIGIBLE_REPLICA)
        if any(b not in self.assignment for b in request.new_isr):
            return error(INELIGIBLE_REPLICA)
        note("AlterPartition " + ("expanded" if len(request.new_isr) > len(li.isr)
                                   else "shrank") + " the ISR")
        self.write(LeaderIsr(li.leader, li.leader_epoch, request.new_isr, 0))
        return SimpleNamespace(error_code=NONE, leader_epoch=self.li.leader_epoch,
                               isr=list(self.li.isr), partition_epoch=self.li.partition_epoch)

    def fetch_round(self, replica: int) -> None:
        """ReplicaFetcher._round for this follower: truncate until done, then fetch."""
        broker = self.brokers[replica]
        entry = broker.following()
        assert entry is not None
        fetcher, following = entry
        ready = {TP: (following, broker.partition_)}
        peer = ModelPeer(self, fetcher.leader_id)
        start = broker.log.log_end_offset
        self.last_answer_error = NONE
        for _ in range(MAX_TRUNCATION_ROUNDS):
            if not following.truncating or self.last_answer_error != NONE:
                break
            run_now(fetcher._truncate(peer, ready))  # type: ignore[arg-type]
        else:
            raise AssertionError(f"broker {replica} still truncating after "
                                 f"{MAX_TRUNCATION_ROUNDS} OffsetForLeaderEpoch rounds")
        if broker.log.log_end_offset < start:
            note("a follower truncated its log")
        if not following.truncating and self.last_answer_error == NONE:
            fetcher._refresh(now=0.0)
            run_now(fetcher._fetch(peer))  # type: ignore[arg-type]

    def settle_produces(self) -> None:
        """Answer the acks=all produces whose offsets the high watermark passed, as
        produce._until_replicated does."""
        still = []
        for p in self.pending:
            broker = self.brokers.get(p.replica)
            if broker is None or broker.partition_ is not p.partition or not p.partition.is_leader:
                continue  # NOT_LEADER_OR_FOLLOWER: the client retries, nothing promised
            if p.partition.high_watermark >= p.end:
                if len(p.partition.isr) >= self.config.min_insync_replicas:
                    self.acked.update(p.records)
                    note("an acks=all produce was acknowledged")
            else:
                still.append(p)
        self.pending = still

    def start_broker(self, replica: int) -> None:
        rp, hw, clean = self.checkpoints[replica]
        log = Log.open(self.log_dir(replica), self.config, recovery_point=rp,
                       clean_shutdown=clean)
        log.high_watermark = hw
        self.checkpoints[replica] = (rp, hw, False)  # a crash from now on is unclean
        self.broker_epochs[replica] += 1
        self.brokers[replica] = ModelBroker(self, replica, log, self.broker_epochs[replica])

    def stop_broker(self, replica: int, clean: bool) -> None:
        broker = self.brokers.pop(replica)
        log = broker.log
        if clean:
            log.flush()
            self.checkpoints[replica] = (log.recovery_point, log.high_watermark, True)
            log.close()
        else:
            kill(log)
        # Controller._on_broker_failure.
        if self.li.leader == replica:
            self.elect_offline()
        else:
            self.remove_from_isr(replica)

    def restart_broker(self, replica: int) -> None:
        self.start_broker(replica)
        # Controller._on_broker_startup: the partition's state to the new broker, then
        # an election if the partition is offline.
        self.send_leader_and_isr([replica])
        if self.li.leader not in self.brokers:
            self.elect_offline()

    def answer_every_alter_partition(self) -> None:
        for alter in list(self.in_flight):
            self.answer(alter, deliver=True)

    def answer(self, alter: AlterInFlight, deliver: bool) -> None:
        if alter.answer is None:
            alter.answer = self.alter_partition(alter.request)
        if deliver:
            self.in_flight.remove(alter)
            resume(alter.coro, alter.answer)

    # --- rules ------------------------------------------------------------------------

    @initialize(segment_bytes=st.sampled_from([512, 1024, 1 << 20]),
                index_bytes=st.sampled_from([48, 1 << 20]),
                index_interval=st.sampled_from([0, 200, 4096]),
                min_isr=st.sampled_from([1, 2]),
                fetch_max_bytes=st.sampled_from([1, 400, 1 << 20]),
                assignment=st.permutations(BROKERS))
    def create(self, segment_bytes: int, index_bytes: int, index_interval: int,
               min_isr: int, fetch_max_bytes: int, assignment: list[int]) -> None:
        self.config = LogConfig(segment_bytes=segment_bytes, segment_index_bytes=index_bytes,
                                index_interval_bytes=index_interval,
                                min_insync_replicas=min_isr)
        self.fetch_max_bytes = fetch_max_bytes
        self.assignment = tuple(assignment)
        for replica in BROKERS:
            self.start_broker(replica)
        # Controller._initialize: the first live replica leads, every live one in the ISR.
        self.li = LeaderIsr(self.assignment[0], 0, self.assignment, 0)
        self.send_leader_and_isr(list(BROKERS))

    def produce(self, data: st.DataObject, acks: int, count: int, pad: int,
                read_only: bool) -> None:
        """Partition.append_records on a broker that believes it leads (a client with
        stale metadata may still reach a demoted leader)."""
        replica = data.draw(st.sampled_from([b.node_id for b in self.believed_leaders()]),
                            label="to")
        partition = self.brokers[replica].partition_
        self.timestamp += data.draw(st.integers(0, 3), label="ms later")
        first_id = self.next_id
        self.next_id += count
        batch = make_batch(first_id, count, pad, self.timestamp)
        try:
            info = partition.append_records(batch if read_only else bytearray(batch), acks)
        except PartitionError as e:
            assert acks == -1 and e.error_code == NOT_ENOUGH_REPLICAS, e
            assert len(partition.isr) < self.config.min_insync_replicas
            return
        assert info.last_offset - info.first_offset + 1 == count
        if acks == -1:
            self.pending.append(PendingProduce(
                replica, partition, info.last_offset + 1,
                {info.first_offset + i: record_value(first_id + i, pad) for i in range(count)}))
        self.settle_produces()

    @precondition(lambda self: bool(self.believed_leaders()))
    @rule(data=st.data(), count=st.integers(1, 4), pad=st.integers(0, 40),
          read_only=st.booleans())
    def produce_acks_all(self, data: st.DataObject, count: int, pad: int,
                         read_only: bool) -> None:
        self.produce(data, -1, count, pad, read_only)

    @precondition(lambda self: bool(self.believed_leaders()))
    @rule(data=st.data(), count=st.integers(1, 4), pad=st.integers(0, 40),
          read_only=st.booleans())
    def produce_acks_1(self, data: st.DataObject, count: int, pad: int,
                       read_only: bool) -> None:
        self.produce(data, 1, count, pad, read_only)

    @precondition(lambda self: any(self.can_fetch(r) for r in BROKERS))
    @rule(order=st.permutations(BROKERS))
    def replicate(self, order: list[int]) -> None:
        """A fetch round of every follower whose leader is up, in some order."""
        for replica in order:
            if self.can_fetch(replica):
                self.fetch_round(replica)
        self.settle_produces()

    @precondition(lambda self: any(self.can_fetch(r) for r in BROKERS))
    @rule(data=st.data())
    def follower_fetch(self, data: st.DataObject) -> None:
        replica = data.draw(st.sampled_from([r for r in BROKERS if self.can_fetch(r)]),
                            label="replica")
        self.fetch_round(replica)
        self.settle_produces()

    @precondition(lambda self: bool(self.brokers))
    @rule(data=st.data(), clean=st.booleans(), late=late)
    def crash(self, data: st.DataObject, clean: bool, late: frozenset[int]) -> None:
        """A broker dies (clean: after LogManager.shutdown's flush, checkpoint, close)."""
        replica = data.draw(st.sampled_from(sorted(self.brokers)), label="replica")
        self.late = late
        self.stop_broker(replica, clean)
        self.settle_produces()

    @precondition(lambda self: len(self.brokers) < len(BROKERS))
    @rule(data=st.data(), late=late)
    def restart(self, data: st.DataObject, late: frozenset[int]) -> None:
        replica = data.draw(st.sampled_from([r for r in BROKERS if r not in self.brokers]),
                            label="replica")
        self.late = late
        self.restart_broker(replica)
        self.settle_produces()

    @precondition(lambda self: bool(self.brokers))
    @rule(data=st.data(), late=late)
    def controlled_shutdown(self, data: st.DataObject, late: frozenset[int]) -> None:
        """Controller.controlled_shutdown, then the broker stops cleanly."""
        replica = data.draw(st.sampled_from(sorted(self.brokers)), label="replica")
        self.late = late
        li = self.li
        if li.leader == replica:
            election = controlled_shutdown_election(self.assignment, li.isr, set(self.brokers),
                                                    {replica})
            if election is not None:
                note("controlled shutdown moved the leadership")
                self.write(LeaderIsr(election.leader, li.leader_epoch + 1, election.isr, 0))
                self.send_leader_and_isr(list(BROKERS))
        else:
            self.brokers[replica].stop()  # StopReplica(delete=False)
            self.remove_from_isr(replica)
        # The broker waits for its LeaderAndIsr, and stops.
        self.deliver_all(self.brokers[replica])
        self.stop_broker(replica, clean=True)
        self.settle_produces()

    @precondition(lambda self: self.li.leader in self.brokers
                  and self.li.leader != self.assignment[0])
    @rule(late=late)
    def preferred_leader_election(self, late: frozenset[int]) -> None:
        """Controller._elect_one("preferred") (auto rebalance or ElectLeaders): the old
        leader stays up and becomes a follower."""
        li = self.li
        election = preferred_election(self.assignment, li.isr, set(self.brokers))
        if election is None:
            return  # PREFERRED_LEADER_NOT_AVAILABLE
        note("preferred leader election")
        self.late = late
        self.write(LeaderIsr(election.leader, li.leader_epoch + 1, election.isr, 0))
        self.send_leader_and_isr(list(BROKERS))
        self.settle_produces()

    @precondition(lambda self: bool(self.brokers))
    @rule(late=late)
    def controller_failover(self, late: frozenset[int]) -> None:
        """A new controller sends every broker the partition's state as it stands in
        ZooKeeper, an AlterPartition still in flight or not (Controller._failover)."""
        note("controller failover")
        self.late = late
        self.send_leader_and_isr(list(BROKERS))
        self.settle_produces()

    @precondition(lambda self: any(b.inbox for b in self.brokers.values()))
    @rule(data=st.data())
    def deliver_leader_and_isr(self, data: st.DataObject) -> None:
        replica = data.draw(st.sampled_from(sorted(b.node_id for b in self.brokers.values()
                                                   if b.inbox)), label="replica")
        broker = self.brokers[replica]
        broker.leader_and_isr(broker.inbox.pop(0))
        self.settle_produces()

    @precondition(lambda self: bool(self.brokers))
    @rule(data=st.data(), flush=st.booleans())
    def checkpoint(self, data: st.DataObject, flush: bool) -> None:
        """LogManager's periodic flush and recovery-point / high-watermark checkpoints."""
        replica = data.draw(st.sampled_from(sorted(self.brokers)), label="replica")
        log = self.brokers[replica].log
        if flush:
            log.flush()
        self.checkpoints[replica] = (log.recovery_point, log.high_watermark, False)

    @rule(ms=st.integers(1, 3 * LAG_MS))
    def tick(self, ms: int) -> None:
        self.clock += ms
        for broker in list(self.brokers.values()):
            broker.shrink_isr()
        self.settle_produces()

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), deliver=st.sampled_from([True, False]))
    def answer_alter_partition(self, data: st.DataObject, deliver: bool) -> None:
        """The controller handles an AlterPartition (in any order); its answer reaches
        the leader now or later."""
        i = data.draw(st.integers(0, len(self.in_flight) - 1), label="request")
        self.answer(self.in_flight[i], deliver)
        self.settle_produces()

    @precondition(lambda self: self.steps - self.last_heal >= 12)
    @rule()
    def heal(self) -> None:
        """Every broker back, every message delivered, no more time passing:
        replication must converge to equal logs, a full ISR and the high watermark at
        the log end everywhere."""
        self.late = frozenset()
        for broker in self.brokers.values():
            self.deliver_all(broker)
        for replica in BROKERS:
            if replica not in self.brokers:
                self.restart_broker(replica)
        for _ in range(HEAL_ROUNDS):
            self.answer_every_alter_partition()
            for replica in BROKERS:
                if self.can_fetch(replica):
                    self.fetch_round(replica)
            self.settle_produces()
            logs = [log_batches(b.log) for b in self.brokers.values()]
            leader = self.current_leader()
            if (leader is not None and all(batches == logs[0] for batches in logs)
                    and not self.in_flight and set(self.li.isr) == set(BROKERS)
                    and {b.log.high_watermark for b in self.brokers.values()}
                    == {leader.log.log_end_offset}):
                break
        else:
            raise AssertionError(
                f"no convergence after {HEAL_ROUNDS} rounds: {self.li}, log ends "
                f"{[b.log.log_end_offset for b in self.brokers.values()]}, high watermarks "
                f"{[b.log.high_watermark for b in self.brokers.values()]}")
        assert not self.pending
        assert len(self.believed_leaders()) == 1
        note("healed")
        self.last_heal = self.steps

    # --- invariants -------------------------------------------------------------------

    @invariant()
    def count_steps(self) -> None:
        self.steps += 1

    @invariant()
    def fetchers_see_only_fencing_errors(self) -> None:
        assert not self.errors, self.errors

    @invariant()
    def acknowledged_records_survive(self) -> None:
        """On the controller's leader (even before it knows), and on every ISR member
        done truncating against it."""
        leader = self.brokers.get(self.li.leader)
        if leader is None:
            return
        records = log_records(leader.log)
        for offset, value in sorted(self.acked.items()):
            assert records.get(offset) == value, (
                f"acknowledged offset {offset} ({value!r}) is {records.get(offset)!r} on the "
                f"leader {leader.node_id}")
        for broker, its_leader in self.caught_up_followers():
            if its_leader is not leader or broker.node_id not in self.li.isr:
                continue
            mine = log_records(broker.log)
            for offset, value in sorted(self.acked.items()):
                if offset < broker.log.log_end_offset:
                    assert mine.get(offset) == value, (
                        f"acknowledged offset {offset} ({value!r}) is {mine.get(offset)!r} "
                        f"on ISR member {broker.node_id}")

    @invariant()
    def high_watermarks_bounded_and_monotonic(self) -> None:
        seen: dict[int, tuple[Partition, int]] = {}
        for leader in self.believed_leaders():
            partition = leader.partition_
            hw = partition.high_watermark
            before = self.high_watermarks.get(leader.node_id)
            if before is not None and before[0] is partition:
                assert hw >= before[1], (
                    f"the high watermark of leader {leader.node_id} went back from "
                    f"{before[1]} to {hw}")
            seen[leader.node_id] = (partition, hw)
            assert hw <= partition.log.log_end_offset
            for replica in partition.maximal_isr - {leader.node_id}:
                state = partition.followers.get(replica)
                if state is not None and state.log_end_offset >= 0:
                    assert hw <= state.log_end_offset, (
                        f"high watermark {hw} of leader {leader.node_id} above ISR member "
                        f"{replica}'s known log end {state.log_end_offset}")
        self.high_watermarks = seen
        epochs = [b.partition_.leader_epoch for b in self.believed_leaders()]
        assert len(set(epochs)) == len(epochs), f"two leaders in one epoch: {epochs}"
        assert all(e <= self.li.leader_epoch for e in epochs)
        for broker, leader in self.caught_up_followers():
            if leader.node_id == self.li.leader and broker.node_id in self.li.isr:
                assert leader.partition_.high_watermark <= broker.log.log_end_offset, (
                    f"high watermark {leader.partition_.high_watermark} above ISR member "
                    f"{broker.node_id}'s log end {broker.log.log_end_offset}")
            assert broker.log.high_watermark <= leader.partition_.high_watermark

    @invariant()
    def followers_hold_a_prefix_of_the_leader(self) -> None:
        for broker, leader in self.caught_up_followers():
            mine, theirs = log_batches(broker.log), log_batches(leader.log)
            assert mine == theirs[:len(mine)], (
                f"broker {broker.node_id} diverges from its leader {leader.node_id}:\n"
                f"  follower {mine}\n  leader   {theirs}")

    @invariant()
    def epoch_caches_increase(self) -> None:
        for broker in self.brokers.values():
            log = broker.log
            entries = log.leader_epochs.entries
            for (e1, o1), (e2, o2) in zip(entries, entries[1:], strict=False):
                assert e1 < e2 and o1 <= o2, f"broker {broker.node_id}: epochs {entries}"
            assert all(o <= log.log_end_offset for _, o in entries), (
                f"broker {broker.node_id}: epochs {entries} past log end {log.log_end_offset}")
            for base, _, epoch, _ in log_batches(log):
                assert log.leader_epochs.epoch_for(base) == epoch, (
                    f"broker {broker.node_id}: batch at {base} of epoch {epoch}, cache "
                    f"{entries}")

    def check_all(self) -> None:
        """Every invariant (for scripted runs)."""
        self.fetchers_see_only_fencing_errors()
        self.acknowledged_records_survive()
        self.high_watermarks_bounded_and_monotonic()
        self.followers_hold_a_prefix_of_the_leader()
        self.epoch_caches_increase()

    def teardown(self) -> None:
        for alter in self.in_flight:
            alter.coro.close()
        for broker in self.brokers.values():
            broker.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if MODEL_DIR:
        return Path(tempfile.mkdtemp(prefix="replication-model-", dir=MODEL_DIR))
    return tmp_path_factory.mktemp("replication-model")


def test_replication_model(tmp_path_factory: pytest.TempPathFactory) -> None:
    ReplicationModel.base = model_dir(tmp_path_factory)
    try:
        run_state_machine_as_test(ReplicationModel, settings=settings(
            max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    finally:
        shutil.rmtree(ReplicationModel.base, ignore_errors=True)


# --- scripted runs of the same machine: classic scenarios, each step checked ------------


class Given:
    """Stands for ``st.data()`` in a scripted run: hands out the given values."""

    def __init__(self, *values: Any) -> None:
        self.values = list(values)

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        return self.values.pop(0)


def run_script(base: Path, assignment: list[int], fetch_max_bytes: int,
               steps: list[tuple[Any, ...]], index_bytes: int = 1 << 20) -> ReplicationModel:
    ReplicationModel.base = base
    machine = ReplicationModel()
    try:
        machine.create(1024, index_bytes, 0, 1, fetch_max_bytes, assignment)
        machine.check_all()
        for name, *args in steps:
            getattr(machine, name)(*args)
            machine.check_all()
        return machine
    finally:
        machine.teardown()


NOBODY: frozenset[int] = frozenset()


def test_script_unreplicated_tail_truncated(tmp_path: Path) -> None:
    """KIP-101: a leader's acks=1 tail that no follower has goes when it returns as a
    follower of a leader that wrote other records at those offsets."""
    machine = run_script(tmp_path, [0, 1, 2], 1 << 20, [
        ("produce_acks_all", Given(0, 1), 2, 3, True),
        ("replicate", [1, 2, 0]), ("replicate", [1, 2, 0]),
        ("produce_acks_1", Given(0, 1), 2, 3, True),  # offsets 2-3 on broker 0 only
        ("crash", Given(0), False, NOBODY),  # broker 1 leads
        ("produce_acks_1", Given(1, 1), 3, 3, True),  # offsets 2-4 on broker 1
        ("restart", Given(0), NOBODY),
        ("follower_fetch", Given(0)),  # truncates to 2, fetches 2-4
        ("heal",),
    ])
    assert sorted(machine.acked) == [0, 1]


def test_script_leader_epoch_without_records_dropped(tmp_path: Path) -> None:
    """A leader demoted before writing in its epoch keeps that epoch cached at its log
    end; truncating to the log end must drop it (Log.truncate_to), or every fetch
    diverges at that epoch and the follower never catches up."""
    run_script(tmp_path, [0, 1, 2], 1 << 20, [
        ("produce_acks_all", Given(0, 1), 1, 0, True),
        ("replicate", [1, 2, 0]), ("replicate", [1, 2, 0]),
        ("crash", Given(0), False, NOBODY),  # broker 1 leads epoch 1, writes nothing
        ("restart", Given(0), NOBODY),
        ("follower_fetch", Given(0)),
        ("answer_alter_partition", Given(0), True),  # broker 0 back in the ISR
        ("preferred_leader_election", NOBODY),  # broker 0 leads epoch 2
        ("produce_acks_all", Given(0, 1), 1, 0, True),
        ("follower_fetch", Given(1)), ("follower_fetch", Given(1)),
        ("heal",),
    ])


def test_script_lagging_high_watermark_not_enough_to_rejoin(tmp_path: Path) -> None:
    """KAFKA-7128: a new leader's high watermark may lag what was committed; a follower
    at that high watermark but short of the leader's epoch start must not rejoin the
    ISR, or it could be elected without committed records."""
    machine = run_script(tmp_path, [0, 1, 2], 1, [
        ("crash", Given(0), False, NOBODY),  # broker 1 leads, ISR (1, 2)
        ("restart", Given(0), NOBODY),
        ("follower_fetch", Given(0)),
        ("answer_alter_partition", Given(0), True),  # ISR (0, 1, 2)
        ("tick", 60),
        ("produce_acks_all", Given(1, 1), 1, 0, True),
        ("produce_acks_all", Given(1, 1), 1, 0, True),
        ("follower_fetch", Given(0)), ("follower_fetch", Given(0)), ("follower_fetch", Given(0)),
        ("tick", 60),  # broker 2 lags: the ISR shrinks to (0, 1), offsets 0-1 commit
        ("answer_alter_partition", Given(0), True),
        ("preferred_leader_election", NOBODY),  # broker 0 leads; its high watermark lags
        ("follower_fetch", Given(2)),  # broker 2 gets offset 0 only
        ("answer_every_alter_partition",),  # none: broker 2 is short of the epoch start
        ("crash", Given(1), False, NOBODY),
        ("crash", Given(0), False, NOBODY),  # broker 2 must not be elected
    ])
    assert sorted(machine.acked) == [0, 1]
    assert machine.li.leader == -1


def test_script_demoted_leader_cannot_commit(tmp_path: Path) -> None:
    """A leader demoted by a preferred election that has not heard yet still takes
    produces; nothing it takes can be acknowledged, since the new leader no longer
    fetches from it and the controller refuses its ISR shrink."""
    machine = run_script(tmp_path, [1, 0, 2], 1 << 20, [
        ("crash", Given(1), False, NOBODY),  # broker 0 leads
        ("restart", Given(1), NOBODY),
        ("follower_fetch", Given(1)),
        ("answer_alter_partition", Given(0), True),
        ("preferred_leader_election", frozenset({0})),  # broker 1 leads; 0 does not know
        ("produce_acks_all", Given(0, 1), 2, 0, True),  # to the demoted leader
        ("follower_fetch", Given(2)), ("follower_fetch", Given(2)),  # 2 follows 1 now
        ("tick", 250),  # broker 0 proposes dropping 1 and 2: refused (fenced)
        ("answer_alter_partition", Given(0), True),
        ("deliver_leader_and_isr", Given(0)),
        ("heal",),
    ])
    assert machine.acked == {}


def test_script_follower_segment_recovers_after_crash(tmp_path: Path) -> None:
    """With a 4-slot time index, a follower's segment must roll where its rebuild
    would: after a crash, recovery rebuilds the indexes of the active segment. (Found by
    the model: a multi-batch follower append indexed too few timestamps, the segment
    outgrew its time index and recovery failed with "timeindex is full".)"""
    ms = 1  # every batch a millisecond after the last: each one raises the max timestamp
    run_script(tmp_path, [0, 1, 2], 1 << 20, index_bytes=48, steps=[
        ("produce_acks_1", Given(0, ms), 1, 0, True),
        ("replicate", [1, 2, 0]),
        ("crash", Given(1), False, NOBODY),
        ("restart", Given(1), NOBODY),  # its one-batch segment is recovered
        *[("produce_acks_1", Given(0, ms), 1, 0, True) for _ in range(4)],
        ("follower_fetch", Given(1)),  # offsets 1-3 in one append
        ("follower_fetch", Given(1)),  # offset 4
        ("crash", Given(1), False, NOBODY),
        ("restart", Given(1), NOBODY),  # RuntimeError: ...timeindex is full
    ])
