"""Controller requests from a controller that is no longer the controller.

A broker answers LeaderAndIsr, UpdateMetadata and StopReplica carrying an older
controller epoch than the one it has seen with STALE_CONTROLLER_EPOCH (11) and
changes nothing, as Kafka 3.9 does: that fence is what keeps a deposed controller
from undoing its successor's decisions.
"""

from __future__ import annotations

import base64
import uuid

from josefk.protocol.controller_messages import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

from ..rawkafka import RawConnection
from .harness import Cluster, partition_state, znode_json

STALE_CONTROLLER_EPOCH = 11
_LIsrTopic = LeaderAndIsrRequest.LeaderAndIsrTopicState
_UMTopic = UpdateMetadataRequest.UpdateMetadataTopicState
_SRTopic = StopReplicaRequest.StopReplicaTopicState


def _broker_epoch(cluster: Cluster, broker_id: int) -> int:
    """Kafka's broker epoch: the czxid of the broker's registration."""
    _, stat = cluster.zk.get(f"/brokers/ids/{broker_id}")
    return stat.czxid


def test_stale_controller_epoch_is_refused(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    state = partition_state(cluster.zk, topic, 0)
    epoch = cluster.controller_epoch()
    assert epoch >= 1
    follower_id = next(b for b in state["isr"] if b != state["leader"])
    follower = cluster[follower_id]
    doc, _ = znode_json(cluster.zk, f"/brokers/topics/{topic}")
    topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(doc["topic_id"] + "=="))
    stale = epoch - 1
    broker_epoch = _broker_epoch(cluster, follower_id)
    # The deposed controller would make the follower lead, at a higher leader epoch.
    leader_and_isr = LeaderAndIsrRequest(
        controller_id=state["leader"], is_kraft_controller=False, controller_epoch=stale,
        broker_epoch=broker_epoch, type=0, ungrouped_partition_states=[], live_leaders=[],
        topic_states=[_LIsrTopic(topic_name=topic, topic_id=topic_id, partition_states=[
            _LIsrTopic.LeaderAndIsrPartitionState(
                partition_index=0, controller_epoch=stale, leader=follower_id,
                leader_epoch=state["leader_epoch"] + 5, isr=[follower_id],
                partition_epoch=99, replicas=[follower_id], adding_replicas=[],
                removing_replicas=[], is_new=False, leader_recovery_state=0)])])
    update_metadata = UpdateMetadataRequest(
        controller_id=state["leader"], is_kraft_controller=False, type=0,
        controller_epoch=stale, broker_epoch=broker_epoch, ungrouped_partition_states=[],
        live_brokers=[], topic_states=[])
    stop_replica = StopReplicaRequest(
        controller_id=state["leader"], is_kraft_controller=False, controller_epoch=stale,
        broker_epoch=broker_epoch, delete_partitions=False, ungrouped_partitions=[],
        topics=[], topic_states=[_SRTopic(topic_name=topic, partition_states=[
            _SRTopic.StopReplicaPartitionState(partition_index=0, leader_epoch=-2,
                                               delete_partition=True)])])
    with RawConnection(follower.bootstrap, client_id=str(state["leader"])) as conn:
        assert conn.request(leader_and_isr, 7).error_code == STALE_CONTROLLER_EPOCH
        assert conn.request(update_metadata, 8).error_code == STALE_CONTROLLER_EPOCH
        assert conn.request(stop_replica, 4).error_code == STALE_CONTROLLER_EPOCH
    # Nothing changed: the follower still follows, every broker still lists the partition
    # with its leader, and the follower's replica is still there (no deletion).
    view = cluster.agreed_view([topic])
    assert view.leaders(topic) == {0: state["leader"]}
    assert partition_state(cluster.zk, topic, 0)["leader"] == state["leader"]
    cluster.wait_in_sync(topic, 1)
