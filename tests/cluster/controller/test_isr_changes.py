"""`IsrChanges` alone: AlterPartition's checks and writes, and followers leaving ISRs,
over a fake of the fenced writes and a recording channel."""

from __future__ import annotations

import pytest
from controller_fakes import (
    MemoryWrites,
    MemoryZooKeeper,
    RecordingChannel,
    add_topic,
    make_context,
)

from josefk.cluster.controller.context import TP, ControllerContext, RequestBatch
from josefk.cluster.controller.isr import AlterIsr, IsrChanges
from josefk.cluster.metadata.requests import LeaderAndIsr, UpdateMetadata
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr
from josefk.protocol.error_codes import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_UPDATE_VERSION,
    NONE,
    NOT_CONTROLLER,
    STALE_BROKER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
)

TP0: TP = ("t", 0)
TP1: TP = ("t", 1)


class Isr:
    def __init__(self) -> None:
        self.ctx: ControllerContext = make_context((1, 2, 3, 4))
        add_topic(self.ctx, None, "t", {0: ((1, 2, 3), 1, (1, 2)), 1: ((2, 3, 1), 2, (2, 3, 1))})
        self.writes = MemoryWrites(self.ctx, MemoryZooKeeper())
        self.channel = RecordingChannel()
        self.changed: list[TP] = []
        self.isr = IsrChanges(self.ctx, self.writes,
                              lambda: RequestBatch(self.ctx, self.channel), self._on_changed)

    async def _on_changed(self, tp: TP) -> None:
        self.changed.append(tp)

    def epoch(self, broker_id: int) -> int:
        return self.ctx.brokers[broker_id].epoch

    async def alter(self, new_isr: tuple[int, ...], *, broker_id: int = 1,
                    broker_epoch: int | None = None, tp: TP = TP0, leader_epoch: int = 0,
                    partition_epoch: int = 0) -> tuple[int, object]:
        epoch = self.epoch(broker_id) if broker_epoch is None else broker_epoch
        return await self.isr.alter_partition(broker_id, epoch, tp, leader_epoch, new_isr,
                                              partition_epoch, 0)


@pytest.fixture
def s() -> Isr:
    return Isr()


async def test_a_leader_grows_its_isr(s: Isr) -> None:
    error, written = await s.alter((1, 2, 3))
    assert error == NONE
    assert written == s.ctx.leader_isr[TP0]
    assert (written.leader, written.leader_epoch, written.isr, written.zk_version) == (
        1, 0, (1, 2, 3), 1)  # the leader epoch stays, the partition epoch moves
    # Every broker learns the new ISR.
    assert {u.partitions[0].isr for b in (1, 2, 3, 4)
            for u in s.channel.of(UpdateMetadata, b)} == {(1, 2, 3)}
    assert s.changed == [TP0]


async def test_a_stale_broker_epoch_is_refused(s: Isr) -> None:
    assert STALE_BROKER_EPOCH == 77  # Kafka's code
    assert await s.alter((1, 2, 3), broker_epoch=s.epoch(1) - 1) == (STALE_BROKER_EPOCH, None)
    assert await s.alter((1, 2, 3), broker_id=9, broker_epoch=-1) == (STALE_BROKER_EPOCH, None)
    assert s.writes.leader_isr_writes == [] and s.channel.sent == [] and s.changed == []
    assert s.ctx.leader_isr[TP0].isr == (1, 2)


async def test_an_unknown_broker_epoch_is_accepted(s: Isr) -> None:
    assert (await s.alter((1,), broker_epoch=-1))[0] == NONE


async def test_only_the_current_leader_at_its_epoch_may_change_the_isr(s: Isr) -> None:
    assert await s.alter((1, 2, 3), broker_id=2) == (FENCED_LEADER_EPOCH, None)
    assert await s.alter((1, 2, 3), leader_epoch=-1) == (FENCED_LEADER_EPOCH, None)
    assert await s.alter((1, 2, 3), leader_epoch=1) == (NOT_CONTROLLER, None)
    assert await s.alter((1, 2, 3), partition_epoch=1) == (NOT_CONTROLLER, None)
    s.ctx.leader_isr[TP0] = LeaderIsr(-1, 1, (1,), 5, zk_version=0)
    assert await s.alter((1, 2, 3)) == (NOT_CONTROLLER, None)  # no leader
    assert s.writes.leader_isr_writes == []


async def test_a_stale_partition_epoch_answers_the_state_when_it_matches(s: Isr) -> None:
    error, state = await s.alter((1, 2, 3))
    assert error == NONE
    # The leader resends its request (its answer got lost): the state as it is.
    assert await s.alter((1, 2, 3)) == (NONE, state)
    assert await s.alter((1,)) == (INVALID_UPDATE_VERSION, None)
    assert len(s.writes.leader_isr_writes) == 1


async def test_only_live_assigned_replicas_may_join(s: Isr) -> None:
    assert await s.alter((1, 2, 4)) == (INELIGIBLE_REPLICA, None)  # not a replica
    s.ctx.shutting_down.add(3)
    assert await s.alter((1, 2, 3)) == (INELIGIBLE_REPLICA, None)
    s.ctx.shutting_down.clear()
    del s.ctx.brokers[3]
    assert await s.alter((1, 2, 3)) == (INELIGIBLE_REPLICA, None)
    assert (await s.alter((1,)))[0] == NONE  # leaving needs no live broker


async def test_unknown_and_deleted_partitions(s: Isr) -> None:
    assert await s.alter((1,), tp=("nope", 0)) == (UNKNOWN_TOPIC_OR_PARTITION, None)
    s.ctx.topics_to_delete.add("t")
    assert await s.alter((1,)) == (UNKNOWN_TOPIC_OR_PARTITION, None)


async def test_a_write_that_lost_a_race_is_refused(s: Isr) -> None:
    s.writes.conflicts.add(TP0)
    assert await s.alter((1, 2, 3)) == (INVALID_UPDATE_VERSION, None)
    assert s.channel.sent == [] and s.changed == []


async def test_one_request_many_partitions_one_update_metadata(s: Isr) -> None:
    answers = await s.isr.alter_partitions(2, s.epoch(2), [
        AlterIsr(TP0, 0, (1,), 0),  # broker 2 does not lead it
        AlterIsr(TP1, 0, (2, 3), 0)])
    assert answers[TP0] == (FENCED_LEADER_EPOCH, None)
    assert answers[TP1][0] == NONE and answers[TP1][1].isr == (2, 3)
    [update] = s.channel.of(UpdateMetadata, 1)
    assert [(p.topic, p.partition) for p in update.partitions] == [TP1]
    assert s.changed == [TP1]


async def test_dead_followers_leave_the_isr(s: Isr) -> None:
    batch = RequestBatch(s.ctx, s.channel)
    await s.isr.remove_from_isr([3], [TP0, TP1], batch)
    batch.send()
    assert s.ctx.leader_isr[TP0].isr == (1, 2)  # not in it: untouched
    assert s.ctx.leader_isr[TP0].leader_epoch == 0
    li = s.ctx.leader_isr[TP1]
    assert (li.leader, li.leader_epoch, li.isr) == (2, 1, (2, 1))
    # The remaining replicas learn it; the removed one does not.
    assert [p.isr for p in s.channel.of(LeaderAndIsr, 1)[0].partitions] == [(2, 1)]
    assert s.channel.of(LeaderAndIsr, 3) == []


async def test_the_isr_keeps_its_last_member_and_a_leader_is_not_removed(s: Isr) -> None:
    batch = RequestBatch(s.ctx, s.channel)
    await s.isr.remove_from_isr([1], [TP0], batch)  # broker 1 leads it: left alone
    assert s.ctx.leader_isr[TP0].isr == (1, 2)
    s.ctx.leader_isr[TP1] = LeaderIsr(2, 0, (3,), 5, zk_version=0)
    await s.isr.remove_from_isr([3], [TP1], batch)
    assert s.ctx.leader_isr[TP1].isr == (3,)  # never empty
    assert s.writes.leader_isr_writes == []
