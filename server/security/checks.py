"""Per-API authorization checks shared by the request handlers, as Kafka 4.x's KafkaApis,
ControllerApis and AuthHelper make them. Every helper assumes the caller asked
``authorizer.enabled`` first where the request path is hot (Produce, Fetch)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from josefk.cluster.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from josefk.protocol.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from josefk.server.security.authorizer import Authorizer

Op = AclOperation
Rt = ResourceType

#: ``Errors``' default messages, which Kafka's error responses carry.
ERROR_MESSAGES = {
    TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}
#: The schema default of the authorized-operations fields: "not requested".
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)

# ConfigResource.Type ids, and the ACL resource and error that guard each.
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER = 2, 4, 8
_CONFIG_CLIENT_METRICS, _CONFIG_GROUP = 16, 32
_CONFIG_GUARDS: dict[int, tuple[ResourceType, int]] = {
    _CONFIG_TOPIC: (Rt.TOPIC, TOPIC_AUTHORIZATION_FAILED),
    _CONFIG_BROKER: (Rt.CLUSTER, CLUSTER_AUTHORIZATION_FAILED),
    _CONFIG_BROKER_LOGGER: (Rt.CLUSTER, CLUSTER_AUTHORIZATION_FAILED),
    _CONFIG_CLIENT_METRICS: (Rt.CLUSTER, CLUSTER_AUTHORIZATION_FAILED),
    _CONFIG_GROUP: (Rt.GROUP, GROUP_AUTHORIZATION_FAILED),
}


def bit_field(codes: Iterable[int]) -> int:
    """``Utils.to32BitField``."""
    return sum(1 << code for code in set(codes))


def topic_operations(authorizer: Authorizer, name: str) -> int:
    """A topic's authorized-operations bit field."""
    return bit_field(authorizer.authorized_operations(Rt.TOPIC, name))


def cluster_operations(authorizer: Authorizer) -> set[int]:
    """The cluster's authorized operations as Metadata and DescribeCluster answer them:
    none at all without DESCRIBE on the cluster."""
    if not authorizer.cluster_allowed(Op.DESCRIBE):
        return set()
    return authorizer.authorized_operations(Rt.CLUSTER, CLUSTER_NAME)


# --- Produce and Fetch --------------------------------------------------------------------


def produce_denied_topics(authorizer: Authorizer, body: Any) -> frozenset[str]:
    return authorizer.denied_names(Op.WRITE, Rt.TOPIC, (t.name for t in body.topic_data))


def refuse_fetch(authorizer: Authorizer, reads: list[Any], replica: int) -> list[Any]:
    """Take out of ``reads`` those Kafka refuses with TOPIC_AUTHORIZATION_FAILED and
    return them: a follower's fetch needs CLUSTER_ACTION for all, a consumer READ on
    each topic (partitions of unknown topic ids are answered as such first)."""
    if replica >= 0:
        refused = [] if authorizer.cluster_allowed(Op.CLUSTER_ACTION) else list(reads)
    else:
        denied = authorizer.denied_names(Op.READ, Rt.TOPIC,
                                         (r.topic for r in reads if r.topic is not None))
        refused = [r for r in reads if r.topic in denied]
    for r in refused:
        r.error_code = TOPIC_AUTHORIZATION_FAILED
    if refused:
        gone = {id(r) for r in refused}
        reads[:] = [r for r in reads if id(r) not in gone]
    return refused


# --- topics by name -----------------------------------------------------------------------


def split_topics(authorizer: Authorizer, operation: AclOperation, items: Sequence[Any],
                 name_of: Any = lambda item: item.name) -> tuple[list[Any], list[Any]]:
    """``AuthHelper.partitionSeqByAuthorized``: (allowed items, refused items)."""
    denied = authorizer.denied_names(operation, Rt.TOPIC, (name_of(i) for i in items))
    if not denied:
        return list(items), []
    return ([i for i in items if name_of(i) not in denied],
            [i for i in items if name_of(i) in denied])


class TopicGate:
    """DeleteTopics' two checks (ControllerApis.deleteTopics): may the session see a
    topic (DESCRIBE), and may it delete it (DELETE on the topic, or on the cluster)?"""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer
        self.everything = (not authorizer.enabled
                           or authorizer.cluster_allowed(Op.DELETE, log_denial=False))

    def describable(self, name: str) -> bool:
        return self.everything or self.authorizer.allowed(Op.DESCRIBE, Rt.TOPIC, name)

    def deletable(self, name: str) -> bool:
        return self.everything or self.authorizer.allowed(Op.DELETE, Rt.TOPIC, name)


def creatable_topics(authorizer: Authorizer, names: Iterable[str]) -> set[str]:
    """CreateTopics and auto-creation: CREATE on the cluster, else on each topic."""
    names = set(names)
    if not authorizer.enabled or authorizer.cluster_allowed(Op.CREATE, log_denial=False):
        return names
    return names - authorizer.denied_names(Op.CREATE, Rt.TOPIC, names)


# --- configs --------------------------------------------------------------------------------


def config_denied(authorizer: Authorizer, operation: AclOperation, resource_type: int,
                  name: str) -> int | None:
    """The error for a config resource the session may not describe or alter
    (DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, group, or the cluster for broker
    resources); None when allowed, or for a resource type the handler refuses itself."""
    guard = _CONFIG_GUARDS.get(resource_type)
    if guard is None or not authorizer.enabled:
        return None
    acl_type, error = guard
    resource = CLUSTER_NAME if acl_type is Rt.CLUSTER else name
    return None if authorizer.allowed(operation, acl_type, resource) else error
