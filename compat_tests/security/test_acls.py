"""ACL authorization as stock clients see it, the same on josefk and Apache Kafka 4.x
(``--kafka``): a broker with the security listeners, an authorizer, ``User:ANONYMOUS``
(PLAINTEXT, and Kafka's controller) and ``User:admin`` as super users, and the client
certificate's DN mapped to ``User:alice``. ACLs are created, described and deleted with
confluent-kafka's admin client; ``alice`` (SASL PLAIN, or mTLS) is the principal checked.

ACL changes reach Kafka's authorizer through the metadata log: each change is waited for
(DescribeAcls, answered from the broker's authorizer, shows it) with a bounded poll."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from ..certs import Certs
from ..conftest import free_port
from ..rawkafka import RawConnection
from .clients import Login, confluent_config
from .conftest import LISTENERS, PLAIN_USERS, SecureBroker, run_broker, security_overrides

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ALICE = "User:alice"
ALICE_SASL = Login("SASL_PLAINTEXT", "PLAIN", "alice", PLAIN_USERS["alice"])
ADMIN_SASL = Login("SASL_PLAINTEXT", "PLAIN", "admin", PLAIN_USERS["admin"])
ALICE_MTLS = Login("SSL", client_cert=True)
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
WAIT_S = 20.0

Binding = tuple[Any, ...]


@pytest.fixture(scope="module")
def secure(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           certs: Certs) -> Iterator[SecureBroker]:
    """The security listeners plus an authorizer (Kafka 4's; josefk takes either name)."""
    ports = {name: free_port() for name in LISTENERS}
    overrides = security_overrides(ports, certs)
    overrides.update({
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS;User:admin",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT",
    })
    with run_broker(request, tmp_path_factory.mktemp("acls"), overrides,
                    f"127.0.0.1:{ports['PLAINTEXT']}") as broker:
        yield SecureBroker(broker, ports, certs)


@pytest.fixture(scope="module")
def admin(secure: SecureBroker) -> AdminClient:
    """A super user's admin client (PLAINTEXT: User:ANONYMOUS)."""
    return AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})


@pytest.fixture
def prefix() -> str:
    """A name prefix of this test's own, so no two tests' ACLs meet."""
    return f"acl-{uuid.uuid4().hex[:8]}"


def client_config(secure: SecureBroker, login: Login) -> dict[str, Any]:
    listener = login.protocol
    return {"bootstrap.servers": secure.bootstrap(listener),
            **confluent_config(login, secure.certs)}


def wait_until(check: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.2)


def as_tuple(b: AclBinding) -> Binding:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
            b.permission_type)


def acl(restype: ResourceType, name: str, operation: AclOperation,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL, principal: str = ALICE,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", operation, permission)


def described(admin: AdminClient, acl_filter: AclBindingFilter) -> set[Binding]:
    return {as_tuple(b) for b in admin.describe_acls(acl_filter).result(timeout=10)}


def principal_filter(principal: str = ALICE,
                     pattern: ResourcePatternType = ResourcePatternType.ANY,
                     restype: ResourceType = ResourceType.ANY,
                     name: str | None = None) -> AclBindingFilter:
    return AclBindingFilter(restype, name, pattern, principal, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def add_acls(admin: AdminClient, *bindings: AclBinding) -> None:
    """Create the ACLs and wait until the broker's authorizer has them."""
    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=10)
    wanted = {as_tuple(b) for b in bindings}
    wait_until(lambda: wanted <= {as_tuple(b) for p in {b.principal for b in bindings}
                                  for b in admin.describe_acls(principal_filter(p))
                                  .result(timeout=10)},
               f"ACLs {wanted} visible")


def make_topics(admin: AdminClient, *names: str) -> None:
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names])
    for future in futures.values():
        future.result(timeout=30)
    wait_until(lambda: set(names) <= set(admin.list_topics(timeout=10).topics),
               f"topics {names} listed")


def produce_error(secure: SecureBroker, login: Login, topic: str) -> int | None:
    """The error code of one produced message (None: delivered)."""
    producer = Producer({**client_config(secure, login), "message.timeout.ms": 15000})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"value", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1, "no delivery report"
    return None if errors[0] is None else errors[0].code()


def sasl_connection(secure: SecureBroker, user: str) -> RawConnection:
    """A raw connection authenticated as ``user`` (SASL PLAIN over SASL_PLAINTEXT)."""
    conn = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    conn.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    token = f"\0{user}\0{PLAIN_USERS[user]}".encode()
    answer = conn.request(SaslAuthenticateRequest(auth_bytes=token), 1)
    assert answer.error_code == 0, answer
    return conn


# --- the cases --------------------------------------------------------------------------------


def test_allow_deny_over_allow_and_prefixed_patterns(secure: SecureBroker, admin: AdminClient,
                                                      prefix: str) -> None:
    ok, denied, outside = f"{prefix}-ok", f"{prefix}-denied", f"other-{prefix}"
    make_topics(admin, ok, denied, outside)
    add_acls(admin, acl(ResourceType.TOPIC, f"{prefix}-", AclOperation.WRITE,
                        ResourcePatternType.PREFIXED),
             acl(ResourceType.TOPIC, denied, AclOperation.WRITE,
                 permission=AclPermissionType.DENY))
    assert produce_error(secure, ALICE_SASL, ok) is None
    assert produce_error(secure, ALICE_SASL, denied) == TOPIC_AUTHORIZATION_FAILED
    assert produce_error(secure, ALICE_SASL, outside) == TOPIC_AUTHORIZATION_FAILED


def test_super_users_need_no_acls(secure: SecureBroker, admin: AdminClient,
                                  prefix: str) -> None:
    topic = f"{prefix}-anyone"
    make_topics(admin, topic)
    assert produce_error(secure, ADMIN_SASL, topic) is None
    assert produce_error(secure, ALICE_SASL, topic) == TOPIC_AUTHORIZATION_FAILED


def test_topics_the_client_may_not_describe_are_hidden(secure: SecureBroker,
                                                       admin: AdminClient, prefix: str) -> None:
    visible, hidden = f"{prefix}-visible", f"{prefix}-hidden"
    make_topics(admin, visible, hidden)
    add_acls(admin, acl(ResourceType.TOPIC, visible, AclOperation.READ))  # implies DESCRIBE
    alice = AdminClient(client_config(secure, ALICE_SASL))
    listed = set(alice.list_topics(timeout=10).topics)
    assert visible in listed and hidden not in listed
    with sasl_connection(secure, "alice") as conn:
        response = conn.request(MetadataRequest(topics=[
            MetadataRequest.MetadataRequestTopic(name=n) for n in (visible, hidden)],
            allow_auto_topic_creation=False), 9)
    assert {t.name: t.error_code for t in response.topics} == {
        visible: 0, hidden: TOPIC_AUTHORIZATION_FAILED}


def test_consuming_in_a_group_needs_read_on_the_group(secure: SecureBroker,
                                                      admin: AdminClient, prefix: str) -> None:
    topic, group = f"{prefix}-topic", f"{prefix}-group"
    make_topics(admin, topic)
    assert produce_error(secure, ADMIN_SASL, topic) is None
    add_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.READ))

    def consume() -> tuple[list[bytes], set[int]]:
        consumer = Consumer({**client_config(secure, ALICE_SASL), "group.id": group,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: list[bytes] = []
        errors: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        try:
            while not got and GROUP_AUTHORIZATION_FAILED not in errors \
                    and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error() is not None:
                    errors.add(msg.error().code())
                else:
                    got.append(msg.value())
        except KafkaException as e:
            errors.add(e.args[0].code())
        finally:
            consumer.close()
        return got, errors

    got, errors = consume()
    assert not got and GROUP_AUTHORIZATION_FAILED in errors
    add_acls(admin, acl(ResourceType.GROUP, group, AclOperation.READ))
    got, errors = consume()
    assert got == [b"value"], errors


def test_transactions_need_write_on_the_transactional_id(secure: SecureBroker,
                                                         admin: AdminClient,
                                                         prefix: str) -> None:
    topic, txn = f"{prefix}-topic", f"{prefix}-txn"
    make_topics(admin, topic)
    # DESCRIBE only: the coordinator is found, InitProducerId is refused.
    add_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.WRITE),
             acl(ResourceType.TRANSACTIONAL_ID, txn, AclOperation.DESCRIBE))
    with sasl_connection(secure, "alice") as conn:
        response = conn.request(InitProducerIdRequest(
            transactional_id=txn, transaction_timeout_ms=10000, producer_id=-1,
            producer_epoch=-1), 4)
    assert response.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    producer = Producer({**client_config(secure, ALICE_SASL), "transactional.id": txn})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(15)
    assert refused.value.args[0].code() == TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    add_acls(admin, acl(ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE))
    producer = Producer({**client_config(secure, ALICE_SASL), "transactional.id": txn})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"in a transaction")
    producer.commit_transaction(30)


def test_a_replica_fetch_needs_cluster_action(secure: SecureBroker, admin: AdminClient,
                                              prefix: str) -> None:
    topic = f"{prefix}-topic"
    make_topics(admin, topic)
    add_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.ALL))
    part = FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20)
    request = FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])],
                           forgotten_topics_data=[], rack_id="")

    def errors(conn: RawConnection) -> list[int]:
        response = conn.request(request, 12)
        return [p.error_code for t in response.responses for p in t.partitions]

    with sasl_connection(secure, "alice") as conn:
        assert errors(conn) == [TOPIC_AUTHORIZATION_FAILED]
    with RawConnection(secure.bootstrap("PLAINTEXT")) as conn:  # a super user
        assert TOPIC_AUTHORIZATION_FAILED not in errors(conn)


def test_the_mtls_principal_comes_from_the_certificate(secure: SecureBroker,
                                                       admin: AdminClient, prefix: str) -> None:
    mine, other = f"{prefix}-mine", f"{prefix}-other"
    make_topics(admin, mine, other)
    add_acls(admin, acl(ResourceType.TOPIC, mine, AclOperation.WRITE))
    assert produce_error(secure, ALICE_MTLS, mine) is None
    # Not User:ANONYMOUS, the super user a TLS client without a certificate is.
    assert produce_error(secure, ALICE_MTLS, other) == TOPIC_AUTHORIZATION_FAILED
    assert produce_error(secure, Login("SSL"), other) is None


def test_describe_and_delete_acls_by_filter(secure: SecureBroker, admin: AdminClient,
                                            prefix: str) -> None:
    who = f"User:{prefix}"
    literal = acl(ResourceType.TOPIC, f"{prefix}-a", AclOperation.READ, principal=who)
    prefixed = acl(ResourceType.TOPIC, f"{prefix}-", AclOperation.WRITE,
                   ResourcePatternType.PREFIXED, principal=who)
    group = acl(ResourceType.GROUP, f"{prefix}-g", AclOperation.READ, principal=who)
    add_acls(admin, literal, prefixed, group)
    assert described(admin, principal_filter(who)) == {
        as_tuple(literal), as_tuple(prefixed), as_tuple(group)}
    assert described(admin, principal_filter(who, ResourcePatternType.MATCH,
                                              ResourceType.TOPIC, f"{prefix}-a")) == {
        as_tuple(literal), as_tuple(prefixed)}
    assert described(admin, principal_filter(who, ResourcePatternType.PREFIXED)) == {
        as_tuple(prefixed)}

    deleted = admin.delete_acls([principal_filter(who, ResourcePatternType.PREFIXED)])
    assert [{as_tuple(b) for b in f.result(timeout=10)} for f in deleted.values()] == [
        {as_tuple(prefixed)}]
    wait_until(lambda: described(admin, principal_filter(who)) == {
        as_tuple(literal), as_tuple(group)}, "the prefixed ACL gone")
    deleted = admin.delete_acls([principal_filter(who)])
    assert [{as_tuple(b) for b in f.result(timeout=10)} for f in deleted.values()] == [
        {as_tuple(literal), as_tuple(group)}]
    wait_until(lambda: not described(admin, principal_filter(who)), "every ACL gone")


def test_only_who_may_describe_and_alter_the_cluster_reads_and_writes_acls(
        secure: SecureBroker) -> None:
    # Raw requests: librdkafka 2.16 reads DescribeAcls' top-level error as no ACLs.
    with sasl_connection(secure, "alice") as conn:
        response = conn.request(DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1), 2)
        assert (response.error_code, response.resources) == (CLUSTER_AUTHORIZATION_FAILED, [])
        response = conn.request(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="x", resource_pattern_type=3, principal=ALICE,
            host="*", operation=3, permission_type=3)]), 2)
        assert [r.error_code for r in response.results] == [CLUSTER_AUTHORIZATION_FAILED]
