"""The broker's authorizer: ``authorizer.class.name`` (Kafka 3.9's AclAuthorizer, or Kafka
4's StandardAuthorizer) turns it on; ``super.users`` and ``allow.everyone.if.no.acl.found``
as Kafka reads them. The checks are the pure functions of ``josefk.cluster.security``,
over the ACLs the security store keeps; the session of the request in hand says who asks.
Without an authorizer every check allows, as in Kafka."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from josefk.cluster.security.acls import AclOperation, ResourceType
from josefk.cluster.security.authorizer import AclCache, authorize, authorize_by_resource_type
from josefk.server.config.broker import BrokerConfig
from josefk.server.security.session import Session, current_session

logger = logging.getLogger("kafka.authorizer.logger")

CLUSTER_NAME = "kafka-cluster"

_Op = AclOperation
#: ``AclEntry.supportedOperations``: what an authorized-operations bit field can hold.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                         _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS),
    ResourceType.GROUP: (_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS,
                         _Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS,
                           _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_Op.DESCRIBE, _Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (_Op.DESCRIBE,),
    ResourceType.USER: (_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS),
}


def parse_super_users(raw: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (spaces around them ignored)."""
    return frozenset(p.strip() for p in (raw or "").split(";") if p.strip())


@dataclass
class Authorizer:
    """Answers "may the session of this request do this?" for the request path."""

    enabled: bool
    acls: Callable[[], AclCache]
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_config(cls, config: BrokerConfig, acls: Callable[[], AclCache]) -> Authorizer:
        return cls(bool(config.values["authorizer.class.name"]), acls,
                   parse_super_users(config.values["super.users"]),
                   config.values["allow.everyone.if.no.acl.found"])

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str,
                session: Session | None = None, *, log_denial: bool = True) -> bool:
        if not self.enabled:
            return True
        session = session or current_session.get()
        ok = authorize(self.acls(), session.principal, session.host, operation,
                       resource_type, name, super_users=self.super_users,
                       allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found)
        if not ok and log_denial:
            logger.info("Principal = %s is Denied operation = %s from host = %s on resource "
                        "= %s:LITERAL:%s", session.principal, operation.pascal_name,
                        session.host, resource_type.pascal_name, name)
        return ok

    def cluster_allowed(self, operation: AclOperation, session: Session | None = None, *,
                        log_denial: bool = True) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME, session,
                            log_denial=log_denial)

    def allowed_names(self, operation: AclOperation, resource_type: ResourceType,
                      names: Iterable[str], *, log_denial: bool = True) -> set[str]:
        """The names of ``names`` the session may do ``operation`` on."""
        return {n for n in names
                if self.allowed(operation, resource_type, n, log_denial=log_denial)}

    def denied_names(self, operation: AclOperation, resource_type: ResourceType,
                     names: Iterable[str], *, log_denial: bool = True) -> frozenset[str]:
        """The names of ``names`` the session may not do ``operation`` on (none without an
        authorizer), each checked once."""
        if not self.enabled:
            return frozenset()
        return frozenset(n for n in dict.fromkeys(names)
                         if not self.allowed(operation, resource_type, n, log_denial=log_denial))

    def authorized_operations(self, resource_type: ResourceType, name: str) -> set[int]:
        """``AuthHelper.authorizedOperations``: the codes of the operations the resource
        supports that the session may do (every one without an authorizer)."""
        return {int(op) for op in SUPPORTED_OPERATIONS[resource_type]
                if self.allowed(op, resource_type, name, log_denial=False)}

    def allowed_some(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType``: may the session do ``operation`` on some
        resource of this type (InitProducerId's idempotent writes)?"""
        if not self.enabled:
            return True
        session = current_session.get()
        return authorize_by_resource_type(
            self.acls(), session.principal, session.host, operation, resource_type,
            super_users=self.super_users,
            allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found)
