"""Request handlers, one module per API (or family of APIs), in packages by subsystem.

A handler is ``async def handle(broker, request) -> Response``: the fields of
the response (a mapping kafka-python's response class takes as keywords, or a
response object), ready frame parts (zero-copy fetch), or None for no response
at all (acks=0). Each module maps the api keys it serves to its handlers in
``HANDLERS``; `MODULES` names the module of every api key, so a module (and the
kafka-python classes it uses) is imported on its api's first request, not at start-up.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

from josefk.protocol.error_codes import (
    KAFKA_STORAGE_ERROR,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from josefk.protocol.messages import Request
from josefk.server.network.zero_copy import Part

if TYPE_CHECKING:
    from josefk.cluster.partition import Partition
    from josefk.server.broker import Broker

Response = Mapping[str, Any] | ApiMessage | Sequence[Part] | None
Handler = Callable[["Broker", Request], Awaitable[Response]]

_FAMILIES: dict[str, tuple[ApiKey, ...]] = {
    "api_versions": (ApiKey.ApiVersions,),
    "metadata": (ApiKey.Metadata,),
    "produce": (ApiKey.Produce,),
    "fetch": (ApiKey.Fetch,),
    "list_offsets": (ApiKey.ListOffsets,),
    "admin.topics": (ApiKey.CreateTopics,),
    "admin.topic_changes": (ApiKey.DeleteTopics, ApiKey.CreatePartitions, ApiKey.DescribeCluster,
              ApiKey.DescribeTopicPartitions),
    "admin.configs": (ApiKey.DescribeConfigs, ApiKey.AlterConfigs, ApiKey.IncrementalAlterConfigs),
    "admin.quotas": (ApiKey.DescribeClientQuotas, ApiKey.AlterClientQuotas),
    "records": (ApiKey.AlterReplicaLogDirs, ApiKey.DescribeLogDirs, ApiKey.DeleteRecords,
                ApiKey.OffsetForLeaderEpoch),
    "groups.classic": (ApiKey.FindCoordinator, ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat,
               ApiKey.LeaveGroup, ApiKey.DescribeGroups, ApiKey.ListGroups,
               ApiKey.DeleteGroups),
    "groups.offsets": (ApiKey.OffsetCommit, ApiKey.OffsetFetch, ApiKey.OffsetDelete),
    "producers": (ApiKey.DescribeProducers,),
    "controller_apis": (ApiKey.LeaderAndIsr, ApiKey.UpdateMetadata, ApiKey.StopReplica,
                        ApiKey.ControlledShutdown, ApiKey.AlterPartition,
                        ApiKey.AllocateProducerIds),
    "elections": (ApiKey.ElectLeaders, ApiKey.AlterPartitionReassignments,
                  ApiKey.ListPartitionReassignments),
    "transactions": (ApiKey.InitProducerId, ApiKey.AddPartitionsToTxn, ApiKey.AddOffsetsToTxn,
                     ApiKey.EndTxn, ApiKey.DescribeTransactions, ApiKey.ListTransactions,
                     ApiKey.WriteTxnMarkers),
    "groups.txn_offsets": (ApiKey.TxnOffsetCommit,),
    "groups.consumer": (ApiKey.ConsumerGroupHeartbeat, ApiKey.ConsumerGroupDescribe),
    "security": (ApiKey.CreateAcls, ApiKey.DescribeAcls, ApiKey.DeleteAcls,
                 ApiKey.SaslHandshake, ApiKey.SaslAuthenticate,
                 ApiKey.DescribeUserScramCredentials, ApiKey.AlterUserScramCredentials),
}
#: Api key -> the module of this package that handles it.
MODULES: Mapping[int, str] = {int(key): module for module, keys in _FAMILIES.items()
                              for key in keys}
#: Served only in a cluster (zookeeper.connect set).
CLUSTER_ONLY_KEYS = frozenset(int(key) for key in _FAMILIES["controller_apis"])


@functools.cache
def handler(api_key: int) -> Handler:
    """The handler of ``api_key``, importing its module the first time."""
    module = importlib.import_module(f"{__name__}.{MODULES[api_key]}")
    return module.HANDLERS[api_key]


def partition_or_error(broker: Broker, topic: str, index: int) -> Partition | int:
    """The partition, or the error code of one not served here (Kafka's
    ``getPartitionOrError``): KAFKA_STORAGE_ERROR in a failed log directory,
    NOT_LEADER_OR_FOLLOWER when the cluster knows it, else UNKNOWN_TOPIC_OR_PARTITION."""
    partition = broker.partition(topic, index)
    if partition is not None:
        return KAFKA_STORAGE_ERROR if getattr(partition.log, "offline", False) else partition
    if broker.log_manager.is_offline(topic, index):
        return KAFKA_STORAGE_ERROR
    return (NOT_LEADER_OR_FOLLOWER if broker.partition_view(topic, index) is not None
            else UNKNOWN_TOPIC_OR_PARTITION)
