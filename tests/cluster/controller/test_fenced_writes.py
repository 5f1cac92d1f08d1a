"""`FencedWrites` alone, on an in-memory ZooKeeper: writes checked against the
controller epoch's znode version."""

from __future__ import annotations

import pytest
from controller_fakes import EPOCH, MemoryZooKeeper, make_context

from josefk.cluster.controller.context import ControllerContext
from josefk.cluster.controller.pipeline import ControllerMovedError
from josefk.cluster.controller.writes import FencedWrites, ignore_no_node
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import BadVersionError, Create, SetData
from josefk.cluster.zk.znodes import PartitionState as LeaderIsr

TP0 = ("t", 0)
PATH = zn.partition_state_path(*TP0)


class Fenced:
    def __init__(self) -> None:
        self.zk = MemoryZooKeeper()
        self.zk.put(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(EPOCH))  # version 0
        self.ctx: ControllerContext = make_context()
        state = LeaderIsr(1, 0, (1, 2), EPOCH)
        self.zk.put(PATH, state.encode())
        self.ctx.leader_isr[TP0] = LeaderIsr.decode(self.zk.data(PATH), 0)
        self.writes = FencedWrites(self.zk, self.ctx)


@pytest.fixture
def f() -> Fenced:
    return Fenced()


async def test_a_write_lands_while_the_epoch_holds(f: Fenced) -> None:
    await f.writes.multi([Create("/x", b"1")])
    assert f.zk.data("/x") == b"1"


async def test_a_moved_epoch_ends_the_controller_and_writes_nothing(f: Fenced) -> None:
    f.zk.put(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(EPOCH + 1))  # version 1
    with pytest.raises(ControllerMovedError):
        await f.writes.multi([Create("/x")])
    assert "/x" not in f.zk.nodes
    with pytest.raises(ControllerMovedError):
        await f.writes.write_leader_isr(TP0, LeaderIsr(2, 1, (2,), EPOCH))
    assert LeaderIsr.decode(f.zk.data(PATH)).leader == 1


async def test_a_version_conflict_of_another_znode_is_raised_as_it_is(f: Fenced) -> None:
    with pytest.raises(BadVersionError):
        await f.writes.multi([SetData(PATH, b"{}", 7)])


async def test_a_partition_state_write_bumps_the_partition_epoch(f: Fenced) -> None:
    written = await f.writes.write_leader_isr(TP0, LeaderIsr(2, 1, (2,), EPOCH))
    assert written is not None and written.zk_version == 1
    assert f.ctx.leader_isr[TP0] == written
    assert LeaderIsr.decode(f.zk.data(PATH), 1) == written


async def test_a_partition_state_changed_under_us_is_reread(f: Fenced) -> None:
    f.zk.put(PATH, LeaderIsr(1, 0, (1,), EPOCH).encode())  # a leader shrank its ISR
    assert await f.writes.write_leader_isr(TP0, LeaderIsr(2, 1, (2,), EPOCH)) is None
    assert (f.ctx.leader_isr[TP0].isr, f.ctx.leader_isr[TP0].zk_version) == ((1,), 1)


async def test_ignore_no_node(f: Fenced) -> None:
    await ignore_no_node(f.zk.delete("/nope"))
    await ignore_no_node(f.zk.delete(zn.CONTROLLER_EPOCH))
    assert zn.CONTROLLER_EPOCH not in f.zk.nodes
