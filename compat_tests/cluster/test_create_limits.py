"""CreateTopics and CreatePartitions past 10,000 new partitions in cluster mode: refused at
once, with Kafka 4.x's answers (compat_tests/test_create_limits.py checks those against
Kafka 4.x), where Kafka 3.9 in ZooKeeper mode has no such bound and would set about
placing two billion partitions.
"""

from __future__ import annotations

import time

import pytest

from ..test_create_limits import (
    INT32_MAX,
    LIMIT,
    POLICY_VIOLATION,
    TOO_MANY_PARTITIONS,
    UNKNOWN_SERVER_ERROR,
    create,
)
from .harness import Cluster, zk_assignment

pytestmark = pytest.mark.josefk_only("Kafka 3.9 (ZooKeeper mode) has no partitions-per-request "
                                     "bound; josefk's cluster mode answers as Kafka 4.x")


def test_huge_requests_are_refused_at_once(cluster: Cluster, topic: str) -> None:
    with cluster.admin() as admin:
        for count in (LIMIT + 1, INT32_MAX):
            for validate_only in (True, False):
                began = time.monotonic()
                got = create(admin, {topic: {"num_partitions": count},
                                     topic + "-small": {"num_partitions": 1}}, validate_only)
                assert sorted(got) == [(topic, POLICY_VIOLATION, TOO_MANY_PARTITIONS),
                                       (topic + "-small", POLICY_VIOLATION, TOO_MANY_PARTITIONS)]
                assert time.monotonic() - began < 10
        assert cluster.zk.exists(f"/brokers/topics/{topic}") is None

        cluster.create_topic(topic, 1, 3)
        for validate_only in (True, False):
            began = time.monotonic()
            response = admin.create_partitions({topic: INT32_MAX}, timeout_ms=30_000,
                                               validate_only=validate_only, raise_errors=False)
            assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
                (topic, UNKNOWN_SERVER_ERROR, None)]
            assert time.monotonic() - began < 10
        assert list(zk_assignment(cluster.zk, topic)) == [0]
        # Within the bound all is as before.
        response = admin.create_partitions({topic: 3}, timeout_ms=30_000, raise_errors=False)
        assert [(r.name, r.error_code) for r in response.results] == [(topic, 0)]
