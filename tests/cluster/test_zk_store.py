"""cluster/zk_store.py's config change notifications against a real ZooKeeper: each
``/config/changes`` notification re-reads its topic's configs; one that fails is logged
and skipped, and the watch goes on (Kafka's ZkNodeChangeNotificationListener)."""

from __future__ import annotations

import logging

import pytest
import trio
from zk_harness import SessionFactory, wait_for

from josefk.cluster.controller.membership import create_top_level_paths
from josefk.cluster.metadata.cache import MetadataCache
from josefk.cluster.metadata.zk_store import ZkMetadataStore
from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.client import ZooKeeper
from josefk.server.config.values import ConfigError

pytestmark = pytest.mark.usefixtures("zookeeper_server")


async def notify(zk: ZooKeeper, topic: str) -> None:
    """A config change notification, as Kafka's AdminZkClient writes it."""
    await zk.create(f"{zn.CONFIG_CHANGES}/{zn.CONFIG_CHANGE_PREFIX}",
                    zn.encode_config_change(f"topics/{topic}"), sequence=True, makepath=True)


async def test_a_bad_config_change_is_logged_and_skipped(
        zk_session: SessionFactory, caplog: pytest.LogCaptureFixture) -> None:
    zk = await zk_session()
    await create_top_level_paths(zk)
    applied: list[str] = []

    def on_config_change(topic: str) -> None:
        if topic == "refused":  # as Broker.reconfigure refuses a config it cannot apply
            raise ConfigError("Invalid value x for configuration retention.bytes")
        applied.append(topic)

    store = ZkMetadataStore(zk, MetadataCache(), "PLAINTEXT", "cluster-id",
                            on_config_change=on_config_change)
    for topic, data in {"unreadable": b"not json",
                        "refused": zn.encode_config({"retention.bytes": "x"}),
                        "good": zn.encode_config({"retention.ms": "1000"}),
                        "later": zn.encode_config({})}.items():
        await zk.create(zn.topic_config_path(topic), data, makepath=True)
    await notify(zk, "good")  # there before the watch starts: only marked seen
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.watch_config_changes)
        with trio.fail_after(10):
            await wait_for(lambda: store._seen_changes)
            for topic in ("unreadable", "refused", "good"):
                await notify(zk, topic)
            await wait_for(lambda: applied == ["good"])
            await notify(zk, "later")
            await wait_for(lambda: applied == ["good", "later"])
        assert store.configs["good"] == {"retention.ms": "1000"}
        assert "unreadable" not in store.configs
        nursery.cancel_scope.cancel()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    for topic in ("unreadable", "refused"):
        assert any(f"of topic {topic}; skipped" in m for m in errors), errors
