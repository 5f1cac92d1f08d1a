"""Brokers joining and leaving: a rack in the registration, and start-ups that must fail.

A broker whose id is already registered, or whose ZooKeeper does not answer,
stops with a clear error and a non-zero status instead of hanging or harming
the running cluster.
"""

from __future__ import annotations

import re
import time

from ..conftest import free_port
from .harness import BROKER_IDS, BROKER_KEYS, SESSION_TIMEOUT_MS, Cluster, wait_until, znode_json

# How long a broker that cannot start may take to give up.
EXIT_TIMEOUT = 60.0
CONNECTION_TIMEOUT_MS = 3000


def test_rack_joins_and_clean_leave(cluster: Cluster) -> None:
    extra = cluster.new_broker(4, extra={"broker.rack": "rack-a"})
    try:
        extra.start()
        doc, stat = znode_json(cluster.zk, "/brokers/ids/4")
        assert set(doc) == BROKER_KEYS | {"rack"}, doc
        assert doc["rack"] == "rack-a"
        assert stat.ephemeralOwner != 0
        cluster.agreed_view(
            [], lambda v: v.brokers.get(4) == ("127.0.0.1", extra.port, "rack-a"),
            what="every broker to list broker 4 with its rack",
        )
        # A clean shutdown closes the session: the registration goes at once,
        # not a session timeout later.
        extra.terminate()
        began = time.monotonic()
        wait_until(lambda: not cluster.zk.exists("/brokers/ids/4"), SESSION_TIMEOUT_MS / 2000,
                   "/brokers/ids/4 to go after a clean shutdown")
        assert time.monotonic() - began < SESSION_TIMEOUT_MS / 1000
        cluster.agreed_view([], lambda v: set(v.brokers) == set(BROKER_IDS),
                            what="every broker to drop broker 4")
    finally:
        extra.kill()


def test_duplicate_broker_id_is_refused(cluster: Cluster) -> None:
    before = cluster.zk.get("/brokers/ids/1")
    duplicate = cluster.new_broker(1, name="duplicate-1")
    status, log = duplicate.run_until_exit(EXIT_TIMEOUT)
    assert status is not None, f"a second broker 1 still ran after {EXIT_TIMEOUT:.0f}s"
    assert status != 0
    assert re.search(r"NodeExists|already registered|already exists", log, re.I), log[-3000:]
    # The registered broker 1 is untouched and the cluster still has its three brokers.
    assert cluster.zk.get("/brokers/ids/1") == before
    cluster.agreed_view([], lambda v: set(v.brokers) == set(BROKER_IDS))


def test_unreachable_zookeeper_fails_within_connection_timeout(cluster: Cluster) -> None:
    nowhere = f"127.0.0.1:{free_port()}/josefk-nowhere"
    lost = cluster.new_broker(
        5, zk_connect=nowhere, name="no-zookeeper",
        extra={"zookeeper.connection.timeout.ms": str(CONNECTION_TIMEOUT_MS)},
    )
    began = time.monotonic()
    status, log = lost.run_until_exit(EXIT_TIMEOUT)
    took = time.monotonic() - began
    assert status is not None, f"still waiting for ZooKeeper after {EXIT_TIMEOUT:.0f}s"
    assert status != 0
    # It keeps trying for the whole connection timeout (ZooKeeper may be coming up).
    assert took >= CONNECTION_TIMEOUT_MS / 1000, f"gave up after {took:.1f}s"
    assert re.search(r"timed out", log, re.I) and re.search(r"zookeeper", log, re.I), log[-3000:]
