"""The ZooKeeper ensemble of ``--zookeepers 3`` (``ensemble.py``): three real servers form a
quorum, and a session on all three outlives its leader's SIGKILL."""

from __future__ import annotations

import pytest

from ..cluster.conftest import need_jars
from ..cluster.harness import wait_until, zk_client
from .ensemble import Ensemble, loopback_members


@pytest.mark.timeout(120)
def test_a_session_outlives_the_leaders_death(request: pytest.FixtureRequest, tmp_path) -> None:
    if request.config.getoption("bootstrap"):
        pytest.skip("starts its own ZooKeeper servers; --bootstrap given")
    need_jars(request.config, kafka=False)
    ensemble = Ensemble(tmp_path, loopback_members(3))
    ensemble.start()
    try:
        modes = sorted(n.mode() for n in ensemble.nodes)
        assert modes == ["follower", "follower", "leader"], modes
        client = zk_client(ensemble.connect)
        try:
            client.create("/before", b"1")
            session = client.client_id
            leader = ensemble.leader()
            assert leader is not None
            leader.stop(kill=True)
            # The two left elect a leader of their own and the session carries on there.
            new = wait_until(ensemble.leader, 30, "a new leader")
            assert new is not leader
            client.create("/after", b"2")
            assert client.client_id == session
            leader.start()
            assert leader.mode() == "follower"
            assert client.get("/before")[0] == b"1" and client.get("/after")[0] == b"2"
        finally:
            client.stop()
            client.close()
    finally:
        ensemble.stop(kill=True)
