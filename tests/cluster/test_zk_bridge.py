"""KazooZooKeeper (server/zk_client.py) against a real ZooKeeper: every operation of the
`josefk.cluster.zk.client.ZooKeeper` interface, its errors, watches, sessions, chroots
and the connection timeout."""

from __future__ import annotations

import threading
import uuid

import pytest
import trio
from zk_harness import SessionFactory, ZooKeeperServer, free_port

from josefk.cluster.zk.client import (
    BadVersionError,
    Check,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionState,
    SetData,
    Stat,
    ZkError,
)
from josefk.server.control import zk_bridge
from josefk.server.control.zk_bridge import KazooZooKeeper, ZooKeeperUnavailableError, split_connect

pytestmark = pytest.mark.usefixtures("zookeeper_server")


def test_split_connect() -> None:
    assert split_connect("h1:2181,h2:2181/kafka/a") == ("h1:2181,h2:2181", "/kafka/a")
    assert split_connect("h1:2181") == ("h1:2181", "")
    assert split_connect("h1:2181/") == ("h1:2181", "")
    assert split_connect("h1:2181/kafka/") == ("h1:2181", "/kafka")


async def test_create_get_exists_children_set(zk: KazooZooKeeper) -> None:
    with trio.fail_after(10):
        assert await zk.create("/a", b"one") == "/a"
        data, stat = await zk.get("/a")
        assert data == b"one"
        assert isinstance(stat, Stat)
        assert stat.version == 0 and stat.ephemeral_owner == 0 and stat.num_children == 0
        assert stat.czxid == stat.mzxid > 0

        assert await zk.exists("/a") == stat
        assert await zk.exists("/missing") is None

        await zk.create("/a/c", b"")
        await zk.create("/a/b")
        assert sorted(await zk.get_children("/a")) == ["b", "c"]
        assert (await zk.get("/a/b"))[0] == b""  # no data reads as b"", not None
        assert (await zk.exists("/a")).num_children == 2

        new = await zk.set("/a", b"two")
        assert new.version == 1 and new.czxid == stat.czxid and new.mzxid > stat.mzxid
        assert (await zk.set("/a", b"three", version=1)).version == 2
        assert (await zk.get("/a"))[0] == b"three"

        # makepath and sequence
        assert await zk.create("/x/y/z", b"deep", makepath=True) == "/x/y/z"
        assert (await zk.get("/x/y/z"))[0] == b"deep"
        first = await zk.create("/seq/n-", sequence=True, makepath=True)
        second = await zk.create("/seq/n-", sequence=True)
        assert first == "/seq/n-0000000000" and second == "/seq/n-0000000001"

        await zk.ensure_path("/p/q/r")
        await zk.ensure_path("/p/q/r")  # idempotent
        assert await zk.exists("/p/q/r") is not None


async def test_get_many_reads_each_path_in_order_across_chunks(
        zk: KazooZooKeeper, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zk_bridge, "GET_MANY_CHUNK", 7)
    with trio.fail_after(20):
        for i in range(20):
            await zk.create(f"/m/{i}", str(i).encode() if i % 3 else None, makepath=True)
        await zk.set("/m/4", b"four")
        paths = [f"/m/{i}" for i in range(20)] + ["/m/missing", "/m/4"]
        got = await zk.get_many(paths)
        assert len(got) == 22
        for i, read in enumerate(got[:20]):
            assert not isinstance(read, ZkError), (i, read)
            expected = b"four" if i == 4 else (str(i).encode() if i % 3 else b"")
            assert read[0] == expected
            assert read[1] == (await zk.get(f"/m/{i}"))[1]
        assert isinstance(got[20], NoNodeError)
        assert got[21][0] == b"four" and got[21][1].version == 1
        assert await zk.get_many([]) == []


async def test_delete_plain_conditional_and_recursive(zk: KazooZooKeeper) -> None:
    with trio.fail_after(10):
        await zk.create("/d", b"")
        await zk.set("/d", b"v1")
        with pytest.raises(BadVersionError):
            await zk.delete("/d", version=0)
        await zk.delete("/d", version=1)
        assert await zk.exists("/d") is None

        await zk.create("/t/a/b/c", b"", makepath=True)
        await zk.create("/t/a/d", b"")
        await zk.create("/t/e", b"")
        with pytest.raises(NotEmptyError):
            await zk.delete("/t")
        await zk.delete("/t", recursive=True)
        assert await zk.exists("/t") is None
        assert await zk.exists("/t/a/b/c") is None


async def test_errors_are_josefk_errors(zk: KazooZooKeeper) -> None:
    """kazoo's exceptions never leak: each one is the interface's own error."""
    with trio.fail_after(10):
        await zk.create("/e", b"")
        cases = [
            (zk.get("/nope"), NoNodeError),
            (zk.get_children("/nope"), NoNodeError),
            (zk.set("/nope", b""), NoNodeError),
            (zk.delete("/nope"), NoNodeError),
            (zk.create("/nope/child", b""), NoNodeError),
            (zk.create("/e", b""), NodeExistsError),
            (zk.set("/e", b"x", version=7), BadVersionError),
            (zk.delete("/e", version=7), BadVersionError),
        ]
        for call, error in cases:
            with pytest.raises(error) as info:
                await call
            assert type(info.value) is error
            assert isinstance(info.value, ZkError)
            assert type(info.value).__module__ == "josefk.cluster.zk.client"


async def test_multi_commits_all_ops(zk: KazooZooKeeper) -> None:
    with trio.fail_after(10):
        await zk.create("/m0", b"zero")
        await zk.create("/gone", b"")
        await zk.multi([
            Check("/m0", 0),
            Create("/m1", b"one"),
            Create("/eph", b"", ephemeral=True),
            SetData("/m0", b"changed", 0),
            Delete("/gone"),
        ])
        assert (await zk.get("/m1"))[0] == b"one"
        data, stat = await zk.get("/m0")
        assert data == b"changed" and stat.version == 1
        assert await zk.exists("/gone") is None
        assert (await zk.exists("/eph")).ephemeral_owner == zk.session_id != 0


async def test_multi_is_all_or_nothing(zk: KazooZooKeeper) -> None:
    with trio.fail_after(10):
        await zk.create("/m0", b"zero")
        # A failing Check after a Create: the Create is rolled back.
        with pytest.raises(BadVersionError):
            await zk.multi([Create("/m1", b"one"), Check("/m0", 5)])
        assert await zk.exists("/m1") is None

        # A failing Create after a SetData and a Delete: neither happens.
        await zk.create("/m2", b"")
        with pytest.raises(NodeExistsError):
            await zk.multi([SetData("/m0", b"x"), Delete("/m2"), Create("/m0", b"dup")])
        data, stat = await zk.get("/m0")
        assert data == b"zero" and stat.version == 0
        assert await zk.exists("/m2") is not None

        # A Check on a missing znode.
        with pytest.raises(NoNodeError):
            await zk.multi([Create("/m3", b""), Check("/absent", 0)])
        assert await zk.exists("/m3") is None

        # The failing op's error, not the roll-back of the ops before it.
        with pytest.raises(BadVersionError):
            await zk.multi([Create("/m4", b""), Create("/m5", b""), SetData("/m0", b"", 9)])
        assert await zk.exists("/m4") is None and await zk.exists("/m5") is None


async def test_data_watch_fires_once_on_the_trio_thread(zk: KazooZooKeeper) -> None:
    trio_thread = threading.get_ident()
    calls: list[int] = []
    fired = trio.Event()

    def watch() -> None:
        calls.append(threading.get_ident())
        trio.lowlevel.current_trio_token()  # raises off the trio thread / outside trio.run
        fired.set()

    with trio.fail_after(10):
        await zk.create("/w", b"0")
        await zk.get("/w", watch)
        await zk.set("/w", b"1")
        await fired.wait()
        await zk.set("/w", b"2")
        await zk.set("/w", b"3")
        await zk.get("/w")  # a round trip after the writes: any second event has arrived
        await trio.sleep(0.2)
    assert calls == [trio_thread]


async def test_exists_and_child_watches(zk: KazooZooKeeper, zk_session: SessionFactory
                                        ) -> None:
    other = await zk_session()
    created, child, deleted = trio.Event(), trio.Event(), trio.Event()
    with trio.fail_after(10):
        assert await zk.exists("/later", created.set) is None
        await other.create("/later", b"")
        await created.wait()

        assert await zk.get_children("/later", child.set) == []
        await other.create("/later/kid", b"")
        await child.wait()

        await zk.exists("/later/kid", deleted.set)
        await other.delete("/later/kid")
        await deleted.wait()


async def test_ephemeral_znodes_vanish_with_their_session(zk: KazooZooKeeper,
                                                          zk_session: SessionFactory) -> None:
    other = await zk_session()
    assert other.session_id not in (0, zk.session_id)
    gone = trio.Event()
    with trio.fail_after(10):
        await other.create("/eph", b"x", ephemeral=True)
        await other.create("/persistent", b"y")
        stat = await zk.exists("/eph", gone.set)
        assert stat is not None and stat.ephemeral_owner == other.session_id

        await other.stop()
        await gone.wait()
        assert await zk.exists("/eph") is None
        assert (await zk.get("/persistent"))[0] == b"y"


async def test_session_state_listener_runs_on_the_trio_thread(
        zk_session: SessionFactory) -> None:
    session = await zk_session()
    states: list[tuple[SessionState, int]] = []
    lost = trio.Event()

    def listener(state: SessionState) -> None:
        states.append((state, threading.get_ident()))
        if state is SessionState.LOST:
            lost.set()

    session.on_session_state(listener)
    with trio.fail_after(10):
        await session.stop()
        await lost.wait()
    assert states == [(SessionState.LOST, threading.get_ident())]


async def test_chroot_is_created_and_paths_live_under_it(
        zookeeper_server: ZooKeeperServer, zk_session: SessionFactory) -> None:
    root = await zk_session(zookeeper_server.hosts)
    chroot = f"/chroot-{uuid.uuid4().hex}"
    with trio.fail_after(10):
        assert await root.exists(chroot) is None
        inner = await zk_session(f"{zookeeper_server.hosts}{chroot}/a/b")
        assert await root.exists(f"{chroot}/a/b") is not None

        await inner.create("/brokers/ids/1", b"data", makepath=True)
        assert (await root.get(f"{chroot}/a/b/brokers/ids/1"))[0] == b"data"
        assert await root.exists("/brokers") is None
        assert await inner.get_children("/") == ["brokers"]
        # Sequence and multi paths are chroot-relative too.
        assert await inner.create("/s-", sequence=True) == "/s-0000000001"
        await inner.multi([Create("/m", b"")])
        assert await root.exists(f"{chroot}/a/b/m") is not None


async def test_unavailable_within_connection_timeout_and_loop_stays_responsive() -> None:
    port = free_port()  # nothing listens there
    zk = KazooZooKeeper(f"127.0.0.1:{port}/kafka", session_timeout_ms=6000,
                        connection_timeout_ms=1000)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.02)
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        start = trio.current_time()
        with trio.fail_after(10), pytest.raises(ZooKeeperUnavailableError) as info:
            await zk.start()
        elapsed = trio.current_time() - start
        nursery.cancel_scope.cancel()
    assert 0.9 <= elapsed < 4.0, elapsed
    assert "zookeeper.connection.timeout.ms=1000" in str(info.value)
    # The loop kept running while kazoo connected on its own thread.
    assert ticks >= 0.5 * elapsed / 0.02, (ticks, elapsed)
    with trio.fail_after(10):
        await zk.stop()


async def test_paths_without_a_value_hold_null_data_as_kafkas(
        zookeeper_server: ZooKeeperServer, zk_session: SessionFactory) -> None:
    """Kafka's controller parses any value it finds in ``/latest_producer_id_block``: an
    empty one (kazoo's default) made every AllocateProducerIds of a Kafka controller fail.
    The top-level paths, ``makepath`` parents and value-less creates hold null data."""
    from kazoo.client import KazooClient

    from josefk.cluster.controller.membership import create_top_level_paths
    from josefk.cluster.zk import znodes as zn

    chroot = f"/null-{uuid.uuid4().hex}"
    zk = await zk_session(f"{zookeeper_server.hosts}{chroot}")
    with trio.fail_after(20):
        await create_top_level_paths(zk)
        await zk.create(zn.delete_topic_path("t"), makepath=True)
        await zk.create("/x/y/z", b"value", makepath=True)

    def raw_values() -> dict[str, bytes | None]:
        client = KazooClient(hosts=zookeeper_server.hosts)
        client.start(timeout=10)
        try:
            paths = [*zn.PERSISTENT_PATHS, zn.delete_topic_path("t"), "/x", "/x/y", "/x/y/z"]
            return {path: client.get(chroot + path)[0] for path in paths}
        finally:
            client.stop()
            client.close()

    values = await trio.to_thread.run_sync(raw_values)
    assert values.pop("/x/y/z") == b"value"
    assert zn.PRODUCER_ID_BLOCK in values
    assert values == dict.fromkeys(values, None)


async def test_an_empty_producer_id_block_left_by_an_older_josefk_is_nulled(
        zookeeper_server: ZooKeeperServer, zk_session: SessionFactory) -> None:
    from josefk.cluster.controller.membership import create_top_level_paths
    from josefk.cluster.zk import znodes as zn

    zk = await zk_session(f"{zookeeper_server.hosts}/old-{uuid.uuid4().hex}")
    with trio.fail_after(20):
        await zk.create(zn.PRODUCER_ID_BLOCK, b"")
        await create_top_level_paths(zk)
        assert (await zk.exists(zn.PRODUCER_ID_BLOCK)).version == 1  # nulled once
        await zk.set(zn.PRODUCER_ID_BLOCK, zn.encode_producer_id_block(1, 0, 999), version=1)
        await create_top_level_paths(zk)
        data, stat = await zk.get(zn.PRODUCER_ID_BLOCK)
        assert stat.version == 2 and zn.decode_producer_id_block_end(data) == 999
