import pytest
from kafka.protocol.api_key import ApiKey

from josefk.protocol.messages import API_CLASSES
from josefk.protocol.versions import (
    SUPPORTED_VERSIONS,
    VersionRange,
    advertised_range,
    advertised_versions,
    enabled_api_keys,
    is_supported,
    supported_range,
)

# Apache Kafka 4.0.0's ranges for the apis we serve (Produce min 3 accepted; Produce 13,
# Fetch 18, ListOffsets 11, DescribeLogDirs 5 and ListTransactions 2 as 4.3:
# compat_tests/test_newest_versions.py).
KAFKA_4_0 = {
    "Produce": (3, 13), "Fetch": (4, 18), "ListOffsets": (1, 11), "Metadata": (0, 13),
    "OffsetCommit": (2, 10), "OffsetFetch": (1, 10), "FindCoordinator": (0, 6),
    "JoinGroup": (0, 9), "Heartbeat": (0, 4), "LeaveGroup": (0, 5), "SyncGroup": (0, 5),
    "DescribeGroups": (0, 6), "ListGroups": (0, 5), "ApiVersions": (0, 4),
    "CreateTopics": (2, 7), "DeleteTopics": (1, 6), "DeleteRecords": (0, 2),
    "InitProducerId": (0, 5), "OffsetForLeaderEpoch": (2, 4), "AddPartitionsToTxn": (0, 5),
    "AddOffsetsToTxn": (0, 4), "EndTxn": (0, 5), "TxnOffsetCommit": (0, 5),
    "DescribeConfigs": (1, 4), "AlterConfigs": (0, 2), "DescribeLogDirs": (1, 5),
    "CreatePartitions": (0, 3), "DeleteGroups": (0, 2), "IncrementalAlterConfigs": (0, 1),
    "OffsetDelete": (0, 0), "DescribeCluster": (0, 2), "DescribeTopicPartitions": (0, 0),
    "DescribeProducers": (0, 0), "AlterReplicaLogDirs": (1, 2), "WriteTxnMarkers": (1, 1),
    "DescribeTransactions": (0, 0), "ListTransactions": (0, 2),
    "SaslHandshake": (0, 1), "SaslAuthenticate": (0, 2), "DescribeAcls": (1, 3),
    "CreateAcls": (1, 3), "DeleteAcls": (1, 3), "DescribeUserScramCredentials": (0, 0),
    "AlterUserScramCredentials": (0, 0), "DescribeClientQuotas": (0, 1),
    "AlterClientQuotas": (0, 1),
    "ConsumerGroupHeartbeat": (0, 1), "ConsumerGroupDescribe": (0, 1),
}
# Apache Kafka 3.9.1's ranges for the inter-broker apis of ZooKeeper mode.
KAFKA_3_9_ZK = {
    "LeaderAndIsr": (0, 7), "StopReplica": (0, 4), "UpdateMetadata": (0, 8),
    "ControlledShutdown": (0, 3), "AlterPartition": (0, 3), "AllocateProducerIds": (0, 0),
    # Admin apis the controller answers (a cluster), as in Kafka 3.9.1, and a single broker
    # too, as Kafka 4.3 (AlterPartitionReassignments 1).
    "ElectLeaders": (0, 2), "AlterPartitionReassignments": (0, 1),
    "ListPartitionReassignments": (0, 0),
}


def test_table_is_kafka_4_0():
    assert {ApiKey(k).name: tuple(r) for k, r in SUPPORTED_VERSIONS.items()} == (
        KAFKA_4_0 | KAFKA_3_9_ZK
    )


def test_every_api_has_kafka_python_classes_that_cover_the_range():
    assert set(SUPPORTED_VERSIONS) == set(API_CLASSES)
    for key, r in SUPPORTED_VERSIONS.items():
        request_class, response_class = API_CLASSES[key]
        assert request_class.max_version >= r.max_version, request_class.__name__
        assert response_class.max_version >= r.max_version, response_class.__name__


def test_minimums_are_the_schema_baselines():
    # kafka-python resets min_version to 0, but keeps the schema's validVersions.
    for key, r in SUPPORTED_VERSIONS.items():
        request_class, _ = API_CLASSES[key]
        assert request_class.min_version == 0
        assert request_class.valid_versions[0] == r.min_version, request_class.__name__


def test_version_range_contains():
    r = VersionRange(2, 5)
    assert 2 in r and 5 in r
    assert 1 not in r and 6 not in r and "3" not in r


@pytest.mark.parametrize(
    ("key", "version", "ok"),
    [
        (ApiKey.Produce, 2, False),
        (ApiKey.Produce, 3, True),
        (ApiKey.Produce, 12, True),
        (ApiKey.Produce, 13, True),
        (ApiKey.Produce, 14, False),
        (ApiKey.Fetch, 3, False),
        (ApiKey.Fetch, 18, True),
        (ApiKey.Fetch, 19, False),
        (ApiKey.ApiVersions, 4, True),
        (ApiKey.ApiVersions, 5, False),
        (ApiKey.ApiVersions, -1, False),
        (ApiKey.WriteTxnMarkers, 0, False),
        (999, 0, False),
    ],
)
def test_is_supported(key, version, ok):
    assert is_supported(key, version) is ok


def test_supported_range():
    assert supported_range(ApiKey.Metadata) == VersionRange(0, 13)
    assert supported_range(ApiKey.CreateDelegationToken) is None


def test_produce_advertised_from_zero_but_accepted_from_three():
    assert advertised_range(ApiKey.Produce) == VersionRange(0, 13)
    assert supported_range(ApiKey.Produce) == VersionRange(3, 13)
    assert advertised_range(ApiKey.Fetch) == VersionRange(4, 18)


def test_enabled_keys_always_include_apiversions_and_drop_unknown():
    assert enabled_api_keys([ApiKey.Metadata, ApiKey.CreateDelegationToken, 999]) == {
        ApiKey.Metadata,
        ApiKey.ApiVersions,
    }
    assert enabled_api_keys([]) == {ApiKey.ApiVersions}


def test_advertised_versions_sorted_and_filtered():
    ads = advertised_versions([ApiKey.Fetch, ApiKey.Produce, ApiKey.CreateDelegationToken])
    assert list(ads) == [0, 1, 18]
    assert ads[0] == VersionRange(0, 13)
    assert ads[18] == VersionRange(0, 4)
    assert all(type(k) is int for k in ads)


def test_table_is_read_only():
    with pytest.raises(TypeError):
        SUPPORTED_VERSIONS[ApiKey.Fetch] = VersionRange(0, 1)  # type: ignore[index]
