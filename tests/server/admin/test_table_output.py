"""The admin commands' tables and JSON, from hand-made views."""

from __future__ import annotations

import json

from josefk.server.admin import render
from josefk.server.admin.views import (
    BrokerView,
    ClusterView,
    GroupListing,
    GroupView,
    MemberView,
    PartitionLag,
    PartitionView,
    TopicView,
)

HEALTHY = PartitionView(0, 1, [1, 2, 3], [1, 2, 3], [])
BEHIND = PartitionView(1, 2, [2, 3, 1], [2], [])
OFFLINE = PartitionView(2, -1, [3, 1, 2], [3], [3])
CLUSTER = ClusterView("abc", 2, [BrokerView(1, "h1", 9092, None), BrokerView(2, "h2", 9093, "r2")],
                      [TopicView("orders", False, [HEALTHY, BEHIND, OFFLINE])])
MEMBER = MemberView("m-1", "app", "10.0.0.1", [("orders", 0)])
IDLE = MemberView("m-2", "idle", "h", [])
GROUP = GroupView("g", "Stable", "consumer", "range", 2, [MEMBER, IDLE],
                  [PartitionLag("orders", 0, 5, 9, 4, "m-1"),
                   PartitionLag("orders", 1, None, 7, None, None)])


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_partition_states() -> None:
    assert not HEALTHY.under_replicated and not HEALTHY.offline
    assert BEHIND.under_replicated and not BEHIND.offline
    assert OFFLINE.offline
    assert BEHIND.as_json() == {"partition": 1, "leader": 2, "replicas": [2, 3, 1], "isr": [2],
                                "offline_replicas": [], "under_replicated": True,
                                "offline": False}


def test_views_as_json_are_plain() -> None:
    for view in (CLUSTER, GROUP, GroupListing("g", "consumer", "Empty")):
        assert json.loads(json.dumps(view.as_json())) == view.as_json()
    assert GROUP.as_json()["members"][0]["assignment"] == [["orders", 0]]
    assert GROUP.as_json()["offsets"][1] == {"topic": "orders", "partition": 1,
                                             "committed": None, "log_end": 7, "lag": None,
                                             "member_id": None}


def test_table_aligns_and_escapes() -> None:
    text = render.table(("A", "LONGER"), [("x\x1b[2J", None), ("yy", [1, 2])])
    lines = text.splitlines()
    assert lines == ["A         LONGER", "x\\x1b[2J  -", "yy        1,2"]


def test_topics_table_marks_partitions() -> None:
    assert rows(render.topics_table(CLUSTER.topics)) == [
        ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "STATUS"],
        ["orders", "0", "1", "1,2,3", "1,2,3", "ok"],
        ["orders", "1", "2", "2,3,1", "2", "under-replicated"],
        ["orders", "2", "-1", "3,1,2", "3", "offline"]]


def test_cluster_text_and_json() -> None:
    summary = render.cluster_json(CLUSTER)
    assert summary["controller_id"] == 2 and summary["partitions"] == 3
    assert [p["partition"] for p in summary["under_replicated"]] == [1, 2]
    assert [p["partition"] for p in summary["offline"]] == [2]
    text = render.cluster_text(CLUSTER)
    assert "Cluster id: abc" in text and "Controller: 2" in text
    assert "Under-replicated partitions: 2" in text and "Offline partitions: 1" in text
    assert ["2", "h2", "9093", "r2", "controller"] in rows(text)
    assert ["1", "h1", "9092", "-"] in rows(text)
    assert ["orders", "2", "-1", "3,1,2", "3"] in rows(text)  # listed once


def test_group_text_like_consumer_groups_describe() -> None:
    text = render.group_text(GROUP)
    assert text.splitlines()[0] == ("Group g: Stable, protocol range, coordinator 2, "
                                    "2 member(s)")
    assert rows(text)[2:] == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
         "CONSUMER-ID", "HOST", "CLIENT-ID"],
        ["g", "orders", "0", "5", "9", "4", "m-1", "10.0.0.1", "app"],
        ["g", "orders", "1", "-", "7", "-", "-", "-", "-"],
        ["g", "-", "-", "-", "-", "-", "m-2", "h", "idle"]]


def test_groups_and_reset_output() -> None:
    assert rows(render.groups_table([GroupListing("g", "", "Empty")])) == [
        ["GROUP", "STATE", "PROTOCOL-TYPE"], ["g", "Empty", "-"]]
    reset = [PartitionLag("orders", 0, 3, 9, 6, None)]
    assert rows(render.reset_table("g", reset)) == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["g", "orders", "0", "3"]]
    assert render.reset_json("g", reset, False) == {
        "group_id": "g", "executed": False,
        "offsets": [{"topic": "orders", "partition": 0, "new_offset": 3, "log_end": 9}]}
