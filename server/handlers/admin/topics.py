"""CreateTopics, answered as Kafka 4.x's controller does (``ControllerApis.createTopics``
and ``ReplicationControlManager.createTopics``), in single-node and cluster mode alike.

A name given more than once, and ``__cluster_metadata``, are refused by name and the
rest go on; then the request is refused as a whole, every topic named in it getting
the error, when it asks for more than MAX_PARTITIONS_PER_BATCH partitions in all, or
its topics would come to more metadata records than that. Only then is any replica
placed.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import CreateTopicsResponse
from kafka.protocol.api_key import ApiKey

from josefk.cluster.metadata.errors import (
    MAX_PARTITIONS_PER_BATCH,
    ClusterError,
    InvalidReplicaAssignmentError,
    NonConsecutivePartitionsError,
    TooManyPartitionsError,
    TooManyRecordsError,
)
from josefk.cluster.metadata.store import Topic
from josefk.cluster.security.acls import AclOperation, ResourceType
from josefk.protocol.error_codes import (
    INVALID_REQUEST,
    THROTTLING_QUOTA_EXCEEDED,
    TOPIC_AUTHORIZATION_FAILED,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.handlers.admin.mutations import mutation_quota, throttled
from josefk.server.quotas.mutation import ThrottlingQuotaExceeded
from josefk.server.security.checks import creatable_topics

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
CreateResult = CreateTopicsResponse.CreatableTopicResult
CreateConfig = CreateResult.CreatableTopicConfigs
#: Kafka's ``Topic.CLUSTER_METADATA_TOPIC_NAME``: its KRaft log, never a topic to create.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"


async def handle_create(broker: Broker, request: Request) -> Response:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    refused = [_result(name, INVALID_REQUEST, "Duplicate topic name.")
               for name, n in counts.items() if n > 1]
    if counts[CLUSTER_METADATA_TOPIC] == 1:
        refused.append(_result(CLUSTER_METADATA_TOPIC, INVALID_REQUEST,
                               f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is "
                               "prohibited."))
    wanted = [t for t in body.topics
              if counts[t.name] == 1 and t.name != CLUSTER_METADATA_TOPIC]
    authorizer = broker.authorizer
    allowed = creatable_topics(authorizer, (t.name for t in wanted))
    refused += [_result(t.name, TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                for t in wanted if t.name not in allowed]
    wanted = [t for t in wanted if t.name in allowed]
    # Without DESCRIBE_CONFIGS a created topic's configs, partitions and replicas stay hidden.
    hidden = authorizer.denied_names(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                     (t.name for t in wanted), log_denial=False)
    try:
        await _check_size(broker, wanted)
    except ClusterError as e:
        logger.info("create topics refused: %s", e)
        return {"throttle_time_ms": 0,
                "topics": [_result(t.name, e.error_code, str(e)) for t in body.topics]}
    results = []
    quota = mutation_quota(broker, request)
    for t in wanted:
        # Drawn before the topic is made, given back if it is not (Kafka draws after its
        # checks, which here come with the creation).
        permits = 0 if body.validate_only else _partitions_asked(broker, t)
        try:
            quota.record(permits)
        except ThrottlingQuotaExceeded as e:
            results.append(_result(t.name, THROTTLING_QUOTA_EXCEEDED, str(e)))
            continue
        try:
            topic = await _create(broker, t, body.validate_only)
        except ClusterError as e:
            quota.refund(permits)
            logger.info("create topic %r failed: %s", t.name, e)
            results.append(_result(t.name, e.error_code, str(e)))
            continue
        if topic.name in hidden:
            results.append(CreateResult(
                name=topic.name, topic_id=topic.topic_id, error_code=0, error_message=None,
                topic_config_error_code=TOPIC_AUTHORIZATION_FAILED, num_partitions=-1,
                replication_factor=-1, configs=[]))
            continue
        entries = broker.describe_topic_configs(topic.name, topic.configs)
        results.append(CreateResult(
            name=topic.name, topic_id=topic.topic_id, error_code=0, error_message=None,
            topic_config_error_code=0, num_partitions=len(topic.partitions),
            replication_factor=len(next(iter(topic.partitions.values()), [])),
            configs=[CreateConfig(name=e.name, value=e.value, read_only=e.read_only,
                                  config_source=e.source, is_sensitive=e.is_sensitive)
                     for e in entries]))
    return throttled(quota, {"throttle_time_ms": 0, "topics": results + refused})


def _partitions_asked(broker: Broker, t: Any) -> int:
    if t.assignments:
        return len(t.assignments)
    return broker.config.num_partitions if t.num_partitions == -1 else max(t.num_partitions, 0)


async def _check_size(broker: Broker, topics: Sequence[Any]) -> None:
    """Kafka's two bounds on one CreateTopics: the partitions asked for (the manual
    assignments, else the count or the default; ``validateTotalNumberOfPartitions``),
    then the metadata records of the topics it would create (one each, one per config
    override, one per partition), which only a validate-only planning of them all
    tells, so it is done when they could be too many."""
    asked = [_partitions_asked(broker, t) for t in topics]
    if sum(asked) > MAX_PARTITIONS_PER_BATCH:
        raise TooManyPartitionsError()
    most = sum(1 + len({c.name for c in t.configs}) + n for t, n in zip(topics, asked, strict=True))
    if most <= MAX_PARTITIONS_PER_BATCH:
        return
    records = 0
    for t in topics:
        try:
            topic = await _create(broker, t, validate_only=True)
        except ClusterError:
            continue
        records += 1 + len(topic.configs) + topic.num_partitions
        if records > MAX_PARTITIONS_PER_BATCH:
            raise TooManyRecordsError()


async def _create(broker: Broker, t: Any, validate_only: bool) -> Topic:
    pairs = [(a.partition_index, list(a.broker_ids)) for a in t.assignments]
    configs = {c.name: c.value for c in t.configs}
    seen: set[int] = set()
    for i, (partition, _) in enumerate(pairs):
        if partition in seen:
            # Kafka checks the assignments in order and stops at the first partition given
            # twice (a dict cannot hold it): what it finds before that still comes first.
            with contextlib.suppress(NonConsecutivePartitionsError):  # checked at the end
                await broker.create_topic(t.name, t.num_partitions, t.replication_factor,
                                          assignment=dict(pairs[:i]), configs=configs,
                                          validate_only=True)
            raise InvalidReplicaAssignmentError(
                f"Found multiple manual partition assignments for partition {partition}")
        seen.add(partition)
    return await broker.create_topic(t.name, t.num_partitions, t.replication_factor,
                                     assignment=dict(pairs) or None, configs=configs,
                                     validate_only=validate_only)


def _result(name: str, code: int, message: str) -> Any:
    return CreateResult(name=name, topic_id=ZERO_UUID, error_code=code, error_message=message,
                        topic_config_error_code=0, num_partitions=-1, replication_factor=-1,
                        configs=[])


HANDLERS = {ApiKey.CreateTopics: handle_create}
