"""Fixtures of the cluster-mode tests: one real ZooKeeper server for the session, a
chroot of its own for every test, and KazooZooKeeper sessions rooted there.

The server is Apache ZooKeeper from ``.cache/zookeeper/libs`` (tools/zookeeper/fetch.sh),
started with tools/zookeeper/start.sh on a free loopback port. Tests that need it skip
without java or the jars, or fail when ``JOSEFK_REQUIRE_KAFKA=1``.
"""

from __future__ import annotations

import importlib.util
import types
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio
from zk_harness import (
    CONNECTION_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    SessionFactory,
    ZooKeeperServer,
    require_zookeeper,
)

from josefk.server.control.zk_bridge import KazooZooKeeper


def _reexport_root_conftest() -> None:
    """Tests import helpers of tests/conftest.py as ``from conftest import ...`` (e.g.
    ``require_kafka_jars``). Without packages, ``conftest`` in sys.modules is whichever
    conftest.py pytest imported last, this one included; so this one offers the root's
    plain helpers and constants too (not its fixtures, which pytest finds by itself)."""
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("_josefk_tests_root_conftest", path)
    assert spec is not None and spec.loader is not None
    root = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root)
    for name, value in vars(root).items():
        if name.startswith("_") or name in globals():
            continue
        helper = (isinstance(value, types.FunctionType) and value.__module__ == root.__name__
                  and not hasattr(value, "_pytestfixturefunction"))
        if helper or name.isupper():
            globals()[name] = value


_reexport_root_conftest()


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper for the whole session (tests keep apart through chroots)."""
    require_zookeeper()
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper") / "data")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperServer) -> str:
    """``zookeeper.connect`` with a chroot of this test's own (created on connect)."""
    return f"{zookeeper_server.hosts}/test-{uuid.uuid4().hex}"


@pytest.fixture
async def zk_session(zk_connect: str) -> AsyncIterator[SessionFactory]:
    """Open KazooZooKeeper sessions on this test's chroot; all are closed at the end."""
    sessions: list[KazooZooKeeper] = []

    async def open_session(connect: str | None = None) -> KazooZooKeeper:
        zk = KazooZooKeeper(connect or zk_connect, SESSION_TIMEOUT_MS, CONNECTION_TIMEOUT_MS)
        sessions.append(zk)
        with trio.fail_after(15):
            await zk.start()
        return zk

    yield open_session
    with trio.move_on_after(15) as scope:
        scope.shield = True
        for zk in sessions:
            await zk.stop()


@pytest.fixture
async def zk(zk_session: SessionFactory) -> KazooZooKeeper:
    """A session on this test's chroot."""
    return await zk_session()
