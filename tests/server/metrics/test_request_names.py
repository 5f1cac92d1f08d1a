"""server/metrics/recorder.py: the request label of a Fetch, consumer or follower, in every
version's form (a replica id of its own up to v14, in ReplicaState from v15)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka.protocol.consumer import FetchRequest

from josefk.server.metrics.recorder import Recorder

FETCH = 1


def _fetch(version: int, replica_id: int) -> SimpleNamespace:
    fields = dict(max_wait_ms=1, min_bytes=1, topics=[])
    if version >= 15:
        fields["replica_state"] = FetchRequest.ReplicaState(replica_id=replica_id,
                                                            replica_epoch=1)
    else:
        fields["replica_id"] = replica_id
    return SimpleNamespace(api_key=FETCH, body=FetchRequest(version=version, **fields))


@pytest.mark.parametrize("version", [4, 12, 14, 15, 17])
def test_a_fetch_is_labelled_by_who_sends_it(version: int) -> None:
    recorder = Recorder({FETCH: "Fetch", 0: "Produce"})
    assert recorder.name(_fetch(version, 2)) == "FetchFollower"
    assert recorder.name(_fetch(version, -1)) == "FetchConsumer"
    assert recorder.name(SimpleNamespace(api_key=0, body=None)) == "Produce"
