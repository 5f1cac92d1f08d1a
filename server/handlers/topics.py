"""CreateTopics."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import CreateTopicsResponse
from kafka.protocol.api_key import ApiKey

from josefk.cluster.metadata import ClusterError
from josefk.protocol.messages import Request
from josefk.server.handlers import Response

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
CreateResult = CreateTopicsResponse.CreatableTopicResult
CreateConfig = CreateResult.CreatableTopicConfigs


async def handle_create(broker: Broker, request: Request) -> Response:
    body = request.body
    results = []
    for t in body.topics:
        assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
        configs = {c.name: c.value for c in t.configs}
        try:
            topic = await broker.create_topic(t.name, t.num_partitions, t.replication_factor,
                                        assignment=assignment, configs=configs,
                                        validate_only=body.validate_only)
        except ClusterError as e:
            logger.info("create topic %r failed: %s", t.name, e)
            results.append(_result(t.name, e.error_code, str(e)))
            continue
        entries = broker.describe_topic_configs(topic.name, topic.configs)
        results.append(CreateResult(
            name=topic.name, topic_id=topic.topic_id, error_code=0, error_message=None,
            topic_config_error_code=0, num_partitions=len(topic.partitions),
            replication_factor=len(next(iter(topic.partitions.values()), [])),
            configs=[CreateConfig(name=e.name, value=e.value, read_only=e.read_only,
                                  config_source=e.source, is_sensitive=e.is_sensitive)
                     for e in entries]))
    return {"throttle_time_ms": 0, "topics": results}


def _result(name: str, code: int, message: str) -> Any:
    return CreateResult(name=name, topic_id=ZERO_UUID, error_code=code, error_message=message,
                        topic_config_error_code=0, num_partitions=-1, replication_factor=-1,
                        configs=[])


HANDLERS = {ApiKey.CreateTopics: handle_create}
