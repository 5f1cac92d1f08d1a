"""The api versions josefk accepts and advertises in ApiVersions.

kafka-python resets every message class's minimum version to 0, so the ranges
are ours. Minimums are the Apache Kafka 4.0 baselines (KIP-896), as recorded in
the "removed in Apache Kafka 4.0" notes and `validVersions` of the JSON schemas
kafka-python 3.0.12 ships. Maximums are what Kafka 4.0.0 serves, except Fetch: 18,
as Kafka 4.3 (v16 answers leaders' endpoints, KIP-951; v17's replica directory id and
v18's high watermark are a follower's and KRaft's, read and ignored); kafka-python's
schemas come from a newer Kafka (InitProducerId 6) and those newer versions need
features we do not implement. OffsetCommit and OffsetFetch 10 (topic ids), Produce 13
(topic ids, KIP-516), ListOffsets 11 (KIP-1023's earliest pending upload: nothing,
without tiered storage), ListTransactions 2, DescribeLogDirs 5 (no log dir cordoned)
and AlterPartitionReassignments 1 are Kafka 4.3's; compat_tests/test_newest_versions.py
lists every difference from Kafka 4.3.1's ApiVersions and why.

The inter-broker apis of ZooKeeper mode (LeaderAndIsr, StopReplica,
UpdateMetadata, ControlledShutdown, AlterPartition) have Kafka 3.9.1's full
ranges, from our own schemas (`controller_messages.py`); Kafka 4 dropped the
first four. Like every api here, they are only served and advertised once a
handler for them is registered (`enabled_api_keys`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import NamedTuple

from kafka.protocol.api_key import ApiKey

__all__ = [
    "SUPPORTED_VERSIONS",
    "VersionRange",
    "advertised_range",
    "advertised_versions",
    "enabled_api_keys",
    "is_supported",
    "supported_range",
]


class VersionRange(NamedTuple):
    """An inclusive range of api versions."""

    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


_V = VersionRange
_TABLE = {
    ApiKey.Produce: _V(3, 13),
    ApiKey.Fetch: _V(4, 18),
    ApiKey.ListOffsets: _V(1, 11),
    ApiKey.Metadata: _V(0, 13),
    ApiKey.LeaderAndIsr: _V(0, 7),
    ApiKey.StopReplica: _V(0, 4),
    ApiKey.UpdateMetadata: _V(0, 8),
    ApiKey.ControlledShutdown: _V(0, 3),
    ApiKey.OffsetCommit: _V(2, 10),
    ApiKey.OffsetFetch: _V(1, 10),
    ApiKey.FindCoordinator: _V(0, 6),
    ApiKey.JoinGroup: _V(0, 9),
    ApiKey.Heartbeat: _V(0, 4),
    ApiKey.LeaveGroup: _V(0, 5),
    ApiKey.SyncGroup: _V(0, 5),
    ApiKey.DescribeGroups: _V(0, 6),
    ApiKey.ListGroups: _V(0, 5),
    ApiKey.SaslHandshake: _V(0, 1),
    ApiKey.ApiVersions: _V(0, 4),
    ApiKey.CreateTopics: _V(2, 7),
    ApiKey.DeleteTopics: _V(1, 6),
    ApiKey.DeleteRecords: _V(0, 2),
    ApiKey.InitProducerId: _V(0, 5),
    ApiKey.OffsetForLeaderEpoch: _V(2, 4),
    ApiKey.AddPartitionsToTxn: _V(0, 5),
    ApiKey.AddOffsetsToTxn: _V(0, 4),
    ApiKey.EndTxn: _V(0, 5),
    ApiKey.WriteTxnMarkers: _V(1, 1),
    ApiKey.TxnOffsetCommit: _V(0, 5),
    ApiKey.DescribeAcls: _V(1, 3),
    ApiKey.CreateAcls: _V(1, 3),
    ApiKey.DeleteAcls: _V(1, 3),
    ApiKey.DescribeConfigs: _V(1, 4),
    ApiKey.AlterConfigs: _V(0, 2),
    ApiKey.AlterReplicaLogDirs: _V(1, 2),
    ApiKey.DescribeLogDirs: _V(1, 5),
    ApiKey.CreatePartitions: _V(0, 3),
    ApiKey.DeleteGroups: _V(0, 2),
    ApiKey.SaslAuthenticate: _V(0, 2),
    ApiKey.IncrementalAlterConfigs: _V(0, 1),
    ApiKey.ElectLeaders: _V(0, 2),
    ApiKey.AlterPartitionReassignments: _V(0, 1),
    ApiKey.ListPartitionReassignments: _V(0, 0),
    ApiKey.OffsetDelete: _V(0, 0),
    ApiKey.DescribeUserScramCredentials: _V(0, 0),
    ApiKey.AlterUserScramCredentials: _V(0, 0),
    ApiKey.AlterPartition: _V(0, 3),
    ApiKey.AllocateProducerIds: _V(0, 0),
    ApiKey.DescribeCluster: _V(0, 2),
    ApiKey.DescribeProducers: _V(0, 0),
    ApiKey.DescribeTransactions: _V(0, 0),
    ApiKey.ListTransactions: _V(0, 2),
    ApiKey.DescribeTopicPartitions: _V(0, 0),
    ApiKey.ConsumerGroupHeartbeat: _V(0, 1),
    ApiKey.ConsumerGroupDescribe: _V(0, 1),
    ApiKey.DescribeClientQuotas: _V(0, 1),
    ApiKey.AlterClientQuotas: _V(0, 1),
}
SUPPORTED_VERSIONS: Mapping[int, VersionRange] = MappingProxyType(
    {int(k): v for k, v in _TABLE.items()}
)

# Kafka 4.0 advertises Produce from v0 although it rejects v0-v2: librdkafka
# refuses to produce compressed batches otherwise (KAFKA-18659,
# ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION).
_ADVERTISED_MIN: Mapping[int, int] = MappingProxyType({ApiKey.Produce: 0})


def supported_range(api_key: int) -> VersionRange | None:
    """The versions of `api_key` we accept, or None if we do not know the api."""
    return SUPPORTED_VERSIONS.get(api_key)


def is_supported(api_key: int, api_version: int) -> bool:
    """Whether a request of `api_key` at `api_version` may be decoded."""
    supported = SUPPORTED_VERSIONS.get(api_key)
    return supported is not None and api_version in supported


def advertised_range(api_key: int) -> VersionRange:
    """The range to list in ApiVersions for an api key of the table."""
    supported = SUPPORTED_VERSIONS[api_key]
    return supported._replace(min_version=_ADVERTISED_MIN.get(api_key, supported.min_version))


def enabled_api_keys(handled: Iterable[int]) -> frozenset[int]:
    """The api keys to serve: those of `handled` in our table, plus ApiVersions.

    ApiVersions is always enabled: every client starts with it, and the
    unsupported-version fallback lives in this layer.
    """
    return frozenset(int(k) for k in handled if k in SUPPORTED_VERSIONS) | {
        int(ApiKey.ApiVersions)
    }


def advertised_versions(handled: Iterable[int]) -> dict[int, VersionRange]:
    """Api key -> range to advertise, ordered by api key, for the enabled apis."""
    return {k: advertised_range(k) for k in sorted(enabled_api_keys(handled))}
